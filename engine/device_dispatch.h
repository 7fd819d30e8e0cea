// Running an executable's kernels on a device that loads kernel modules (a GPU, through
// DeviceAPI): what Engine::Dispatch does instead of calling host functions when the engine's
// target is not the CPU (EngineOptions::target `cuda`).
//
// Once per executable's code (at build): the constants are uploaded to the device and every
// kernel's module is loaded (DeviceCode). Per run: the host inputs are copied to device
// workspaces, every launch of every kernel is enqueued in order on the calling thread's
// current stream of the device (DeviceAPI::GetCurrentStream), the outputs are copied back, and
// the run waits for the stream. The arena of intermediates and each kernel's scratch are
// workspaces too, given back when the run ends (the device's pool keeps them for the next).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "devices/device_api.h"
#include "engine/executable.h"

namespace kiln {

// What an ExecutableCode has on one device. Immutable once made; frees its device memory and
// unloads its modules when the last executable sharing it goes.
struct DeviceCode {
  DeviceAPI* api = nullptr;  // not owned: outlives the engine (EngineOptions::device_api)
  Device dev;
  std::vector<void*> constant_data;  // device copies of ExecutableCode::constants, in order
  std::vector<void*> modules;        // one per distinct CompiledModule of the launches
  // Per launch of ExecutableCode::launches, per DeviceLaunch of its entry: the kernel handle.
  std::vector<std::vector<void*>> kernels;

  DeviceCode() = default;
  DeviceCode(const DeviceCode&) = delete;
  DeviceCode& operator=(const DeviceCode&) = delete;
  ~DeviceCode();
};

// `code`'s constants uploaded to `dev` and its kernels' modules loaded there. Every launch must
// be a device function (KernelEntry::on_device). Errors (no room, a module the device rejects)
// are the device's, with what was done so far undone.
std::shared_ptr<const DeviceCode> MakeDeviceCode(const ExecutableCode& code, DeviceAPI* api,
                                                 Device dev);

// One run of `exe` (whose code has a DeviceCode) on host tensors: `inputs` and `outputs` as
// Engine::Dispatch takes them. `cancel`, when set, stops the run before its next kernel
// (kCancelled). Blocks until the device has finished the run.
void DispatchOnDevice(const Executable& exe, const Tensor* inputs, const Tensor* outputs,
                      const std::atomic<bool>* cancel);

}  // namespace kiln
