// Compile-and-compare helpers: one op (or one fused function) lowered, put through the loop
// pipeline, JIT-compiled and run, then compared with the op's reference kernel.
//
// CPU models. Kernels are compiled for the host unless KILN_TEST_CPU names an LLVM CPU model
// (`znver4`, `x86-64-v3`, ...): tests/CMakeLists.txt runs a sweep of these tests once per model
// in a fixed list, so code generated for other CPUs is checked on every host that can execute
// it. A process whose model this host cannot execute prints why and exits with
// kSkipCpuExitCode, which ctest reports as skipped.
//
// CUDA. With KILN_TEST_CUDA set to architectures (`sm_80,sm_90`), every kernel a test compiles
// is also lowered to CUDA C (engine/compile.h) and compiled by NVRTC to PTX for each of them,
// and a failure there fails the test: tests/CMakeLists.txt sets it for every jit test, which
// checks that every lowering has a CUDA kernel that compiles, on machines without a GPU. Where
// NVRTC cannot be loaded the process says why and tests the CPU kernels only.
//
// CUDA on the host. With KILN_TEST_CUDA_HOST=1, the kernels tests run are the CUDA C ones,
// compiled by the host's C++ compiler and run thread by thread (common/cuda_host_emulation.h),
// so the op tests check generated CUDA C against the reference kernels without a GPU. Slow (a
// compiler run per kernel): tests/CMakeLists.txt runs the cross-CPU sweep's selection so.
// With KILN_TEST_CUDA_RUN=1 they are run on the GPU (common/cuda_device_run.h); without one
// the process says why and exits as skipped (jit@cuda-run/* in ctest, scripts/gpu_check.sh).
#pragma once

#include <functional>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/cuda_device_run.h"
#include "common/cuda_host_emulation.h"
#include "common/test_util.h"
#include "engine/compile.h"
#include "ir/interpreter.h"
#include "ir/type_infer.h"
#include "jit/nvrtc.h"
#include "passes/pass_context.h"

namespace kiln::test {

// The code generation options every kernel of this test process is compiled with.
inline const CodegenOptions& TestCodegen() {
  static const CodegenOptions options = [] {
    CodegenOptions o;
    if (const char* cpu = std::getenv("KILN_TEST_CPU")) o.mcpu = cpu;
    return o;
  }();
  return options;
}

inline constexpr int kSkipCpuExitCode = 77;

// The CUDA architectures KILN_TEST_CUDA names (`sm_80,sm_90`); empty when it is unset.
inline const std::vector<std::string>& CudaArchs() {
  static const std::vector<std::string> archs = [] {
    std::vector<std::string> out;
    const char* env = std::getenv("KILN_TEST_CUDA");
    std::string all = env ? env : "", one;
    for (char c : all + ",") {
      if (c != ',') {
        one += c;
      } else if (!one.empty()) {
        out.push_back(one);
        one.clear();
      }
    }
    return out;
  }();
  return archs;
}

// Under KILN_TEST_CUDA: kernels lowered to CUDA C as tests compile them, and compiled by NVRTC
// in batches (one program per batch and architecture: NVRTC's start-up dominates a small
// kernel, and the sweep compiles thousands). Lowering and emitting errors throw at once; a
// batch that fails to compile is compiled kernel by kernel to name the failing ones, with the
// test that made each.
class CudaBatch {
 public:
  static CudaBatch& Get() {
    static CudaBatch* batch = new CudaBatch();  // flushed by the environment's TearDown
    return *batch;
  }
  void Add(const Function& fn, const std::string& name) {
    CudaKernelSource k = LowerKernelToCuda(fn, name);
    auto renamed = std::make_shared<loop::PrimFuncNode>(*k.lowered.func);
    renamed->name = StrCat(name, "_", count_++);
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    queued_.push_back({renamed, t ? StrCat(t->test_suite_name(), ".", t->name()) : "?"});
    if (queued_.size() >= kBatch) Flush();
  }
  void Flush() {
    std::vector<Entry> batch = std::move(queued_);
    queued_.clear();
    if (batch.empty()) return;
    std::vector<loop::PrimFunc> funcs;
    for (const Entry& e : batch) funcs.push_back(e.func);
    std::string code = EmitCuda(funcs).code;
    for (const std::string& arch : CudaArchs()) {
      try {
        CompileCudaToPtx(code, "kiln_test_batch", arch);
      } catch (const Error&) {
        std::string failures;
        for (const Entry& e : batch) {
          try {
            CompileCudaToPtx(EmitCuda({e.func}).code, e.func->name, arch);
          } catch (const Error& one) {
            failures += StrCat("\n", e.test, ": ", one.what());
          }
        }
        Throw(ErrorCode::kCompileError, "CUDA C did not compile for ", arch, ":", failures);
      }
    }
  }

 private:
  static constexpr size_t kBatch = 96;
  struct Entry {
    loop::PrimFunc func;
    std::string test;
  };
  std::vector<Entry> queued_;
  int count_ = 0;
};

inline void CheckCudaCompiles(const Function& fn, const std::string& name) {
  if (!CudaArchs().empty() && NvrtcUnavailable().empty()) CudaBatch::Get().Add(fn, name);
}  // SKIP_RETURN_CODE of the cross-CPU ctest entries

// Says which CPU model this process compiles for before any test runs, or, when this host
// cannot execute that model's code, why not, and ends the process as skipped.
class TestCpuEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const CodegenOptions& o = TestCodegen();
    // Vectors and register tiles sized for the CPU the kernels are compiled for, as the engine
    // sizes them (this thread's default context: every test of the process runs on it).
    PassContext::Current().SetConfig("target.vector_bits", int64_t{VectorRegisterBits(o)});
    if (std::getenv("KILN_TEST_CUDA_RUN")) {
      if (std::string why = CudaRunUnavailable(); !why.empty()) {
        std::printf("kiln: kernels not run on a GPU (KILN_TEST_CUDA_RUN): %s\n", why.c_str());
        std::fflush(stdout);
        std::exit(kSkipCpuExitCode);
      }
      std::printf("kiln: every kernel run as CUDA C on cuda(0)\n");
    }
    if (!CudaArchs().empty() && !NvrtcUnavailable().empty())
      std::printf("kiln: kernels not compiled to PTX (KILN_TEST_CUDA): %s\n",
                  NvrtcUnavailable().c_str());
    else if (!CudaArchs().empty())
      std::printf("kiln: every kernel also compiled to PTX by NVRTC %s for %s\n",
                  NvrtcVersion().c_str(), std::getenv("KILN_TEST_CUDA"));
    if (o.mcpu.empty()) return;
    std::string why = HostCannotRun(o);
    if (!why.empty()) {
      std::printf("kiln: CPU model %s skipped: %s\n", o.mcpu.c_str(), why.c_str());
      std::fflush(stdout);
      std::exit(kSkipCpuExitCode);
    }
    std::printf("kiln: kernels compiled for CPU model %s (%s)\n", o.mcpu.c_str(),
                LLVMTargetDescription(o).c_str());
  }
  void TearDown() override;
};
inline void TestCpuEnvironment::TearDown() {
  if (CudaArchs().empty() || !NvrtcUnavailable().empty()) return;
  try {
    CudaBatch::Get().Flush();
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
}

inline ::testing::Environment* const kTestCpuEnvironment =
    ::testing::AddGlobalTestEnvironment(new TestCpuEnvironment);

// ` name=value ...` of every attribute, for test failure messages.
inline std::string AttrsText(const Attrs& attrs) {
  std::string s;
  for (const auto& [name, value] : attrs.values())
    s += StrCat(" ", name, "=", AttrValueToString(value));
  return s;
}

// A function with one parameter per input and a single call of `op`. With `symbolic`, every
// dim larger than 1 becomes a symbol named after its size (`d7`), so equal sizes share a
// symbol and the kernel is compiled shape-generic.
inline Function SingleOpFunction(const std::string& op, const std::vector<Tensor>& inputs,
                                 const Attrs& attrs, bool symbolic) {
  std::vector<Var> params;
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape shape;
    for (int64_t d : inputs[i].shape())
      shape.push_back(symbolic && d > 1 ? Dim::Symbol(StrCat("d", d)) : Dim(d));
    params.push_back(MakeVar(StrCat("x", i), TensorType(shape, inputs[i].dtype())));
    args.push_back(params.back());
  }
  Expr call = MakeCall(op, args, attrs);
  return InferTypes(MakeFunction(params, call, nullptr, Attrs{{"primitive", true}}));
}

// Runs `fn` compiled (for TestCodegen() unless `options` say otherwise). Symbols are bound from
// the inputs' shapes.
inline std::vector<Tensor> RunCompiled(const Function& fn, const std::vector<Tensor>& inputs,
                                       const std::string& name = "kernel",
                                       const CodegenOptions& options = TestCodegen()) {
  std::vector<Type> types;
  for (const Tensor& t : inputs) types.push_back(TypeOfTensor(t));
  std::map<std::string, int64_t> symbols = BindInputShapes(fn, types);
  Function concrete = BindSymbols(fn, symbols);
  std::vector<std::pair<DType, std::vector<int64_t>>> out_types;
  auto add = [&](const Type& t) {
    const TensorTypeNode* tt = AsTensor(t);
    out_types.push_back({tt->dtype, ConstShape(tt->shape)});
  };
  if (const TupleTypeNode* tup = AsTuple(concrete->body->type)) {
    for (const Type& f : tup->fields) add(f);
  } else {
    add(concrete->body->type);
  }
  static const bool on_host = std::getenv("KILN_TEST_CUDA_HOST") != nullptr;
  if (on_host) return RunCudaOnHost(fn, inputs, out_types, symbols, name);
  static const bool on_gpu = std::getenv("KILN_TEST_CUDA_RUN") != nullptr;
  if (on_gpu) return RunCudaOnDevice(fn, inputs, out_types, symbols, name);
  CompiledKernel k = CompileKernel(fn, name, options);
  CheckCudaCompiles(fn, name);
  return RunKernel(k, inputs, out_types, symbols);
}

// Compiles `op` on `inputs` (concretely, and again shape-generic when `also_symbolic`) and
// compares every output with the reference kernel.
inline ::testing::AssertionResult CompiledMatchesReference(const std::string& op,
                                                           const std::vector<Tensor>& inputs,
                                                           const Attrs& attrs = {},
                                                           double atol = 1e-5, double rtol = 1e-5,
                                                           bool also_symbolic = true) {
  std::vector<Tensor> want = RunOpReference(op, inputs, attrs);
  for (bool symbolic : {false, true}) {
    if (symbolic && !also_symbolic) break;
    std::vector<Tensor> got;
    try {
      got = RunCompiled(SingleOpFunction(op, inputs, attrs, symbolic), inputs, "k_" + op);
    } catch (const Error& e) {
      return ::testing::AssertionFailure()
             << op << (symbolic ? " (symbolic)" : "") << ": " << e.what();
    }
    if (got.size() != want.size())
      return ::testing::AssertionFailure()
             << op << ": " << got.size() << " outputs, want " << want.size();
    for (size_t i = 0; i < want.size(); ++i) {
      ::testing::AssertionResult r = TensorsNear(got[i], want[i], atol, rtol);
      if (!r)
        return ::testing::AssertionFailure()
               << op << (symbolic ? " (symbolic)" : "") << " output " << i << ": " << r.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// `op` compiled with the dims `symbolic(input, dim)` picks symbolic and every other dim constant,
// against the reference, to `tol` (0: exactly); `what` names the case in messages.
// The primitive function of `op` over parameters shaped as `inputs`, dim d of input i a symbol
// where symbolic(i, d) ("batch" for d = 0, else "s<d>"), typed.
inline Function SymbolicDimsFunction(const std::string& op, const std::vector<Tensor>& inputs,
                                     const Attrs& attrs,
                                     const std::function<bool(size_t, size_t)>& symbolic) {
  std::vector<Var> params;
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape shape;
    for (size_t d = 0; d < inputs[i].shape().size(); ++d)
      shape.push_back(symbolic(i, d) ? Dim::Symbol(d == 0 ? std::string("batch") : StrCat("s", d))
                                     : Dim(inputs[i].shape()[d]));
    params.push_back(MakeVar(StrCat("x", i), TensorType(shape, inputs[i].dtype())));
    args.push_back(params.back());
  }
  return InferTypes(
      MakeFunction(params, MakeCall(op, args, attrs), nullptr, Attrs{{"primitive", true}}));
}

// Every dim of the first input symbolic but its channels (dim `channel_axis`), every other input
// constant: a windowed op over images of any size (the engine's generic tier).
inline bool SymbolicImageDim(size_t input, size_t dim, size_t channel_axis) {
  return input == 0 && dim != channel_axis;
}

inline ::testing::AssertionResult SymbolicDimsMatchReference(
    const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs, double tol,
    const std::function<bool(size_t, size_t)>& symbolic, const std::string& what) {
  Function fn = SymbolicDimsFunction(op, inputs, attrs, symbolic);
  std::vector<Tensor> want = RunOpReference(op, inputs, attrs);
  std::vector<Tensor> got;
  try {
    got = RunCompiled(fn, inputs, "k_" + op + "_sym");
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << op << " (" << what << "): " << e.what();
  }
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << op << ": " << got.size() << " outputs, want " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    ::testing::AssertionResult r = TensorsNear(got[i], want[i], tol, tol);
    if (!r)
      return ::testing::AssertionFailure()
             << op << " (" << what << ") output " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// dim 0 of the first `batched` inputs (the batch) symbolic: the shape-generic form of the
// windowed ops whose lowering needs constant spatial dims.
inline ::testing::AssertionResult SymbolicBatchMatchesReference(const std::string& op,
                                                                const std::vector<Tensor>& inputs,
                                                                const Attrs& attrs,
                                                                double tol = 1e-5,
                                                                size_t batched = 1) {
  return SymbolicDimsMatchReference(
      op, inputs, attrs, tol, [batched](size_t i, size_t d) { return i < batched && d == 0; },
      "symbolic batch");
}

// SymbolicImageDim's dims symbolic.
inline ::testing::AssertionResult SymbolicImageMatchesReference(const std::string& op,
                                                                const std::vector<Tensor>& inputs,
                                                                const Attrs& attrs,
                                                                double tol = 1e-5,
                                                                size_t channel_axis = 1) {
  return SymbolicDimsMatchReference(
      op, inputs, attrs, tol,
      [channel_axis](size_t i, size_t d) { return SymbolicImageDim(i, d, channel_axis); },
      "symbolic image size");
}

}  // namespace kiln::test
