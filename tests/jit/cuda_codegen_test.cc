// CUDA C from loop IR (jit/cuda_codegen.h) and NVRTC (jit/nvrtc.h), on machines without a GPU:
// how a function is cut into launches, what becomes scratch, what is refused, and that NVRTC
// and ptxas accept what is generated. Every op's kernel compiling to PTX is the op sweep's job
// under KILN_TEST_CUDA (tests/CMakeLists.txt); running the kernels needs a GPU.
//
// The NVRTC tests skip, saying why, where NVRTC cannot be loaded; the ptxas test where the
// toolkit's ptxas is not found.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/loop_test_util.h"
#include "engine/compile.h"
#include "ir/type_infer.h"
#include "jit/cuda_codegen.h"
#include "jit/nvrtc.h"

namespace kiln {
namespace {

using loop::Add;
using loop::Alloc;
using loop::Buffer;
using loop::BufferNode;
using loop::FloatImm;
using loop::For;
using loop::ForKind;
using loop::Free;
using loop::IntImm;
using loop::IsConstInt;
using loop::Load;
using loop::MakeBuffer;
using loop::Mul;
using loop::PrimFunc;
using loop::Ramp;
using loop::Seq;
using loop::Stmt;
using loop::Store;
using loop::Sub;

Function AddFunction(const Shape& shape) {
  Var a = kiln::MakeVar("a", TensorType(shape, DType::kFloat32));
  Var b = kiln::MakeVar("b", TensorType(shape, DType::kFloat32));
  return InferTypes(
      kiln::MakeFunction({a, b}, MakeCall("add", {a, b}), nullptr, Attrs{{"primitive", true}}));
}

TEST(CudaCodegen, ElementwiseOpIsOneGridStrideLaunch) {
  CudaKernelSource k = LowerKernelToCuda(AddFunction({Dim(7), Dim(13)}), "k_add");
  ASSERT_EQ(k.source.functions.size(), 1u);
  const KernelEntry& f = k.source.functions[0];
  ASSERT_EQ(f.launches.size(), 1u);
  EXPECT_EQ(f.launches[0].kernel, "k_add");
  int64_t threads = 0;
  ASSERT_TRUE(IsConstInt(f.launches[0].threads, &threads));
  EXPECT_EQ(threads, 91);  // both loops, collapsed: a thread per element
  EXPECT_TRUE(f.scratch.empty());
  EXPECT_NE(k.source.code.find("extern \"C\" __global__ void __launch_bounds__(256) k_add("),
            std::string::npos)
      << k.source.code;
  EXPECT_NE(k.source.code.find("gridDim.x"), std::string::npos) << k.source.code;
}

TEST(CudaCodegen, SymbolicExtentsArriveAsScalarParameters) {
  CudaKernelSource k = LowerKernelToCuda(AddFunction({Dim::Symbol("n"), Dim(5)}), "k_add_generic");
  ASSERT_EQ(k.lowered.func->scalar_params.size(), 1u);
  const KernelEntry& f = k.source.functions.at(0);
  ASSERT_EQ(f.launches.size(), 1u);
  EXPECT_FALSE(IsConstInt(f.launches[0].threads)) << "the thread count follows n";
  EXPECT_NE(k.source.code.find("long long v_n)"), std::string::npos) << k.source.code;
}

// alloc t[n]; for i parallel { t[i] = x[i] * 2 }; for i parallel { out[i] = t[i] + 1 }
PrimFunc TwoStages(loop::Expr n) {
  Buffer x = MakeBuffer("x", DType::kFloat32, {n});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n});
  Buffer t = MakeBuffer("t", DType::kFloat32, {n}, BufferNode::Scope::kLocal);
  loop::Var i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Stmt first =
      For(i, IntImm(0), n, ForKind::kParallel, Store(t, {i}, Mul(Load(x, {i}), FloatImm(2))));
  Stmt second =
      For(j, IntImm(0), n, ForKind::kParallel, Store(out, {j}, Add(Load(t, {j}), FloatImm(1))));
  std::vector<loop::Var> scalars;
  if (loop::AsVar(n)) scalars.push_back(std::static_pointer_cast<const loop::VarNode>(n));
  return test::MakePrimFunc({x, out}, scalars, Seq({Alloc(t), first, second, Free(t)}),
                            "two_stages");
}

TEST(CudaCodegen, TopLevelLocalsAreScratchSharedByTheStages) {
  loop::Var n = loop::MakeVar("n");
  CudaModuleSource m = EmitCuda(std::vector<PrimFunc>{TwoStages(n)});
  const KernelEntry& f = m.functions.at(0);
  ASSERT_EQ(f.launches.size(), 2u);
  EXPECT_EQ(f.launches[0].kernel, "two_stages_s0");
  EXPECT_EQ(f.launches[1].kernel, "two_stages_s1");
  ASSERT_EQ(f.scratch.size(), 1u);
  EXPECT_EQ(f.scratch[0].name, "t");
  EXPECT_EQ(f.scratch[0].numel.get(), static_cast<const loop::ExprNode*>(n.get()))
      << "n elements of t, over the scalar parameter";
  // Both kernels take the same parameters: buffers, scratch, scalars.
  const std::string params =
      "(const float* __restrict__ v_x, float* __restrict__ v_out, float* __restrict__ v_t, "
      "long long v_n)";
  EXPECT_NE(m.code.find("two_stages_s0" + params), std::string::npos) << m.code;
  EXPECT_NE(m.code.find("two_stages_s1" + params), std::string::npos) << m.code;
}

TEST(CudaCodegen, ASerialStageRunsOnOneThread) {
  Buffer out = MakeBuffer("out", DType::kInt32, {IntImm(4)});
  loop::Var i = loop::MakeVar("i");
  // out[i] = out[i - 1] + 1 reads what the iteration before wrote: not parallel.
  Stmt body = For(i, IntImm(1), IntImm(3), ForKind::kSerial,
                  Store(out, {i}, Add(Load(out, {Sub(i, IntImm(1))}), IntImm(1, DType::kInt32))));
  CudaModuleSource m = EmitCuda({test::MakePrimFunc({out}, {}, body, "scan", 0)});
  const KernelEntry& f = m.functions.at(0);
  ASSERT_EQ(f.launches.size(), 1u);
  int64_t threads = 0;
  ASSERT_TRUE(IsConstInt(f.launches[0].threads, &threads));
  EXPECT_EQ(threads, 1);
  EXPECT_NE(m.code.find("if (blockIdx.x != 0 || threadIdx.x != 0) return;"), std::string::npos)
      << m.code;
}

TEST(CudaCodegen, AThreadsBufferOfSymbolicSizeIsItsSliceOfAPool) {
  loop::Var n = loop::MakeVar("n"), m = loop::MakeVar("m");
  Buffer x = MakeBuffer("x", DType::kFloat32, {n, m});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, m});
  Buffer row = MakeBuffer("row", DType::kFloat32, {m}, BufferNode::Scope::kLocal);
  loop::Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Stmt body =
      For(i, IntImm(0), n, ForKind::kParallel,
          Seq({Alloc(row), For(j, IntImm(0), m, ForKind::kSerial, Store(row, {j}, Load(x, {i, j}))),
               For(k, IntImm(0), m, ForKind::kSerial,
                   Store(out, {i, k}, Load(row, {Sub(Sub(m, k), IntImm(1))}))),
               Free(row)}));
  CudaModuleSource src = EmitCuda({test::MakePrimFunc({x, out}, {n, m}, body, "reverse_rows")});
  const KernelEntry& f = src.functions.at(0);
  ASSERT_EQ(f.scratch.size(), 1u);
  EXPECT_EQ(f.scratch[0].name, "row");
  EXPECT_TRUE(f.scratch[0].per_thread);
  EXPECT_EQ(f.scratch[0].numel.get(), static_cast<const loop::ExprNode*>(m.get()));
  EXPECT_NE(src.code.find("float* v_row = v_row_pool + "), std::string::npos) << src.code;

  // The launch object: a device function of two buffers over (n, m), few blocks (its pools
  // grow with the threads), and what one call needs: the grid and the pool's bytes.
  EXPECT_TRUE(f.on_device());
  EXPECT_EQ(f.num_buffers, 2u);
  ASSERT_EQ(f.scalar_params.size(), 2u);
  EXPECT_EQ(f.max_blocks, kCudaMaxBlocksWithPools);
  ASSERT_EQ(f.launches.size(), 1u);
  EXPECT_EQ(f.launches[0].block_threads, kCudaBlockThreads);
  for (int64_t rows : {int64_t{1}, int64_t{300}, int64_t{1000000}}) {
    const int64_t scalars[] = {rows, 7};
    DeviceCallShape shape = ShapeDeviceCall(f, scalars);
    const int64_t blocks = std::min<int64_t>((rows + kCudaBlockThreads - 1) / kCudaBlockThreads,
                                             kCudaMaxBlocksWithPools);
    ASSERT_EQ(shape.grids.size(), 1u);
    EXPECT_EQ(shape.grids[0], blocks) << rows << " rows";
    ASSERT_EQ(shape.scratch_bytes.size(), 1u);
    EXPECT_EQ(shape.scratch_bytes[0], static_cast<size_t>(7 * 4 * blocks * kCudaBlockThreads))
        << "a row of 7 floats for every thread started";
  }
  const int64_t none[] = {0, 7};
  EXPECT_EQ(ShapeDeviceCall(f, none).grids.at(0), 1u) << "an empty launch still starts a block";
}

TEST(CudaCodegen, AThreadsLargeBufferIsASliceOfAPoolToo) {
  loop::Var n = loop::MakeVar("n");
  Buffer x = MakeBuffer("x", DType::kFloat32, {n});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n});
  Buffer small = MakeBuffer("small", DType::kFloat32, {IntImm(4096)}, BufferNode::Scope::kLocal);
  Buffer big = MakeBuffer("big", DType::kFloat32, {IntImm(4097)}, BufferNode::Scope::kLocal);
  loop::Var i = loop::MakeVar("i");
  Stmt body = For(i, IntImm(0), n, ForKind::kParallel,
                  Seq({Alloc(small), Alloc(big), Store(small, {IntImm(0)}, Load(x, {i})),
                       Store(big, {IntImm(0)}, Load(small, {IntImm(0)})),
                       Store(out, {i}, Load(big, {IntImm(0)})), Free(big), Free(small)}));
  CudaModuleSource src = EmitCuda({test::MakePrimFunc({x, out}, {n}, body, "f")});
  const KernelEntry& f = src.functions.at(0);
  ASSERT_EQ(f.scratch.size(), 1u);  // 16 KiB is an array, one element more a pool
  EXPECT_EQ(f.scratch[0].name, "big");
  EXPECT_TRUE(f.scratch[0].per_thread);
  EXPECT_NE(src.code.find("float v_small[4096];"), std::string::npos) << src.code;
}

TEST(CudaCodegen, AThreadsBufferWhoseSizeChangesInTheKernelIsUnsupported) {
  loop::Var n = loop::MakeVar("n");
  Buffer x = MakeBuffer("x", DType::kFloat32, {n});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n});
  loop::Var i = loop::MakeVar("i");
  Buffer t = MakeBuffer("row", DType::kFloat32, {Add(i, IntImm(1))}, BufferNode::Scope::kLocal);
  Stmt body =
      For(i, IntImm(0), n, ForKind::kParallel,
          Seq({Alloc(t), Store(t, {i}, Load(x, {i})), Store(out, {i}, Load(t, {i})), Free(t)}));
  try {
    EmitCuda({test::MakePrimFunc({x, out}, {n}, body, "f")});
    FAIL() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("'row'"), std::string::npos) << e.what();
  }
}

TEST(CudaCodegen, VectorLanesAreUnsupported) {
  Buffer x = MakeBuffer("x", DType::kFloat32, {IntImm(8)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {IntImm(8)});
  Stmt body = Store(out, {Ramp(IntImm(0), 1, 8)}, Load(x, {Ramp(IntImm(0), 1, 8)}));
  try {
    EmitCuda({test::MakePrimFunc({x, out}, {}, body, "vec")});
    FAIL() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("vector"), std::string::npos) << e.what();
  }
}

#define KILN_REQUIRE_NVRTC()                                          \
  if (!NvrtcUnavailable().empty()) {                                  \
    GTEST_SKIP() << "NVRTC cannot be loaded: " << NvrtcUnavailable(); \
  }

TEST(Nvrtc, CompilesGeneratedKernelsForSm80AndSm90) {
  KILN_REQUIRE_NVRTC();
  EXPECT_FALSE(NvrtcVersion().empty());
  std::string code = EmitCuda(std::vector<PrimFunc>{TwoStages(loop::MakeVar("n"))}).code;
  for (const char* arch : {"sm_80", "sm_90"}) {
    NvrtcResult r = CompileCudaToPtx(code, "two_stages", arch);
    EXPECT_NE(r.ptx.find(StrCat(".target ", arch)), std::string::npos) << r.ptx.substr(0, 400);
    EXPECT_NE(r.ptx.find(".entry two_stages_s0"), std::string::npos);
    EXPECT_NE(r.ptx.find(".entry two_stages_s1"), std::string::npos);
  }
}

TEST(Nvrtc, AnUnknownArchitectureIsInvalidArgument) {
  KILN_REQUIRE_NVRTC();
  for (const char* arch : {"sm_1", "gfx90a", "sm_", "compute_90"}) {
    try {
      CompileCudaToPtx("__global__ void k() {}", "k", arch);
      ADD_FAILURE() << arch << ": expected kInvalidArgument";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << arch;
      EXPECT_NE(std::string(e.what()).find(arch), std::string::npos) << e.what();
    }
  }
}

TEST(Nvrtc, ACompileErrorCarriesNvrtcsLog) {
  KILN_REQUIRE_NVRTC();
  try {
    CompileCudaToPtx("__global__ void k() { undeclared_thing = 1; }", "broken", "sm_90");
    FAIL() << "expected kCompileError";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCompileError);
    EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
}

// ptxas, the toolkit's PTX assembler, turns the PTX into machine code for the architecture: the
// check a driver would make when loading it.
TEST(Nvrtc, PtxasAssemblesTheSoftmaxKernels) {
  KILN_REQUIRE_NVRTC();
  std::string ptxas = "/usr/local/cuda/bin/ptxas";
  if (std::system("command -v ptxas >/dev/null 2>&1") == 0)
    ptxas = "ptxas";
  else if (!std::ifstream(ptxas))
    GTEST_SKIP() << "no ptxas on PATH or in /usr/local/cuda/bin";
  Var x = kiln::MakeVar("x", TensorType({Dim::Symbol("rows"), Dim(37)}, DType::kFloat32));
  Function fn =
      InferTypes(kiln::MakeFunction({x}, MakeCall("softmax", {x}, Attrs{{"axis", int64_t{-1}}}),
                                    nullptr, Attrs{{"primitive", true}}));
  CudaKernelSource k = LowerKernelToCuda(fn, "k_softmax");
  test::TempDir dir;
  for (const char* arch : {"sm_80", "sm_90"}) {
    std::string path = dir.path() + "/k_" + arch + ".ptx";
    std::ofstream(path) << CompileCudaToPtx(k.source.code, "k_softmax", arch).ptx;
    std::string cmd = ptxas + " -arch=" + arch + " " + path + " -o " + path + ".cubin 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

}  // namespace
}  // namespace kiln
