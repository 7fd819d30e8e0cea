#include "passes/pass.h"

#include <algorithm>
#include <cctype>

#include "ir/error.h"
#include "ir/structural.h"
#include "ir/trace.h"
#include "ir/type_infer.h"

namespace kiln {

#define KILN_PASS(P) void Register##P##Pass(PassRegistry& r);
#include "passes/passes.def"
#undef KILN_PASS

namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

class ModulePassImpl : public Pass {
 public:
  ModulePassImpl(PassInfo info, ModulePassFn fn, Attrs options)
      : Pass(std::move(info), std::move(options)), fn_(std::move(fn)) {}

 protected:
  IRModule Run(const IRModule& m, const PassContext& ctx) const override { return fn_(m, ctx); }

 private:
  ModulePassFn fn_;
};

class FunctionPassImpl : public Pass {
 public:
  FunctionPassImpl(PassInfo info, FunctionPassFn fn, Attrs options)
      : Pass(std::move(info), std::move(options)), fn_(std::move(fn)) {}

 protected:
  IRModule Run(const IRModule& m, const PassContext& ctx) const override {
    IRModule out = m;
    for (const auto& [name, f] : m.functions()) {
      const AttrValue* skip = f->attrs.Find("skip_optimization");
      if (skip && KindOf(*skip) == AttrKind::kBool && std::get<bool>(*skip)) continue;
      Function g = fn_(f, m, ctx);
      if (!g) Throw(ErrorCode::kInternal, "returned no function for @", name);
      if (g != f) {
        try {
          out = out.With(name, InferTypes(g));
        } catch (const Error& e) {
          throw Error(e.code(), StrCat("@", name, ": ", e.what()));
        }
      }
    }
    return out;
  }

 private:
  FunctionPassFn fn_;
};

class SequentialImpl : public Pass {
 public:
  SequentialImpl(std::vector<PassPtr> passes, std::string name)
      : Pass(PassInfo{std::move(name), 0, {}}), passes_(std::move(passes)) {}

  const std::vector<PassPtr>& passes() const { return passes_; }
  std::string ToString() const override {
    std::string s;
    for (const PassPtr& p : passes_) {
      if (!s.empty()) s += ",";
      s += p->ToString();
    }
    return s;
  }

 protected:
  IRModule Run(const IRModule& m, const PassContext& ctx) const override {
    IRModule cur = m;
    for (const PassPtr& p : passes_) {
      if (!ctx.PassEnabled(p->info())) continue;
      std::vector<std::string> chain{p->info().name};
      cur = RunRequired(p->info(), cur, ctx, chain);
      cur = (*p)(cur, ctx);
    }
    return cur;
  }

 private:
  // Runs the passes `info` requires (and theirs, first), unconditionally.
  static IRModule RunRequired(const PassInfo& info, IRModule m, const PassContext& ctx,
                              std::vector<std::string>& chain) {
    for (const std::string& req : info.required) {
      if (Contains(chain, req)) {
        std::string cycle;
        for (const std::string& c : chain) cycle += c + " -> ";
        Throw(ErrorCode::kInvalidArgument, "pass requirement cycle: ", cycle, req);
      }
      const PassRegistration* reg = PassRegistry::Global().Find(req);
      if (!reg)
        Throw(ErrorCode::kNotFound, "pass '", info.name, "' requires unknown pass '", req, "'");
      PassPtr p = PassRegistry::Global().Create(req);
      chain.push_back(req);
      m = RunRequired(p->info(), std::move(m), ctx, chain);
      chain.pop_back();
      m = (*p)(m, ctx);
    }
    return m;
  }

  std::vector<PassPtr> passes_;
};

}  // namespace

IRModule Pass::operator()(const IRModule& m) const {
  return (*this)(m, PassContext::Current());
}

IRModule Pass::operator()(const IRModule& m, const PassContext& ctx) const {
  bool required = Contains(ctx.required_passes, info_.name);
  if (!ctx.InstrumentBeforePass(m, info_, required)) return m;
  TraceSpan span("pass", info_.name);  // a Sequential's span holds its passes'
  bool check = ctx.GetConfigBool("testing.check_immutable");
  size_t before = check ? StructuralHash(m) : 0;
  IRModule out;
  try {
    out = Run(m, ctx);
  } catch (const Error& e) {
    // Name the innermost pass only: a Sequential passes its child's message through.
    std::string msg = e.what();
    if (msg.rfind("pass '", 0) == 0) throw;
    throw Error(e.code(), StrCat("pass '", info_.name, "': ", msg));
  }
  if (check && StructuralHash(m) != before)
    Throw(ErrorCode::kInternal, "pass '", info_.name, "' modified the module it was given");
  ctx.InstrumentAfterPass(out, info_);
  return out;
}

std::string Pass::ToString() const {
  const PassRegistration* reg = PassRegistry::Global().Find(info_.name);
  std::string opts;
  for (const auto& [k, v] : options_.values()) {
    if (reg) {
      auto spec = std::find_if(reg->options.begin(), reg->options.end(),
                               [&](const AttrSpec& s) { return s.name == k; });
      if (spec != reg->options.end() && spec->default_value && *spec->default_value == v) continue;
    }
    {
      if (!opts.empty()) opts += ", ";
      opts += k + "=" + AttrValueToString(v);
    }
  }
  return opts.empty() ? info_.name : info_.name + "(" + opts + ")";
}

PassPtr CreateModulePass(PassInfo info, ModulePassFn fn, Attrs options) {
  return std::make_shared<ModulePassImpl>(std::move(info), std::move(fn), std::move(options));
}

PassPtr CreateFunctionPass(PassInfo info, FunctionPassFn fn, Attrs options) {
  return std::make_shared<FunctionPassImpl>(std::move(info), std::move(fn), std::move(options));
}

PassPtr Sequential(std::vector<PassPtr> passes, std::string name) {
  for (const PassPtr& p : passes)
    if (!p) Throw(ErrorCode::kInvalidArgument, "Sequential '", name, "': a pass is null");
  return std::make_shared<SequentialImpl>(std::move(passes), std::move(name));
}

const std::vector<PassPtr>& SequentialPasses(const PassPtr& p) {
  static const std::vector<PassPtr> kNone;
  auto* s = dynamic_cast<const SequentialImpl*>(p.get());
  return s ? s->passes() : kNone;
}

PassRegistry& PassRegistry::Global() {
  static PassRegistry* r = [] {
    auto* reg = new PassRegistry();  // never destroyed: passes may run during static teardown
    // Test mode: the pass tests run with it on by default (ctest sets the variable for them;
    // tests/CMakeLists.txt), so every pass they run is checked, not only where a test asks.
    const char* test_mode = std::getenv("KILN_TESTING_CHECK_IMMUTABLE");
    RegisterPassConfig("testing.check_immutable", AttrKind::kBool,
                       test_mode != nullptr && std::string(test_mode) == "1",
                       "check that no pass modifies the module it was given (default: on "
                       "where the environment has KILN_TESTING_CHECK_IMMUTABLE=1)");
    RegisterPassConfig("codegen.fast_math", AttrKind::kBool, false,
                       "let code generators reassociate and contract float math");
    // On by default, as C compilers do within an expression: a multiply-add becomes one FMA
    // (one rounding instead of two), which doubles the throughput of every reduction.
    RegisterPassConfig("codegen.fp_contract", AttrKind::kBool, true,
                       "let code generators fuse a float multiply and add into an FMA");
    // Set by the engine from its target (VectorRegisterBits); 0 leaves the loop passes at their
    // AVX2-sized defaults.
    RegisterPassConfig("target.vector_bits", AttrKind::kInt, int64_t{0},
                       "the target's widest vector register in bits (0: unknown); sizes "
                       "VectorizeLoops' lanes and TileLoops' register tiles unless their own keys "
                       "are set");
    // Set by the engine to its kernel threads; graph passes that choose which loop the threads
    // split (FuseOps: a conv's pool) read it.
    RegisterPassConfig("target.threads", AttrKind::kInt, int64_t{0},
                       "the threads that run each kernel (0: unknown)");
    // On by default: a float sum that adds one element at a time runs at the add's latency
    // (4 cycles an element); partial sums per vector lane run at its throughput.
    RegisterPassConfig("codegen.reassociate_reductions", AttrKind::kBool, true,
                       "let code generators vectorize float sums with partial sums per lane");
    // On by default: a shape-generic build's 3x3 convs then run as fast as a specialization's
    // (passes/graph/winograd.cc says at what compile time).
    RegisterPassConfig("winograd.any_image_size", AttrKind::kBool, true,
                       "let WinogradConvs give convs over symbolic image sizes Winograd's form "
                       "(where the transformed filter is small)");
    // Off by default (CodegenOptions::slp_vectorize says why).
    RegisterPassConfig("codegen.slp_vectorize", AttrKind::kBool, false,
                       "let LLVM pack straight-line scalar code into vectors (its SLP vectorizer)");
#define KILN_PASS(P) Register##P##Pass(*reg);
#include "passes/passes.def"
#undef KILN_PASS
    return reg;
  }();
  return *r;
}

void PassRegistry::Register(PassRegistration reg) {
  if (reg.name.empty() || !reg.create)
    Throw(ErrorCode::kInvalidArgument, "pass registration needs a name and a create function");
  std::lock_guard<std::mutex> lock(mu_);
  if (passes_.count(reg.name))
    Throw(ErrorCode::kInvalidArgument, "pass '", reg.name, "' is already registered");
  std::string name = reg.name;
  passes_.emplace(name, std::make_shared<const PassRegistration>(std::move(reg)));
}

const PassRegistration* PassRegistry::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : it->second.get();
}

std::vector<std::string> PassRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [n, r] : passes_) names.push_back(n);
  return names;
}

PassPtr PassRegistry::Create(const std::string& name, const Attrs& options) const {
  const PassRegistration* reg = Find(name);
  if (!reg) {
    std::string known;
    for (const std::string& n : Names()) {
      if (!known.empty()) known += ", ";
      known += n;
    }
    Throw(ErrorCode::kNotFound, "unknown pass '", name, "' (known: ", known, ")");
  }
  OpDef schema;  // reuse the op attribute checker for pass options
  schema.name = name;
  schema.attrs = reg->options;
  Attrs normalized;
  try {
    normalized = NormalizeAttrs(schema, options);
  } catch (const Error& e) {
    std::string msg = e.what();
    size_t p = msg.find("op '");
    if (p == 0) msg = "pass '" + msg.substr(4);
    throw Error(e.code(), msg);
  }
  PassPtr p = reg->create(normalized);
  KILN_CHECK(p != nullptr, "pass '", name, "' create function returned null");
  return p;
}

namespace {

// A small recursive-descent reader for pipeline strings.
class PipelineReader {
 public:
  explicit PipelineReader(const std::string& s) : s_(s) {}

  PassPtr Read() {
    std::vector<PassPtr> passes;
    Skip();
    if (pos_ == s_.size()) return Sequential({});
    while (true) {
      passes.push_back(ReadPass());
      Skip();
      if (pos_ == s_.size()) break;
      Expect(',');
    }
    return Sequential(std::move(passes));
  }

 private:
  [[noreturn]] void Fail(const std::string& msg) {
    Throw(ErrorCode::kInvalidArgument, "pipeline \"", s_, "\" at ", pos_ + 1, ": ", msg);
  }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void Expect(char c) {
    Skip();
    if (pos_ >= s_.size() || s_[pos_] != c) Fail(StrCat("expected '", c, "'"));
    ++pos_;
  }
  std::string Ident() {
    Skip();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '_' || s_[pos_] == '.'))
      ++pos_;
    if (start == pos_) Fail("expected a name");
    return s_.substr(start, pos_ - start);
  }
  PassPtr ReadPass() {
    std::string name = Ident();
    Attrs opts;
    Skip();
    if (pos_ < s_.size() && s_[pos_] == '(') {
      ++pos_;
      Skip();
      while (pos_ < s_.size() && s_[pos_] != ')') {
        std::string key = Ident();
        Expect('=');
        opts.Set(key, Value());
        Skip();
        if (pos_ < s_.size() && s_[pos_] == ',') ++pos_;
        Skip();
      }
      Expect(')');
    }
    if (!PassRegistry::Global().Find(name)) Fail(StrCat("unknown pass '", name, "'"));
    return PassRegistry::Global().Create(name, opts);
  }
  AttrValue Value() {
    Skip();
    if (pos_ >= s_.size()) Fail("expected a value");
    char c = s_[pos_];
    if (c == '"') {
      std::string out;
      ++pos_;
      while (pos_ < s_.size() && s_[pos_] != '"') {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
        out += s_[pos_++];
      }
      Expect('"');
      return out;
    }
    if (c == '[') {
      ++pos_;
      std::vector<AttrValue> items;
      Skip();
      while (pos_ < s_.size() && s_[pos_] != ']') {
        items.push_back(Value());
        Skip();
        if (pos_ < s_.size() && s_[pos_] == ',') ++pos_;
        Skip();
      }
      Expect(']');
      bool all_int = std::all_of(items.begin(), items.end(),
                                 [](const AttrValue& v) { return KindOf(v) == AttrKind::kInt; });
      if (all_int) {
        std::vector<int64_t> xs;
        for (const AttrValue& v : items) xs.push_back(std::get<int64_t>(v));
        return xs;
      }
      std::vector<double> xs;
      for (const AttrValue& v : items) {
        if (KindOf(v) == AttrKind::kInt)
          xs.push_back(static_cast<double>(std::get<int64_t>(v)));
        else if (KindOf(v) == AttrKind::kFloat)
          xs.push_back(std::get<double>(v));
        else
          Fail("lists hold numbers only");
      }
      return xs;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') {
      size_t start = pos_;
      ++pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                  s_[pos_] == '.' || s_[pos_] == '-' || s_[pos_] == '+'))
        ++pos_;
      std::string num = s_.substr(start, pos_ - start);
      char* end = nullptr;
      errno = 0;
      long long i = std::strtoll(num.c_str(), &end, 10);
      if (*end == '\0' && errno == 0) return static_cast<int64_t>(i);
      double d = std::strtod(num.c_str(), &end);
      if (*end != '\0') Fail(StrCat("bad number '", num, "'"));
      return d;
    }
    std::string word = Ident();
    if (word == "true") return true;
    if (word == "false") return false;
    DType dt;
    if (ParseDType(word, &dt)) return dt;
    return word;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

PassPtr ParsePipeline(const std::string& text) {
  return PipelineReader(text).Read();
}

std::string PipelineToString(const PassPtr& pass) {
  return pass ? pass->ToString() : "";
}

}  // namespace kiln
