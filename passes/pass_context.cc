#include "passes/pass_context.h"

#include <algorithm>
#include <mutex>

#include "ir/error.h"
#include "passes/instrument.h"
#include "passes/pass.h"

namespace kiln {

namespace {

struct ConfigRegistry {
  std::mutex mu;
  std::map<std::string, PassConfigInfo> keys;
};
ConfigRegistry& Configs() {
  static ConfigRegistry* r = new ConfigRegistry();  // never destroyed: used at static teardown
  return *r;
}

std::string KnownKeys() {
  std::string s;
  for (const auto& [k, info] : Configs().keys) {
    if (!s.empty()) s += ", ";
    s += k;
  }
  return s.empty() ? "none" : s;
}

const PassConfigInfo& LookupConfig(const std::string& key) {
  PassRegistry::Global();  // built-in passes register their config keys with themselves
  ConfigRegistry& r = Configs();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.keys.find(key);
  if (it == r.keys.end())
    Throw(ErrorCode::kInvalidArgument, "unknown pass config key '", key, "' (known: ", KnownKeys(),
          ")");
  return it->second;
}

struct ThreadContexts {
  PassContext default_ctx;
  std::vector<std::shared_ptr<PassContext>> stack;
};
ThreadContexts& Contexts() {
  thread_local ThreadContexts t;
  return t;
}

}  // namespace

void RegisterPassConfig(const std::string& key, AttrKind kind, AttrValue default_value,
                        const std::string& doc) {
  ConfigRegistry& r = Configs();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.keys.find(key);
  if (it != r.keys.end()) {
    if (it->second.kind != kind)
      Throw(ErrorCode::kInvalidArgument, "pass config key '", key, "' is already registered as ",
            AttrKindName(it->second.kind));
    return;
  }
  if (KindOf(default_value) != kind)
    Throw(ErrorCode::kInvalidArgument, "pass config key '", key, "': default is ",
          AttrKindName(KindOf(default_value)), ", declared ", AttrKindName(kind));
  r.keys.emplace(key, PassConfigInfo{key, kind, std::move(default_value), doc});
}

std::vector<PassConfigInfo> ListPassConfigs() {
  PassRegistry::Global();
  ConfigRegistry& r = Configs();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<PassConfigInfo> out;
  for (const auto& [k, info] : r.keys) out.push_back(info);
  return out;
}

void PassContext::SetConfig(const std::string& key, AttrValue value) {
  const PassConfigInfo& info = LookupConfig(key);
  AttrKind have = KindOf(value);
  if (have != info.kind) {
    if (info.kind == AttrKind::kFloat && have == AttrKind::kInt) {
      value = static_cast<double>(std::get<int64_t>(value));
    } else if (info.kind == AttrKind::kBool && have == AttrKind::kInt &&
               (std::get<int64_t>(value) == 0 || std::get<int64_t>(value) == 1)) {
      value = std::get<int64_t>(value) == 1;
    } else {
      Throw(ErrorCode::kInvalidArgument, "pass config '", key, "' must be ",
            AttrKindName(info.kind), ", got ", AttrKindName(have), " ", AttrValueToString(value));
    }
  }
  config_[key] = std::move(value);
}

AttrValue PassContext::GetConfig(const std::string& key) const {
  const PassConfigInfo& info = LookupConfig(key);
  auto it = config_.find(key);
  return it == config_.end() ? info.default_value : it->second;
}

int64_t PassContext::GetConfigInt(const std::string& key) const {
  AttrValue v = GetConfig(key);
  KILN_CHECK(KindOf(v) == AttrKind::kInt, "config '", key, "' is not an int");
  return std::get<int64_t>(v);
}
double PassContext::GetConfigFloat(const std::string& key) const {
  AttrValue v = GetConfig(key);
  KILN_CHECK(KindOf(v) == AttrKind::kFloat, "config '", key, "' is not a float");
  return std::get<double>(v);
}
bool PassContext::GetConfigBool(const std::string& key) const {
  AttrValue v = GetConfig(key);
  KILN_CHECK(KindOf(v) == AttrKind::kBool, "config '", key, "' is not a bool");
  return std::get<bool>(v);
}
std::string PassContext::GetConfigString(const std::string& key) const {
  AttrValue v = GetConfig(key);
  KILN_CHECK(KindOf(v) == AttrKind::kString, "config '", key, "' is not a string");
  return std::get<std::string>(v);
}

bool PassContext::PassEnabled(const PassInfo& info) const {
  auto listed = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), info.name) != names.end();
  };
  if (listed(required_passes)) return true;
  if (listed(disabled_passes)) return false;
  return info.opt_level <= opt_level;
}

void PassContext::EnterInstruments() {
  size_t entered = 0;
  try {
    for (; entered < instruments_.size(); ++entered) instruments_[entered]->EnterPassContext();
  } catch (...) {
    // Those that entered get their exit hook; an error there must not hide the first one.
    for (size_t i = 0; i < entered; ++i) {
      try {
        instruments_[i]->ExitPassContext();
      } catch (...) {
      }
    }
    instruments_.clear();
    throw;
  }
}

void PassContext::ExitInstruments() {
  try {
    for (const InstrumentPtr& pi : instruments_) pi->ExitPassContext();
  } catch (...) {
    instruments_.clear();
    throw;
  }
}

void PassContext::OverrideInstruments(std::vector<InstrumentPtr> instruments) {
  ExitInstruments();
  instruments_ = std::move(instruments);
  EnterInstruments();
}

bool PassContext::InstrumentBeforePass(const IRModule& module, const PassInfo& info,
                                       bool required) const {
  if (!required) {
    for (const InstrumentPtr& pi : instruments_)
      if (!pi->ShouldRun(module, info)) return false;
  }
  for (const InstrumentPtr& pi : instruments_) pi->RunBeforePass(module, info);
  return true;
}

void PassContext::InstrumentAfterPass(const IRModule& module, const PassInfo& info) const {
  for (const InstrumentPtr& pi : instruments_) pi->RunAfterPass(module, info);
}

PassContext& PassContext::Current() {
  ThreadContexts& t = Contexts();
  return t.stack.empty() ? t.default_ctx : *t.stack.back();
}

PassContextScope::PassContextScope(std::shared_ptr<PassContext> ctx) : ctx_(std::move(ctx)) {
  KILN_CHECK(ctx_ != nullptr, "PassContextScope needs a context");
  ctx_->EnterInstruments();  // may throw: then the scope never opened
  Contexts().stack.push_back(ctx_);
  open_ = true;
}

void PassContextScope::Close() {
  if (!open_) return;
  open_ = false;
  auto& stack = Contexts().stack;
  KILN_CHECK(!stack.empty() && stack.back() == ctx_, "pass context scopes closed out of order");
  stack.pop_back();
  ctx_->ExitInstruments();
}

PassContextScope::~PassContextScope() {
  try {
    Close();
  } catch (const std::exception& e) {
    ctx_->Report(
        {Diagnostic::Level::kError, "", StrCat("instrument exit hook failed: ", e.what())});
  }
}

}  // namespace kiln
