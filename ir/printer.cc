// The text IR printer. See ir/text.h for the format.
//
// Placement of bindings: a node is printed in the innermost function scope that contains all
// of its uses (the lowest common ancestor of its users' scopes), so a node that a nested
// function reads from outside is bound before that function, and a node only the nested
// function uses is printed inside it. Within a scope, bindings follow one post-order of the
// whole def, so operands always come before their users.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <set>
#include <unordered_map>

#include "ir/text.h"

#include "ir/loop/loop_text.h"

namespace kiln {

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool IsAllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string Quote(const std::string& s) {
  return AttrValueToString(AttrValue(s));
}

// The spelling after a '%' or '@' sigil. Counters are bare digits; a source name that would
// read back as a counter, or that has other characters, is quoted.
std::string NameSpelling(const std::string& name, bool counter) {
  if (counter) return name;
  bool plain = !name.empty() && !IsAllDigits(name);
  for (char c : name) plain = plain && IsNameChar(c);
  return plain ? name : Quote(name);
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!IsNameChar(c)) return false;
  return true;
}

// Symbols that are not identifiers (ONNX allows `batch-size`) are substituted by a symbol whose
// name is the quoted spelling, so Dim::ToString writes them quoted. The substitution may
// reorder terms; the parser re-canonicalizes, so the text still reads back to the same Dim.
std::string DimText(const Dim& d) {
  std::set<std::string> symbols;
  d.CollectSymbols(&symbols);
  auto plain = [](const std::string& s) { return IsIdentifier(s) && s != "min" && s != "max"; };
  bool all_plain = true;
  for (const std::string& s : symbols) all_plain = all_plain && plain(s);
  if (all_plain) return d.ToString();
  Dim quoted = d.Substitute([&](const std::string& s) -> std::optional<Dim> {
    if (plain(s)) return std::nullopt;
    return Dim::Symbol(Quote(s));
  });
  return quoted.ToString();
}

std::string TypeText(const Type& t) {
  if (!t) return "?";
  switch (t->kind) {
    case TypeKind::kTensor: {
      const TensorTypeNode* tt = AsTensor(t);
      if (tt->shape_var || tt->dtype_var) {
        std::string s = "Tensor[";
        if (tt->shape_var) {
          s += AsTypeVar(tt->shape_var)->name;
        } else {
          s += "(";
          for (size_t i = 0; i < tt->shape.size(); ++i)
            s += (i ? ", " : "") + DimText(tt->shape[i]);
          s += ")";
        }
        s += ", ";
        s += tt->dtype_var ? AsTypeVar(tt->dtype_var)->name : std::string(DTypeName(tt->dtype));
        return s + "]";
      }
      std::string s = std::string(DTypeName(tt->dtype)) + "[";
      for (size_t i = 0; i < tt->shape.size(); ++i) s += (i ? ", " : "") + DimText(tt->shape[i]);
      return s + "]";
    }
    case TypeKind::kTuple: {
      const auto& f = AsTuple(t)->fields;
      std::string s = "(";
      for (size_t i = 0; i < f.size(); ++i) s += (i ? ", " : "") + TypeText(f[i]);
      return s + (f.size() == 1 ? ",)" : ")");
    }
    case TypeKind::kFunc: {
      const FuncTypeNode* f = AsFunc(t);
      std::string s = "fn(";
      for (size_t i = 0; i < f->params.size(); ++i) s += (i ? ", " : "") + TypeText(f->params[i]);
      return s + ") -> " + TypeText(f->ret);
    }
    case TypeKind::kIncomplete:
      return "?";
    case TypeKind::kTypeVar:
      return AsTypeVar(t)->name;
    case TypeKind::kTypeCall: {
      const TypeCallNode* c = AsTypeCall(t);
      std::string s = c->adt;
      for (size_t i = 0; i < c->args.size(); ++i) s += (i ? ", " : "[") + TypeText(c->args[i]);
      return c->args.empty() ? s : s + "]";
    }
  }
  return "?";
}

std::string TypeArgText(const TypeArg& a) {
  if (a.kind == ParamKind::kType) return TypeText(a.type);
  if (a.kind == ParamKind::kShape) {
    std::string s = "(";
    for (size_t i = 0; i < a.shape.size(); ++i) s += (i ? ", " : "") + DimText(a.shape[i]);
    return s + ")";
  }
  if (a.kind == ParamKind::kShapeVar) return DimText(a.dim);
  return TypeArgToString(a);
}

// `<s : Shape, t : Type>`, or "" for none.
std::string TypeParamsText(const std::vector<Type>& params) {
  std::string s;
  for (size_t i = 0; i < params.size(); ++i) {
    const TypeVarNode* v = AsTypeVar(params[i]);
    s += (i ? ", " : "<") + v->name + " : " + ParamKindName(v->param_kind);
  }
  return params.empty() ? s : s + ">";
}

// `type Tree[a] { Leaf, Node(a, Tree[a], Tree[a]) }`
std::string AdtText(const AdtDef& adt) {
  std::string s = "type " + adt.name;
  for (size_t i = 0; i < adt.type_params.size(); ++i)
    s += (i ? ", " : "[") + AsTypeVar(adt.type_params[i])->name;
  if (!adt.type_params.empty()) s += "]";
  s += " {";
  for (size_t i = 0; i < adt.constructors.size(); ++i) {
    const AdtConstructor& c = adt.constructors[i];
    s += (i ? ", " : " ") + c.name;
    for (size_t j = 0; j < c.fields.size(); ++j) s += (j ? ", " : "(") + TypeText(c.fields[j]);
    if (!c.fields.empty()) s += ")";
  }
  return s + " }\n";
}

// The shortest %g spelling for which `same` holds, i.e. that reads back to the same bits.
// `exact_type`: v's own type is what the text reads back as (not a half printed through float),
// so std::to_chars' shortest digits for T are the shortest for `same`.
template <typename T, typename Same>
std::string ShortestFloat(T v, int max_precision, Same same, bool exact_type = true) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[48];
  // std::to_chars' shortest round-trip digits give the precision to print at, checked: a
  // constant's million elements cost one conversion each rather than up to max_precision
  // snprintf-strtod pairs.
  bool done = false;
  if (exact_type) {
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    if (ec == std::errc()) {
      int digits = 0;
      for (const char* c = buf; c < end && *c != 'e'; ++c) digits += *c >= '0' && *c <= '9';
      std::snprintf(buf, sizeof buf, "%.*g", std::max(digits, 1), static_cast<double>(v));
      done = same(buf);
    }
  }
  if (!done)
    for (int prec = 1; prec <= max_precision; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
      if (same(buf)) break;
    }
  // %g writes 100 as `1e+02`; whole numbers of ordinary size read better in full.
  if (std::strchr(buf, 'e') && v == std::trunc(v) && std::fabs(v) < 1e7)
    std::snprintf(buf, sizeof buf, "%.0f", static_cast<double>(v));
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

template <typename T>
bool SameBits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

std::string ElementText(const Tensor& t, int64_t i) {
  return DispatchDType(t.dtype(), [&]<typename T>() -> std::string {
    T v = static_cast<const T*>(t.raw_data())[i];
    if constexpr (std::is_same_v<T, bool>) {
      return v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, float>) {
      return ShortestFloat(v, 9,
                           [&](const char* s) { return SameBits(std::strtof(s, nullptr), v); });
    } else if constexpr (std::is_same_v<T, double>) {
      return ShortestFloat(v, 17,
                           [&](const char* s) { return SameBits(std::strtod(s, nullptr), v); });
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      // The parser reads a half as T(strtof(text)); print what reads back to the same bits.
      return ShortestFloat(
          static_cast<float>(v), 9,
          [&](const char* s) { return T(std::strtof(s, nullptr)).bits == v.bits; },
          /*exact_type=*/false);
    } else {
      return std::to_string(static_cast<int64_t>(v));
    }
  });
}

class Printer {
 public:
  Printer(const PrintOptions& options, std::vector<Tensor>* meta)
      : options_(options), meta_(meta) {}

  std::string PrintDef(const std::string& name, const Function& fn) {
    std::string out = "def @" + NameSpelling(name, false);
    if (!fn) return out + "() {\n  <null>\n}\n";
    Analyze(fn.get(), fn->body);
    out += FunctionTail(fn.get(), "");
    return out + "\n";
  }

  std::string PrintTop(const Expr& e) {
    if (!e) return "<null>";
    Analyze(nullptr, e);
    std::string out;
    PrintScope(nullptr, e.get(), "", out);
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

 private:
  static void Children(const ExprNode* n, std::vector<const ExprNode*>& out) {
    out.clear();
    switch (n->kind) {
      case ExprKind::kCall: {
        // The callee last, so a bound function is printed right before its call.
        const CallNode* c = static_cast<const CallNode*>(n);
        for (const Expr& a : c->args) out.push_back(a.get());
        if (c->fn) out.push_back(c->fn.get());
        break;
      }
      case ExprKind::kTuple:
        for (const Expr& f : static_cast<const TupleNode*>(n)->fields) out.push_back(f.get());
        break;
      case ExprKind::kTupleGetItem:
        out.push_back(static_cast<const TupleGetItemNode*>(n)->tuple.get());
        break;
      case ExprKind::kFunction:
        out.push_back(static_cast<const FunctionNode*>(n)->body.get());
        break;
      case ExprKind::kMatch: {
        const MatchNode* m = static_cast<const MatchNode*>(n);
        out.push_back(m->data.get());
        for (const MatchClause& c : m->clauses) out.push_back(c.body.get());
        break;
      }
      default:
        break;
    }
    std::erase(out, nullptr);
  }

  // The scope of clause `i` of match `m`: a key of its own beside the nodes' (clause bodies
  // are scopes like function bodies).
  static const ExprNode* ClauseScope(const MatchNode* m, size_t i) {
    return reinterpret_cast<const ExprNode*>(&m->clauses[i]);
  }

  // Counts uses, computes each node's home scope (see the file comment) and the binding order.
  // `scope` is the function whose body `root` is, or null for a bare expression.
  void Analyze(const ExprNode* scope, const Expr& root) {
    if (!root) return;
    std::vector<const ExprNode*> order;
    std::unordered_map<const ExprNode*, bool> seen;
    struct Frame {
      const ExprNode* node;
      std::vector<const ExprNode*> children;
      size_t next = 0;
    };
    std::vector<Frame> stack;
    auto push = [&](const ExprNode* n) {
      seen[n] = true;
      stack.push_back(Frame{n, {}, 0});
      Children(n, stack.back().children);
    };
    uses_[root.get()] = 1;
    push(root.get());
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.children.size()) {
        const ExprNode* child = top.children[top.next++];
        ++uses_[child];
        if (!seen.count(child)) push(child);
        continue;
      }
      order.push_back(top.node);
      stack.pop_back();
    }

    depth_[scope] = 0;
    home_[root.get()] = scope;
    std::vector<const ExprNode*> children;
    for (size_t i = order.size(); i-- > 0;) {
      const ExprNode* user = order[i];
      const ExprNode* use_scope = home_.at(user);
      if (user->kind == ExprKind::kFunction) {
        depth_[user] = depth_.at(use_scope) + 1;
        use_scope = user;
      }
      if (user->kind == ExprKind::kMatch) {
        const MatchNode* m = static_cast<const MatchNode*>(user);
        auto place = [&](const ExprNode* c, const ExprNode* where) {
          auto it = home_.find(c);
          if (it == home_.end()) {
            home_[c] = where;
          } else {
            it->second = CommonScope(it->second, where);
          }
        };
        place(m->data.get(), use_scope);
        for (size_t k = 0; k < m->clauses.size(); ++k) {
          const ExprNode* scope_k = ClauseScope(m, k);
          depth_[scope_k] = depth_.at(use_scope) + 1;
          home_[scope_k] = use_scope;
          place(m->clauses[k].body.get(), scope_k);
        }
        continue;
      }
      Children(user, children);
      for (const ExprNode* c : children) {
        auto it = home_.find(c);
        if (it == home_.end()) {
          home_[c] = use_scope;
        } else {
          it->second = CommonScope(it->second, use_scope);
        }
      }
    }
    for (const ExprNode* n : order) {
      if (n->kind == ExprKind::kVar || n->kind == ExprKind::kGlobalVar ||
          n->kind == ExprKind::kConstructor)
        continue;
      if (n->kind == ExprKind::kConstant && uses_.at(n) < 2) continue;
      members_[home_.at(n)].push_back(n);
    }
  }

  const ExprNode* CommonScope(const ExprNode* a, const ExprNode* b) const {
    while (depth_.at(a) > depth_.at(b)) a = home_.at(a);
    while (depth_.at(b) > depth_.at(a)) b = home_.at(b);
    while (a != b) {
      a = home_.at(a);
      b = home_.at(b);
    }
    return a;
  }

  bool ShowType(const ExprNode* n) const {
    if (!options_.show_types || !n->type) return false;
    // A constant's own type is implied by its `const(type, ...)` spelling.
    if (n->kind != ExprKind::kConstant) return true;
    const Tensor& value = static_cast<const ConstantNode*>(n)->value;
    return !value.defined() || !TypeEqual(n->type, TypeOfTensor(value));
  }

  // A scope's result is written in place of a reference when no name is needed for it.
  bool InlineResult(const ExprNode* n) const {
    if (n->kind == ExprKind::kVar || n->kind == ExprKind::kConstant) return false;
    if (n->kind == ExprKind::kGlobalVar || n->kind == ExprKind::kConstructor) return true;
    return uses_.at(n) == 1 && Unnamed(n) && !ShowType(n);
  }

  void PrintScope(const ExprNode* scope, const ExprNode* result, const std::string& indent,
                  std::string& out) {
    bool inline_result = result && InlineResult(result);
    auto it = members_.find(scope);
    if (it != members_.end()) {
      for (const ExprNode* n : it->second) {
        if (n == result && inline_result) continue;
        std::string name = AssignName(n);
        out += indent + name;
        if (ShowType(n)) out += ": " + TypeText(n->type);
        out += " = " + Rhs(n, indent) + "\n";
      }
    }
    out += indent + (!result ? "<null>" : inline_result ? Rhs(result, indent) : Ref(result)) + "\n";
  }

  bool Unnamed(const ExprNode* n) const { return n->name.empty() || options_.anonymous; }

  std::string AssignName(const ExprNode* n) {
    bool counter = Unnamed(n);
    std::string name;
    if (counter) {
      while (taken_.count(std::to_string(counter_))) ++counter_;
      name = std::to_string(counter_++);
    } else {
      name = n->name;
      for (int k = 1; taken_.count(name); ++k) name = n->name + "_" + std::to_string(k);
    }
    taken_.insert(name);
    std::string ref = "%";  // appended, not `"%" + ...`: GCC 12 warns falsely on that form
    ref += NameSpelling(name, counter);
    refs_[n] = ref;
    return ref;
  }

  std::string Ref(const ExprNode* n) {
    if (!n) return "<null>";
    auto it = refs_.find(n);
    if (it != refs_.end()) return it->second;
    if (n->kind == ExprKind::kVar) return AssignName(n);  // a free variable
    if (n->kind == ExprKind::kGlobalVar) return "@" + NameSpelling(n->name, false);
    if (n->kind == ExprKind::kConstructor) return n->name;
    return Rhs(n, "");
  }

  std::string Rhs(const ExprNode* n, const std::string& indent) {
    switch (n->kind) {
      case ExprKind::kVar:
        return Ref(n);
      case ExprKind::kConstant:
        return ConstantText(static_cast<const ConstantNode*>(n)->value);
      case ExprKind::kCall: {
        const CallNode* c = static_cast<const CallNode*>(n);
        std::string s = c->op ? c->op->name : Ref(c->fn.get());
        for (size_t i = 0; i < c->type_args.size(); ++i)
          s += (i ? ", " : "<") + TypeArgText(c->type_args[i]);
        if (!c->type_args.empty()) s += ">";
        s += "(";
        bool first = true;
        for (const Expr& a : c->args) {
          {
            if (!first) s += ", ";
            s += Ref(a.get());
          }
          first = false;
        }
        for (const auto& [key, value] : c->attrs.values()) {
          if (c->op && IsDefault(*c->op, key, value)) continue;
          {
            if (!first) s += ", ";
            s += AttrText(key, value);
          }
          first = false;
        }
        return s + ")";
      }
      case ExprKind::kTuple: {
        const auto& f = static_cast<const TupleNode*>(n)->fields;
        std::string s = "(";
        for (size_t i = 0; i < f.size(); ++i) s += (i ? ", " : "") + Ref(f[i].get());
        return s + (f.size() == 1 ? ",)" : ")");
      }
      case ExprKind::kTupleGetItem: {
        const TupleGetItemNode* g = static_cast<const TupleGetItemNode*>(n);
        return Ref(g->tuple.get()) + "." + std::to_string(g->index);
      }
      case ExprKind::kFunction:
        return "fn" + FunctionTail(static_cast<const FunctionNode*>(n), indent);
      case ExprKind::kGlobalVar:
      case ExprKind::kConstructor:
        return Ref(n);
      case ExprKind::kMatch: {
        const MatchNode* m = static_cast<const MatchNode*>(n);
        std::string s = "match (" + Ref(m->data.get()) + ") {\n";
        for (size_t k = 0; k < m->clauses.size(); ++k) {
          s += indent + "  " + PatternText(m->clauses[k].pattern) + " => {\n";
          PrintScope(ClauseScope(m, k), m->clauses[k].body.get(), indent + "    ", s);
          s += indent + "  }\n";
        }
        return s + indent + "}";
      }
    }
    return "<?>";
  }

  std::string PatternText(const Pattern& p) {
    switch (p->kind) {
      case PatternKind::kWildcard:
        return "_";
      case PatternKind::kVar:
        return AssignName(p->var.get()) + (p->var->type ? ": " + TypeText(p->var->type) : "");
      case PatternKind::kConstructor:
      case PatternKind::kTuple: {
        std::string s =
            p->kind == PatternKind::kConstructor ? p->adt->constructors[p->tag].name : "";
        if (p->kind == PatternKind::kConstructor && p->fields.empty()) return s;
        s += "(";
        for (size_t i = 0; i < p->fields.size(); ++i)
          s += (i ? ", " : "") + PatternText(p->fields[i]);
        return s + (p->kind == PatternKind::kTuple && p->fields.size() == 1 ? ",)" : ")");
      }
    }
    return "_";
  }

  // `(params) -> ret attrs{...} {\n body }` for a def or a nested function.
  std::string FunctionTail(const FunctionNode* fn, const std::string& indent) {
    std::string s = TypeParamsText(fn->type_params) + "(";
    for (size_t i = 0; i < fn->params.size(); ++i) {
      const Var& p = fn->params[i];
      if (i) s += ", ";
      if (!p) {
        s += "<null>";
        continue;
      }
      s += AssignName(p.get());
      if (p->type) s += ": " + TypeText(p->type);
    }
    s += ")";
    if (fn->ret_type) s += " -> " + TypeText(fn->ret_type);
    for (size_t i = 0; i < fn->type_constraints.size(); ++i) {
      const TypeConstraint& k = fn->type_constraints[i];
      s += (i ? ", " : " where ") + TypeText(k.result) + " = " + k.op + "(";
      for (size_t j = 0; j < k.args.size(); ++j) s += (j ? ", " : "") + TypeText(k.args[j]);
      s += ")";
    }
    if (!fn->attrs.empty()) {
      s += " attrs{";
      bool first = true;
      for (const auto& [key, value] : fn->attrs.values()) {
        {
          if (!first) s += ", ";
          s += AttrText(key, value);
        }
        first = false;
      }
      s += "}";
    }
    s += " {\n";
    PrintScope(fn, fn->body.get(), indent + "  ", s);
    return s + indent + "}";
  }

  static bool IsDefault(const OpDef& op, const std::string& key, const AttrValue& v) {
    for (const AttrSpec& spec : op.attrs)
      if (spec.name == key) return spec.default_value && *spec.default_value == v;
    return false;
  }

  static std::string AttrText(const std::string& key, const AttrValue& v) {
    return (IsIdentifier(key) ? key : Quote(key)) + "=" + AttrValueToString(v);
  }

  std::string ConstantText(const Tensor& t) {
    if (!t.defined()) return "const(?, <undefined>)";
    std::string type = TypeText(TypeOfTensor(t));
    size_t limit = options_.max_inline_constant;
    if (meta_ && limit > 0 && static_cast<size_t>(t.numel()) > limit) {
      meta_->push_back(t);
      return "const(" + type + ", meta[" + std::to_string(meta_->size() - 1) + "])";
    }
    std::string s = "const(" + type + ", ";
    if (t.ndim() == 0) return s + ElementText(t, 0) + ")";
    s += "[";
    for (int64_t i = 0; i < t.numel(); ++i) s += (i ? ", " : "") + ElementText(t, i);
    return s + "])";
  }

  const PrintOptions& options_;
  std::vector<Tensor>* meta_;
  std::unordered_map<const ExprNode*, int> uses_;
  // The scope a node is bound in (a FunctionNode, or null for the top of a bare expression);
  // for a FunctionNode, the scope it is bound in, which makes this the scope tree's parent map.
  std::unordered_map<const ExprNode*, const ExprNode*> home_;
  std::unordered_map<const ExprNode*, int> depth_;                             // of each scope
  std::unordered_map<const ExprNode*, std::vector<const ExprNode*>> members_;  // in bind order
  std::unordered_map<const ExprNode*, std::string> refs_;
  std::set<std::string> taken_;
  int counter_ = 0;
};

}  // namespace

std::string Print(const IRModule& module, const PrintOptions& options, std::vector<Tensor>* meta) {
  std::string out;
  for (const auto& [name, adt] : module.adts()) out += AdtText(*adt);
  for (const auto& [name, fn] : module.functions()) {
    if (!out.empty()) out += "\n";
    out += Printer(options, meta).PrintDef(name, fn);
  }
  // Kernels print in the loop IR's own syntax; the parser reads graph functions only.
  for (const auto& [name, f] : module.prim_funcs()) {
    if (!out.empty()) out += "\n";
    out += loop::Print(f);
  }
  return out;
}

std::string Print(const Expr& expr, const PrintOptions& options, std::vector<Tensor>* meta) {
  return Printer(options, meta).PrintTop(expr);
}

std::string PrintType(const Type& type) {
  return TypeText(type);
}

std::ostream& operator<<(std::ostream& os, const Expr& expr) {
  return os << Print(expr);
}
std::ostream& operator<<(std::ostream& os, const IRModule& module) {
  return os << Print(module);
}

}  // namespace kiln
