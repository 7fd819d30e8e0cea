// Loop IR -> LLVM IR, for the files in jit/ only (it names LLVM types). llvm_codegen.cc emits
// (with llvm_emit_expr.cc and llvm_emit_stmt.cc); llvm_jit.cc optimizes, compiles and links
// (BuildLLVM).
#pragma once

#include <vector>

#include "ir/loop/loop.h"
#include "jit/kernel.h"
#include "llvm/IR/Module.h"

namespace kiln {

// Adds one external kernel per PrimFunc to `module` (the KernelFn calling convention, named
// after the function) with its internal helpers, and verifies them. kCompileError naming the
// function for a nameless, duplicate or library-clashing name, a Reduce left in the IR, or IR
// that LLVM rejects: bad IR never reaches the optimizer.
void EmitKernels(llvm::Module& module, const std::vector<loop::PrimFunc>& funcs,
                 const CodegenOptions& options);

}  // namespace kiln
