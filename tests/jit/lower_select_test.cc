// Lowerings of the ops in ir/ops/select.cc, gather_scatter.cc, along_axis.cc, generate.cc and
// einsum.cc (concat, split, slice, gather, gather_elements, gather_nd, scatter_elements,
// scatter_nd, trilu, hardmax, cumsum, range, one_hot, topk, einsum, eye_like,
// constant_of_shape, reverse_sequence): each op compiled,
// concretely and shape-generic, and compared with its reference kernel on random data. Most ops
// only move or compare elements, so results must match exactly (atol = rtol = 0); range computes in
// double and converts like the reference, so it matches exactly too. Only cumsum, einsum and the
// scatters' add and mul reductions sum floats in another order (or precision) than the
// reference, within a tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/guarded_run.h"
#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::GuardedMatchesReference;
using test::OpFunction;
using test::RandomTensor;
using test::RunCompiled;
using test::S;
using test::SingleOpFunction;
using V = std::vector<int64_t>;

const DType kDTypes[] = {DType::kFloat32, DType::kInt32, DType::kFloat16, DType::kInt64};

// `op` on random inputs of `shapes` (all of one dtype), for every dtype in kDTypes.
::testing::AssertionResult MatchesForEveryDType(const std::string& op, const std::vector<V>& shapes,
                                                const Attrs& attrs) {
  for (DType t : kDTypes) {
    std::vector<Tensor> inputs;
    uint64_t seed = 11;
    for (const V& s : shapes) inputs.push_back(RandomTensor(t, s, seed++, -100, 100));
    ::testing::AssertionResult r = CompiledMatchesReference(op, inputs, attrs, 0, 0);
    if (!r) return r << " [" << DTypeName(t) << "]";
  }
  return ::testing::AssertionSuccess();
}

std::string ShapesToString(const std::vector<V>& shapes) {
  std::string s;
  for (const V& v : shapes) s += IntsToString(v);
  return s;
}

TEST(LowerSelect, Concat) {
  struct Case {
    std::vector<V> in;
    int64_t axis;
  };
  const Case cases[] = {
      {{{1}, {1}}, 0},                         // size 1
      {{{7}}, 0},                              // one input
      {{{13, 5}, {13, 7}, {13, 1}}, 1},        // odd sizes, three parts
      {{{3, 5}, {7, 5}}, 0},                   // the outer axis
      {{{3, 5}, {3, 5}, {3, 5}, {3, 5}}, -1},  // equal parts, negative axis
      {{{2, 3, 5}, {2, 1, 5}, {2, 4, 5}}, 1},  // a middle axis
      {{{13, 0}, {13, 5}, {13, 0}}, 1},        // empty parts
      {{{0, 5}, {0, 5}}, 0},                   // empty output
      {{{0, 5}, {0, 7}}, 1},                   // empty output, other axis
      {{{257, 1031}, {257, 17}}, 1},           // large
      {{{1 << 15}, {1 << 15}, {1}}, 0},        // large, 1-D
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("concat", c.in, {{"axis", c.axis}}))
        << ShapesToString(c.in) << " axis " << c.axis;
  }
}

TEST(LowerSelect, Split) {
  struct Case {
    V in;
    int64_t axis;
    V split;
    int64_t num_outputs;
  };
  const Case cases[] = {
      {{1}, 0, {1}, 0},                  // size 1
      {{7}, 0, {7}, 0},                  // one part
      {{13, 5}, 0, {6, 7}, 0},           // odd sizes
      {{13, 5}, 0, {}, 3},               // 5, 5, 3
      {{13, 5}, 1, {2, 0, 3}, 0},        // an empty part
      {{3, 7, 2}, -2, {}, 2},            // a middle axis: 4, 3
      {{0, 6}, 1, {}, 2},                // empty input
      {{257, 1031}, 1, {}, 4},           // large
      {{1 << 16}, 0, {1, 65534, 1}, 0},  // large, 1-D
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType(
        "split", {c.in}, {{"axis", c.axis}, {"split", c.split}, {"num_outputs", c.num_outputs}}))
        << IntsToString(c.in) << " axis " << c.axis << " split " << IntsToString(c.split) << " n "
        << c.num_outputs;
  }
}

TEST(LowerSelect, Slice) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  struct Case {
    V in, starts, ends, axes, steps;
  };
  const Case cases[] = {
      {{1}, {0}, {1}, {}, {}},                            // size 1
      {{13, 5}, {2}, {11}, {}, {3}},                      // odd sizes, a step
      {{13, 5}, {-1}, {-100}, {}, {-2}},                  // reversed, every other
      {{13, 5}, {1}, {kMax}, {1}, {}},                    // exporters' INT64_MAX end
      {{13, 5}, {kMax}, {kMin}, {0}, {-1}},               // the whole axis reversed
      {{3, 5, 7}, {-2, 1}, {kMax, -1}, {-1, 0}, {1, 1}},  // two axes, negative axis
      {{7}, {5}, {2}, {}, {}},                            // empty: end before start
      {{0, 5}, {0}, {3}, {1}, {}},                        // empty input
      {{257, 1031}, {1, 3}, {-1, -5}, {}, {2, 3}},        // large
      {{1 << 16}, {-1}, {kMin}, {}, {-1}},                // large, reversed
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType(
        "slice", {c.in},
        {{"starts", c.starts}, {"ends", c.ends}, {"axes", c.axes}, {"steps", c.steps}}))
        << IntsToString(c.in) << " starts " << IntsToString(c.starts) << " ends "
        << IntsToString(c.ends) << " axes " << IntsToString(c.axes) << " steps "
        << IntsToString(c.steps);
  }
}

TEST(LowerSelect, Gather) {
  struct Case {
    V data, indices;
    int64_t axis;
  };
  const Case cases[] = {
      {{1}, {1}, 0},           // size 1
      {{13, 5}, {7}, 0},       // odd sizes
      {{13, 5}, {3, 4}, 1},    // 2-D indices, inner axis
      {{13, 5}, {}, -1},       // a scalar index drops the axis
      {{3, 7, 5}, {2, 9}, 1},  // a middle axis
      {{13, 5}, {0}, 0},       // no indices: empty output
      {{0, 5}, {4}, 1},        // empty data
      {{300}, {1 << 16}, 0},   // large indices
      {{257, 1031}, {2}, 0},   // large rows
  };
  for (DType t : kDTypes) {
    for (DType it : {DType::kInt64, DType::kInt32}) {
      for (const Case& c : cases) {
        int axis = static_cast<int>(c.axis < 0 ? c.axis + c.data.size() : c.axis);
        double dim = static_cast<double>(c.data[axis]);
        Tensor data = RandomTensor(t, c.data, 3, -100, 100);
        // In range, negative ones included: [-dim, dim - 1].
        Tensor indices = RandomTensor(it, c.indices, 4, -dim, dim - 1);
        EXPECT_TRUE(CompiledMatchesReference("gather", {data, indices}, {{"axis", c.axis}}, 0, 0))
            << DTypeName(t) << IntsToString(c.data) << " indices " << DTypeName(it)
            << IntsToString(c.indices) << " axis " << c.axis;
      }
    }
  }
}

TEST(LowerSelect, GatherElements) {
  struct Case {
    V data, indices;
    int64_t axis;
  };
  const Case cases[] = {
      {{1}, {1}, 0},                // size 1
      {{13}, {29}, 0},              // 1-D, more indices than data
      {{13, 5}, {7, 5}, 0},         // odd sizes, outer axis
      {{13, 5}, {13, 9}, -1},       // inner axis, negative
      {{13, 5}, {4, 3}, 1},         // indices smaller than data off the axis
      {{3, 7, 5}, {3, 2, 5}, 1},    // a middle axis
      {{13, 5}, {0, 5}, 0},         // no indices: empty output
      {{257, 1031}, {257, 3}, 1},   // large rows
      {{300, 2}, {1 << 15, 2}, 0},  // large indices
  };
  for (DType t : kDTypes) {
    for (DType it : {DType::kInt64, DType::kInt32}) {
      for (const Case& c : cases) {
        int axis = static_cast<int>(c.axis < 0 ? c.axis + c.data.size() : c.axis);
        double dim = static_cast<double>(c.data[axis]);
        Tensor data = RandomTensor(t, c.data, 3, -100, 100);
        Tensor indices = RandomTensor(it, c.indices, 4, -dim, dim - 1);
        // The symbolic variant only where indices and data share their other dims (the
        // relation requires that of symbolic dims).
        bool same = true;
        for (size_t d = 0; d < c.data.size(); ++d)
          same &= static_cast<int>(d) == axis || c.data[d] == c.indices[d];
        EXPECT_TRUE(CompiledMatchesReference("gather_elements", {data, indices}, {{"axis", c.axis}},
                                             0, 0, same))
            << DTypeName(t) << IntsToString(c.data) << " indices " << DTypeName(it)
            << IntsToString(c.indices) << " axis " << c.axis;
      }
    }
  }
}

TEST(LowerSelect, GatherElementsOutOfRangeIndexReadsClampedElement) {
  Tensor data = test::Floats({2, 3}, {0, 1, 2, 10, 11, 12});
  Tensor indices = test::MakeTensor<int64_t>({2, 2}, {100, -100, -1, 1});
  for (bool symbolic : {false, true}) {
    std::vector<Tensor> out = RunCompiled(
        SingleOpFunction("gather_elements", {data, indices}, {{"axis", int64_t{1}}}, symbolic),
        {data, indices});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(test::TensorsNear(out[0], test::Floats({2, 2}, {2, 0, 12, 11}), 0, 0))
        << (symbolic ? "symbolic" : "concrete");
  }
}

TEST(LowerSelect, ScatterElements) {
  struct Case {
    V data, indices;
    int64_t axis;
  };
  const Case cases[] = {
      {{1}, {1}, 0},               // size 1
      {{13}, {29}, 0},             // 1-D, many duplicates
      {{13, 5}, {7, 5}, 0},        // odd sizes, outer axis
      {{13, 5}, {13, 9}, -1},      // inner axis, more updates than the axis holds
      {{13, 5}, {4, 3}, 1},        // indices smaller than data off the axis
      {{3, 7, 5}, {3, 2, 5}, 1},   // a middle axis
      {{13, 5}, {0, 5}, 0},        // no updates: the data
      {{257, 1031}, {257, 3}, 1},  // large
  };
  for (const char* reduction : {"none", "add", "mul"}) {
    const bool mul = std::string(reduction) == "mul";
    for (DType t : kDTypes) {
      // Sums and products are reduced in another order than the reference kernel's.
      const double tol = t == DType::kFloat16 ? 1e-2 : IsFloat(t) ? 1e-5 : 0;
      for (const Case& c : cases) {
        int axis = static_cast<int>(c.axis < 0 ? c.axis + c.data.size() : c.axis);
        double dim = static_cast<double>(c.data[axis]);
        Tensor data = RandomTensor(t, c.data, 3, mul ? -2 : -100, mul ? 2 : 100);
        Tensor indices = RandomTensor(DType::kInt64, c.indices, 4, -dim, dim - 1);
        Tensor updates = RandomTensor(t, c.indices, 5, mul ? -2 : -100, mul ? 2 : 100);
        bool same = true;
        for (size_t d = 0; d < c.data.size(); ++d)
          same &= static_cast<int>(d) == axis || c.data[d] == c.indices[d];
        EXPECT_TRUE(CompiledMatchesReference(
            "scatter_elements", {data, indices, updates},
            {{"axis", c.axis}, {"reduction", std::string(reduction)}}, tol, tol, same))
            << reduction << " " << DTypeName(t) << IntsToString(c.data) << " indices "
            << IntsToString(c.indices) << " axis " << c.axis;
      }
    }
  }
}

TEST(LowerSelect, ScatterElementsDropsOutOfRangeUpdates) {
  Tensor data = test::Floats({2, 3}, {0, 1, 2, 10, 11, 12});
  Tensor indices = test::MakeTensor<int64_t>({2, 2}, {100, -1, -100, 0});
  Tensor updates = test::Floats({2, 2}, {-1, -2, -3, -4});
  for (bool symbolic : {false, true}) {
    std::vector<Tensor> out =
        RunCompiled(SingleOpFunction("scatter_elements", {data, indices, updates},
                                     {{"axis", int64_t{1}}}, symbolic),
                    {data, indices, updates});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(test::TensorsNear(out[0], test::Floats({2, 3}, {0, 1, -2, -4, 11, 12}), 0, 0))
        << (symbolic ? "symbolic" : "concrete");
  }
}

// gather_nd and scatter_nd need the tuple length (the indices' last dim) constant, so
// SingleOpFunction's symbolic variant, which makes every dim above 1 a symbol, does not apply:
// this one keeps that dim constant. Compares with the reference kernel.
::testing::AssertionResult SymbolicNdMatchesReference(const std::string& op,
                                                      const std::vector<Tensor>& inputs,
                                                      const Attrs& attrs, double tol) {
  std::vector<Var> params;
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape shape;
    const V& dims = inputs[i].shape();
    for (size_t d = 0; d < dims.size(); ++d) {
      bool tuple_length = i == 1 && d + 1 == dims.size();
      shape.push_back(!tuple_length && dims[d] > 1 ? Dim::Symbol(StrCat("d", dims[d]))
                                                   : Dim(dims[d]));
    }
    params.push_back(MakeVar(StrCat("x", i), TensorType(shape, inputs[i].dtype())));
    args.push_back(params.back());
  }
  Function fn = InferTypes(
      MakeFunction(params, MakeCall(op, args, attrs), nullptr, Attrs{{"primitive", true}}));
  std::vector<Tensor> got = RunCompiled(fn, inputs, "k_" + op);
  std::vector<Tensor> want = RunOpReference(op, inputs, attrs);
  return test::TensorsNear(got.at(0), want.at(0), tol, tol);
}

TEST(LowerSelect, GatherNd) {
  struct Case {
    V data, indices;
    int64_t batch_dims;
  };
  const Case cases[] = {
      {{1}, {1, 1}, 0},             // size 1
      {{13, 5}, {7, 2}, 0},         // whole tuples: elements
      {{13, 5}, {3, 4, 1}, 0},      // partial tuples: rows
      {{3, 7, 5}, {3, 9, 1}, 1},    // a batch dim
      {{3, 7, 5}, {3, 2, 2}, 1},    // batch dim and whole tuples
      {{13, 5}, {0, 1}, 0},         // no tuples: empty output
      {{257, 1031}, {3, 1}, 0},     // large rows
      {{300, 2}, {1 << 14, 2}, 0},  // many tuples
  };
  for (DType t : kDTypes) {
    for (DType it : {DType::kInt64, DType::kInt32}) {
      for (const Case& c : cases) {
        // In range, negative ones included, for the smallest dim a tuple indexes.
        int64_t m = c.indices.back();
        double dim = 1e9;
        for (int64_t d = c.batch_dims; d < c.batch_dims + m; ++d)
          dim = std::min(dim, static_cast<double>(c.data[d]));
        Tensor data = RandomTensor(t, c.data, 3, -100, 100);
        Tensor indices = RandomTensor(it, c.indices, 4, -dim, dim - 1);
        Attrs attrs{{"batch_dims", c.batch_dims}};
        EXPECT_TRUE(CompiledMatchesReference("gather_nd", {data, indices}, attrs, 0, 0,
                                             /*also_symbolic=*/false))
            << DTypeName(t) << IntsToString(c.data) << " indices " << DTypeName(it)
            << IntsToString(c.indices) << " batch_dims " << c.batch_dims;
        EXPECT_TRUE(SymbolicNdMatchesReference("gather_nd", {data, indices}, attrs, 0))
            << "symbolic " << DTypeName(t) << IntsToString(c.data) << " indices " << DTypeName(it)
            << IntsToString(c.indices) << " batch_dims " << c.batch_dims;
      }
    }
  }
}

TEST(LowerSelect, ScatterNd) {
  struct Case {
    V data, indices;
  };
  const Case cases[] = {
      {{1}, {1}},              // size 1, one 1-D tuple
      {{13}, {29, 1}},         // many duplicates
      {{13, 5}, {7, 2}},       // whole tuples: elements
      {{13, 5}, {3, 1}},       // partial tuples: rows
      {{3, 7, 5}, {2, 2, 2}},  // 2-D batch of tuples
      {{13, 5}, {0, 1}},       // no updates: the data
      {{257, 131}, {9, 1}},    // large
  };
  for (const char* reduction : {"none", "add", "mul"}) {
    const bool mul = std::string(reduction) == "mul";
    for (DType t : kDTypes) {
      const double tol = t == DType::kFloat16 ? 1e-2 : IsFloat(t) ? 1e-5 : 0;
      for (const Case& c : cases) {
        int64_t m = c.indices.back();
        double dim = 1e9;
        for (int64_t d = 0; d < m; ++d) dim = std::min(dim, static_cast<double>(c.data[d]));
        V ushape(c.indices.begin(), c.indices.end() - 1);
        ushape.insert(ushape.end(), c.data.begin() + m, c.data.end());
        Tensor data = RandomTensor(t, c.data, 3, mul ? -2 : -100, mul ? 2 : 100);
        Tensor indices = RandomTensor(DType::kInt64, c.indices, 4, -dim, dim - 1);
        Tensor updates = RandomTensor(t, ushape, 5, mul ? -2 : -100, mul ? 2 : 100);
        Attrs attrs{{"reduction", std::string(reduction)}};
        EXPECT_TRUE(CompiledMatchesReference("scatter_nd", {data, indices, updates}, attrs, tol,
                                             tol, /*also_symbolic=*/false))
            << reduction << " " << DTypeName(t) << IntsToString(c.data) << " indices "
            << IntsToString(c.indices);
        EXPECT_TRUE(SymbolicNdMatchesReference("scatter_nd", {data, indices, updates}, attrs, tol))
            << "symbolic " << reduction << " " << DTypeName(t) << IntsToString(c.data)
            << " indices " << IntsToString(c.indices);
      }
    }
  }
}

TEST(LowerSelect, Trilu) {
  struct Case {
    V in;
    bool upper;
    int64_t k;
  };
  const Case cases[] = {
      {{1, 1}, true, 0},         // size 1
      {{13, 5}, true, 0},        // odd, wide
      {{5, 13}, false, 0},       // odd, tall
      {{7, 7}, true, 2},         // above the diagonal
      {{7, 7}, false, -3},       // below it
      {{3, 4, 9}, true, -1},     // batched
      {{4, 6}, false, 100},      // everything kept
      {{4, 6}, true, 100},       // nothing kept
      {{0, 6}, true, 0},         // empty
      {{2, 129, 257}, true, 1},  // large
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("trilu", {c.in}, {{"upper", c.upper}, {"k", c.k}}))
        << IntsToString(c.in) << " upper " << c.upper << " k " << c.k;
  }
}

TEST(LowerSelect, Hardmax) {
  struct Case {
    V in;
    int64_t axis;
  };
  const Case cases[] = {
      {{1}, 0},          // size 1
      {{13}, 0},         // 1-D, odd
      {{13, 5}, -1},     // inner axis
      {{13, 5}, 0},      // outer axis
      {{3, 7, 5}, 1},    // a middle axis
      {{0, 5}, 1},       // empty
      {{257, 1031}, 1},  // large rows
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kFloat64}) {
    for (const Case& c : cases) {
      // Whole numbers in a small range, so rows have ties; some NaNs, and a row of them.
      Tensor ints = RandomTensor(DType::kInt32, c.in, 5, -4, 4);
      Tensor x = Tensor::Empty(t, c.in);
      for (int64_t i = 0; i < x.numel(); ++i) {
        double v = ints.GetAsDouble(i);
        x.SetFromDouble(i, i % 11 == 3 || (c.in.size() == 2 && i < c.in[1]) ? nan : v);
      }
      EXPECT_TRUE(CompiledMatchesReference("hardmax", {x}, {{"axis", c.axis}}, 0, 0))
          << DTypeName(t) << IntsToString(c.in) << " axis " << c.axis;
    }
  }
}

TEST(LowerSelect, Cumsum) {
  struct Case {
    V in;
    int64_t axis;
  };
  const Case cases[] = {
      {{1}, 0},        // size 1
      {{13}, 0},       // 1-D, odd
      {{13, 5}, -1},   // inner axis
      {{13, 5}, 0},    // outer axis
      {{3, 7, 5}, 1},  // a middle axis
      {{0, 5}, 1},     // empty
      {{9, 1031}, 1},  // long lines
  };
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      for (DType t : kDTypes) {
        // Floats may be summed in another order than the reference's (reversed lines are),
        // which leaves an absolute error of about len * eps * |x| near sums that cancel;
        // integers are exact.
        const double rtol = t == DType::kFloat16 ? 1e-2 : IsFloat(t) ? 1e-5 : 0;
        const double atol = t == DType::kFloat16 ? 1e-2 : IsFloat(t) ? 1e-3 : 0;
        for (const Case& c : cases) {
          Tensor x = RandomTensor(t, c.in, 6, -10, 10);
          Attrs attrs{{"axis", c.axis}, {"exclusive", exclusive}, {"reverse", reverse}};
          EXPECT_TRUE(CompiledMatchesReference("cumsum", {x}, attrs, atol, rtol))
              << DTypeName(t) << IntsToString(c.in) << " axis " << c.axis << " exclusive "
              << exclusive << " reverse " << reverse;
        }
      }
    }
  }
}

// k computed at run time: the second input, read once per element.
TEST(LowerSelect, TriluKAsInput) {
  for (int64_t k : V{-2, 0, 3}) {
    for (DType kt : {DType::kInt64, DType::kInt32}) {
      Tensor x = RandomTensor(DType::kFloat32, {3, 5, 7}, 7, -100, 100);
      Tensor kin = Tensor::Empty(kt, {1});
      kin.SetFromDouble(0, static_cast<double>(k));
      EXPECT_TRUE(CompiledMatchesReference("trilu", {x, kin}, {{"upper", k != 0}}, 0, 0))
          << "k " << k << " " << DTypeName(kt);
    }
  }
}

// ---- Reads stay in bounds ----
//
// Concat reads every part in every element (the arms of its selects are all evaluated) and
// gather reads data at indices it loaded, so these run with each input copied right against an
// inaccessible page: a read past its end, or before its start, faults.

TEST(LowerSelect, ConcatReadsStayInBounds) {
  const DType f32 = DType::kFloat32;
  struct Case {
    std::vector<V> in;
    int64_t axis;
  };
  const Case cases[] = {
      {{{13, 5}, {13, 7}, {13, 1}}, 1},
      {{{3, 300}, {1, 300}, {4, 300}}, 0},
      {{{2, 3, 64}, {2, 1, 64}, {2, 5, 64}}, 1},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> inputs;
    for (const V& s : c.in) inputs.push_back(RandomTensor(f32, s, inputs.size() + 1));
    Attrs attrs{{"axis", c.axis}};
    for (bool symbolic : {false, true}) {
      EXPECT_TRUE(GuardedMatchesReference(
          "concat", test::SingleOpFunction("concat", inputs, attrs, symbolic), inputs, attrs))
          << ShapesToString(c.in) << " axis " << c.axis << (symbolic ? " symbolic" : "");
    }
  }
}

// The index-taking ops read data at indices they loaded, and the scatters read updates at the
// position of the last update that names an element (clamped when there is none).
TEST(LowerSelect, IndexedOpsReadsStayInBounds) {
  struct Case {
    std::string op;
    std::vector<Tensor> inputs;
    Attrs attrs;
  };
  const Case cases[] = {
      {"gather_elements",
       {RandomTensor(DType::kFloat32, {13, 65}, 1),
        RandomTensor(DType::kInt64, {13, 9}, 2, -65, 64)},
       {{"axis", int64_t{1}}}},
      {"gather_nd",
       {RandomTensor(DType::kFloat32, {13, 65}, 1),
        RandomTensor(DType::kInt64, {9, 2}, 2, -13, 12)},
       {}},
      {"scatter_elements",
       {RandomTensor(DType::kFloat32, {13, 65}, 1),
        RandomTensor(DType::kInt64, {13, 9}, 2, -65, 64),
        RandomTensor(DType::kFloat32, {13, 9}, 3)},
       {{"axis", int64_t{1}}}},
      {"scatter_nd",
       {RandomTensor(DType::kFloat32, {13, 65}, 1), RandomTensor(DType::kInt64, {9, 1}, 2, -13, 12),
        RandomTensor(DType::kFloat32, {9, 65}, 3)},
       {}},
  };
  for (const Case& c : cases) {
    // The nd ops need a constant tuple length, which the all-symbolic variant would not keep.
    const bool nd = c.op.find("_nd") != std::string::npos;
    for (bool symbolic : {false, true}) {
      if (symbolic && nd) continue;
      EXPECT_TRUE(GuardedMatchesReference(
          c.op, test::SingleOpFunction(c.op, c.inputs, c.attrs, symbolic), c.inputs, c.attrs))
          << c.op << (symbolic ? " symbolic" : "");
    }
  }
}

// A part whose symbolic extent is 0 at run time has no element in range: its (untaken) reads
// go to its first element, not past its end by up to the size of the inner dims.
TEST(LowerSelect, ConcatSymbolicPartEmptyAtRunTime) {
  const DType f32 = DType::kFloat32;
  Attrs axis0{{"axis", int64_t{0}}};
  Function rows =
      OpFunction("concat", {{S("n"), 300}, {S("m"), 300}, {2, 300}}, {f32, f32, f32}, axis0);
  for (auto [n, m] : {std::pair<int64_t, int64_t>{3, 0}, {0, 4}, {0, 0}, {3, 4}}) {
    std::vector<Tensor> in = {RandomTensor(f32, {n, 300}, 1), RandomTensor(f32, {m, 300}, 2),
                              RandomTensor(f32, {2, 300}, 3)};
    EXPECT_TRUE(GuardedMatchesReference("concat", rows, in, axis0)) << "n " << n << " m " << m;
  }
  Attrs axis1{{"axis", int64_t{1}}};
  Function cols = OpFunction("concat", {{S("r"), S("a")}, {S("r"), S("b")}}, {f32, f32}, axis1);
  for (auto [a, b] : {std::pair<int64_t, int64_t>{0, 9}, {9, 0}}) {
    std::vector<Tensor> in = {RandomTensor(f32, {7, a}, 1), RandomTensor(f32, {7, b}, 2)};
    EXPECT_TRUE(GuardedMatchesReference("concat", cols, in, axis1)) << "a " << a << " b " << b;
  }
}

TEST(LowerSelect, SliceReadsStayInBounds) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  Tensor x = RandomTensor(DType::kFloat32, {13, 65}, 1);
  const Attrs cases[] = {
      {{"starts", V{-1, 64}}, {"ends", V{kMin, -100}}, {"steps", V{-1, -3}}},
      {{"starts", V{2, 1}}, {"ends", V{13, 65}}, {"steps", V{5, 2}}},
  };
  for (const Attrs& attrs : cases) {
    for (bool symbolic : {false, true}) {
      EXPECT_TRUE(GuardedMatchesReference(
          "slice", test::SingleOpFunction("slice", {x}, attrs, symbolic), {x}, attrs))
          << (symbolic ? "symbolic" : "");
    }
  }
}

TEST(LowerSelect, GatherReadsStayInBounds) {
  Tensor data = RandomTensor(DType::kFloat32, {13, 65}, 1);
  Tensor indices = RandomTensor(DType::kInt64, {4, 9}, 2, -65, 64);
  Attrs attrs{{"axis", int64_t{1}}};
  for (bool symbolic : {false, true}) {
    EXPECT_TRUE(GuardedMatchesReference(
        "gather", test::SingleOpFunction("gather", {data, indices}, attrs, symbolic),
        {data, indices}, attrs))
        << (symbolic ? "symbolic" : "");
  }
}

// The reference kernel rejects an out-of-range index; a compiled kernel cannot throw, so it
// reads the element at the index clamped into range (ir/ops/select.cc) and stays in bounds.
TEST(LowerSelect, GatherOutOfRangeIndexReadsClampedElement) {
  Tensor data = test::Floats({5, 2}, {0, 1, 10, 11, 20, 21, 30, 31, 40, 41});
  Tensor indices = test::MakeTensor<int64_t>({4}, {100, -100, 2, -1});
  for (bool symbolic : {false, true}) {
    std::vector<Tensor> out =
        RunCompiled(SingleOpFunction("gather", {data, indices}, {{"axis", int64_t{0}}}, symbolic),
                    {data, indices});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(
        test::TensorsNear(out[0], test::Floats({4, 2}, {40, 41, 0, 1, 20, 21, 40, 41}), 0, 0))
        << (symbolic ? "symbolic" : "concrete");
  }
}

TEST(LowerSelect, Range) {
  struct RangeCase {
    double start, limit, delta;
    DType dtype;
  };
  const RangeCase cases[] = {
      {0, 1, 1, DType::kFloat32},              // size 1
      {3, 10, 1, DType::kInt32},               // odd size
      {-5, 8.5, 0.25, DType::kFloat32},        // fractional delta
      {10, -3, -1, DType::kInt32},             // counting down
      {-3, 7.5, 0.5, DType::kFloat16},         // f16
      {0.1, 1.0, 0.1, DType::kFloat64},        // inexact steps in f64
      {0.1, 1.0, 0.1, DType::kFloat32},        // and rounded to f32
      {5, 5, 1, DType::kFloat32},              // empty
      {5, 0, 1, DType::kInt64},                // empty, limit below start
      {0, 1 << 16, 1, DType::kFloat32},        // large
      {-70000, 70000, 1.25, DType::kFloat16},  // large, f16 rounds; beyond 65504 is inf
      {250, 0, -3, DType::kUInt8},             // u8
      {1e12, 1.5e12, 3e7, DType::kInt64},      // large i64 values
  };
  for (const RangeCase& c : cases) {
    Attrs attrs{{"start", c.start}, {"limit", c.limit}, {"delta", c.delta}, {"dtype", c.dtype}};
    // start + i * delta may round once, as an FMA (jit/kernel.h fp_contract; NVRTC contracts
    // it, so 0.1 + 5 * 0.1 differs in the last bit of f64 on a GPU): one ulp of f64.
    const double rtol = c.dtype == DType::kFloat64 ? 2.3e-16 : 0;
    EXPECT_TRUE(CompiledMatchesReference("range", {}, attrs, 0, rtol))
        << "range(" << c.start << ", " << c.limit << ", " << c.delta << ") " << DTypeName(c.dtype);
  }
}

TEST(LowerSelect, OneHot) {
  struct Case {
    V indices;
    int64_t depth, axis;
  };
  const Case cases[] = {
      {{1}, 1, -1},      // size 1
      {{13}, 5, -1},     // odd, classes last
      {{13}, 7, 0},      // classes first
      {{3, 7}, 4, 1},    // a middle axis
      {{}, 9, 0},        // a scalar index
      {{0, 3}, 4, -1},   // empty
      {{2049}, 3, -1},   // large
      {{5, 3}, 300, 1},  // many classes
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Every index dtype with f32 values; the other value dtypes with i64 indices.
  const std::pair<DType, DType> dtypes[] = {
      {DType::kInt64, DType::kFloat32},   {DType::kInt32, DType::kFloat32},
      {DType::kFloat32, DType::kFloat32}, {DType::kFloat16, DType::kFloat32},
      {DType::kInt64, DType::kInt64},     {DType::kInt64, DType::kBool},
  };
  for (const auto& [it, vt] : dtypes) {
    for (const Case& c : cases) {
      // Indices in and beyond [-depth, depth): out of range ones give all off; float ones
      // truncate, with a NaN among them.
      const double d = static_cast<double>(c.depth);
      Tensor indices = RandomTensor(it, c.indices, 8, -d - 2, d + 1.5);
      if (IsFloat(it) && indices.numel() > 3) indices.SetFromDouble(3, nan);
      Tensor values = RandomTensor(vt, {2}, 9, -50, 50);
      if (vt == DType::kBool) values = test::MakeTensor<bool>({2}, {false, true});
      Attrs attrs{{"depth", c.depth}, {"axis", c.axis}};
      EXPECT_TRUE(CompiledMatchesReference("one_hot", {indices, values}, attrs, 0, 0))
          << DTypeName(it) << IntsToString(c.indices) << " values " << DTypeName(vt) << " depth "
          << c.depth << " axis " << c.axis;
    }
  }
}

TEST(LowerSelect, TopK) {
  struct Case {
    V in;
    int64_t k, axis;
  };
  const Case cases[] = {
      {{1}, 1, 0},        // size 1
      {{13}, 5, 0},       // 1-D, odd
      {{13, 5}, 13, 0},   // all of an outer axis
      {{3, 7, 5}, 3, 1},  // a middle axis
      {{0, 5}, 3, 1},     // empty
      {{9, 257}, 10, 1},  // long lines
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Compiles are slow (two reductions, two outputs): both orders in f32, one in the others.
  const std::pair<DType, bool> variants[] = {{DType::kFloat32, true},
                                             {DType::kFloat32, false},
                                             {DType::kFloat16, true},
                                             {DType::kInt64, false}};
  for (const auto& [t, largest] : variants) {
    for (const Case& c : cases) {
      // Whole numbers in a small range, so lines have ties; floats get NaNs too.
      Tensor x = RandomTensor(t, c.in, 10, -4, 4);
      if (IsFloat(t))
        for (int64_t i = 5; i < x.numel(); i += 7) x.SetFromDouble(i, nan);
      Attrs attrs{{"k", c.k}, {"axis", c.axis}, {"largest", largest}};
      EXPECT_TRUE(CompiledMatchesReference("topk", {x}, attrs, 0, 0))
          << DTypeName(t) << IntsToString(c.in) << " k " << c.k << " axis " << c.axis << " largest "
          << largest;
    }
  }
  // Distinct values: the order alone decides. k = 0 and an inner axis, in i32.
  Tensor x = RandomTensor(DType::kFloat64, {5, 31}, 12, -1e6, 1e6);
  EXPECT_TRUE(CompiledMatchesReference("topk", {x}, {{"k", int64_t{31}}}, 0, 0));
  Tensor y = RandomTensor(DType::kInt32, {13, 5}, 13, -3, 3);
  EXPECT_TRUE(CompiledMatchesReference("topk", {y}, {{"k", int64_t{2}}}, 0, 0));
  EXPECT_TRUE(
      CompiledMatchesReference("topk", {y}, {{"k", int64_t{0}}, {"axis", int64_t{0}}}, 0, 0));
}

TEST(LowerSelect, Einsum) {
  struct Case {
    std::string equation;
    std::vector<V> in;
    bool every_dtype;  // else f32 only, to keep the compiles few
  };
  const Case cases[] = {
      {"ij,jk->ik", {{1, 1}, {1, 1}}, false},                   // size 1
      {"ij,jk->ik", {{7, 13}, {13, 5}}, true},                  // odd sizes
      {"ij,jk", {{33, 65}, {65, 17}}, false},                   // larger, implicit output
      {"bij, bjk -> bik", {{3, 2, 5}, {3, 5, 7}}, false},       // batch
      {"ij->ji", {{13, 5}}, false},                             // transpose
      {"ij->", {{13, 5}}, false},                               // sum of all
      {"ij->j", {{13, 5}}, false},                              // column sums
      {"ii->i", {{7, 7}}, false},                               // diagonal
      {"ii", {{7, 7}}, false},                                  // trace
      {"i,j->ij", {{5}, {3}}, false},                           // outer
      {"i,i", {{1031}, {1031}}, true},                          // inner, long
      {"...ij,...jk->...ik", {{5, 1, 2, 3}, {7, 3, 4}}, true},  // ellipsis, broadcast
      {"...ii->...i", {{3, 5, 5}}, true},                       // batch diagonal
      {"ij,jk->ik", {{4, 0}, {0, 3}}, false},                   // empty sum
  };
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kFloat16}) {
    // Compiled f32/f16 sums accumulate in f32, the reference in double; f64 sums may run in
    // another order (vectorized); integer sums are exact.
    const double tol = t == DType::kFloat16   ? 1e-2
                       : t == DType::kFloat32 ? 1e-4
                       : t == DType::kFloat64 ? 1e-12
                                              : 0;
    for (const Case& c : cases) {
      if (t != DType::kFloat32 && !c.every_dtype) continue;
      std::vector<Tensor> inputs;
      uint64_t seed = 13;
      for (const V& s : c.in) inputs.push_back(RandomTensor(t, s, seed++, -3, 3));
      EXPECT_TRUE(CompiledMatchesReference("einsum", inputs, {{"equation", c.equation}}, tol, tol))
          << DTypeName(t) << " " << c.equation << " " << ShapesToString(c.in);
    }
  }
}

TEST(LowerSelect, EyeLike) {
  struct Case {
    V in;
    int64_t k;
  };
  const Case cases[] = {
      {{1, 1}, 0},    // size 1
      {{13, 5}, 0},   // odd, wide
      {{5, 13}, 3},   // above the diagonal
      {{13, 5}, -4},  // below it
      {{4, 6}, 9},    // off the matrix
      {{0, 3}, 0},    // empty
      {{65, 63}, 1},  // larger
  };
  for (DType t : {DType::kFloat32, DType::kInt64, DType::kBool}) {
    for (const Case& c : cases) {
      Tensor x = RandomTensor(DType::kInt32, c.in, 3, -9, 9);
      EXPECT_TRUE(CompiledMatchesReference("eye_like", {x}, {{"k", c.k}, {"dtype", t}}, 0, 0))
          << DTypeName(t) << IntsToString(c.in) << " k " << c.k;
    }
  }
}

TEST(LowerSelect, ConstantOfShape) {
  struct Case {
    V shape;
    double value;
    DType dtype;
  };
  const Case cases[] = {
      {{}, 1.5, DType::kFloat32},       // a scalar
      {{1}, -3, DType::kInt32},         // size 1
      {{13, 5}, 0.1, DType::kFloat64},  // odd
      {{7, 3}, 0.1, DType::kFloat16},   // rounded to f16 through f32
      {{4, 0}, 2, DType::kInt64},       // empty
      {{3}, 1, DType::kBool},           // true
      {{4097}, 255, DType::kUInt8},     // large
      {{5}, -1e300, DType::kFloat32},   // beyond f32: -inf
  };
  for (const Case& c : cases) {
    Attrs attrs{{"shape", c.shape}, {"value", c.value}, {"dtype", c.dtype}};
    EXPECT_TRUE(CompiledMatchesReference("constant_of_shape", {}, attrs, 0, 0))
        << DTypeName(c.dtype) << IntsToString(c.shape) << " value " << c.value;
  }
}

TEST(LowerSelect, ReverseSequence) {
  struct Case {
    V in;
    int64_t batch_axis, time_axis;
  };
  const Case cases[] = {
      {{1, 1}, 1, 0},      // size 1
      {{13, 5}, 1, 0},     // time first
      {{5, 13}, 0, 1},     // batch first
      {{5, 13, 3}, 0, 1},  // with a feature axis
      {{7, 3, 9}, 2, 0},   // batch last
      {{0, 4}, 1, 0},      // no time steps
      {{129, 33}, 1, 0},   // larger
  };
  for (DType t : {DType::kFloat32, DType::kInt64, DType::kFloat16}) {
    for (DType lt : {DType::kInt64, DType::kInt32}) {
      for (const Case& c : cases) {
        Tensor x = RandomTensor(t, c.in, 4, -100, 100);
        // Lengths in and beyond [0, steps]: the ones outside clamp.
        const double steps = static_cast<double>(c.in[c.time_axis]);
        Tensor lens = RandomTensor(lt, {c.in[c.batch_axis]}, 5, -1, steps + 2);
        Attrs attrs{{"batch_axis", c.batch_axis}, {"time_axis", c.time_axis}};
        EXPECT_TRUE(CompiledMatchesReference("reverse_sequence", {x, lens}, attrs, 0, 0))
            << DTypeName(t) << IntsToString(c.in) << " lens " << DTypeName(lt) << " batch "
            << c.batch_axis << " time " << c.time_axis;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
