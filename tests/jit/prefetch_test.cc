// The loop IR's Prefetch statement (a hint that one element is read soon): it prints, compares
// and verifies as a statement over a scalar load; the LLVM code generator emits a prefetch into
// L2 for it and the CUDA one nothing, and neither changes a result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "ir/loop/loop_text.h"
#include "jit/cuda_codegen.h"
#include "jit/kernel.h"

namespace kiln {
namespace {

using loop::Buffer;
using loop::Expr;
using loop::Var;
using ::testing::HasSubstr;
using ::testing::Not;

Expr I(int64_t v) {
  return loop::IntImm(v);
}

// out[i] = 2 * x[i] for i in [0, n), prefetching x[min(i + 16, n - 1)] each step.
loop::PrimFunc Doubled(int64_t n) {
  Buffer x = loop::MakeBuffer("x", DType::kFloat32, {I(n)});
  Buffer out = loop::MakeBuffer("out", DType::kFloat32, {I(n)});
  Var i = loop::MakeVar("i");
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = "doubled";
  f->buffer_params = {x, out};
  f->num_inputs = 1;
  f->body = loop::For(
      i, I(0), I(n), loop::ForKind::kSerial,
      loop::Seq(
          {loop::Prefetch(loop::Load(x, {loop::Min(loop::Add(i, I(16)), I(n - 1))})),
           loop::Store(out, {i},
                       loop::Mul(loop::FloatImm(2.0, DType::kFloat32), loop::Load(x, {i})))}));
  return f;
}

TEST(Prefetch, IsAStatementOverAScalarLoad) {
  loop::PrimFunc f = Doubled(40);
  EXPECT_NO_THROW(loop::Verify(f));
  EXPECT_THAT(loop::Print(f), HasSubstr("prefetch(x[min(i + 16, 39)])"));
  EXPECT_TRUE(loop::StructuralEqual(f, Doubled(40)));
  EXPECT_FALSE(loop::StructuralEqual(f, Doubled(41)));
  Buffer x = loop::MakeBuffer("x", DType::kFloat32, {I(64)});
  EXPECT_THAT(test::ErrorMessage([] { loop::Prefetch(loop::FloatImm(1.0, DType::kFloat32)); }),
              HasSubstr("prefetch of something other than a scalar load"));
  EXPECT_THAT(test::ErrorMessage([&] { loop::Prefetch(loop::Load(x, {loop::Ramp(I(0), 1, 16)})); }),
              HasSubstr("scalar load"));
}

TEST(Prefetch, LlvmPrefetchesIntoL2AndCudaSkipsIt) {
  for (int64_t n : {1, 17, 1000}) {
    loop::PrimFunc f = Doubled(n);
    auto mod = BuildLLVM({f}, CodegenOptions{});
    EXPECT_THAT(mod->source(), HasSubstr("@llvm.prefetch.p0(ptr")) << mod->source();
    EXPECT_THAT(mod->source(), HasSubstr("i32 0, i32 2, i32 1)"));  // read, L2, data
    std::vector<float> x(n), out(n, -1);
    for (int64_t i = 0; i < n; ++i) x[i] = 0.25f * static_cast<float>(i) - 3;
    std::vector<void*> buffers = {x.data(), out.data()};
    mod->Lookup("doubled")(buffers.data(), nullptr);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 2 * x[i]) << i;
    CudaModuleSource cuda = EmitCuda({f});
    EXPECT_THAT(cuda.code, Not(HasSubstr("prefetch")));
    EXPECT_THAT(cuda.code, HasSubstr("2.0f"));
  }
}

}  // namespace
}  // namespace kiln
