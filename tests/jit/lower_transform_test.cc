// Lowerings of the movement ops in ir/ops/transform.cc (reshape, transpose, squeeze, unsqueeze,
// expand, flatten, tile, depth_to_space, space_to_depth): each op compiled, concretely and
// shape-generic, and compared with its reference kernel on random data. The ops only move elements,
// so results must match exactly (atol = rtol = 0).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;
using V = std::vector<int64_t>;

// One dtype of each class the ops allow (float, integer, half), plus i64 and bool, which
// change the element size and the in-register type.
const DType kDTypes[] = {DType::kFloat32, DType::kInt32, DType::kFloat16, DType::kInt64,
                         DType::kBool};

// `op` on one random input of `shape`, for every dtype in kDTypes.
::testing::AssertionResult MatchesForEveryDType(const std::string& op, const V& shape,
                                                const Attrs& attrs) {
  for (DType t : kDTypes) {
    Tensor x = RandomTensor(t, shape, /*seed=*/shape.size() + 7, -100, 100);
    ::testing::AssertionResult r = CompiledMatchesReference(op, {x}, attrs, 0, 0);
    if (!r) return r << " [" << DTypeName(t) << IntsToString(shape) << "]";
  }
  return ::testing::AssertionSuccess();
}

TEST(LowerTransform, Reshape) {
  struct Case {
    V in, shape;
  };
  const Case cases[] = {
      {{1}, {1, 1}},               // size 1
      {{7}, {7, 1}},               // adds a trailing 1
      {{13, 5}, {5, 13}},          // odd sizes, nothing shared
      {{3, 5, 7}, {15, -1}},       // merges leading dims, infers the last
      {{2, 3, 35}, {0, 3, 5, 7}},  // a 0 copies the input dim; splits the last
      {{6, 4}, {2, 3, 2, 2}},      // splits every dim
      {{0, 5}, {5, -1}},           // empty
      {{3, 0}, {-1, 3}},           // empty, inferred dim
      {{257, 1031}, {1031, 257}},  // large
      {{1 << 16}, {256, 16, 16}},  // large, 1-D to 3-D
      {{4, 1, 9}, {36}},           // to 1-D
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("reshape", c.in, {{"shape", c.shape}}))
        << IntsToString(c.in) << " -> " << IntsToString(c.shape);
  }
}

TEST(LowerTransform, ReshapeAllowZero) {
  EXPECT_TRUE(MatchesForEveryDType("reshape", {0, 3}, {{"shape", V{3, 0}}, {"allowzero", true}}));
}

TEST(LowerTransform, Transpose) {
  struct Case {
    V in, perm;
  };
  const Case cases[] = {
      {{1}, {}},                      // size 1
      {{7}, {0}},                     // 1-D
      {{13, 5}, {}},                  // odd sizes, reversed axes
      {{3, 5, 7}, {1, 2, 0}},         // a rotation
      {{2, 3, 5, 7}, {3, 1, -4, 2}},  // rank 4, a negative axis
      {{1, 13, 1}, {2, 0, 1}},        // size-1 dims move
      {{0, 3}, {1, 0}},               // empty
      {{3, 0, 5}, {2, 1, 0}},         // empty in the middle
      {{257, 1031}, {1, 0}},          // large
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("transpose", c.in, {{"perm", c.perm}}))
        << IntsToString(c.in) << " perm " << IntsToString(c.perm);
  }
}

TEST(LowerTransform, Squeeze) {
  struct Case {
    V in, axes;
  };
  const Case cases[] = {
      {{1}, {}},                // size 1, to a scalar
      {{1, 7, 1, 13}, {}},      // every 1
      {{1, 13, 5}, {0}},        // a listed axis
      {{13, 5, 1}, {-1}},       // a negative axis
      {{7, 1, 1, 5}, {2}},      // one of two 1s
      {{0, 1, 3}, {1}},         // empty
      {{1, 257, 1, 1031}, {}},  // large
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("squeeze", c.in, {{"axes", c.axes}}))
        << IntsToString(c.in) << " axes " << IntsToString(c.axes);
  }
}

TEST(LowerTransform, Unsqueeze) {
  struct Case {
    V in, axes;
  };
  const Case cases[] = {
      {{1}, {0}},             // size 1
      {{}, {0, 1}},           // from a scalar
      {{7}, {0, 2}},          // around a dim
      {{13, 5}, {-1}},        // a negative axis
      {{13, 5}, {1}},         // in the middle
      {{0, 3}, {1}},          // empty
      {{257, 1031}, {0, 2}},  // large
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("unsqueeze", c.in, {{"axes", c.axes}}))
        << IntsToString(c.in) << " axes " << IntsToString(c.axes);
  }
}

TEST(LowerTransform, Expand) {
  struct Case {
    V in, shape;
  };
  const Case cases[] = {
      {{1}, {1}},              // size 1
      {{1}, {7}},              // from one element
      {{13, 1}, {5, 13, 5}},   // new leading dim and a 1 broadcast
      {{3, 1, 5}, {3, 7, 1}},  // both sides broadcast
      {{7}, {1}},              // the target's 1 keeps the input's dim
      {{}, {3, 5}},            // from a scalar
      {{1, 3}, {0, 3}},        // empty
      {{1031}, {257, 1031}},   // large
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("expand", c.in, {{"shape", c.shape}}))
        << IntsToString(c.in) << " -> " << IntsToString(c.shape);
  }
}

TEST(LowerTransform, Flatten) {
  struct Case {
    V in;
    int64_t axis;
  };
  const Case cases[] = {
      {{1}, 0},           // size 1
      {{13, 5}, 1},       // already 2-D
      {{3, 5, 7}, 2},     // merges the leading dims
      {{3, 5, 7}, 0},     // everything into the second dim
      {{3, 5, 7}, 3},     // everything into the first dim (axis == rank)
      {{3, 5, 7}, -2},    // a negative axis
      {{0, 3, 5}, 1},     // empty
      {{4, 257, 64}, 2},  // large
      {{257, 1031}, 0},   // large
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("flatten", c.in, {{"axis", c.axis}}))
        << IntsToString(c.in) << " axis " << c.axis;
  }
}

TEST(LowerTransform, Tile) {
  struct Case {
    V in, repeats;
  };
  const Case cases[] = {
      {{1}, {1}},              // size 1
      {{1}, {7}},              // a size-1 axis repeated
      {{13, 5}, {3, 1}},       // odd sizes, outer axis
      {{13, 5}, {1, 3}},       // inner axis
      {{3, 5, 7}, {2, 3, 2}},  // every axis
      {{4, 5}, {0, 2}},        // zero repeats: empty
      {{0, 5}, {3, 2}},        // empty input
      {{257, 1031}, {2, 1}},   // large
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(MatchesForEveryDType("tile", c.in, {{"repeats", c.repeats}}))
        << IntsToString(c.in) << " repeats " << IntsToString(c.repeats);
  }
}

TEST(LowerTransform, DepthToSpaceAndSpaceToDepth) {
  struct Case {
    V in;
    int64_t blocksize;
  };
  // Shapes that suit depth_to_space (channels a multiple of b^2); space_to_depth runs on
  // their depth_to_space output shapes, which suit it.
  const Case cases[] = {
      {{1, 1, 1, 1}, 1},     // size 1
      {{1, 4, 1, 1}, 2},     // one block
      {{2, 9, 5, 7}, 3},     // odd sizes
      {{3, 8, 2, 3}, 2},     // batched, two output channels
      {{1, 32, 33, 17}, 4},  // large
      {{0, 4, 3, 3}, 2},     // empty
  };
  for (const Case& c : cases) {
    for (const char* mode : {"DCR", "CRD"}) {
      EXPECT_TRUE(MatchesForEveryDType("depth_to_space", c.in,
                                       {{"blocksize", c.blocksize}, {"mode", std::string(mode)}}))
          << IntsToString(c.in) << " b " << c.blocksize << " " << mode;
    }
    const int64_t b = c.blocksize;
    V space = {c.in[0], c.in[1] / (b * b), c.in[2] * b, c.in[3] * b};
    EXPECT_TRUE(MatchesForEveryDType("space_to_depth", space, {{"blocksize", b}}))
        << IntsToString(space) << " b " << b;
  }
}

// shape and size compile (when nothing folded them first), shape-generic too: the kernel
// writes the dims it was given.
TEST(LowerTransform, ShapeAndSize) {
  for (const V& shape : {V{1}, V{3, 1, 5}, V{2, 7, 4, 9}}) {
    Tensor x = RandomTensor(DType::kFloat32, shape, shape.size());
    EXPECT_TRUE(CompiledMatchesReference("shape", {x}, {}, 0, 0)) << IntsToString(shape);
    EXPECT_TRUE(CompiledMatchesReference("shape", {x}, {{"start", int64_t{-2}}}, 0, 0));
    EXPECT_TRUE(CompiledMatchesReference("size", {x}, {}, 0, 0)) << IntsToString(shape);
  }
}

}  // namespace
}  // namespace kiln
