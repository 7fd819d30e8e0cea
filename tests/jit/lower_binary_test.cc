// The lowerings of the broadcasting binary ops and `where` (ir/ops/binary.cc): every op
// compiled, concretely and shape-generic, and compared with its reference kernel on random
// data over same-shape, broadcast, size-1, empty and large operands, for every dtype family it
// accepts; then the integer corner cases the kernels must not trap on (x / 0, x % 0,
// MIN / -1), wrapping overflow, integer pow's squarings, and NaN.
//
// Tolerances. The reference computes f32 in f32 and f16/bf16 in f32, as the kernels do, and
// pow and mod call the same libm functions, so every op must match exactly (atol 0, rtol 0).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using ShapePair = std::pair<std::vector<int64_t>, std::vector<int64_t>>;

// Same shapes of size 1, odd sizes, NumPy broadcasting (rank 0, trailing, both sides), an
// empty tensor, and a large one (67591 elements).
const std::vector<ShapePair> kShapePairs = {
    {{1}, {1}},        {{}, {7}},     {{13, 5}, {13, 5}},  {{13, 5}, {5}},
    {{13, 1}, {1, 5}}, {{0, 3}, {3}}, {{257, 263}, {263}},
};

const std::vector<DType> kFloats = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                    DType::kBFloat16};
const std::vector<DType> kInts = {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64,
                                  DType::kUInt8};

// Random values in [lo, hi], clamped to the dtype's range.
Tensor Random(DType t, const std::vector<int64_t>& shape, double lo, double hi, uint64_t seed) {
  if (t == DType::kInt8) lo = std::max(lo, -128.0), hi = std::min(hi, 127.0);
  if (t == DType::kInt16) lo = std::max(lo, -32768.0), hi = std::min(hi, 32767.0);
  if (t == DType::kUInt8) lo = std::max(lo, 0.0), hi = std::min(hi, 255.0);
  if (t == DType::kUInt16) lo = std::max(lo, 0.0), hi = std::min(hi, 65535.0);
  if (t == DType::kUInt32 || t == DType::kUInt64) lo = std::max(lo, 0.0);
  return RandomTensor(t, shape, seed, lo, hi);
}

struct Range {
  double lo, hi;
};

// `op` on every shape pair, with a in `ra` and b in `rb`.
void CheckAllShapes(const std::string& op, DType t, Range ra, Range rb, const Attrs& attrs = {},
                    double rtol = 0) {
  uint64_t seed = 1;
  for (const auto& [sa, sb] : kShapePairs) {
    Tensor a = Random(t, sa, ra.lo, ra.hi, seed++);
    Tensor b = Random(t, sb, rb.lo, rb.hi, seed++);
    EXPECT_TRUE(CompiledMatchesReference(op, {a, b}, attrs, 0, rtol))
        << op << " " << a.TypeString() << ", " << b.TypeString();
  }
}

TEST(LowerBinaryTest, ArithmeticMatchesReference) {
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    SCOPED_TRACE(op);
    for (DType t : kFloats) CheckAllShapes(op, t, {-10, 10}, {-10, 10});
    // Over the whole range of the narrow types, so that sums and products wrap; divisors in
    // [-5, 5] give many x / 0 and x / -1.
    for (DType t : kInts) {
      CheckAllShapes(op, t, {-1e12, 1e12}, {-1e12, 1e12});
      if (std::string(op) == "div") CheckAllShapes(op, t, {-1e12, 1e12}, {-5, 5});
    }
  }
}

TEST(LowerBinaryTest, ModBothFormsMatchReference) {
  for (int64_t fmod : {0, 1}) {
    Attrs attrs{{"fmod", fmod}};
    for (DType t : kFloats) CheckAllShapes("mod", t, {-10, 10}, {-4, 4}, attrs);
    for (DType t : kInts) {
      CheckAllShapes("mod", t, {-1e12, 1e12}, {-1e12, 1e12}, attrs);
      CheckAllShapes("mod", t, {-1e12, 1e12}, {-5, 5}, attrs);  // many % 0 and % -1
    }
  }
}

TEST(LowerBinaryTest, PowMatchesReference) {
  // Negative bases with fractional exponents give NaN in both. f32 and f64 pow are kiln's own
  // inline code (jit/llvm_vector_math.h: within 1 and 2 ulp); f16 and bf16 compute through f32
  // and round, so they may differ from the reference's rounding of libm's by one ulp.
  for (DType t : kFloats) {
    double rtol = t == DType::kFloat32    ? 2.4e-7
                  : t == DType::kFloat16  ? 1e-3
                  : t == DType::kBFloat16 ? 8e-3
                                          : 4.5e-16;  // 2 ulp of f64
    CheckAllShapes("pow", t, {-3, 3}, {-4, 4}, {}, rtol);
  }
  for (DType t : kInts) {
    CheckAllShapes("pow", t, {-4, 4}, {-3, 20});  // small: negative exponents, 0^0, wrapping
    CheckAllShapes("pow", t, {-1e12, 1e12}, {-1e18, 1e18});  // every exponent bit in use
  }
}

TEST(LowerBinaryTest, ComparisonsMatchReference) {
  for (const char* op : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
    SCOPED_TRACE(op);
    // Narrow ranges so that equal values are common.
    for (DType t : kFloats) CheckAllShapes(op, t, {-2, 2}, {-2, 2});
    for (DType t : kInts) CheckAllShapes(op, t, {-3, 3}, {-3, 3});
    CheckAllShapes(op, DType::kBool, {0, 1}, {0, 1});
  }
}

TEST(LowerBinaryTest, LogicMatchesReference) {
  for (const char* op : {"and", "or", "xor"}) {
    SCOPED_TRACE(op);
    CheckAllShapes(op, DType::kBool, {0, 1}, {0, 1});
  }
}

TEST(LowerWhereTest, MatchesReference) {
  const std::vector<std::vector<std::vector<int64_t>>> shapes = {
      {{1}, {1}, {1}},       {{7}, {7}, {7}},       {{13, 1}, {5}, {13, 5}},
      {{}, {13, 5}, {1, 5}}, {{0, 3}, {3}, {1, 3}}, {{257, 1}, {263}, {257, 263}},
  };
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kUInt8, DType::kBool,
                  DType::kFloat64, DType::kInt64}) {
    uint64_t seed = 1;
    for (const auto& s : shapes) {
      Tensor c = RandomTensor(DType::kBool, s[0], seed++);
      Tensor x = Random(t, s[1], -100, 100, seed++);
      Tensor y = Random(t, s[2], -100, 100, seed++);
      EXPECT_TRUE(CompiledMatchesReference("where", {c, x, y}, {}, 0, 0))
          << DTypeName(t) << " " << c.TypeString() << ", " << x.TypeString() << ", "
          << y.TypeString();
    }
  }
}

// a, b filled with every pair of `values`, in an odd shape.
std::pair<Tensor, Tensor> AllPairs(DType t, const std::vector<double>& values) {
  int64_t n = static_cast<int64_t>(values.size());
  Tensor a = Tensor::Empty(t, {n, n}), b = Tensor::Empty(t, {n, n});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      a.SetFromDouble(i * n + j, values[i]);
      b.SetFromDouble(i * n + j, values[j]);
    }
  }
  return {a, b};
}

// x / 0, x % 0, MIN / -1 and MIN % -1 are defined by the reference; the kernels must give
// those values and never execute a trapping division (a SIGFPE would end this test binary).
TEST(LowerBinaryTest, IntegerDivisionCornerCasesDoNotTrap) {
  for (DType t : kInts) {
    double bits = DTypeSize(t) * 8;
    double min = t == DType::kUInt8 ? 0 : -std::ldexp(1.0, static_cast<int>(bits) - 1);
    double max = t == DType::kUInt8 ? 255 : std::ldexp(1.0, static_cast<int>(bits) - 1) - 1;
    auto [a, b] = AllPairs(t, {min, min + 1, -7, -1, 0, 1, 2, 7, max - 1, max});
    for (const char* op : {"div", "mod", "add", "sub", "mul", "pow"}) {
      EXPECT_TRUE(CompiledMatchesReference(op, {a, b}, {}, 0, 0)) << op << " " << DTypeName(t);
    }
    EXPECT_TRUE(CompiledMatchesReference("mod", {a, b}, {{"fmod", int64_t{1}}}, 0, 0))
        << DTypeName(t);
    // The divisor is only known at run time in both of these: a whole tensor of zeros.
    Tensor zeros = Random(t, {13, 5}, 0, 0, 1);
    Tensor x = Random(t, {13, 5}, -100, 100, 2);
    for (const char* op : {"div", "mod"})
      EXPECT_TRUE(CompiledMatchesReference(op, {x, zeros}, {}, 0, 0)) << op << " " << DTypeName(t);
  }
}

TEST(LowerBinaryTest, FloatSpecialValuesMatchReference) {
  const std::vector<double> values = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e30};
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
    auto [a, b] = AllPairs(t, values);
    for (const char* op : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal",
                           "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
      // f64 pow is kiln's inline code (within 2 ulp, jit/llvm_vector_math.h) where libm's is
      // correctly rounded: 2.5^2.5 differs in the last bit. Special values still match exactly.
      const double rtol = std::string(op) == "pow" && t == DType::kFloat64 ? 4.5e-16 : 0;
      EXPECT_TRUE(CompiledMatchesReference(op, {a, b}, {}, 0, rtol)) << op << " " << DTypeName(t);
    }
    for (int64_t fmod : {0, 1})
      EXPECT_TRUE(CompiledMatchesReference("mod", {a, b}, {{"fmod", fmod}}, 0, 0))
          << "mod fmod=" << fmod << " " << DTypeName(t);
  }
}

// maximum/minimum propagate NaN whichever side it is on, where a plain max instruction keeps
// the other operand; TensorsNear would accept neither NaN nor a number for the other.
TEST(LowerBinaryTest, MaximumMinimumPropagateNaN) {
  Tensor a = test::Floats({3}, {NAN, 1.0f, NAN});
  Tensor b = test::Floats({3}, {1.0f, NAN, NAN});
  for (const char* op : {"maximum", "minimum"}) {
    Tensor got = test::RunCompiled(test::SingleOpFunction(op, {a, b}, {}, false), {a, b}).at(0);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(got.data<float>()[i])) << op << " " << i;
  }
}

// A symbolic dim that is 1 at run time broadcasts: the kernel is compiled once for
// f32[a, 5] + f32[b, 5] and run with a or b equal to 1.
TEST(LowerBinaryTest, SymbolicDimBroadcastsWhenOneAtRunTime) {
  for (const char* op : {"add", "div", "pow", "less"}) {
    Var x = MakeVar("x", TensorType({test::S("a"), Dim(5)}, DType::kFloat32));
    Var y = MakeVar("y", TensorType({test::S("b"), Dim(5)}, DType::kFloat32));
    Function fn =
        InferTypes(MakeFunction({x, y}, MakeCall(op, {x, y}), nullptr, Attrs{{"primitive", true}}));
    for (auto [na, nb] : {std::pair<int64_t, int64_t>{1, 7}, {7, 1}, {7, 7}, {1, 1}}) {
      Tensor a = Random(DType::kFloat32, {na, 5}, 0.5, 2, 1);
      Tensor b = Random(DType::kFloat32, {nb, 5}, -2, 2, 2);
      Tensor want = test::RunOne(op, {a, b});
      Tensor got = test::RunCompiled(fn, {a, b}).at(0);
      // pow is within 2 ulp of libm's, as in PowMatchesReference (CUDA's powf differs from
      // the host's in the last bit); the rest is exact.
      const double rtol = std::string(op) == "pow" ? 2.4e-7 : 0;
      EXPECT_TRUE(test::TensorsNear(got, want, 0, rtol)) << op << " a=" << na << " b=" << nb;
    }
  }
}

TEST(LowerBinaryTest, PReluMatchesReference) {
  for (DType t : kFloats) CheckAllShapes("prelu", t, {-10, 10}, {-2, 2});
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64})
    CheckAllShapes("prelu", t, {-1e6, 1e6}, {-1e3, 1e3});  // products wrap in i8/i16
}

// The wider unsigned dtypes: arithmetic wraps modulo 2^n, division and min/max and comparisons
// are unsigned (LLVM's udiv, umin, ult), and the shifts give 0 past the bit width. Fewer
// shapes than above: the generic paths are the same as u8's.
TEST(LowerBinaryTest, WideUnsignedMatchesReference) {
  const std::vector<ShapePair> shapes = {{{1}, {1}}, {{13, 5}, {5}}};
  for (DType t : {DType::kUInt16, DType::kUInt32, DType::kUInt64}) {
    SCOPED_TRACE(DTypeName(t));
    uint64_t seed = 100;
    auto check = [&](const std::string& op, Range ra, Range rb) {
      for (const auto& [sa, sb] : shapes) {
        Tensor a = Random(t, sa, ra.lo, ra.hi, seed++);
        Tensor b = Random(t, sb, rb.lo, rb.hi, seed++);
        EXPECT_TRUE(CompiledMatchesReference(op, {a, b}, {}, 0, 0)) << op << " " << a.TypeString();
      }
    };
    for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum", "less", "equal"})
      check(op, {0, 1e12}, {0, 1e12});
    check("div", {0, 1e12}, {0, 5});  // many x / 0
    check("pow", {0, 4}, {0, 20});
    const double bits = DTypeSize(t) * 8;
    check("shift_left", {0, 1e12}, {0, bits + 3});  // shifts past the width included
    check("shift_right", {0, 1e12}, {0, bits + 3});
  }
  // u64 values past 2^63 compare, divide and shift as unsigned (they are negative as i64).
  Tensor a = Tensor::FromVector<uint64_t>({4}, {~uint64_t{0}, uint64_t{1} << 63, 5, 0});
  Tensor b = Tensor::FromVector<uint64_t>({4}, {3, 1, uint64_t{1} << 63, 64});
  for (const char* op : {"div", "mod", "maximum", "less", "shift_right", "shift_left"})
    EXPECT_TRUE(CompiledMatchesReference(op, {a, b}, {}, 0, 0)) << op;
}

}  // namespace
}  // namespace kiln
