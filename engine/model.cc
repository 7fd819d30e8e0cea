#include "engine/model.h"

#include <atomic>

#include "engine/segments.h"
#include "ir/dynamic.h"
#include "ir/error.h"
#include "ir/type_infer.h"

namespace kiln {

std::shared_ptr<const Model> Model::Create(Function graph, std::string name) {
  auto fail = [&](ErrorCode code, const std::string& why) {
    Throw(code, "model '", name, "': ", why);
  };
  if (!graph) fail(ErrorCode::kInvalidArgument, "the graph is null");
  for (size_t i = 0; i < graph->params.size(); ++i) {
    const Var& p = graph->params[i];
    if (!AsTensor(p->type))
      fail(ErrorCode::kInvalidArgument,
           StrCat("input ", i, " '", p->name, "' must have a tensor type, has ",
                  TypeToString(p->type)));
  }
  std::vector<DimConstraint> constraints;
  Function typed;
  try {
    typed = InferTypes(graph, &constraints);
  } catch (const Error& e) {
    fail(e.code(), e.what());
  }
  static std::atomic<uint64_t> next_id{1};
  std::shared_ptr<Model> m(new Model());
  m->id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  m->name_ = std::move(name);
  m->graph_ = std::move(typed);
  m->constraints_ = std::move(constraints);
  m->dynamic_ = HasDynamicOps(m->graph_);
  m->value_inputs_ = ValueInputs(m->graph_);
  m->is_value_input_.assign(m->graph_->params.size(), false);
  for (int i : m->value_inputs_) m->is_value_input_[i] = true;
  m->segments_ = SplitAtDataDependentOp(m->graph_, m->name_);
  return m;
}

}  // namespace kiln
