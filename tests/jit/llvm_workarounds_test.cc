// The workarounds for miscompiles in the LLVM kiln links (jit/llvm_target.h), each with the
// kernel that showed it. A case runs for every CPU model of the list that this host can
// execute, so it fails without its workaround on an affected host; elsewhere it says which
// models it could not run.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

// LLVM 19's SLP vectorizer on znver4/znver5: conv f64, group=2, strides=[3] over x [1, 4, 9]
// and w [6, 2, 2]. Its loops unroll to 18 straight-line four-term dot products that share
// loaded scalars; SLP turned them into masked gathers and reuse shuffles and got outputs 13,
// 14, 16 and 17 wrong.
struct ConvCase {
  std::vector<Tensor> inputs = {test::RandomTensor(DType::kFloat64, {1, 4, 9}, 7),
                                test::RandomTensor(DType::kFloat64, {6, 2, 2}, 8)};
  Attrs attrs{{"group", int64_t{2}}, {"strides", Ints{3}}};

  // Whether the kernel compiled under `options` matches the reference kernel.
  ::testing::AssertionResult Check(const CodegenOptions& options) const {
    std::vector<Tensor> want = RunOpReference("conv", inputs, attrs);
    std::vector<Tensor> got = test::RunCompiled(
        test::SingleOpFunction("conv", inputs, attrs, false), inputs, "k_conv", options);
    return test::TensorsNear(got[0], want[0], 1e-9, 1e-9);
  }
};

const char* const kModels[] = {"", "x86-64-v3", "skylake-avx512", "znver3", "znver4", "znver5"};

// With LLVM's SLP vectorizer off (the default) and on (codegen.slp_vectorize), where the
// workaround keeps it off for znver4 and znver5.
TEST(ZenSlpMiscompile, ConvF64IsRightForEveryModel) {
  ConvCase c;
  for (const char* model : kModels) {
    for (bool slp : {false, true}) {
      CodegenOptions o;
      o.mcpu = model;
      o.slp_vectorize = slp;
      const std::string name = o.mcpu.empty() ? "host" : o.mcpu;
      if (std::string why = HostCannotRun(o); !why.empty()) {
        if (slp) std::printf("kiln: %s not run: %s\n", name.c_str(), why.c_str());
        continue;
      }
      EXPECT_TRUE(c.Check(o)) << name << (slp ? " with SLP: " : ": ") << LLVMTargetDescription(o);
    }
  }
}

// The workaround is part of what the code was built for, so entries built with and without it
// never share a disk cache key.
TEST(ZenSlpMiscompile, WorkaroundIsInTheTargetDescription) {
  CodegenOptions o;
  o.mcpu = "znver4";
  EXPECT_TRUE(LLVMTargetDescription(o).ends_with(" [no-slp]")) << LLVMTargetDescription(o);
  o.llvm_workarounds = false;
  EXPECT_FALSE(LLVMTargetDescription(o).ends_with(" [no-slp]")) << LLVMTargetDescription(o);
  o = {};
  o.mcpu = "znver3";
  EXPECT_FALSE(LLVMTargetDescription(o).ends_with(" [no-slp]")) << LLVMTargetDescription(o);
}

// Shows that the case above exercises the bug: without the workaround, LLVM 19 gets it wrong
// for znver4. When an LLVM release no longer does, this fails to say the workaround can be
// narrowed to the versions that need it.
TEST(ZenSlpMiscompile, StillMiscompiledWithoutTheWorkaround) {
  if (LLVMVersion().rfind("19.", 0) != 0) GTEST_SKIP() << "only LLVM 19 was seen to miscompile";
  CodegenOptions o;
  o.mcpu = "znver4";
  if (std::string why = HostCannotRun(o); !why.empty()) GTEST_SKIP() << "znver4: " << why;
  o.llvm_workarounds = false;
  o.slp_vectorize = true;  // off by default; the miscompile is the SLP vectorizer's
  EXPECT_FALSE(ConvCase().Check(o))
      << "LLVM " << LLVMVersion()
      << " no longer miscompiles conv f64 for znver4: the SLP workaround may be dropped for it";
}

}  // namespace
}  // namespace kiln
