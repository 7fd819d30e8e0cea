// Model: a graph function with symbolic input shapes (`x: f32[batch, 8]`) and its weights,
// which are the Constants inside the graph. What an application loads once and runs many
// times, with different shapes, through an Engine.
//
// Immutable once created and shared between threads (hold it by shared_ptr<const Model>). A
// model knows nothing of engines: each Engine keeps its own specializations of it, keyed by
// the model's id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace kiln {

struct Segments;

// enable_shared_from_this: the engine's background compiles keep the models they compile alive.
class Model : public std::enable_shared_from_this<Model> {
 public:
  // Validates `graph`: every parameter is annotated with a tensor type (dims may be symbolic),
  // and InferTypes succeeds with the symbolic dims. Errors keep the code of the failure
  // (kTypeError from inference names the node) and are prefixed with `model '<name>': `.
  // An output may be a sequence (ir/sequence.h): a run returns it as its elements, in place,
  // their count known once the run specialized (a caller that regroups them returns the
  // sequence's seq.length as well).
  static std::shared_ptr<const Model> Create(Function graph, std::string name = "model");

  // Unique within the process and never reused, even after the model is destroyed, so an
  // engine's cache can never confuse a new model with an old one at the same address.
  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  // The graph with every node typed (symbolic where the inputs are).
  const Function& graph() const { return graph_; }
  // Constraints on the symbols that inference could not decide (e.g. `seq == 16` for a
  // reshape); checked when a run binds the symbols.
  const std::vector<DimConstraint>& constraints() const { return constraints_; }
  int num_inputs() const { return static_cast<int>(graph_->params.size()); }
  // Whether specialization must resolve shapes computed as values (ir/dynamic.h).
  bool dynamic() const { return dynamic_; }
  // The inputs whose values set shapes (a Reshape's target shape given as an input): their
  // values are part of the shape key, as every input's shape is. Sorted.
  const std::vector<int>& value_inputs() const { return value_inputs_; }
  bool is_value_input(int i) const { return is_value_input_[i]; }
  // Set when the graph holds an op whose result sizes depend on values (nonzero): the model then
  // runs as its segments, each a model of its own (engine/segments.h); null otherwise.
  const std::shared_ptr<const Segments>& segments() const { return segments_; }

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  Model() = default;
  uint64_t id_ = 0;
  std::string name_;
  Function graph_;
  std::vector<DimConstraint> constraints_;
  bool dynamic_ = false;
  std::vector<int> value_inputs_;
  std::vector<bool> is_value_input_;
  std::shared_ptr<const Segments> segments_;
};

using ModelPtr = std::shared_ptr<const Model>;

}  // namespace kiln
