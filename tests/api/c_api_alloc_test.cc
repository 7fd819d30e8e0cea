// kiln_engine_run on a warm shape allocates nothing on the heap when the caller gives every
// output (the serving case): this binary replaces the global operator new with one that counts,
// as tests/engine/alloc_test.cc does for Engine::Run, and runs through the C API itself, by
// input name and by position, with output names and without, with the default (tiered) policy
// once the shape is specialized.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "c_api_util.h"
#include "common/alloc_counter.h"
#include "kiln.h"

namespace kiln::test {
namespace {

// A wrapped f32 tensor over `data` with `shape`.
kiln_tensor* Wrap(std::vector<float>& data, std::vector<int64_t> shape) {
  kiln_tensor* t = nullptr;
  KILN_EXPECT_OK(
      kiln_tensor_wrap(KILN_F32, shape.size(), shape.data(), data.data(), data.size() * 4, &t));
  return t;
}

TEST(CApiAllocations, WarmRunsIntoGivenOutputsAllocateNothing) {
  CMlp mlp(8, 16, 4, 7);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  const char* in_names[1] = {"x"};
  const char* out_names[1] = {nullptr};
  KILN_ASSERT_OK(kiln_model_output_name(mlp.model, 0, &out_names[0]));
  for (int batch : {1, 5, 300}) {
    SCOPED_TRACE(batch);
    std::vector<float> x = mlp.Input(batch, batch), y(static_cast<size_t>(batch) * mlp.out);
    kiln_tensor* xt = Wrap(x, {batch, mlp.in});
    kiln_tensor* yt = Wrap(y, {batch, mlp.out});
    const kiln_tensor* ins[1] = {xt};
    kiln_tensor* outs[1] = {yt};
    // Warm: the first run is served by the generic tier and queues the shape; once it is
    // specialized, a run takes the specialized executable (and makes its arena).
    KILN_ASSERT_OK(kiln_engine_run(engine, mlp.model, 1, in_names, ins, 1, nullptr, outs));
    KILN_ASSERT_OK(kiln_engine_wait_background_compiles(engine));
    KILN_ASSERT_OK(kiln_engine_run(engine, mlp.model, 1, in_names, ins, 1, nullptr, outs));
    ExpectNear(y, mlp.Reference(x, batch), "warm run");
    long allocations = CountAllocations([&] {
      for (int i = 0; i < 50; ++i) {
        kiln_engine_run(engine, mlp.model, 1, in_names, ins, 1, nullptr, outs);
        kiln_engine_run(engine, mlp.model, 1, nullptr, ins, 1, nullptr, outs);
        kiln_engine_run(engine, mlp.model, 1, in_names, ins, 1, out_names, outs);
      }
    });
    EXPECT_EQ(allocations, 0);
    std::fill(y.begin(), y.end(), 0.0f);
    KILN_ASSERT_OK(kiln_engine_run(engine, mlp.model, 1, nullptr, ins, 1, out_names, outs));
    ExpectNear(y, mlp.Reference(x, batch), "after the counted runs");
    kiln_tensor_destroy(xt);
    kiln_tensor_destroy(yt);
  }
  kiln_engine_destroy(engine);
}

// A prepared binding: names resolved once, tensors bound by handle; new values written into a
// bound input's buffer are what the next run reads, and warm runs allocate nothing.
TEST(CApiAllocations, BindingRunsAllocateNothingAndReadTheBoundBuffers) {
  CMlp mlp(8, 16, 4, 7);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  const char* out_name = nullptr;
  KILN_ASSERT_OK(kiln_model_output_name(mlp.model, 0, &out_name));
  const int batch = 6;
  std::vector<float> x = mlp.Input(batch, 1), y(batch * 4);
  kiln_tensor* xt = Wrap(x, {batch, mlp.in});
  kiln_tensor* yt = Wrap(y, {batch, mlp.out});
  kiln_binding* binding = nullptr;
  KILN_ASSERT_OK(kiln_binding_create(engine, mlp.model, &binding));
  EXPECT_EQ(kiln_binding_run(binding), KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("input 'x' is not bound"), std::string::npos)
      << kiln_last_error();
  KILN_ASSERT_OK(kiln_binding_bind_input(binding, "x", xt));
  KILN_ASSERT_OK(kiln_binding_bind_output(binding, out_name, yt));
  kiln_tensor_destroy(xt);  // the binding holds the tensor (the buffer stays the caller's)
  kiln_tensor_destroy(yt);
  KILN_ASSERT_OK(kiln_binding_run(binding));
  KILN_ASSERT_OK(kiln_engine_wait_background_compiles(engine));
  KILN_ASSERT_OK(kiln_binding_run(binding));
  ExpectNear(y, mlp.Reference(x, batch), "first values");
  std::vector<float> next = mlp.Input(batch, 2);
  long allocations = CountAllocations([&] {
    for (int i = 0; i < 100; ++i) kiln_binding_run(binding);
    std::copy(next.begin(), next.end(), x.begin());
    kiln_binding_run(binding);
  });
  EXPECT_EQ(allocations, 0);
  ExpectNear(y, mlp.Reference(next, batch), "values written into the bound buffer");
  kiln_binding_destroy(binding);
  kiln_engine_destroy(engine);
}

TEST(CApiAllocations, BindingErrorsNameTheSlot) {
  CMlp mlp(8, 16, 4, 7);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  kiln_binding* binding = nullptr;
  EXPECT_EQ(kiln_binding_create(engine, nullptr, &binding), KILN_INVALID_ARGUMENT);
  KILN_ASSERT_OK(kiln_binding_create(engine, mlp.model, &binding));
  std::vector<float> x(3 * 5), y(3 * 4);
  kiln_tensor* xt = Wrap(x, {3, 5});
  kiln_tensor* yt = Wrap(y, {3, 4});
  EXPECT_EQ(kiln_binding_bind_input(binding, "nope", xt), KILN_NOT_FOUND);
  EXPECT_NE(std::string(kiln_last_error()).find("has no input 'nope' (its inputs: x)"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_binding_bind_input(binding, "x", xt), KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error())
                .find("input 'x': expected f32[batch, 8], given "
                      "f32[3, 5]"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(kiln_binding_bind_output(binding, "x", yt), KILN_NOT_FOUND);
  EXPECT_EQ(kiln_binding_run(nullptr), KILN_INVALID_ARGUMENT);
  kiln_tensor_destroy(xt);
  kiln_tensor_destroy(yt);
  kiln_binding_destroy(binding);
  kiln_binding_destroy(nullptr);
  kiln_engine_destroy(engine);
}

// The fast way refuses what it cannot check in place, and the general way then names the fault
// as before: an unknown input name, a wrong output shape, a missing output.
TEST(CApiAllocations, ArgumentsAtFaultAreStillNamed) {
  CMlp mlp(8, 16, 4, 7);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  std::vector<float> x = mlp.Input(3, 1), y(3 * 4), bad(2 * 4);
  kiln_tensor* xt = Wrap(x, {3, mlp.in});
  kiln_tensor* yt = Wrap(y, {3, mlp.out});
  kiln_tensor* bt = Wrap(bad, {2, mlp.out});
  const kiln_tensor* ins[1] = {xt};
  const char* wrong_name[1] = {"nope"};
  kiln_tensor* outs[1] = {yt};
  EXPECT_EQ(kiln_engine_run(engine, mlp.model, 1, wrong_name, ins, 1, nullptr, outs),
            KILN_NOT_FOUND);
  EXPECT_NE(std::string(kiln_last_error()).find("has no input 'nope'"), std::string::npos)
      << kiln_last_error();
  kiln_tensor* bad_outs[1] = {bt};
  EXPECT_EQ(kiln_engine_run(engine, mlp.model, 1, nullptr, ins, 1, nullptr, bad_outs),
            KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("expected f32[3, 4], given f32[2, 4]"),
            std::string::npos)
      << kiln_last_error();
  KILN_EXPECT_OK(kiln_engine_run(engine, mlp.model, 1, nullptr, ins, 1, nullptr, outs));
  ExpectNear(y, mlp.Reference(x, 3), "after the errors");
  kiln_tensor_destroy(xt);
  kiln_tensor_destroy(yt);
  kiln_tensor_destroy(bt);
  kiln_engine_destroy(engine);
}

}  // namespace
}  // namespace kiln::test
