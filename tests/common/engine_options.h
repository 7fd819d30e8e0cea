// EngineOptions for engine tests, set one field at a time (designated initializers would trip
// -Wmissing-field-initializers), and models from text IR.
//
// Eager(): the run compiles its shape before it answers. Tests that count misses, compiles and
// specializations per run, or that test the eager path's single flight, use it; the default
// policy (tiered) serves a new shape from the generic tier and specializes it in the
// background, so those counts move later, on another thread (tests/engine/tiers_test.cc).
#pragma once

#include <functional>
#include <string>

#include "engine/engine.h"
#include "engine/model.h"
#include "ir/text.h"
#include "ir/type_infer.h"

namespace kiln::test {

inline EngineOptions With(const std::function<void(EngineOptions&)>& set) {
  EngineOptions o;
  if (set) set(o);
  return o;
}

inline EngineOptions Eager(const std::function<void(EngineOptions&)>& set = nullptr) {
  EngineOptions o = With(set);
  o.policy = CompilePolicy::kEager;
  return o;
}

// The model of `text`'s @main (ir/text.h), typed.
inline ModelPtr ModelFromText(const std::string& text, const std::string& name = "m") {
  return Model::Create(InferTypes(ParseModule(text)).Lookup("main"), name);
}

}  // namespace kiln::test
