// Pass instruments observe passes (SPEC.md §2): five hooks, called by PassContext.
//
// Threading: an instrument belongs to the contexts it is installed in; hooks are called on the
// thread that runs the pipeline. Built-in instruments are not meant to be shared by pipelines
// running at the same time.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "passes/pass_context.h"

namespace kiln {

class PassInstrument {
 public:
  explicit PassInstrument(std::string name) : name_(std::move(name)) {}
  virtual ~PassInstrument() = default;
  const std::string& name() const { return name_; }

  virtual void EnterPassContext() {}
  virtual void ExitPassContext() {}
  // May veto a pass that is not required.
  virtual bool ShouldRun(const IRModule&, const PassInfo&) { return true; }
  virtual void RunBeforePass(const IRModule&, const PassInfo&) {}
  virtual void RunAfterPass(const IRModule&, const PassInfo&) {}

 private:
  std::string name_;
};

// Wall time per pass, nested: a pass that runs passes (Sequential, required passes) is their
// parent. `self` is total minus the children's total.
class PassTimingInstrument : public PassInstrument {
 public:
  struct Entry {
    std::string name;
    int calls = 0;
    double total_ms = 0;
    double self_ms = 0;
    std::vector<Entry> children;  // in first-run order, merged by name
  };
  PassTimingInstrument() : PassInstrument("PassTiming") {}
  void EnterPassContext() override;
  void RunBeforePass(const IRModule&, const PassInfo& info) override;
  void RunAfterPass(const IRModule&, const PassInfo& info) override;

  // The top-level entries recorded since the context was entered.
  const std::vector<Entry>& report() const { return roots_; }
  // An indented table: `name  calls  total ms  self ms`.
  std::string Render() const;
  // Whether a pass of that name ran (anywhere in the tree).
  bool Ran(const std::string& pass) const;

 private:
  struct Open {
    std::string name;
    std::chrono::steady_clock::time_point start;
    double children_ms = 0;
  };
  std::vector<Entry> roots_;
  std::vector<Open> open_;
};

// Prints the module before and/or after passes whose name matches (empty = all passes).
class PrintIRInstrument : public PassInstrument {
 public:
  // `sink` receives each print-out; by default they go to stderr.
  PrintIRInstrument(std::vector<std::string> passes, bool before, bool after,
                    std::function<void(const std::string&)> sink = nullptr);
  void RunBeforePass(const IRModule& m, const PassInfo& info) override;
  void RunAfterPass(const IRModule& m, const PassInfo& info) override;

 private:
  bool Matches(const std::string& pass) const;
  std::vector<std::string> passes_;
  bool before_, after_;
  std::function<void(const std::string&)> sink_;
};

// Writes the module to `dir` after each pass that changed it: `NNN_<pass>.kir`, numbered by
// step, plus `000_input.kir` when the context is entered and the first pass runs.
class DumpIRInstrument : public PassInstrument {
 public:
  explicit DumpIRInstrument(std::string dir);
  void EnterPassContext() override;
  void RunBeforePass(const IRModule& m, const PassInfo& info) override;
  void RunAfterPass(const IRModule& m, const PassInfo& info) override;
  const std::vector<std::string>& files() const { return files_; }

 private:
  void Write(const std::string& label, const IRModule& m);
  std::string dir_;
  int step_ = 0;
  size_t last_hash_ = 0;
  bool have_last_ = false;
  std::vector<std::string> files_;
};

// Checks the module is well formed after every pass (VerifyModule); a failure is an error
// naming the pass. After InferType has run, types must be complete too.
class IRVerifierInstrument : public PassInstrument {
 public:
  IRVerifierInstrument() : PassInstrument("IRVerifier") {}
  void EnterPassContext() override { typed_ = false; }
  void RunAfterPass(const IRModule& m, const PassInfo& info) override;

 private:
  bool typed_ = false;
};

// Checks: every variable is defined (a parameter of an enclosing function) before it is used,
// no node is null, call argument counts match their op, and (if `require_types`) every node
// has a complete type. Throws kInvalidArgument naming the function and node.
void VerifyModule(const IRModule& m, bool require_types);

}  // namespace kiln
