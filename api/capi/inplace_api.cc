// Runs into caller-given outputs without allocating: kiln_engine_run's way for the serving
// case (every output given in place) and prepared bindings (kiln_binding, names resolved once).
// The engine's hit path allocates nothing; these add no allocation on top of it once a shape is
// warm, so a server's steady state does no heap work per request.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/capi/capi_internal.h"
#include "ir/error.h"
#include "ir/type_infer.h"

struct kiln_binding {
  kiln::Engine* engine = nullptr;
  const kiln_model* model = nullptr;
  // In model order; a slot is bound once its tensor is set (a copy sharing the handle's
  // buffer, so the handle may be destroyed while the binding holds it).
  std::vector<kiln::Tensor> inputs, outputs;
  std::vector<bool> input_bound, output_bound;
};

namespace {

using kiln::ErrorCode;
using kiln::Throw;
using kiln_capi::Matches;

}  // namespace

namespace kiln_capi {

void RunInPlace(kiln::Engine& engine, const kiln_model& m, std::span<const kiln::Tensor> in,
                std::span<const kiln::Tensor> out, const char* fn) {
  try {
    engine.Run(*m.model, in, out);
  } catch (const kiln::Error& e) {
    // A model run in segments names the output and the size this run made itself.
    if (e.code() != ErrorCode::kInvalidArgument || m.model->segments()) throw;
    // A concrete dim of an output is wrong: name the output (only on this error path).
    std::vector<kiln::Tensor> inputs(in.begin(), in.end());
    std::vector<std::string> want = ExpectedOutputTypes(m, inputs);
    for (size_t j = 0; j < out.size(); ++j)
      if (want[j] != out[j].TypeString())
        Throw(ErrorCode::kInvalidArgument, fn, ": model '", m.model->name(), "': output '",
              m.outputs[j].name, "': expected ", want[j], ", given ", out[j].TypeString());
    throw;
  }
}

namespace {

// The tensors of this thread's kiln_engine_run calls on the way in, kept between calls so that
// a warm run copies handles' tensors into them without allocating: a copy over a tensor of the
// same rank reuses its shape's storage. Emptied (keeping that storage) when the call returns, so
// no caller buffer is kept alive by it.
struct RunScratch {
  std::vector<kiln::Tensor> in, out;
  bool busy = false;  // a kiln_engine_run of this thread is using it (a pass hook's nested run)
};
thread_local RunScratch tls_scratch;

// Index of the model input or output that `name` names (by position without names); -1 if none.
int IoIndex(const std::vector<kiln_model::Io>& ios, const char* const* names, size_t i) {
  if (!names) return static_cast<int>(i);
  if (!names[i]) return -1;
  for (size_t k = 0; k < ios.size(); ++k)
    if (ios[k].name == names[i]) return static_cast<int>(k);
  return -1;
}

}  // namespace

bool RunInPlaceFast(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                    const char* const* input_names, const kiln_tensor* const* inputs,
                    size_t num_outputs, const char* const* output_names, kiln_tensor** outputs) {
  constexpr size_t kMaxIo = 32;
  if (!engine || !model || (num_inputs && !inputs) || !outputs) return false;
  const kiln_model& m = *model;
  if (num_inputs != m.inputs.size() || num_outputs != m.outputs.size() || num_inputs > kMaxIo ||
      num_outputs > kMaxIo || !num_outputs || tls_scratch.busy || m.sequence_outputs)
    return false;
  // Each model input's tensor; every slot named once, every type matching.
  const kiln_tensor* by_input[kMaxIo] = {};
  for (size_t i = 0; i < num_inputs; ++i) {
    const int k = IoIndex(m.inputs, input_names, i);
    if (k < 0 || by_input[k] || !inputs[i] || !Matches(m.inputs[k].type, inputs[i]->t))
      return false;
    by_input[k] = inputs[i];
  }
  for (size_t j = 0; j < num_outputs; ++j)
    if (IoIndex(m.outputs, output_names, j) != static_cast<int>(j) || !outputs[j] ||
        !Matches(m.outputs[j].type, outputs[j]->t))
      return false;

  RunScratch& scratch = tls_scratch;
  if (scratch.in.size() < num_inputs) scratch.in.resize(num_inputs);
  if (scratch.out.size() < num_outputs) scratch.out.resize(num_outputs);
  static const kiln::Tensor kNone;
  struct Release {
    RunScratch& s;
    size_t ni, no;
    ~Release() {
      for (size_t i = 0; i < ni; ++i) s.in[i] = kNone;  // copy-assigned: keeps shape storage
      for (size_t j = 0; j < no; ++j) s.out[j] = kNone;
      s.busy = false;
    }
  } release{scratch, num_inputs, num_outputs};
  scratch.busy = true;
  for (size_t k = 0; k < num_inputs; ++k) scratch.in[k] = by_input[k]->t;
  for (size_t j = 0; j < num_outputs; ++j) scratch.out[j] = outputs[j]->t;
  RunInPlace(*engine->engine, m, std::span<const kiln::Tensor>(scratch.in.data(), num_inputs),
             std::span<const kiln::Tensor>(scratch.out.data(), num_outputs), "kiln_engine_run");
  return true;
}

}  // namespace kiln_capi

namespace {

// Binds `t` to the model input (or output) named `name`: the name looked up (kNotFound naming
// the model's), the type checked (kInvalidArgument naming the slot), the tensor copied into the
// slot (copy-assigned: it reuses the slot's shape storage).
void BindSlot(kiln_binding& b, bool input, const char* name, const kiln::Tensor& t,
              const char* fn) {
  const kiln_model& m = *b.model;
  const std::vector<kiln_model::Io>& ios = input ? m.inputs : m.outputs;
  const char* kind = input ? "input" : "output";
  size_t k = 0;
  while (k < ios.size() && ios[k].name != name) ++k;
  if (k == ios.size()) {
    std::vector<std::string> known;
    for (const kiln_model::Io& io : ios) known.push_back(io.name);
    Throw(ErrorCode::kNotFound, fn, ": model '", m.model->name(), "' has no ", kind, " '", name,
          "' (its ", kind, "s: ", kiln_capi::Join(known, ", "), ")");
  }
  if (!Matches(ios[k].type, t))
    Throw(ErrorCode::kInvalidArgument, fn, ": model '", m.model->name(), "': ", kind, " '", name,
          "': expected ", kiln::TypeToString(ios[k].type), ", given ", t.TypeString());
  (input ? b.inputs : b.outputs)[k] = t;
  (input ? b.input_bound : b.output_bound)[k] = true;
}

// kInvalidArgument naming the first slot of `ios` not bound.
void CheckAllBound(const kiln_model& m, const std::vector<kiln_model::Io>& ios,
                   const std::vector<bool>& bound, const char* kind, const char* fn) {
  for (size_t k = 0; k < ios.size(); ++k)
    if (!bound[k])
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", m.model->name(), "': ", kind, " '",
            ios[k].name, "' is not bound");
}

}  // namespace

extern "C" {

kiln_status kiln_binding_create(kiln_engine* engine, const kiln_model* model, kiln_binding** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(out);
  kiln_capi::RequireTensorOutputs(*model, __func__);
  auto b = std::make_unique<kiln_binding>();
  b->engine = engine->engine.get();
  b->model = model;
  b->inputs.resize(model->inputs.size());
  b->outputs.resize(model->outputs.size());
  b->input_bound.assign(model->inputs.size(), false);
  b->output_bound.assign(model->outputs.size(), false);
  *out = b.release();
  KILN_API_END
}

void kiln_binding_destroy(kiln_binding* binding) {
  delete binding;
}

kiln_status kiln_binding_bind_input(kiln_binding* binding, const char* name,
                                    const kiln_tensor* tensor) {
  KILN_API_BEGIN
  KILN_REQUIRE(binding);
  KILN_REQUIRE(name);
  KILN_REQUIRE(tensor);
  BindSlot(*binding, /*input=*/true, name, tensor->t, __func__);
  KILN_API_END
}

kiln_status kiln_binding_bind_output(kiln_binding* binding, const char* name, kiln_tensor* tensor) {
  KILN_API_BEGIN
  KILN_REQUIRE(binding);
  KILN_REQUIRE(name);
  KILN_REQUIRE(tensor);
  BindSlot(*binding, /*input=*/false, name, tensor->t, __func__);
  KILN_API_END
}

kiln_status kiln_binding_run(kiln_binding* binding) {
  KILN_API_BEGIN
  KILN_REQUIRE(binding);
  const kiln_model& m = *binding->model;
  CheckAllBound(m, m.inputs, binding->input_bound, "input", __func__);
  CheckAllBound(m, m.outputs, binding->output_bound, "output", __func__);
  kiln_capi::RunInPlace(*binding->engine, m, binding->inputs, binding->outputs, __func__);
  KILN_API_END
}

}  // extern "C"
