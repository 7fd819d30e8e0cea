// Test helpers for the loop-level passes (tests/passes/loop_*_test.cc): building a kernel,
// running a pass the way the loop pipeline does, printing, and compiling before and after a
// pass to check that the results keep every bit.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/kernel.h"
#include "passes/loop_pass.h"

namespace kiln::test {

// A kernel named `name`; num_inputs < 0: every buffer but the last is an input. Not verified:
// some tests build functions that only the pass under test makes valid.
inline loop::PrimFunc MakePrimFunc(std::vector<loop::Buffer> buffers,
                                   std::vector<loop::Var> scalars, loop::Stmt body,
                                   std::string name = "f", int num_inputs = -1) {
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = std::move(name);
  f->num_inputs = num_inputs >= 0 ? num_inputs : std::max(0, static_cast<int>(buffers.size()) - 1);
  f->buffer_params = std::move(buffers);
  f->scalar_params = std::move(scalars);
  f->body = std::move(body);
  return f;
}

using PassConfig = std::map<std::string, AttrValue>;

// Runs `pass` on `f` the way the loop pipeline does: over an IRModule, under a PassContext with
// `config` that checks that the input is not modified. The result must verify (reductions
// lowered). The context's diagnostics go to `notes` when it is given.
inline loop::PrimFunc RunLoopPass(const PassPtr& pass, const loop::PrimFunc& f,
                                  const PassConfig& config = {},
                                  std::vector<Diagnostic>* notes = nullptr) {
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  for (const auto& [key, value] : config) ctx->SetConfig(key, value);
  PassContextScope scope(ctx);
  IRModule out = (*pass)(IRModule().WithPrimFunc(f->name, f));
  loop::PrimFunc g = out.prim_funcs().at(f->name);
  loop::Verify(g, /*allow_reduce=*/false);
  if (notes) *notes = ctx->diagnostics();
  return g;
}

// The registered pass `name`, alone (not wrapped in a pipeline).
inline loop::PrimFunc RunLoopPass(const std::string& name, const loop::PrimFunc& f,
                                  const PassConfig& config = {},
                                  std::vector<Diagnostic>* notes = nullptr) {
  return RunLoopPass(PassRegistry::Global().Create(name), f, config, notes);
}

// A pipeline string ("LoopSimplify,PlanStorage"), as the compiler's pipelines are written.
inline loop::PrimFunc RunLoopPipeline(const std::string& pipeline, const loop::PrimFunc& f,
                                      const PassConfig& config = {},
                                      std::vector<Diagnostic>* notes = nullptr) {
  return RunLoopPass(ParsePipeline(pipeline), f, config, notes);
}

// Whether the pass registry registered config `key` with the kind and default of `value`, and a
// doc string.
inline bool ConfigRegisteredWithDefault(const std::string& key, const AttrValue& value) {
  PassRegistry::Global();
  for (const PassConfigInfo& c : ListPassConfigs())
    if (c.key == key) return c.kind == KindOf(value) && c.default_value == value && !c.doc.empty();
  return false;
}

// The body of a printed function: the lines between the signature and the closing brace,
// without their first indent, so expectations read like the pass header's examples.
inline std::string BodyText(const loop::PrimFunc& f) {
  std::string text = loop::Print(f);
  size_t start = text.find('\n') + 1;
  size_t end = text.rfind("}");
  std::string out;
  for (size_t pos = start; pos < end;) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    out += (line.rfind("  ", 0) == 0 ? line.substr(2) : line) + "\n";
    pos = nl + 1;
  }
  return out;
}

// How ExecuteOnRandomData fills buffer b: RandomTensor(seed + b) in [lo, hi]. Each test file
// keeps its own values so that its cases see the data they were written against.
struct RandomData {
  uint64_t seed;
  double lo, hi;
};

// Runs `f` compiled with BuildLLVM on seeded random buffers with `scalars`, returning every
// buffer after.
inline std::vector<Tensor> ExecuteOnRandomData(const loop::PrimFunc& f,
                                               const std::vector<int64_t>& scalars,
                                               const RandomData& data) {
  // Shapes are expressions of the scalar parameters: bind them and let the helpers fold.
  struct Bind : loop::Mutator {
    const loop::PrimFuncNode* f;
    const std::vector<int64_t>* values;
    loop::Expr MutateVar(const loop::VarNode* n, const loop::Expr& self) override {
      for (size_t k = 0; k < f->scalar_params.size(); ++k)
        if (n == f->scalar_params[k].get()) return loop::IntImm((*values)[k]);
      return self;
    }
  } bind;
  bind.f = f.get();
  bind.values = &scalars;
  std::vector<Tensor> buffers;
  std::vector<void*> pointers;
  for (size_t b = 0; b < f->buffer_params.size(); ++b) {
    std::vector<int64_t> shape;
    for (const loop::Expr& d : f->buffer_params[b]->shape) {
      int64_t v = 0;
      EXPECT_TRUE(loop::IsConstInt(bind.MutateExpr(d), &v)) << "shape " << loop::Print(d);
      shape.push_back(v);
    }
    buffers.push_back(
        RandomTensor(f->buffer_params[b]->dtype, shape, data.seed + b, data.lo, data.hi));
    pointers.push_back(buffers.back().raw_data());
  }
  // Bit-for-bit comparisons need every multiply-add rounded the same way in both kernels:
  // without contraction, LLVM cannot fuse one into an FMA in one kernel and not the other;
  // without reassociated reductions, it cannot split one kernel's sum into partial sums.
  CodegenOptions exact;
  exact.fp_contract = false;
  exact.reassociate_reductions = false;
  std::unique_ptr<CompiledModule> m = BuildLLVM({f}, exact);
  m->Lookup(f->name)(pointers.data(), scalars.data());
  return buffers;
}

// The kernels before and after a pass leave the same bits in every buffer, for each set of
// scalar arguments.
inline void ExpectSameResults(const loop::PrimFunc& before, const loop::PrimFunc& after,
                              const RandomData& data,
                              const std::vector<std::vector<int64_t>>& scalar_sets = {{}}) {
  for (const std::vector<int64_t>& scalars : scalar_sets) {
    std::vector<Tensor> want = ExecuteOnRandomData(before, scalars, data);
    std::vector<Tensor> got = ExecuteOnRandomData(after, scalars, data);
    for (size_t b = 0; b < want.size(); ++b)
      EXPECT_TRUE(TensorsNear(got[b], want[b], 0, 0))
          << "buffer " << before->buffer_params[b]->name
          << ", scalars[0] = " << (scalars.empty() ? -1 : scalars[0]);
  }
}

// Runs `f` compiled with BuildLLVM on `inputs` (one pointer per input buffer, in order) and an
// f32 output of `out_size` elements, returned. The output starts as 42 everywhere, so an element
// the kernel did not write shows.
inline std::vector<float> RunF32Kernel(const loop::PrimFunc& f, std::vector<void*> inputs,
                                       size_t out_size, std::vector<int64_t> scalars) {
  std::unique_ptr<CompiledModule> mod = BuildLLVM({f});
  std::vector<float> result(out_size, 42.0f);
  inputs.push_back(result.data());
  mod->Lookup(f->name)(inputs.data(), scalars.data());
  return result;
}

}  // namespace kiln::test
