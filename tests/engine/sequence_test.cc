// Sequences inside a model (ir/sequence.h) run through the engine: every sequence is resolved
// at specialization from the shapes and the value inputs (a split size, a position), so what is
// compiled is ordinary slices, elementwise ops and a concat. Results match the reference
// interpreter; a new split size is a new specialization, a repeat one a hit. A sequence output
// comes back as its elements.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/engine_options.h"
#include "common/test_util.h"
#include "engine/engine.h"
#include "ir/interpreter.h"
#include "ir/text.h"
#include "ir/type_infer.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::RandomTensor;
using test::TensorsNear;
using ::testing::AllOf;
using ::testing::HasSubstr;

// x split into pieces of k columns; piece q, exponentiated, goes in front; all joined again.
constexpr char kSplitJoin[] = R"(
def @main(%x: f32[3, n], %k: i64[], %q: i64[]) {
  %s = dyn.seq.split_chunk(%x, %k, axis=1)
  %e = exp(dyn.seq.at(%s, %q))
  %t = seq.insert(%s, %e, position=[0])
  add(seq.concat(%t, axis=1), const(f32[], 1.0))
}
)";

TEST(EngineSequence, SplitAtInsertConcatCompileAndMatchTheInterpreter) {
  ModelPtr m = test::ModelFromText(kSplitJoin);
  EXPECT_TRUE(m->dynamic());
  EXPECT_EQ(m->value_inputs(), (std::vector<int>{1, 2}));
  Engine engine(test::Eager());
  auto run = [&](int64_t n, int64_t k, int64_t q) {
    std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {3, n}, n * 10 + k),
                              Tensor::Scalar<int64_t>(k), Tensor::Scalar<int64_t>(q)};
    std::vector<Tensor> want = Interpret(m->graph(), in);
    std::vector<Tensor> got = engine.Run(*m, in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(TensorsNear(got[0], want[0])) << n << " " << k << " " << q;
    // Piece q of width k (or what is left) joins the n columns.
    const int64_t width = std::min(k, n - k * (q < 0 ? (n + k - 1) / k + q : q));
    EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{3, n + width})) << n << " " << k << " " << q;
  };
  run(7, 2, 0);
  run(7, 2, -1);  // the last piece, one column
  run(1, 1, 0);
  run(64, 5, 3);
  run(7, 2, 0);  // a repeat: a hit
  run(7, 3, 0);  // a new split size: a new specialization
  EngineStats st = engine.stats();
  EXPECT_EQ(st.specializations, 5u);
  EXPECT_GE(st.hits, 1u);

  // A position out of range for the pieces this x makes is the run's error, naming the node.
  std::vector<Tensor> bad = {RandomTensor(DType::kFloat32, {3, 4}, 1), Tensor::Scalar<int64_t>(2),
                             Tensor::Scalar<int64_t>(2)};
  std::string e = ErrorMessage([&] { engine.Run(*m, bad); });
  EXPECT_THAT(e, AllOf(HasSubstr("position 2"), HasSubstr("sequence of 2 elements")));
}

// A sequence output comes back as its elements, in place; its length, returned too, says how
// many there are.
TEST(EngineSequence, ASequenceOutputIsReturnedAsItsElements) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[3, n], %k: i64[]) {
  %s = dyn.seq.split_chunk(%x, %k, axis=1)
  (seq.length(%s), %s, exp(%x))
}
)");
  Engine engine(test::Eager());
  Tensor x = RandomTensor(DType::kFloat32, {3, 5}, 7);
  for (int64_t k : {2, 5, 1}) {
    std::vector<Tensor> in = {x, Tensor::Scalar<int64_t>(k)};
    std::vector<Tensor> out = engine.Run(*m, in);
    const int64_t pieces = (5 + k - 1) / k;
    ASSERT_EQ(out.size(), static_cast<size_t>(pieces + 2)) << k;
    EXPECT_EQ(out[0].GetAsDouble(0), pieces);
    std::vector<Tensor> want = Interpret(m->graph(), in);
    ASSERT_EQ(want.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i)
      EXPECT_TRUE(TensorsNear(out[i], want[i])) << k << " " << i;
    EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{3, std::min<int64_t>(k, 5)}));
  }
}

// A loop that carries a sequence unrolls at specialization (its trip count a value input),
// never runs in segments: sequences do not exist past specialization.
TEST(EngineSequence, ALoopCarryingASequenceUnrollsPerTripCount) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %acc: List[f32[n]], %v: f32[n]) {
    (%c, seq.insert(%acc, mul(%v, cast(%i, dtype=f32))))
  }
  %loop = dyn.loop(%body, seq.construct(%x), %x, %trips, const(bool[], true), num_carried=1, num_scans=0)
  seq.concat(%loop.0, axis=0)
}
)");
  EXPECT_FALSE(m->segments());
  EXPECT_EQ(m->value_inputs(), std::vector<int>{1});
  Engine engine(test::Eager());
  Tensor x = RandomTensor(DType::kFloat32, {3}, 9);
  for (int64_t trips : {2, 5, 0}) {
    std::vector<Tensor> in = {x, Tensor::Scalar<int64_t>(trips)};
    std::vector<Tensor> got = engine.Run(*m, in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{3 * (trips + 1)}));
    EXPECT_TRUE(TensorsNear(got[0], Interpret(m->graph(), in).at(0))) << trips;
    if (trips > 0) {  // the last element appended: x * (trips - 1)
      EXPECT_NEAR(got[0].GetAsDouble(3 * trips + 1), x.GetAsDouble(1) * (trips - 1), 1e-5);
    }
  }
}

}  // namespace
}  // namespace kiln
