#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unordered_set>

#include "ir/error.h"
#include "ir/structural.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "ir/visitor.h"
#include "passes/instrument.h"

namespace kiln {

// ---- PassTimingInstrument ----

void PassTimingInstrument::EnterPassContext() {
  roots_.clear();
  open_.clear();
}

void PassTimingInstrument::RunBeforePass(const IRModule&, const PassInfo& info) {
  open_.push_back(Open{info.name, std::chrono::steady_clock::now(), 0});
}

void PassTimingInstrument::RunAfterPass(const IRModule&, const PassInfo& info) {
  if (open_.empty() || open_.back().name != info.name) return;  // before-hook was vetoed
  Open o = open_.back();
  open_.pop_back();
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - o.start).count();
  // Find the entry list of the parent: walk the open stack from the roots.
  std::vector<Entry>* level = &roots_;
  for (const Open& parent : open_) {
    auto it = std::find_if(level->begin(), level->end(),
                           [&](const Entry& e) { return e.name == parent.name; });
    if (it == level->end()) {
      level->push_back(Entry{parent.name, 0, 0, 0, {}});
      it = level->end() - 1;
    }
    level = &it->children;
  }
  auto it =
      std::find_if(level->begin(), level->end(), [&](const Entry& e) { return e.name == o.name; });
  if (it == level->end()) {
    level->push_back(Entry{o.name, 0, 0, 0, {}});
    it = level->end() - 1;
  }
  it->calls += 1;
  it->total_ms += ms;
  it->self_ms += ms - o.children_ms;
  if (!open_.empty()) open_.back().children_ms += ms;
}

std::string PassTimingInstrument::Render() const {
  std::string out = "pass                                      calls    total ms     self ms\n";
  std::function<void(const std::vector<Entry>&, int)> walk = [&](const std::vector<Entry>& es,
                                                                 int depth) {
    for (const Entry& e : es) {
      char line[256];
      std::string name = std::string(depth * 2, ' ') + e.name;
      std::snprintf(line, sizeof line, "%-40s %6d %11.3f %11.3f\n", name.c_str(), e.calls,
                    e.total_ms, e.self_ms);
      out += line;
      walk(e.children, depth + 1);
    }
  };
  walk(roots_, 0);
  return out;
}

bool PassTimingInstrument::Ran(const std::string& pass) const {
  std::function<bool(const std::vector<Entry>&)> find = [&](const std::vector<Entry>& es) {
    for (const Entry& e : es)
      if (e.name == pass || find(e.children)) return true;
    return false;
  };
  return find(roots_);
}

// ---- PrintIRInstrument ----

PrintIRInstrument::PrintIRInstrument(std::vector<std::string> passes, bool before, bool after,
                                     std::function<void(const std::string&)> sink)
    : PassInstrument("PrintIR"),
      passes_(std::move(passes)),
      before_(before),
      after_(after),
      sink_(std::move(sink)) {
  if (!sink_) sink_ = [](const std::string& s) { std::fputs(s.c_str(), stderr); };
}

bool PrintIRInstrument::Matches(const std::string& pass) const {
  return passes_.empty() || std::find(passes_.begin(), passes_.end(), pass) != passes_.end();
}

void PrintIRInstrument::RunBeforePass(const IRModule& m, const PassInfo& info) {
  if (before_ && Matches(info.name)) sink_("// IR before " + info.name + "\n" + Print(m) + "\n");
}

void PrintIRInstrument::RunAfterPass(const IRModule& m, const PassInfo& info) {
  if (after_ && Matches(info.name)) sink_("// IR after " + info.name + "\n" + Print(m) + "\n");
}

// ---- DumpIRInstrument ----

DumpIRInstrument::DumpIRInstrument(std::string dir)
    : PassInstrument("DumpIR"), dir_(std::move(dir)) {}

void DumpIRInstrument::EnterPassContext() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) Throw(ErrorCode::kInvalidArgument, "DumpIR: cannot create '", dir_, "': ", ec.message());
  step_ = 0;
  have_last_ = false;
  files_.clear();
}

void DumpIRInstrument::Write(const std::string& label, const IRModule& m) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%03d_", step_++);
  std::string path = (std::filesystem::path(dir_) / (prefix + label + ".kir")).string();
  std::ofstream f(path);
  f << Print(m);
  if (!f) Throw(ErrorCode::kInvalidArgument, "DumpIR: cannot write '", path, "'");
  files_.push_back(path);
}

void DumpIRInstrument::RunBeforePass(const IRModule& m, const PassInfo&) {
  if (have_last_) return;
  last_hash_ = StructuralHash(m);
  have_last_ = true;
  Write("input", m);
}

void DumpIRInstrument::RunAfterPass(const IRModule& m, const PassInfo& info) {
  size_t h = StructuralHash(m);
  if (have_last_ && h == last_hash_) return;  // unchanged: nothing new to look at
  last_hash_ = h;
  have_last_ = true;
  Write(info.name, m);
}

// ---- IRVerifierInstrument ----

void IRVerifierInstrument::RunAfterPass(const IRModule& m, const PassInfo& info) {
  if (info.name == "InferType") typed_ = true;
  try {
    VerifyModule(m, typed_);
  } catch (const Error& e) {
    Throw(ErrorCode::kInternal, "IR verifier after pass '", info.name, "': ", e.what());
  }
}

namespace {

// Walks one function and the functions nested in it, with the set of variables in scope.
void VerifyFunction(const FunctionNode* f, std::unordered_set<const ExprNode*> scope,
                    bool require_types, const std::string& where) {
  for (const Var& p : f->params) {
    if (!p) Throw(ErrorCode::kInvalidArgument, where, ": a parameter is null");
    scope.insert(p.get());
  }
  if (!f->body) Throw(ErrorCode::kInvalidArgument, where, ": the body is null");
  for (const Expr& e : PostOrder(f->body)) {
    if (require_types && !IsComplete(e->type))
      Throw(ErrorCode::kInvalidArgument, where, ": ", DescribeNode(e), " has no complete type (",
            TypeToString(e->type), ")");
    switch (e->kind) {
      case ExprKind::kVar:
        if (!scope.count(e.get()))
          Throw(ErrorCode::kInvalidArgument, where, ": variable %", e->name,
                " is used but not defined in scope");
        break;
      case ExprKind::kCall: {
        const CallNode* c = AsCall(e);
        for (const Expr& a : c->args)
          if (!a) Throw(ErrorCode::kInvalidArgument, where, ": a call has a null argument");
        if (c->op) {
          int n = static_cast<int>(c->args.size());
          if (n < c->op->min_inputs || (c->op->max_inputs >= 0 && n > c->op->max_inputs))
            Throw(ErrorCode::kInvalidArgument, where, ": ", c->op->name, " has ", n, " inputs");
        } else if (!c->fn) {
          Throw(ErrorCode::kInvalidArgument, where, ": a call has neither op nor callee");
        }
        break;
      }
      case ExprKind::kFunction:
        VerifyFunction(AsFunction(e), scope, require_types, where + " (nested function)");
        break;
      default:
        break;
    }
  }
}

}  // namespace

void VerifyModule(const IRModule& m, bool require_types) {
  for (const auto& [name, f] : m.functions()) {
    if (!f) Throw(ErrorCode::kInvalidArgument, "@", name, " is null");
    VerifyFunction(f.get(), {}, require_types, "@" + name);
  }
}

}  // namespace kiln
