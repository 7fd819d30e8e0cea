// Inline LLVM IR for the loop IR's transcendental intrinsics, for jit/ only (it names LLVM
// types). llvm_emit_expr.cc calls EmitInlineMath for every math intrinsic before it falls back to
// a libm call per lane.
//
// Why inline: a libm call per lane costs ~2 ns per element and forces the vector registers of
// a fused kernel to be spilled around every call; polynomials written as IR vectorize to the
// target's widest vectors (whatever the loop's lane count), fuse with their neighbours, and
// compute the same bits in the vector body and the scalar tail. The same formulas serve a GPU
// back end.
//
// Accuracy: the bounds tests/jit/vector_math_test.cc asserts (max ulp), with the maxima it
// measured (every 257th f32 bit pattern; 4M f64 points) in parentheses:
//   exp   f32, f64   range reduction + Taylor series          <= 2  (1.01, 0.99)
//   log   f32, f64   atanh series around 1                    <= 2  (0.78, 0.80)
//   tanh  f32, f64   expm1(2|x|) / (expm1(2|x|) + 2)          <= 3  (2.35, 2.47; glibc 2.12)
//   erf   f32        two fitted polynomials                   <= 2  (1.00)
//         f64        Taylor series below 1, fitted erfc above <= 2  (0.98)
//   sin, cos f32     reduced and evaluated in f64             <= 1  (0.56)
//            f64     three-part Cody-Waite reduction          <= 3  (2.34)
//         both: |x| <= 2^20 inline; larger |x|, inf and NaN lanes call libm
//   pow   f32        exp(y log x) in f64                      <= 1  (0.50); x <= 0, inf or NaN
//                    operands call libm
//         f64        exp(y log x), log x in double-double     <= 2  (1.41); x <= 0, inf or NaN
//                    operands, |y| >= 2^900 and |y log x| >= 700 call libm
//   atan  f32        reduced to |v| <= tan(1/2), series in f64 <= 1  (0.50)
//         f64        the same, 28 terms                       <= 2  (1.65)
//   asin  f32, f64   atan(x / sqrt((1 - x)(1 + x)))           <= 1, 3  (0.50, 2.35)
//   acos  f32, f64   2 atan(sqrt((1 - x) / (1 + x)))          <= 1, 3  (0.51, 2.07)
// Special values follow C's libm: exp(-inf) = 0, exp(+-big) saturates to 0 / inf, log(0) =
// -inf, log(x < 0) = NaN, odd functions keep the sign of zero, NaN propagates. Denormal inputs
// and results are handled (no flush to zero).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/loop/loop.h"
#include "llvm/IR/IRBuilder.h"

namespace kiln {

// Calls the libm function `name` on `args`, lane by lane for vectors: the slow path for the
// inputs the inline code does not cover.
using LibmCaller =
    std::function<llvm::Value*(const std::string& name, const std::vector<llvm::Value*>& args)>;

// What the target offers the inline math beyond baseline x86-64 vectors.
struct InlineMathTarget {
  // AVX-512F: exp scales by 2^n with one VSCALEF on 512-bit vectors, where other targets
  // build 2^n in two factors from integer bits (nine instructions; the SiLU -> LayerNorm chain
  // at 1x128x768 ran 15 % faster). The result is the same: p * 2^n rounded once.
  bool avx512f = false;
};

// fn(args) as inline IR, or nullptr where kiln has no inline version for this function and type
// (the caller then calls libm). `args` are f32 or f64 scalars or vectors of one type. May add
// basic blocks (a branch to the libm path, taken only when some lane needs it); the builder is
// left at the end of the code that produced the result.
llvm::Value* EmitInlineMath(llvm::IRBuilder<>& b, loop::Intrinsic fn,
                            const std::vector<llvm::Value*>& args, const LibmCaller& libm,
                            const InlineMathTarget& target);

}  // namespace kiln
