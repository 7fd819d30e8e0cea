// Printing, structural equality and verification of the loop IR.
//
// The printed form reads like the kernel it describes:
//
//   func @fused_add_relu(%a: f32[n, 16], %b: f32[16], %out: f32[n, 16]; n: i64) {
//     for i in [0, n) parallel {
//       for j in [0, 16) vectorized {
//         out[i, j] = max(a[i, j] + b[j], 0.0f)
//       }
//     }
//   }
#pragma once

#include <string>

#include "ir/loop/loop.h"

namespace kiln::loop {

std::string Print(const Expr& e);
std::string Print(const Stmt& s);
std::string Print(const PrimFunc& f);

// Structural equality modulo the identity of variables and buffers: variables bound by
// loops, lets, reduction axes and function parameters are matched by position; free ones must
// be the same object. Hash is consistent with it.
bool StructuralEqual(const Expr& a, const Expr& b);
bool StructuralEqual(const Stmt& a, const Stmt& b);
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b);
size_t StructuralHash(const PrimFunc& f);

// Checks that `f` is well formed, so code generators never see bad IR: every variable used is
// defined (a parameter, loop variable, let or reduction axis in scope); every buffer accessed is
// a parameter or allocated; index counts match buffer ranks; operand dtypes agree; constant
// indices into constant-shaped buffers are in range; Reduce only where allowed
// (`allow_reduce`). Throws kInvalidArgument naming the function, the statement and the problem.
void Verify(const PrimFunc& f, bool allow_reduce = true);

}  // namespace kiln::loop
