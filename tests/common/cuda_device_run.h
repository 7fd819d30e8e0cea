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

// Why the op tests cannot run their kernels on a GPU here; "" when they can.
inline std::string CudaRunUnavailable() {
  if (!CUDADeviceAPI::UnavailableReason().empty()) return CUDADeviceAPI::UnavailableReason();
  return NvrtcUnavailable();
}

inline std::vector<Tensor> RunCudaOnDevice(
    const Function& fn, const std::vector<Tensor>& inputs,
    const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
    const std::map<std::string, int64_t>& symbols, const std::string& name) {
  static CUDADeviceAPI* api = new CUDADeviceAPI();  // lives as long as the process
  const Device dev{DeviceType::kCUDA, 0};
  const Device host{DeviceType::kCPU, 0};
  std::string cc = api->GetAttr(dev, DeviceAttr::kComputeCapability).AsString();  // "9.0"
  cc.erase(std::remove(cc.begin(), cc.end(), '.'), cc.end());
  CudaKernelSource k = LowerKernelToCuda(fn, name);
  std::string ptx = CompileCudaToPtx(k.source.code, name, "sm_" + cc).ptx;

  KernelCall call = BindKernelCall(k.lowered, inputs, out_types, symbols);
  const KernelEntry& f = k.source.functions.at(0);
  const DeviceCallShape shape = ShapeDeviceCall(f, call.scalars.data());
  std::vector<size_t> sizes;
  for (const Tensor& t : inputs) sizes.push_back(t.nbytes());
  for (const Tensor& t : k.lowered.constants) sizes.push_back(t.nbytes());
  for (const Tensor& t : call.outputs) sizes.push_back(t.nbytes());
  sizes.insert(sizes.end(), shape.scratch_bytes.begin(), shape.scratch_bytes.end());

  // Device buffers, freed however this ends; inputs, constants and the (zeroed) outputs copied.
  struct Buffers {
    CUDADeviceAPI* api;
    Device dev;
    std::vector<void*> ptrs;
    void* module = nullptr;
    ~Buffers() {
      for (void* p : ptrs) api->FreeDataSpace(dev, p);
      api->UnloadModule(dev, module);
    }
  } device{api, dev, {}, nullptr};
  for (size_t i = 0; i < sizes.size(); ++i) {
    device.ptrs.push_back(
        api->AllocDataSpace(dev, static_cast<int64_t>(std::max<size_t>(sizes[i], 1))));
    if (i < call.buffers.size() && sizes[i])
      api->CopyDataFromTo(call.buffers[i], 0, device.ptrs[i], 0, static_cast<int64_t>(sizes[i]),
                          host, dev, nullptr);
  }
  device.module = api->LoadModule(dev, ptx);
  std::vector<long long> scalars(call.scalars.begin(), call.scalars.end());
  std::vector<void*> args;
  for (void*& p : device.ptrs) args.push_back(&p);
  for (long long& s : scalars) args.push_back(&s);
  for (size_t i = 0; i < f.launches.size(); ++i)
    api->LaunchKernel(dev, api->GetKernel(dev, device.module, f.launches[i].kernel), shape.grids[i],
                      f.launches[i].block_threads, args.data(), nullptr);
  api->StreamSync(dev, nullptr);
  size_t first_output = inputs.size() + k.lowered.constants.size();
  for (size_t j = 0; j < call.outputs.size(); ++j)
    if (size_t n = call.outputs[j].nbytes())
      api->CopyDataFromTo(device.ptrs[first_output + j], 0, call.outputs[j].raw_data(), 0,
                          static_cast<int64_t>(n), dev, host, nullptr);
  return call.outputs;
}

}  // namespace kiln::test
