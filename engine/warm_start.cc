// Warm start (engine.h: SeenShapes, Precompile, the shape log): a process records the shape keys
// it ran; the next one compiles them at start-up, from the disk cache when it has one, so its
// first requests are hits.
#include <algorithm>
#include <shared_mutex>
#include <sstream>

#include "engine/engine.h"
#include "ir/error.h"

namespace kiln {

std::string FormatShapeLog(const Model& model, const std::vector<SeenShape>& shapes) {
  std::string out = StrCat("# kiln shape log of model '", model.name(), "': RUNS NAME=DIMS ...\n");
  for (const SeenShape& s : shapes) {
    out += StrCat(s.runs);
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      out += StrCat(" ", model.graph()->params[i]->name, "=");
      for (size_t d = 0; d < s.inputs[i].size(); ++d) out += StrCat(d ? "x" : "", s.inputs[i][d]);
    }
    out += "\n";
  }
  return out;
}

std::vector<SeenShape> ParseShapeLog(const Model& model, const std::string& text) {
  std::vector<SeenShape> shapes;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    auto fail = [&](const std::string& why) {
      Throw(ErrorCode::kParseError, "shape log line ", number, " '", line, "': ", why);
    };
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string word;
    words >> word;
    SeenShape s;
    try {
      size_t used = 0;
      long long runs = std::stoll(word, &used);
      if (used != word.size() || runs < 0) fail("the run count '" + word + "' is not a count");
      s.runs = static_cast<uint64_t>(runs);
    } catch (const std::logic_error&) {
      fail("the run count '" + word + "' is not a count");
    }
    s.inputs.assign(model.graph()->params.size(), {});
    std::vector<bool> given(s.inputs.size(), false);
    while (words >> word) {
      size_t eq = word.find('=');
      if (eq == std::string::npos) fail("'" + word + "' is not NAME=DIMS");
      const std::string name = word.substr(0, eq);
      auto it = std::find_if(model.graph()->params.begin(), model.graph()->params.end(),
                             [&](const Var& p) { return p->name == name; });
      if (it == model.graph()->params.end()) fail("the model has no input '" + name + "'");
      const size_t i = static_cast<size_t>(it - model.graph()->params.begin());
      if (given[i]) fail("input '" + name + "' given twice");
      given[i] = true;
      std::istringstream dims(word.substr(eq + 1));
      for (std::string d; std::getline(dims, d, 'x');) {
        try {
          size_t used = 0;
          long long v = std::stoll(d, &used);
          if (used != d.size() || v < 0) fail("dim '" + d + "' of input '" + name + "'");
          s.inputs[i].push_back(v);
        } catch (const std::logic_error&) {
          fail("dim '" + d + "' of input '" + name + "'");
        }
      }
    }
    for (size_t i = 0; i < given.size(); ++i)
      if (!given[i]) fail("no dims for input '" + model.graph()->params[i]->name + "'");
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<SeenShape> Engine::SeenShapes(const Model& model) const {
  std::vector<SeenShape> out;
  if (!model.value_inputs().empty()) return out;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& [hash, spec] : cache_) {
      if (spec->model_id != model.id()) continue;
      // The signature is, per input, its dtype, rank and dims (dispatch.cc).
      SeenShape s;
      const std::vector<int64_t>& sig = spec->signature;
      for (size_t i = 0; i + 1 < sig.size();) {
        const int64_t rank = sig[i + 1];
        s.inputs.emplace_back(sig.begin() + static_cast<std::ptrdiff_t>(i + 2),
                              sig.begin() + static_cast<std::ptrdiff_t>(i + 2 + rank));
        i += 2 + static_cast<size_t>(rank);
      }
      // The miss that made it counts as a run.
      s.runs = spec->lookups.load(std::memory_order_relaxed) + 1;
      out.push_back(std::move(s));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SeenShape& a, const SeenShape& b) { return a.runs > b.runs; });
  return out;
}

void Engine::Precompile(const Model& model, const std::vector<SeenShape>& shapes) {
  if (model.segments())
    Throw(ErrorCode::kUnsupported, "model '", model.name(),
          "' runs in segments (it has a data-dependent op): its later segments' shapes are "
          "known only once it runs");
  bool queued = false;
  for (const SeenShape& s : shapes) {
    if (s.inputs.size() != model.graph()->params.size())
      Throw(ErrorCode::kInvalidArgument, "model '", model.name(), "': a shape of ", s.inputs.size(),
            " inputs, expected ", model.graph()->params.size());
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const TensorTypeNode* t = AsTensor(model.graph()->params[i]->type);
      inputs.push_back(Tensor::Empty(t->dtype, s.inputs[i]));
    }
    const uint64_t key_hash = ShapeKeyHash(model, inputs);
    Tier cached = Tier::kSpecialized;
    bool found = false;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (Specialization* spec = FindLocked(model, key_hash, inputs)) {
        found = true;
        cached = spec->exe->tier;
      }
    }
    if (!found) {
      GetOrBuild(model, key_hash, inputs);  // checks the inputs as a run does
    } else if (cached == Tier::kGeneric) {
      // Replaces the generic entry.
      QueueSpecialization(model, key_hash, inputs, BindInputs(model, inputs));
      queued = true;
    }
  }
  if (queued) WaitForBackgroundCompiles();
}

}  // namespace kiln
