// Models with data-dependent result sizes (nonzero, compress, unique) run in segments: the
// graph before the op compiled, the op on the host, the graph after it specialized on the
// sizes the op produced. Results match the reference interpreter; each new count is a new
// specialization of the rest, a repeat one a hit; errors name the model and the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/models.h"
#include "engine/engine.h"
#include "engine/segments.h"
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

ModelPtr Load(const std::string& text, const std::string& name = "m") {
  return Model::Create(InferTypes(ParseModule(text)).Lookup("main"), name);
}

void ExpectMatchesInterpreter(Engine& engine, const Model& model,
                              const std::vector<Tensor>& inputs) {
  std::vector<Tensor> want = Interpret(model.graph(), inputs);
  std::vector<Tensor> got = engine.Run(model, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << "output " << i;
    EXPECT_TRUE(TensorsNear(got[i], want[i])) << "output " << i;
  }
}

// x -> relu -> nonzero -> gather the kept values -> exp + 1: the head computes relu(x),
// nonzero runs on the host, the rest gathers. Inputs with different counts of positive values
// specialize the rest once per count; a repeat count is a hit.
TEST(Segments, CountsSpecializeTheRest) {
  ModelPtr m = Load(R"(
def @main(%x: f32[n]) {
  %r = relu(%x)
  %idx = reshape(nonzero(%r), shape=[-1])
  add(exp(gather(%r, %idx, axis=0)), const(f32[], 1.0))
}
)");
  ASSERT_TRUE(m->segments());
  EXPECT_TRUE(m->segments()->head);
  EXPECT_EQ(m->segments()->op->name, "nonzero");
  Engine engine;
  auto input = [](std::vector<float> v) {
    return std::vector<Tensor>{Tensor::FromVector<float>({static_cast<int64_t>(v.size())}, v)};
  };
  ExpectMatchesInterpreter(engine, *m, input({1, -2, 3, -4, 5}));    // 3 kept
  ExpectMatchesInterpreter(engine, *m, input({-1, -2, 3, -4, -5}));  // 1 kept
  ExpectMatchesInterpreter(engine, *m, input({2, -2, 0, 4, 5}));     // 3 kept again
  ExpectMatchesInterpreter(engine, *m, input({-1, -2}));             // none kept
  ExpectMatchesInterpreter(engine, *m, {RandomTensor(DType::kFloat32, {1000}, 3)});
  std::vector<Tensor> out = engine.Run(*m, input({1, -2, 3, -4, 5}));
  ASSERT_EQ(out.at(0).shape(), (std::vector<int64_t>{3}));
  EXPECT_NEAR(out[0].GetAsDouble(1), std::exp(3.0) + 1, 1e-4);
  // The head (n = 5, 2, 1000) and the rest (counts 3, 1, 0 and the random one's) compiled
  // once per distinct shape; the repeats were hits.
  EngineStats st = engine.stats();
  int heads = 0, rests = 0;
  for (const ShapeKeyStats& s : st.shapes) {
    heads += s.shape_key.rfind("m.head(", 0) == 0;
    rests += s.shape_key.rfind("m.rest(", 0) == 0;
  }
  EXPECT_EQ(heads, 3);
  EXPECT_EQ(rests, 4);
  EXPECT_GE(st.hits, 2u);
}

// Into preallocated outputs: the sizes this run made must match them.
TEST(Segments, RunIntoPreallocatedOutputs) {
  ModelPtr m = Load(R"(
def @main(%x: f32[n]) {
  nonzero(%x)
}
)");
  Engine engine;
  std::vector<Tensor> in{Tensor::FromVector<float>({4}, {0, 1, 0, 2})};
  std::vector<Tensor> out{Tensor::Empty(DType::kInt64, {1, 2})};
  engine.Run(*m, in, out);
  EXPECT_EQ(out[0].data<int64_t>()[0], 1);
  EXPECT_EQ(out[0].data<int64_t>()[1], 3);
  EXPECT_FALSE(m->segments()->head);  // nonzero reads the input itself
  std::vector<Tensor> wrong{Tensor::Empty(DType::kInt64, {1, 3})};
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*m, in, wrong); }),
              AllOf(HasSubstr("model 'm': output 0"), HasSubstr("i64[1, 2]")));
}

// Two data-dependent ops in a chain: the rest is cut again. Outputs on both sides of the cut
// (one computed before it) come back in order.
TEST(Segments, ChainedCutsAndOutputsFromBeforeTheCut) {
  ModelPtr m = Load(R"(
def @main(%x: f32[n], %c: bool[n]) {
  %kept = compress(%x, %c, axis=[0])
  %u = unique(%kept, sorted=true)
  (neg(%x), %u.0, %u.3, nonzero(%u.0))
}
)");
  ASSERT_TRUE(m->segments());
  ASSERT_TRUE(m->segments()->rest->segments());
  Engine engine;
  std::vector<Tensor> in{Tensor::FromVector<float>({6}, {3, 1, 3, 0, 2, 1}),
                         Tensor::FromVector<bool>({6}, {true, true, true, true, false, true})};
  ExpectMatchesInterpreter(engine, *m, in);
  std::vector<Tensor> out = engine.Run(*m, in);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{3}));  // 0, 1, 3
  EXPECT_EQ(out[2].data<int64_t>()[2], 2);               // 3 twice
  EXPECT_EQ(out[3].shape(), (std::vector<int64_t>{1, 2}));
}

// The op's own errors (a condition longer than the axis) name the model and the node.
TEST(Segments, OpErrorsNameTheNode) {
  ModelPtr m = Load(R"(
def @main(%x: f32[n], %c: bool[k]) {
  exp(compress(%x, %c))
}
)");
  Engine engine;
  std::vector<Tensor> in{Tensor::FromVector<float>({2}, {1, 2}),
                         Tensor::FromVector<bool>({3}, {true, false, true})};
  EXPECT_THAT(
      ErrorMessage([&] { engine.Run(*m, in); }),
      AllOf(HasSubstr("model 'm'"), HasSubstr("compress"), HasSubstr("condition has 3 elements")));
}

}  // namespace
}  // namespace kiln
