// Models with data-dependent result sizes (nonzero, compress, unique) run in segments: the
// graph before the op compiled, the op on the host, the graph after it specialized on the
// sizes the op produced. Results match the reference interpreter; each new count is a new
// specialization of the rest, a repeat one a hit; errors name the model and the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/engine_options.h"
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
// nonzero runs on the host, the rest gathers.
constexpr char kKeepPositives[] = R"(
def @main(%x: f32[n]) {
  %r = relu(%x)
  %idx = reshape(nonzero(%r), shape=[-1])
  add(exp(gather(%r, %idx, axis=0)), const(f32[], 1.0))
}
)";

// Inputs with different counts of positive values specialize the rest once per count; a repeat
// count is a hit.
TEST(Segments, CountsSpecializeTheRest) {
  ModelPtr m = test::ModelFromText(kKeepPositives);
  ASSERT_TRUE(m->segments());
  EXPECT_TRUE(m->segments()->head);
  EXPECT_EQ(m->segments()->op->name, "nonzero");
  Engine engine(test::Eager());  // counts the shapes each run compiles
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
  EXPECT_EQ(st.runs, 6u);  // five runs checked against the interpreter, and one more
  EXPECT_GE(st.hits, 2u);
}

// Explain on a model run in segments: its head is what the inputs key, so that is explained
// (a new n misses, a seen one hits), and `segments` names the data-dependent op. Bad inputs
// are the run's errors.
TEST(Segments, ExplainSaysWhatServesTheHead) {
  ModelPtr m = test::ModelFromText(kKeepPositives);
  ASSERT_TRUE(m->segments() && m->segments()->head);
  Engine engine(test::Eager());
  std::vector<Tensor> five{RandomTensor(DType::kFloat32, {5}, 1)};
  Explanation x = engine.Explain(*m, five);
  EXPECT_FALSE(x.cached);
  EXPECT_THAT(x.shape_key, HasSubstr("m.head("));
  EXPECT_THAT(x.reason, HasSubstr("first run of model 'm.head'"));
  EXPECT_THAT(x.segments, AllOf(HasSubstr("runs in segments at nonzero"), HasSubstr("head")));
  engine.Run(*m, five);
  x = engine.Explain(*m, five);
  EXPECT_TRUE(x.cached);
  EXPECT_EQ(x.reason, "");
  x = engine.Explain(*m, std::vector<Tensor>{RandomTensor(DType::kFloat32, {7}, 2)});
  EXPECT_FALSE(x.cached);
  EXPECT_THAT(x.reason, HasSubstr("dim 0 is 7; cached: 5"));
  EXPECT_THAT(ErrorMessage([&] {
                engine.Explain(*m, std::vector<Tensor>{RandomTensor(DType::kFloat32, {2, 3})});
              }),
              HasSubstr("rank"));
  EXPECT_EQ(engine.stats().runs, 1u);  // Explain ran nothing
}

// Into preallocated outputs: the sizes this run made must match them.
TEST(Segments, RunIntoPreallocatedOutputs) {
  ModelPtr m = test::ModelFromText(R"(
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
  // nonzero runs compiled in the head (its bounded form); the host only trims.
  ASSERT_TRUE(m->segments()->head);
  EXPECT_EQ(m->segments()->trim_dims, std::vector<int>{1});
  EXPECT_GE(engine.stats().kernel_compiles, 1);
  std::vector<Tensor> wrong{Tensor::Empty(DType::kInt64, {1, 3})};
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*m, in, wrong); }),
              AllOf(HasSubstr("model 'm': output 0"), HasSubstr("i64[1, 2]")));
}

// Two data-dependent ops in a chain: the rest is cut again. Outputs on both sides of the cut
// (one computed before it) come back in order.
TEST(Segments, ChainedCutsAndOutputsFromBeforeTheCut) {
  ModelPtr m = test::ModelFromText(R"(
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

// unique and non_max_suppression run compiled in the head too: every output the values size
// is trimmed to the count, and unique's inverse indices (one per slice) pass whole.
TEST(Segments, UniqueAndNmsRunCompiledAndTrimEachOutput) {
  ModelPtr u = test::ModelFromText(R"(
def @main(%x: f32[n, 2]) {
  %u = unique(%x, sorted=false, axis=[0])
  (%u.0, %u.1, %u.2, neg(%u.3))
}
)");
  ASSERT_TRUE(u->segments() && u->segments()->head);
  EXPECT_EQ(u->segments()->trim_dims, (std::vector<int>{0, 0, -1, 0}));
  Engine engine;
  std::vector<Tensor> x{Tensor::FromVector<float>({5, 2}, {3, 1, 0, 2, 3, 1, 0, 2, 5, 5})};
  ExpectMatchesInterpreter(engine, *u, x);
  std::vector<Tensor> out = engine.Run(*u, x);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(out[2].shape(), (std::vector<int64_t>{5}));

  ModelPtr nms = test::ModelFromText(R"(
def @main(%b: f32[1, n, 4], %s: f32[1, 2, n], %m: i64[], %iou: f32[]) {
  non_max_suppression(%b, %s, %m, %iou)
}
)");
  ASSERT_TRUE(nms->segments() && nms->segments()->head);
  EXPECT_EQ(nms->segments()->trim_dims, (std::vector<int>{0}));
  std::vector<Tensor> in{
      Tensor::FromVector<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6}),
      Tensor::FromVector<float>({1, 2, 3}, {0.9f, 0.8f, 0.7f, 0.1f, 0.2f, 0.3f}),
      Tensor::Scalar<int64_t>(2), Tensor::Scalar<float>(0.5f)};
  ExpectMatchesInterpreter(engine, *nms, in);
  // Class 0: box 0, then box 2 (box 1 overlaps box 0); class 1: box 2, then box 1.
  EXPECT_EQ(engine.Run(*nms, in)[0].shape(), (std::vector<int64_t>{4, 3}));
}

// The op's own errors (a condition longer than the axis) name the model and the node.
TEST(Segments, OpErrorsNameTheNode) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n], %c: bool[k]) {
  exp(compress(%x, %c))
}
)");
  Engine engine;
  std::vector<Tensor> in{Tensor::FromVector<float>({2}, {1, 2}),
                         Tensor::FromVector<bool>({3}, {true, false, true})};
  // The head segment (compress's bounded form, symbolic) records the condition's bound as a
  // constraint on its symbols, checked when they are bound, whatever the tier.
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*m, in); }),
              AllOf(HasSubstr("model 'm'"), HasSubstr("compress"),
                    HasSubstr("the condition's length"), HasSubstr("k = 3 is more than n = 2")));
}

// A while loop over data (ONNX Loop whose body's condition reads a carried value): it cannot
// unroll, so it runs as a loop, its body a model run once per iteration. Doubling x until its
// sum passes a threshold: the iteration count depends on the values. Scan values stack.
TEST(Segments, LoopOverDataRunsAsALoop) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n], %limit: f32[]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n], %lim: f32[]) {
    %next = mul(%v, const(f32[], 2.0))
    (less(sum(%next, axes=[0], keepdims=false), %lim), %next, sum(%v, axes=[0], keepdims=false))
  }
  %loop = dyn.loop(%body, %x, %limit, const(i64[], 100), const(bool[], true), num_carried=1, num_scans=1)
  (%loop.0, %loop.1)
}
)");
  ASSERT_TRUE(m->segments());
  ASSERT_TRUE(m->segments()->loop_body);
  Engine engine(test::Eager());  // counts the body's compiles
  auto run = [&](std::vector<float> x, float limit, int64_t iterations) {
    std::vector<Tensor> in{Tensor::FromVector<float>({static_cast<int64_t>(x.size())}, x),
                           Tensor::Scalar<float>(limit)};
    std::vector<Tensor> out = engine.Run(*m, in);
    ASSERT_EQ(out.size(), 2u);
    const double scale = std::pow(2.0, static_cast<double>(iterations));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[0].GetAsDouble(i), x[i] * scale, 1e-3);
    ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{iterations}));
    double sum = 0;
    for (float v : x) sum += v;
    for (int64_t t = 0; t < iterations; ++t)
      EXPECT_NEAR(out[1].GetAsDouble(t), sum * std::pow(2.0, static_cast<double>(t)), 1e-3);
  };
  run({1, 2}, 10, 2);   // 3 -> 6 -> 12: stops once the sum passes 10
  run({1, 2}, 100, 6);  // 3 * 64 = 192
  run({0.5f, 0.25f, 0.25f}, 3, 2);
  // The body compiled once per distinct shape of its inputs, whatever the iteration count.
  int bodies = 0;
  for (const ShapeKeyStats& s : engine.stats().shapes)
    bodies += s.shape_key.find(".body(") != std::string::npos;
  EXPECT_EQ(bodies, 2);  // n = 2 and n = 3
}

// A trip count given as an input runs as a loop: one body executable serves every count,
// where unrolling would compile the body again per count.
TEST(Segments, TripCountInputRunsAsALoopWithOneBody) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n]) {
    (%c, mul(%v, const(f32[], 2.0)), %v)
  }
  %loop = dyn.loop(%body, %x, %trips, const(bool[], true), num_carried=1, num_scans=1)
  (%loop.0, %loop.1)
}
)");
  ASSERT_TRUE(m->segments());
  ASSERT_TRUE(m->segments()->loop_body);
  Engine engine(test::Eager());  // counts the body's compiles
  for (int64_t trips : {3, 5, 7, 0}) {
    std::vector<Tensor> in{Tensor::FromVector<float>({2}, {1, -3}), Tensor::Scalar<int64_t>(trips)};
    std::vector<Tensor> out = engine.Run(*m, in);
    EXPECT_NEAR(out.at(0).GetAsDouble(1), -3.0 * std::pow(2.0, static_cast<double>(trips)), 1e-3);
    EXPECT_EQ(out.at(1).shape(), (std::vector<int64_t>{trips, 2}));  // [0, 2] for none
    if (trips > 0) ExpectMatchesInterpreter(engine, *m, in);
  }
  int bodies = 0;
  for (const ShapeKeyStats& s : engine.stats().shapes)
    bodies += s.shape_key.find(".body(") != std::string::npos;
  EXPECT_EQ(bodies, 1);

  // scan_reverse stacks the last iteration first.
  ModelPtr r = test::ModelFromText(R"(
def @main(%x: f32[n], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n]) {
    (%c, mul(%v, const(f32[], 2.0)), %v)
  }
  dyn.loop(%body, %x, %trips, const(bool[], true), num_carried=1, num_scans=1, scan_reverse=[1]).1
}
)");
  std::vector<Tensor> in{Tensor::FromVector<float>({2}, {1, -3}), Tensor::Scalar<int64_t>(3)};
  std::vector<Tensor> rev = engine.Run(*r, in);
  ASSERT_EQ(rev.at(0).shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(rev[0].GetAsDouble(0), 4);   // iteration 2's value first
  EXPECT_EQ(rev[0].GetAsDouble(5), -3);  // iteration 0's last
  ExpectMatchesInterpreter(engine, *r, in);
}

// The scan outputs of a loop whose trip count is an input grow with it: past max_run_bytes the
// run stops with kOutOfMemory naming the limit, at once (2^40 iterations asked for), and the
// engine serves the next run.
TEST(Segments, LoopScanOutputsCountAgainstTheRunLimit) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n]) {
    (%c, add(%v, const(f32[], 1.0)), %v)
  }
  dyn.loop(%body, %x, %trips, const(bool[], true), num_carried=1, num_scans=1).1
}
)");
  ASSERT_TRUE(m->segments());
  EngineOptions options = test::Eager();
  options.max_run_bytes = 1 << 20;
  Engine engine(options);
  Tensor x = RandomTensor(DType::kFloat32, {1024}, 1);  // 4 KiB an iteration
  std::vector<Tensor> many{x, Tensor::Scalar<int64_t>(int64_t{1} << 40)};
  Error e = test::ErrorOf([&] { engine.Run(*m, many); });
  EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(std::string(e.what()),
              AllOf(HasSubstr("iteration 256"), HasSubstr("scan outputs"),
                    HasSubstr("limit of 1048576 (EngineOptions.max_run_bytes)")));
  std::vector<Tensor> fewer{x, Tensor::Scalar<int64_t>(200)};
  std::vector<Tensor> out = engine.Run(*m, fewer);
  EXPECT_EQ(out.at(0).shape(), (std::vector<int64_t>{200, 1024}));
}

// The run-time loop reuses the body's executable and two sets of output buffers in turn: a
// body that passes a carried value on unchanged and swaps the others (Fibonacci) must still
// read last iteration's values, and a carried value that grows each iteration (a new shape:
// another executable, new buffers) must too.
TEST(Segments, LoopOutputBuffersAlternateAndFollowNewShapes) {
  ModelPtr fib = test::ModelFromText(R"(
def @main(%a: f32[2], %b: f32[2], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %x: f32[2], %y: f32[2]) {
    (%c, %y, add(%x, %y), %x)
  }
  %loop = dyn.loop(%body, %a, %b, %trips, const(bool[], true), num_carried=2, num_scans=1)
  (%loop.0, %loop.1, %loop.2)
}
)");
  Engine engine;
  std::vector<Tensor> in{Tensor::FromVector<float>({2}, {0, 1}),
                         Tensor::FromVector<float>({2}, {1, 1}), Tensor::Scalar<int64_t>(20)};
  std::vector<Tensor> out = engine.Run(*fib, in);
  EXPECT_EQ(out.at(0).GetAsDouble(0), 6765);  // F(20), from F(0) = 0, F(1) = 1
  EXPECT_EQ(out.at(2).GetAsDouble(2 * 19), 4181);
  ExpectMatchesInterpreter(engine, *fib, in);

  ModelPtr grow = test::ModelFromText(R"(
def @main(%v: f32[k], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %x: f32[m]) {
    (%c, concat(%x, const(f32[1], [1.0]), axis=0))
  }
  dyn.loop(%body, %v, %trips, const(bool[], true), num_carried=1, num_scans=0)
}
)");
  std::vector<Tensor> grow_in{Tensor::FromVector<float>({2}, {5, 6}), Tensor::Scalar<int64_t>(4)};
  std::vector<Tensor> g = engine.Run(*grow, grow_in);
  ASSERT_EQ(g.at(0).shape(), (std::vector<int64_t>{6}));
  EXPECT_EQ(g[0].GetAsDouble(1), 6);
  EXPECT_EQ(g[0].GetAsDouble(5), 1);
}

// A body whose shapes follow the iteration number (a slice at i, as ONNX Loops that index a
// sequence do) would compile once per iteration as a loop: it unrolls at specialization. And a
// dyn.loop whose counts disagree with its arguments is a type error naming them.
TEST(Segments, IterationShapedBodiesUnrollAndMalformedLoopsAreErrors) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %acc: f32[1], %seq: f32[n]) {
    %at = dyn.slice(%seq, reshape(%i, shape=[1]), reshape(add(%i, const(i64[], 1)), shape=[1]))
    (%c, add(%acc, %at))
  }
  dyn.loop(%body, const(f32[1], [0.0]), %x, %trips, const(bool[], true), num_carried=1, num_scans=0).0
}
)");
  EXPECT_FALSE(m->segments());
  Engine engine;
  std::vector<Tensor> out =
      engine.Run(*m, std::vector<Tensor>{Tensor::FromVector<float>({4}, {1, 2, 3, 4}),
                                         Tensor::Scalar<int64_t>(3)});
  EXPECT_NEAR(out.at(0).GetAsDouble(0), 6, 1e-5);

  EXPECT_THAT(ErrorMessage([] {
                test::ModelFromText(R"(
def @main(%x: f32[n], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n]) {
    (%c, %v, %v)
  }
  dyn.loop(%body, %x, %trips, const(bool[], true), num_carried=2, num_scans=0).0
}
)");
              }),
              HasSubstr("num_carried = 2"));
  // Counts near int64's limits are errors too, not overflowing sums (found by fuzzing the C API).
  for (const char* counts : {"num_carried=9223372036854775807, num_scans=0",
                             "num_carried=1, num_scans=9223372036854775807",
                             "num_carried=1, num_scans=9223372036854775806"}) {
    EXPECT_THAT(ErrorMessage([&] {
                  test::ModelFromText(StrCat(R"(
def @main(%x: f32[n], %trips: i64[]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n]) {
    (%c, %v, %v)
  }
  dyn.loop(%body, %x, %trips, const(bool[], true), )",
                                             counts, ").0\n}\n"));
                }),
                AllOf(HasSubstr("dyn.loop"), HasSubstr("922337203685477580")))
        << counts;
  }
}

// A trip count past what kiln unrolls (a constant 10000) runs as a loop too.
TEST(Segments, LongLoopRunsAsALoop) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n]) {
    (%c, add(%v, const(f32[], 1.0)))
  }
  dyn.loop(%body, %x, const(i64[], 10000), const(bool[], true), num_carried=1, num_scans=0).0
}
)");
  ASSERT_TRUE(m->segments());
  Engine engine;
  std::vector<Tensor> out =
      engine.Run(*m, std::vector<Tensor>{Tensor::FromVector<float>({2}, {1, -1})});
  EXPECT_NEAR(out.at(0).GetAsDouble(0), 10001, 1e-3);
  EXPECT_NEAR(out.at(0).GetAsDouble(1), 9999, 1e-3);
}

// A loop whose body holds a data-dependent op cannot unroll into one graph: it runs as a loop,
// its body in segments. Counting the positive elements of x, x - 1, x - 2.
TEST(Segments, LoopWithADataDependentBodyRunsAsALoop) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n]) {
  %body = fn(%i: i64[], %c: bool[], %v: f32[n], %acc: i64[]) {
    (%c, sub(%v, const(f32[], 1.0)), add(%acc, size(nonzero(relu(%v)))))
  }
  dyn.loop(%body, %x, const(i64[], 0), const(i64[], 3), const(bool[], true), num_carried=2, num_scans=0).1
}
)");
  ASSERT_TRUE(m->segments());
  ASSERT_TRUE(m->segments()->loop_body);
  EXPECT_TRUE(m->segments()->loop_body->segments());
  Engine engine;
  std::vector<Tensor> out =
      engine.Run(*m, std::vector<Tensor>{Tensor::FromVector<float>({3}, {1, 2, 3})});
  EXPECT_EQ(out.at(0).GetAsDouble(0), 6);  // 3 + 2 + 1
}

// An If on data (the sign of sum(x)): the head computes the condition, the rest receives it
// as a value input and specializes on it, so each executable of the rest holds the taken
// branch's kernels only, and the other branch is never computed.
TEST(Segments, BranchOnDataComputesOnlyTheTakenBranch) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n]) {
  %c = greater(sum(%x, axes=[0], keepdims=false), const(f32[], 0.0))
  dyn.branch(exp(%x), neg(%x), %c)
}
)");
  ASSERT_TRUE(m->segments());
  EXPECT_EQ(m->segments()->op, nullptr);
  EngineOptions options;
  options.profile = true;
  Engine engine(options);
  for (float sign : {1.0f, -1.0f, 1.0f}) {
    std::vector<Tensor> in{Tensor::FromVector<float>({3}, {sign, 2 * sign, -0.5f * sign})};
    std::vector<Tensor> out = engine.Run(*m, in);
    for (int64_t i = 0; i < 3; ++i) {
      double v = in[0].GetAsDouble(i);
      EXPECT_NEAR(out.at(0).GetAsDouble(i), sign > 0 ? std::exp(v) : -v, 1e-5);
    }
    ExpectMatchesInterpreter(engine, *m, in);
  }
  std::map<std::string, std::vector<std::string>> kernels;  // per shape key of the rest
  for (const KernelProfileStats& k : engine.stats().kernel_profile)
    if (k.shape_key.rfind("m.rest(", 0) == 0) kernels[k.shape_key].push_back(k.kernel);
  ASSERT_EQ(kernels.size(), 2u);  // one per condition value
  for (const auto& [key, names] : kernels) {
    const bool then_taken = key.find("bool[] = [1]") != std::string::npos;
    for (const std::string& name : names)
      EXPECT_THAT(name, ::testing::Not(HasSubstr(then_taken ? "neg" : "exp"))) << key;
  }
}

// TopK whose k is computed from data (the number of positive elements of x): the head
// computes k, the rest specializes on its value.
TEST(Segments, TopKWithKFromData) {
  ModelPtr m = test::ModelFromText(R"(
def @main(%x: f32[n]) {
  %k = reshape(sum(cast(greater(%x, const(f32[], 0.0)), dtype=i64), axes=[0], keepdims=false), shape=[1])
  dyn.topk(%x, %k).0
}
)");
  ASSERT_TRUE(m->segments());
  Engine engine;
  std::vector<Tensor> out =
      engine.Run(*m, std::vector<Tensor>{Tensor::FromVector<float>({5}, {3, -1, 5, -2, 4})});
  ASSERT_EQ(out.at(0).shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(out[0].GetAsDouble(0), 5);
  EXPECT_EQ(out[0].GetAsDouble(2), 3);
}

}  // namespace
}  // namespace kiln
