#include "passes/pipeline.h"

#include "ir/error.h"
#include "ir/loop/loop_text.h"
#include "passes/lower_to_loops.h"

namespace kiln {

PassPtr DefaultGraphPipeline() {
  PassRegistry& r = PassRegistry::Global();
  std::vector<PassPtr> p;
  // Every pass below reads types.
  p.push_back(r.Create("InferType"));
  // Before FoldConstant: turning batch_norm into a scale and shift of constants is what lets
  // FoldConstant fold them (into the preceding matmul's weights, too).
  p.push_back(r.Create("SimplifyInference"));
  p.push_back(r.Create("FoldConstant"));
  // After both, which leave a batch_norm as a scale and a shift of constants; at opt level 3
  // only (it rounds differently from the graph it folds).
  p.push_back(r.Create("FoldScaleAxis"));
  // After folding: constants folded into ones and zeros become identities to remove.
  p.push_back(r.Create("SimplifyExpr"));
  // After simplification, which makes more expressions look alike.
  p.push_back(r.Create("CommonSubexprElimination"));
  // After CSE, whose merging leaves tuple fields and branches unused.
  p.push_back(r.Create("DeadCodeElimination"));
  // After folding (its weights final); before ChannelsLastConvs and WinogradConvs, which choose
  // a conv's form from its kernel.
  p.push_back(r.Create("TrimConvTaps"));
  // After folding (its weights final) and CSE (one conv per distinct conv); before FuseOps,
  // which fuses the chains' elementwise ops into conv_nhwc's kernels.
  p.push_back(r.Create("ChannelsLastConvs"));
  // After ChannelsLastConvs, whose conv_nhwc calls it marks.
  p.push_back(r.Create("WinogradConvs"));
  // After ChannelsLastConvs, whose transposes back to NCHW it reads through; before
  // PackConstantWeights, which packs the matmul's weights it makes.
  p.push_back(r.Create("ConvTransposeAsMatmul"));
  // After folding, so the weights it packs are final; before FuseOps, which makes the gemm a
  // kernel whose parameter the packed constant becomes.
  p.push_back(r.Create("PackConstantWeights"));
  // Last: no graph pass looks inside the primitive functions it creates.
  p.push_back(r.Create("FuseOps"));
  return Sequential(std::move(p), "GraphPipeline");
}

}  // namespace kiln

namespace kiln {

PassPtr DefaultLoopPipeline() {
  PassRegistry& r = PassRegistry::Global();
  std::vector<PassPtr> p;
  // Index math first, so that later passes see constant extents where there are any.
  p.push_back(r.Create("LoopSimplify"));
  p.push_back(r.Create("RemoveTrivialLoops"));
  // Tiling reorders loops; parallelizing and vectorizing then pick the outermost and the
  // innermost loops of the tiled nest.
  // A 1x1 conv's pixel loops become one column loop for TileLoops to block.
  p.push_back(r.Create("CollapseLoops", Attrs{{"column_walks_only", true}}));
  p.push_back(r.Create("TileLoops"));
  // After tiling (which wants a matmul's loops as lowered), before parallelizing (which then
  // hands out fused rows).
  p.push_back(r.Create("FuseLoops"));
  // After fusing (which matches loops by their row variables), so short image rows run as
  // one long loop for VectorizeLoops.
  p.push_back(r.Create("CollapseLoops"));
  // After collapsing (a transpose's pixel loops are one loop), before parallelizing (which then
  // hands out the blocks).
  p.push_back(r.Create("BlockTransposes"));
  p.push_back(r.Create("ParallelizeLoops"));
  p.push_back(r.Create("VectorizeLoops"));
  p.push_back(r.Create("UnrollLoops"));
  // Flattening rewrites every index into one offset: after the passes that read indices.
  p.push_back(r.Create("FlattenBuffers"));
  p.push_back(r.Create("LoopSimplify"));
  // Last: buffer lifetimes are final only once every loop transformation is done.
  p.push_back(r.Create("PlanStorage"));
  return Sequential(std::move(p), "LoopPipeline");
}

PassPtr GpuLoopPipeline() {
  PassRegistry& r = PassRegistry::Global();
  std::vector<PassPtr> p;
  p.push_back(r.Create("LoopSimplify"));
  p.push_back(r.Create("RemoveTrivialLoops"));
  p.push_back(r.Create("FuseLoops"));
  p.push_back(r.Create("CollapseLoops"));
  p.push_back(r.Create("ParallelizeLoops"));
  p.push_back(r.Create("FlattenBuffers"));
  p.push_back(r.Create("LoopSimplify"));
  // Shrinks and places local buffers: inside a parallel loop they become a thread's own.
  p.push_back(r.Create("PlanStorage"));
  return Sequential(std::move(p), "GpuLoopPipeline");
}

std::shared_ptr<PassContext> GpuLoopContext() {
  auto ctx = std::make_shared<PassContext>();
  const PassContext& current = PassContext::Current();
  ctx->opt_level = current.opt_level;
  ctx->required_passes = current.required_passes;
  ctx->disabled_passes = current.disabled_passes;
  for (const auto& [key, value] : current.config()) ctx->SetConfig(key, value);
  ctx->SetConfig("parallelize.min_work", int64_t{1});
  ctx->SetConfig("parallelize.collapse_below", int64_t{1} << 40);
  return ctx;
}

loop::PrimFunc RunLoopPipeline(const loop::PrimFunc& f, const std::string& pipeline) {
  const bool gpu = pipeline == "gpu";
  if (!gpu && pipeline != "cpu")
    Throw(ErrorCode::kNotFound, "no loop pipeline '", pipeline, "' (there are: cpu, gpu)");
  IRModule m = IRModule().WithPrimFunc(f->name, LowerReductions(f));
  if (gpu) {
    PassContextScope scope(GpuLoopContext());
    m = (*GpuLoopPipeline())(m);
    scope.Close();
  } else {
    m = (*DefaultLoopPipeline())(m);
  }
  loop::PrimFunc out = m.prim_funcs().at(f->name);
  loop::Verify(out, /*allow_reduce=*/false);
  return out;
}

}  // namespace kiln
