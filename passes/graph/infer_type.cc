// InferType: fills in the type of every node (SPEC.md §1).
//
//   before:  %1 = add(%x, %b)                  where %x: f32[batch, 10], %b: f32[10]
//   after:   %1: f32[batch, 10] = add(%x, %b)
//
// A module pass, so it also types functions marked skip_optimization: every later stage
// needs types.
#include "ir/type_infer.h"
#include "passes/pass.h"

namespace kiln {

void RegisterInferTypePass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "InferType",
      .opt_level = 0,
      .required = {},
      .options = {},
      .doc = "infer the type of every node",
      .create =
          [](const Attrs&) {
            return CreateModulePass(
                PassInfo{"InferType", 0, {}},
                [](const IRModule& m, const PassContext&) { return InferTypes(m); });
          },
  });
}

}  // namespace kiln
