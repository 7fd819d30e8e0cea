// The default pass pipelines, written in one place.
#pragma once

#include "passes/pass.h"

namespace kiln {

// The graph-level pipeline the engine runs on each specialization. Which of its passes run is
// decided by the PassContext (opt_level, required and disabled passes).
PassPtr DefaultGraphPipeline();

// The loop-level pipeline run on each lowered kernel (after LowerReductions).
PassPtr DefaultLoopPipeline();

}  // namespace kiln
