// The LLVM code generator's sharing of shifted loads (FunctionEmitter::ShareShiftedLoads): a
// statement's whole-register loads a few elements apart are two loads and permutes of them on
// 512-bit registers, and one load each elsewhere; the results are the same bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ir/loop/loop.h"
#include "jit/kernel.h"

namespace kiln {
namespace {

using loop::Buffer;
using loop::Expr;
using loop::Stmt;
using loop::Var;

Expr I(int64_t v) {
  return loop::IntImm(v);
}

// out[ramp(i * W + 2, 1, W)] = w[0] * x[ramp(i * W)] + ... + w[taps - 1] * x[ramp(i * W +
// taps - 1)] + x[ramp(i * W + far)] for i in [0, n): a depthwise conv's row of `taps` taps,
// already vectorized, and one more load `far` elements on (its own group unless within a
// register of the taps). W lanes of `t`.
loop::PrimFunc Taps(DType t, int lanes, int taps, int64_t far, int64_t n) {
  const int64_t len = n * lanes + far + lanes;
  Buffer x = loop::MakeBuffer("x", t, {I(len)}), w = loop::MakeBuffer("w", t, {I(taps)});
  Buffer out = loop::MakeBuffer("out", t, {I(n * lanes + 2 + lanes)});
  Var i = loop::MakeVar("i");
  auto at = [&](int64_t k) {
    return loop::Ramp(loop::Add(loop::Mul(i, I(lanes)), I(k)), 1, lanes);
  };
  Expr sum;
  for (int k = 0; k < taps; ++k) {
    Expr term = loop::Mul(loop::Broadcast(loop::Load(w, {I(k)}), lanes), loop::Load(x, {at(k)}));
    sum = sum ? loop::Add(sum, term) : term;
  }
  sum = loop::Add(sum, loop::Load(x, {at(far)}));
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = "taps";
  f->buffer_params = {x, w, out};
  f->num_inputs = 2;
  f->body = loop::For(i, I(0), I(n), loop::ForKind::kSerial, loop::Store(out, {at(2)}, sum));
  return f;
}

// The permutes of two loaded vectors in the unoptimized IR (a splat's shuffle has one operand
// and a poison one).
int TwoSourceShuffles(const std::string& source) {
  std::istringstream lines(source);
  int count = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("shufflevector") != std::string::npos &&
        line.find("poison") == std::string::npos && line.find("undef") == std::string::npos)
      ++count;
  return count;
}

CodegenOptions Cpu(const std::string& mcpu, const std::string& mattr = "", int opt_level = 3) {
  CodegenOptions o;
  o.mcpu = mcpu;
  o.mattr = mattr;
  o.opt_level = opt_level;
  return o;
}

// Which loads are shared: the taps between the first and last of a group within one register
// (5 taps: the 3 between; a tap repeated at an end: none more), on 512-bit registers only.
TEST(ShiftedLoads, TapsBetweenTheEndsArePermutesOn512BitRegisters) {
  auto shuffles = [](DType t, int lanes, int taps, int64_t far, const std::string& cpu) {
    return TwoSourceShuffles(BuildLLVM({Taps(t, lanes, taps, far, 3)}, Cpu(cpu, "", 0))->source());
  };
  EXPECT_EQ(shuffles(DType::kFloat32, 16, 5, 40, "x86-64-v4"), 3);
  EXPECT_EQ(shuffles(DType::kFloat64, 8, 5, 40, "x86-64-v4"), 3);
  // Two taps: nothing between them. The far load within the register's span of the first tap
  // (offset 12 < 16) joins the group as its last: the 4 taps after the first are between.
  EXPECT_EQ(shuffles(DType::kFloat32, 16, 2, 40, "x86-64-v4"), 0);
  EXPECT_EQ(shuffles(DType::kFloat32, 16, 5, 12, "x86-64-v4"), 4);
  // Taps a register or more apart from the first: a group of their own (16 + 0 .. 16 + 4 is
  // one when the far load is 17: 16 is not within 16 of 0).
  EXPECT_EQ(shuffles(DType::kFloat32, 16, 5, 16, "x86-64-v4"), 3);
  // 256-bit registers (AVX2, or AVX-512 turned off) and narrower vectors: one load each.
  EXPECT_EQ(shuffles(DType::kFloat32, 8, 5, 40, "x86-64-v3"), 0);
  EXPECT_EQ(shuffles(DType::kFloat32, 16, 5, 40, "x86-64-v3"), 0);
  EXPECT_EQ(TwoSourceShuffles(
                BuildLLVM({Taps(DType::kFloat32, 16, 5, 40, 3)}, Cpu("x86-64-v4", "-avx512f", 0))
                    ->source()),
            0);
  EXPECT_EQ(shuffles(DType::kFloat32, 8, 5, 40, "x86-64-v4"), 0);
}

// The host's build and one without AVX-512 agree bit for bit with a C++ loop of the same
// order (a * b + c contracted to fma where the code generator contracts), for 1, 7 and 64
// vectors of taps.
TEST(ShiftedLoads, ResultsMatchUnsharedLoadsBitForBit) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (auto [t, lanes, taps, far] : {std::tuple{DType::kFloat32, 16, 5, int64_t{40}},
                                     std::tuple{DType::kFloat32, 16, 7, int64_t{9}},
                                     std::tuple{DType::kFloat64, 8, 5, int64_t{3}}}) {
    for (int64_t n : {1, 7, 64}) {
      loop::PrimFunc f = Taps(t, lanes, taps, far, n);
      const int64_t len = n * lanes + far + lanes, out_len = n * lanes + 2 + lanes;
      const size_t size = t == DType::kFloat32 ? 4 : 8;
      std::vector<char> x(len * size), w(taps * size);
      auto fill = [&](std::vector<char>& v) {
        for (size_t e = 0; e < v.size() / size; ++e) {
          const float r = dist(rng);
          if (t == DType::kFloat32)
            reinterpret_cast<float*>(v.data())[e] = r;
          else
            reinterpret_cast<double*>(v.data())[e] = r;
        }
      };
      fill(x);
      fill(w);
      auto run = [&](const CodegenOptions& o) {
        std::vector<char> out(out_len * size, 0);
        auto mod = BuildLLVM({f}, o);
        std::vector<void*> buffers = {x.data(), w.data(), out.data()};
        mod->Lookup("taps")(buffers.data(), nullptr);
        return out;
      };
      const std::vector<char> host = run(CodegenOptions{});
      EXPECT_EQ(host, run(Cpu("", "-avx512f")))
          << "lanes " << lanes << " taps " << taps << " n " << n;
      for (int64_t o = 0; o < n * lanes; ++o) {
        double want = 0, got = 0;
        for (int k = 0; k < taps; ++k) {
          const double xk = t == DType::kFloat32 ? reinterpret_cast<float*>(x.data())[o + k]
                                                 : reinterpret_cast<double*>(x.data())[o + k];
          const double wk = t == DType::kFloat32 ? reinterpret_cast<float*>(w.data())[k]
                                                 : reinterpret_cast<double*>(w.data())[k];
          want += wk * xk;
        }
        want += t == DType::kFloat32 ? reinterpret_cast<float*>(x.data())[o + far]
                                     : reinterpret_cast<double*>(x.data())[o + far];
        got = t == DType::kFloat32 ? reinterpret_cast<const float*>(host.data())[o + 2]
                                   : reinterpret_cast<const double*>(host.data())[o + 2];
        ASSERT_NEAR(got, want, 1e-4) << "element " << o;
      }
    }
  }
  if (!HostCannotRun(Cpu("x86-64-v4")).empty())
    std::printf("note: the host lacks AVX-512, so both builds load each tap on its own\n");
}

}  // namespace
}  // namespace kiln
