// Which CPU models this host runs the cross-CPU kernel sweep for (tests/CMakeLists.txt), and
// HostCannotRun, which decides it.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "jit/kernel.h"

#ifndef KILN_CROSS_CPU_MODELS
#error "tests/CMakeLists.txt defines KILN_CROSS_CPU_MODELS"
#endif

namespace kiln {
namespace {

std::vector<std::string> Models() {
  std::vector<std::string> out;
  std::stringstream in(KILN_CROSS_CPU_MODELS);
  for (std::string m; std::getline(in, m, ',');) out.push_back(m);
  return out;
}

// The table ctest's jit@<model>/... entries follow: each model ran, or was skipped and why.
TEST(CrossCpu, Models) {
  std::printf("kiln: host %s\n", LLVMTargetDescription().c_str());
  int ran = 0;
  for (const std::string& m : Models()) {
    CodegenOptions o;
    o.mcpu = m;
    const std::string why = HostCannotRun(o);
    EXPECT_EQ(why.find("is not an x86-64 CPU model"), std::string::npos) << why;
    if (why.empty()) {
      ++ran;
      std::printf("kiln: CPU model %-16s runs\n", m.c_str());
    } else {
      std::printf("kiln: CPU model %-16s skipped: %s\n", m.c_str(), why.c_str());
    }
  }
  std::printf("kiln: %d of %zu CPU models run here, and the host\n", ran, Models().size());
  // Every x86-64 host in use has SSE4.2 (x86-64-v2); the sweep must run somewhere besides the
  // host.
  EXPECT_GE(ran, 1);
}

TEST(CrossCpu, HostCannotRunNamesWhatIsMissing) {
  CodegenOptions o;
  EXPECT_EQ(HostCannotRun(o), "");  // the host runs its own code
  o.mcpu = "x86-64";
  EXPECT_EQ(HostCannotRun(o), "");  // the baseline runs everywhere
  o.mcpu = "no-such-cpu";
  EXPECT_EQ(HostCannotRun(o),
            "'no-such-cpu' is not an x86-64 CPU model LLVM " + LLVMVersion() + " knows");
  // A feature no x86 CPU in use has, added by name, is named.
  o = {};
  o.mattr = "+avx10.2-512";
  std::string why = HostCannotRun(o);
  EXPECT_NE(why.find("lacks avx10.2-512"), std::string::npos) << why;
  // ... and taking it away again makes the code runnable.
  o.mattr = "+avx10.2-512,-avx10.2-512";
  EXPECT_EQ(HostCannotRun(o), "");
  // A CPU model with AVX-512 runs exactly where the host has avx512f.
  o = {};
  o.mcpu = "skylake-avx512";
  CodegenOptions avx512;
  avx512.mattr = "+avx512f";
  EXPECT_EQ(HostCannotRun(o).empty(), HostCannotRun(avx512).empty());
}

// The vector width kernels are tiled for, from the named CPU and mattr, counting what each
// feature implies (LLVM lists x86-64-v3's avx2 without avx, x86-64-v4's avx512bw without
// avx512f).
TEST(CrossCpu, VectorRegisterBitsOfNamedCpus) {
  auto bits = [](const std::string& cpu, const std::string& attrs = "") {
    CodegenOptions o;
    o.mcpu = cpu;
    o.mattr = attrs;
    return VectorRegisterBits(o);
  };
  EXPECT_EQ(bits("x86-64"), 128);
  EXPECT_EQ(bits("x86-64-v2"), 128);
  EXPECT_EQ(bits("x86-64-v3"), 256);
  EXPECT_EQ(bits("x86-64-v4"), 512);
  EXPECT_EQ(bits("haswell"), 256);
  EXPECT_EQ(bits("znver1"), 256);
  EXPECT_EQ(bits("skylake-avx512"), 512);
  EXPECT_EQ(bits("znver5"), 512);
  EXPECT_EQ(bits("x86-64", "+avx2"), 256);
  EXPECT_EQ(bits("x86-64-v4", "-avx512f"), 256);
  EXPECT_EQ(bits("x86-64-v3", "-avx"), 128);
}

}  // namespace
}  // namespace kiln
