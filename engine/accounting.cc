// Byte estimates of executables for the engine's cache budget (engine/executable.h).
#include <unordered_set>

#include "engine/executable.h"

namespace kiln {

namespace {

// What a kernel keeps besides its module: its lowered loop IR (the PrimFunc, its constants'
// descriptions, its symbols). Measured, not counted: an engine's executables of the MLP test
// model take ~700 KB each for 3 kernels, of which the modules account for ~480 KB.
constexpr size_t kLoweredKernelBytes = 64 << 10;

template <typename T>
size_t VectorBytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

size_t SignatureBytes(const std::vector<TensorSignature>& sigs) {
  size_t n = VectorBytes(sigs);
  for (const TensorSignature& s : sigs) n += VectorBytes(s.shape);
  return n;
}

}  // namespace

size_t ExecutableCodeBytes(const ExecutableCode& code,
                           const std::function<bool(const void*)>& is_shared) {
  size_t n = sizeof(ExecutableCode) + VectorBytes(code.launches) + VectorBytes(code.constants) +
             VectorBytes(code.constant_data);
  std::unordered_set<const CompiledKernel*> kernels;
  for (const KernelLaunch& l : code.launches) {
    n += l.name.capacity();
    if (!l.kernel || !kernels.insert(l.kernel.get()).second) continue;
    n += kLoweredKernelBytes;
    if (l.kernel->module) n += l.kernel->module->resident_bytes();
  }
  std::unordered_set<const void*> constants;
  for (const Tensor& t : code.constants)
    if (t.raw_data() && !is_shared(t.raw_data()) && constants.insert(t.raw_data()).second)
      n += t.nbytes();
  return n;
}

size_t ExecutableTableBytes(const Executable& exe) {
  size_t n = sizeof(Executable) + exe.shape_key.capacity() + SignatureBytes(exe.inputs) +
             SignatureBytes(exe.outputs) + VectorBytes(exe.buffer_refs) + VectorBytes(exe.scalars) +
             VectorBytes(exe.copies) + VectorBytes(exe.intermediates) +
             VectorBytes(exe.plan.offsets);
  for (const IntermediateBuffer& b : exe.intermediates) n += VectorBytes(b.type.shape);
  // A std::map node: the pair and three pointers and a color, rounded to malloc's granule.
  n += exe.symbols.size() * 96;
  return n;
}

}  // namespace kiln
