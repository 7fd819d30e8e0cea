// Targets LLVM cannot generate code for are refused with a reason (InvalidLLVMTarget), and an
// LLVM fatal error inside a compile becomes a kCompileError that leaves the process, and the
// next compile, untouched (LLVMFatalErrorsThrow).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "jit/kernel.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::string Invalid(const std::string& mcpu, const std::string& mattr) {
  CodegenOptions o;
  o.mcpu = mcpu;
  o.mattr = mattr;
  return InvalidLLVMTarget(o);
}

TEST(LLVMTarget, AcceptsRealCpusAndFeatures) {
  EXPECT_EQ(Invalid("", ""), "");  // the host
  EXPECT_EQ(Invalid("x86-64", ""), "");
  EXPECT_EQ(Invalid("x86-64-v4", ""), "");
  EXPECT_EQ(Invalid("znver1", "+avx2,-fma"), "");
  EXPECT_EQ(Invalid("sapphirerapids", ""), "");  // valid, whether or not this host runs it
  EXPECT_EQ(Invalid("", "-avx512f,-avx2"), "");
  // Turning SSE off and back on, in order, leaves SSE2.
  EXPECT_EQ(Invalid("", "-sse,+sse2"), "");
}

TEST(LLVMTarget, RefusesWhatLLVMWouldAbortOn) {
  // Each of these made LLVM abort or exit the process at the first compile.
  EXPECT_THAT(Invalid("no_such_cpu_9000", ""), HasSubstr("'no_such_cpu_9000' is not a CPU LLVM"));
  EXPECT_THAT(Invalid("i386", ""), HasSubstr("'i386' is not an x86-64 CPU model"));
  EXPECT_THAT(Invalid("pentium4", ""), HasSubstr("'pentium4' is not an x86-64 CPU model"));
  EXPECT_THAT(Invalid("generic", ""), HasSubstr("'generic' is not an x86-64 CPU model"));
  EXPECT_THAT(Invalid("", "-64bit"), HasSubstr("'-64bit'"));
  EXPECT_THAT(Invalid("", "-sse,-sse2"), HasSubstr("turns off sse2"));
  EXPECT_THAT(Invalid("x86-64", "-sse"), HasSubstr("turns off sse2"));  // sse2 needs sse
  EXPECT_THAT(Invalid("", "+16bit-mode"), HasSubstr("calling convention"));
  EXPECT_THAT(Invalid("", "-64bit-mode"), HasSubstr("calling convention"));
  EXPECT_THAT(Invalid("", "+soft-float"), HasSubstr("calling convention"));
  EXPECT_THAT(Invalid("", "+nonsense"), HasSubstr("'nonsense' is not a feature LLVM"));
  EXPECT_THAT(Invalid("", "avx2"), HasSubstr("not a feature like +avx2"));
}

// A tiny kernel: out[i] = in[i] + 1.
loop::PrimFunc AddOne() {
  loop::Buffer in = loop::MakeBuffer("in", DType::kFloat32, {loop::IntImm(5)});
  loop::Buffer out = loop::MakeBuffer("out", DType::kFloat32, {loop::IntImm(5)});
  loop::Var i = loop::MakeVar("i", DType::kInt64);
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = "add_one";
  f->buffer_params = {in, out};
  f->num_inputs = 1;
  f->body = loop::For(i, loop::IntImm(0), loop::IntImm(5), loop::ForKind::kSerial,
                      loop::Store(out, {i}, loop::Add(loop::Load(in, {i}), loop::FloatImm(1.0))));
  return f;
}

void ExpectAddOneRuns(const CodegenOptions& o) {
  auto module = BuildLLVM({AddOne()}, o);
  std::vector<float> in = {1, 2, 3, 4, 5}, out(5, 0.0f);
  void* buffers[] = {in.data(), out.data()};
  module->Lookup("add_one")(buffers, nullptr);
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 5, 6}));
}

TEST(LLVMTarget, FatalErrorInACompileIsACompileError) {
  // BuildLLVM does not check its options (the engine and kiln_options_set_target do), so a
  // 32-bit CPU reaches LLVM, which reports a fatal error from inside code generation.
  CodegenOptions i386;
  i386.mcpu = "i386";
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      BuildLLVM({AddOne()}, i386);
      ADD_FAILURE() << "compiled for i386";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCompileError);
      EXPECT_THAT(e.what(), HasSubstr("LLVM fatal error: 64-bit code requested"));
    }
    // ... and the next compile, on the same thread, is as good as ever.
    ExpectAddOneRuns(CodegenOptions{});
  }
  // The assembly path too.
  EXPECT_THROW(LLVMAssembly({AddOne()}, i386), Error);
}

}  // namespace
}  // namespace kiln
