// The default pass pipelines, written in one place.
#pragma once

#include <memory>
#include <string>

#include "ir/loop/loop.h"
#include "passes/pass.h"
#include "passes/pass_context.h"

namespace kiln {

// The graph-level pipeline the engine runs on each specialization. Which of its passes run is
// decided by the PassContext (opt_level, required and disabled passes).
PassPtr DefaultGraphPipeline();

// The loop-level pipeline run on each lowered kernel (after LowerReductions).
PassPtr DefaultLoopPipeline();

// The loop-level pipeline for kernels that become CUDA C (jit/cuda_codegen.h): no tiling for
// CPU registers, no vector lanes; loops fused so a row's temporaries live inside its loop, and
// the outermost loop of each nest parallel wherever it is safe, whatever its size (a GPU wants
// every thread it can get). Run it under GpuLoopContext().
PassPtr GpuLoopPipeline();
// A copy of the current PassContext's configuration (no instruments) with the settings
// GpuLoopPipeline relies on: ParallelizeLoops takes any nest that stores something and
// collapses loops of any constant extent.
std::shared_ptr<PassContext> GpuLoopContext();

// A lowered kernel through the loop pipeline a code generator names (jit/kernel.h
// CodeGenerator::loop_pipeline), then loop::Verify'd with no Reduce left:
//   "cpu": LowerReductions, then DefaultLoopPipeline under the current PassContext;
//   "gpu": LowerReductions, then GpuLoopPipeline under GpuLoopContext().
// Another name is kNotFound listing these.
loop::PrimFunc RunLoopPipeline(const loop::PrimFunc& f, const std::string& pipeline);

}  // namespace kiln
