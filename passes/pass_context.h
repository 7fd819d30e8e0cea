// PassContext: the configuration a pipeline runs under (SPEC.md §2).
//
// Contexts nest as a scoped, thread-local stack: PassContextScope makes a context Current() on
// its thread until it closes. Each thread starts with its own default context (opt_level 2,
// no instruments). A PassContext is not synchronized: one context is used by one thread at a
// time; share configuration between threads by copying it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/expr.h"

namespace kiln {

struct PassInfo {
  std::string name;
  int opt_level = 0;                  // the lowest opt_level at which the pass is enabled
  std::vector<std::string> required;  // passes (by registry name) that must run first
};

class PassInstrument;
using InstrumentPtr = std::shared_ptr<PassInstrument>;

// Registers a config key with its kind and default; keys must be registered before any
// context sets them. Registering the same key twice with the same kind is allowed (no-op).
void RegisterPassConfig(const std::string& key, AttrKind kind, AttrValue default_value,
                        const std::string& doc = "");
struct PassConfigInfo {
  std::string key;
  AttrKind kind;
  AttrValue default_value;
  std::string doc;
};
std::vector<PassConfigInfo> ListPassConfigs();

// One message reported by a pass: warnings do not stop a pipeline.
struct Diagnostic {
  enum class Level { kNote, kWarning, kError };
  Level level;
  std::string pass;
  std::string message;
};

class PassContext {
 public:
  PassContext() = default;

  int opt_level = 2;
  std::vector<std::string> required_passes;
  std::vector<std::string> disabled_passes;

  // Sets a registered config key. An unknown key or a value of the wrong kind is
  // kInvalidArgument with the list of known keys. Ints convert to floats and bools.
  void SetConfig(const std::string& key, AttrValue value);
  // The value set here, else the registered default. Unknown keys are kInvalidArgument.
  AttrValue GetConfig(const std::string& key) const;
  int64_t GetConfigInt(const std::string& key) const;
  double GetConfigFloat(const std::string& key) const;
  bool GetConfigBool(const std::string& key) const;
  std::string GetConfigString(const std::string& key) const;
  const std::map<std::string, AttrValue>& config() const { return config_; }

  const std::vector<InstrumentPtr>& instruments() const { return instruments_; }
  // Set before the context is entered. To swap while entered, use OverrideInstruments.
  void SetInstruments(std::vector<InstrumentPtr> instruments) {
    instruments_ = std::move(instruments);
  }
  // Replaces the instruments in place: the old ones get their exit hook, the new ones their
  // enter hook (with the rules of EnterInstruments/ExitInstruments).
  void OverrideInstruments(std::vector<InstrumentPtr> instruments);

  // A pass runs if it is required here, or it is not disabled and its opt_level is at most
  // this context's.
  bool PassEnabled(const PassInfo& info) const;

  // The instrument protocol (SPEC.md §2), called by PassContextScope and by Pass.
  // Enter hooks run in order; if one throws, those already entered get their exit hook, the
  // instrument list is cleared and the exception propagates.
  void EnterInstruments();
  // Exit hooks run in order; if one throws, the instrument list is cleared and it propagates.
  void ExitInstruments();
  // should-run is asked of every instrument unless `required`; if none vetoes, every
  // run-before hook runs in order. Returns whether the pass should run.
  bool InstrumentBeforePass(const IRModule& module, const PassInfo& info, bool required) const;
  void InstrumentAfterPass(const IRModule& module, const PassInfo& info) const;

  void Report(Diagnostic d) const { diagnostics_.push_back(std::move(d)); }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

  // The innermost context entered on this thread, or this thread's default context.
  static PassContext& Current();

 private:
  std::map<std::string, AttrValue> config_;
  std::vector<InstrumentPtr> instruments_;
  mutable std::vector<Diagnostic> diagnostics_;
  friend class PassContextScope;
};

// Makes `ctx` Current() on this thread and runs the instruments' enter hooks. Close() runs the
// exit hooks and restores the previous context, letting an exit-hook exception propagate; the
// destructor closes a scope that was not closed, swallowing such an exception (a destructor
// must not throw) after recording it as an error diagnostic.
class PassContextScope {
 public:
  explicit PassContextScope(std::shared_ptr<PassContext> ctx);
  ~PassContextScope();
  PassContextScope(const PassContextScope&) = delete;
  PassContextScope& operator=(const PassContextScope&) = delete;
  void Close();
  PassContext& context() { return *ctx_; }

 private:
  std::shared_ptr<PassContext> ctx_;
  bool open_ = false;
};

}  // namespace kiln
