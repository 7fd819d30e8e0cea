// Binding a shape-generic executable to one shape: what a new shape's first request does before
// its kernels run (engine/tiers.cc).
//
// Two ways, one result. BindGeneric binds by the symbols' names (Dim::TryEval per dim) and names
// whatever is at fault. GenericBinder, prepared once per generic executable, binds straight from
// the input tensors with flat arrays: dims read by slot, every shape from one DimProgram. On a
// cold cache (the first request of a new shape, after the previous shape's specialized runs)
// the map lookups, node walks and message formatting of the first way were half of finding the
// executable (a conv net at 17x23: binding 22-30 us of 40-60 us); the fast way costs about 14
// us there, and 2-4 us more than a hit when warm (encoder: 4.5-10 before). The fast way gives up,
// returning null, on anything it does not accept (a dtype, rank or dim that does not fit, a
// constraint that fails, a dim that is negative or overflows); the caller then takes the first,
// which finds and names the fault, so errors read the same either way.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/executable.h"
#include "ir/dim_program.h"
#include "ir/op.h"
#include "ir/tensor.h"

namespace kiln {

class GenericBinder {
 public:
  // For a generic executable's tensors (`inputs`: its input signatures, whose dtypes count;
  // `shapes`: their symbolic shapes) and the model's constraints. Null where the inputs' shapes
  // are not all constants and plain symbols, or a shape reads a symbol no input binds: such a
  // model binds the slow way only.
  static std::shared_ptr<const GenericBinder> Make(const std::vector<TensorSignature>& inputs,
                                                   const GenericShapes& shapes,
                                                   const std::vector<DimConstraint>& constraints);

  // `generic` bound to the shapes of `inputs`: a concrete executable as BindGeneric makes it,
  // but for its shape key, which is left empty for the caller. Null where the fast way does not
  // accept them (see above). `generic` must be the executable this binder was made for.
  std::shared_ptr<Executable> Bind(const Executable& generic, std::span<const Tensor> inputs) const;

 private:
  struct InputDim {
    int64_t slot;   // the symbol's slot; < 0: a constant dim
    int64_t value;  // a constant dim's value
  };
  std::vector<DType> dtypes_;    // per input
  std::vector<uint32_t> first_;  // per input, its first entry of dims_; one more at the end
  std::vector<InputDim> dims_;   // every input's dims, in order
  size_t num_symbols_ = 0;       // slots [0, num_symbols_): the symbols the inputs bind
  DimProgram program_;           // outputs', intermediates' dims; then each constraint's a, b
  size_t num_shape_dims_ = 0;    // the program's results that are dims of shapes
  std::vector<uint32_t> ranks_;  // of the outputs, then the intermediates: their dims in turn
  std::vector<DimConstraint::Kind> constraints_;  // those every symbol of which is bound
  std::vector<int64_t> scalar_slots_;             // per Executable::scalars entry
};

// Whether a binding of a shape-generic executable leaves one of its tensors (an input, an
// output or an intermediate) empty. Such a shape is compiled for itself rather than served by
// the generic kernels (engine/tiers.cc): those clamp their reads into each input over symbolic
// extents, and an extent of 0 leaves nothing to clamp into (an index clamped to 0 on an empty
// axis still reaches past the buffer by the dims inside it), where a specialization's constant
// 0 takes each lowering's empty case and reads nothing.
bool BindsAnEmptyTensor(const Executable& binding);

// Prefetches into L2 the machine code of `generic`'s kernels (KernelEntry::text, up to a budget):
// what the first run of a new binding runs that no run of another shape's specialized executable
// kept warm. Called before binding; prefetches never fault and bind nothing, so this changes no
// result. On a 2-vCPU Zen 5 VM, dynamic_conv's first calls of 16 new small shapes (medians of
// 4 interleaved runs each): dispatch 43-47 -> 33-37 us, the whole call 79-98 -> 78-82 us, the
// prefetches costing 4-5 us to issue (40 KiB of code). The constants too (the weights, 133 KiB
// here) paid no more than they cost.
void PrefetchGeneric(const Executable& generic);

// `generic` (a shape-generic executable) for one binding of its model's symbols: a concrete
// executable of tier kGeneric that shares its kernels and constants, with its own memory plan.
// The binding must satisfy the model's constraints (CheckConstraints); a shape that evaluates
// negative (an input too small for a window) is kInvalidArgument naming the tensor. Cheap: no
// pass runs and nothing compiles.
std::shared_ptr<const Executable> BindGeneric(const Executable& generic,
                                              const std::map<std::string, int64_t>& symbols,
                                              std::string shape_key);

}  // namespace kiln
