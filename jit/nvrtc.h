// NVRTC, CUDA's run-time compiler (CUDA C -> PTX), loaded with dlopen at first use: nothing
// links CUDA, so kiln builds and runs its CPU path on machines without the toolkit. Compiling
// needs no GPU and no driver; only loading and launching the PTX does (devices/cuda_device.h).
//
// Thread-safe: NVRTC programs are independent, and the library is loaded once.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// "" when NVRTC could be loaded, else why not (which libraries were tried, what dlopen said).
const std::string& NvrtcUnavailable();
// "13.0": the loaded NVRTC's version; "" when it is unavailable. Part of what a persistent
// cache of PTX must key on.
std::string NvrtcVersion();

// PTX for the virtual architecture of `arch` (`sm_90` compiles for compute_90), with the
// defaults kiln's CUDA kernels assume (C++17, fused multiply-add allowed, no fast math).
// `name` names the program in NVRTC's messages. A compile error is kCompileError with NVRTC's
// log; NVRTC missing is kUnsupported with NvrtcUnavailable(); an architecture NVRTC does not
// know is kInvalidArgument naming it.
struct NvrtcResult {
  std::string ptx;
  std::string log;  // warnings, if any
};
NvrtcResult CompileCudaToPtx(const std::string& source, const std::string& name,
                             const std::string& arch,
                             const std::vector<std::string>& extra_options = {});

}  // namespace kiln
