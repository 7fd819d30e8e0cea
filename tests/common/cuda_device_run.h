// Runs generated CUDA C on a GPU: the kernel lowered to CUDA C, compiled by NVRTC for the
// device's compute capability, loaded and launched through the CUDA device (devices/
// cuda_device.h), its buffers copied there and back. With KILN_TEST_CUDA_RUN=1 the op tests
// run their kernels so (tests/common/kernel_test_util.h), which checks every op's CUDA kernel
// against its reference kernel; scripts/gpu_check.sh runs the op sweep that way. Where there is
// no GPU (or no NVRTC) the process says why and exits as skipped.
//
// Grids and scratch sizes are the launch object's (jit/kernel.h ShapeDeviceCall).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/cuda_host_emulation.h"
#include "devices/cuda_device.h"
#include "engine/compile.h"
#include "jit/nvrtc.h"

namespace kiln::test {

// cuda(0)'s architecture for a target string: "sm_90" for compute capability "9.0". Needs a
// device (CUDADeviceAPI::UnavailableReason() empty).
inline std::string Device0Arch() {
  std::string cc = GetDeviceAPI(DeviceType::kCUDA)
                       ->GetAttr(Device{DeviceType::kCUDA, 0}, DeviceAttr::kComputeCapability)
                       .AsString();
  cc.erase(std::remove(cc.begin(), cc.end(), '.'), cc.end());
  return "sm_" + cc;
}

// Why the op tests cannot run their kernels on a GPU here; "" when they can.
inline std::string CudaRunUnavailable() {
  if (!CUDADeviceAPI::UnavailableReason().empty()) return CUDADeviceAPI::UnavailableReason();
  return NvrtcUnavailable();
}

// A kernel lowered to CUDA C, compiled by NVRTC for cuda(0)'s compute capability, loaded, and
// its buffers placed there: inputs and constants copied, outputs zeroed. Launch() runs it (each
// launch of the lowered function in order) on a stream as often as asked; Outputs() waits for
// cuda(0) and copies the results back. The benchmarks (bench/cuda_bench.cc) time Launch().
// Owns its device buffers and module; one thread at a time.
class CudaKernelOnDevice {
 public:
  CudaKernelOnDevice(const Function& fn, const std::vector<Tensor>& inputs,
                     const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                     const std::map<std::string, int64_t>& symbols, const std::string& name) {
    const std::string arch = Device0Arch();
    CudaKernelSource k = LowerKernelToCuda(fn, name);
    const std::string ptx = CompileCudaToPtx(k.source.code, name, arch).ptx;
    call_ = BindKernelCall(k.lowered, inputs, out_types, symbols);
    entry_ = k.source.functions.at(0);
    shape_ = ShapeDeviceCall(entry_, call_.scalars.data());
    std::vector<size_t> sizes;
    for (const Tensor& t : inputs) sizes.push_back(t.nbytes());
    for (const Tensor& t : k.lowered.constants) sizes.push_back(t.nbytes());
    first_output_ = sizes.size();
    for (const Tensor& t : call_.outputs) sizes.push_back(t.nbytes());
    sizes.insert(sizes.end(), shape_.scratch_bytes.begin(), shape_.scratch_bytes.end());
    for (size_t i = 0; i < sizes.size(); ++i) {
      ptrs_.push_back(
          api().AllocDataSpace(dev_, static_cast<int64_t>(std::max<size_t>(sizes[i], 1))));
      if (i < call_.buffers.size() && sizes[i])
        api().CopyDataFromTo(call_.buffers[i], 0, ptrs_[i], 0, static_cast<int64_t>(sizes[i]),
                             host_, dev_, nullptr);
    }
    module_ = api().LoadModule(dev_, ptx, k.source.code);
    for (const DeviceLaunch& l : entry_.launches)
      kernels_.push_back(api().GetKernel(dev_, module_, l.kernel));
    scalars_.assign(call_.scalars.begin(), call_.scalars.end());
    for (void*& p : ptrs_) args_.push_back(&p);
    for (long long& v : scalars_) args_.push_back(&v);
  }
  ~CudaKernelOnDevice() {
    for (void* p : ptrs_) api().FreeDataSpace(dev_, p);
    api().UnloadModule(dev_, module_);
  }
  CudaKernelOnDevice(const CudaKernelOnDevice&) = delete;
  CudaKernelOnDevice& operator=(const CudaKernelOnDevice&) = delete;

  void Launch(StreamHandle stream = nullptr) {
    for (size_t i = 0; i < kernels_.size(); ++i)
      api().LaunchKernel(dev_, kernels_[i], shape_.grids[i], entry_.launches[i].block_threads,
                         args_.data(), stream);
  }
  std::vector<Tensor> Outputs() {
    api().StreamSync(dev_, nullptr);
    for (size_t j = 0; j < call_.outputs.size(); ++j)
      if (size_t n = call_.outputs[j].nbytes())
        api().CopyDataFromTo(ptrs_[first_output_ + j], 0, call_.outputs[j].raw_data(), 0,
                             static_cast<int64_t>(n), dev_, host_, nullptr);
    return call_.outputs;
  }
  // The CUDA device every instance uses (cuda(0)); lives as long as the process.
  static CUDADeviceAPI& api() {
    static CUDADeviceAPI* a = new CUDADeviceAPI();
    return *a;
  }

 private:
  const Device dev_{DeviceType::kCUDA, 0};
  const Device host_{DeviceType::kCPU, 0};
  KernelCall call_;
  KernelEntry entry_;
  DeviceCallShape shape_;
  size_t first_output_ = 0;
  std::vector<void*> ptrs_;  // inputs, constants, outputs, scratch: the kernel's parameters
  void* module_ = nullptr;
  std::vector<void*> kernels_;
  std::vector<long long> scalars_;
  std::vector<void*> args_;  // cuLaunchKernel's: the address of each parameter
};

inline std::vector<Tensor> RunCudaOnDevice(
    const Function& fn, const std::vector<Tensor>& inputs,
    const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
    const std::map<std::string, int64_t>& symbols, const std::string& name) {
  CudaKernelOnDevice k(fn, inputs, out_types, symbols, name);
  k.Launch();
  return k.Outputs();
}

}  // namespace kiln::test
