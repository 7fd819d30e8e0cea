// The loop IR printer (format sketched in loop_text.h). Details the sketch leaves open:
//
//   func @f(%a: f32[n, 16], %tmp_in: f32[64] strides [2], %out: f32[n, 16]; n: i64) {
//     alloc t: f32[16] local
//     for i in [0, n) parallel {            // serial loops print no kind word
//       let x = i * 16;                      // the let scopes over the rest of the block
//       t[0] = f32(x) + 0.5f
//     }
//     if (n > 4) { ... } else { ... }
//     block compute(vi in [0, 16) = i, reduce vk in [0, 64) = k) {
//       reads a[vi, 0:64]                    // one `min:end` per dim, or `min` when extent is 1
//       writes out[vi]
//       init {
//         out[vi] = 0.0f
//       }
//       out[vi] = out[vi] + sum(a[vi, k] * b[k], k in [0, 64))
//     }
//     evaluate(exp(x))
//     free t
//   }
//
// - A let that is not the last statement of its block scopes over less than the rest of the
//   block, so its body is braced instead: `let x = v {` ... `}`.
// - `num_inputs` is printed (` num_inputs=K` after the parameters) only when it is not the usual
//   "every buffer but the last is an input"; non-empty attributes follow as `attrs {k = v}`.
// - Immediates: i64 plain, other integers with their dtype as suffix (`3i32`, `255u8`), bool as
//   `true`/`false`; floats in the shortest spelling that reads back to the same value of their
//   dtype, suffixed `f` for f32 and the dtype name otherwise (`0.5f`, `0.5f16`, `0.1f64`);
//   non-finite floats print as a cast (`f32(inf)`, `f64(nan)`).
// - Binary operators are infix with C-like precedence (|| < && < comparisons < + - < * / // %);
//   operands are parenthesized exactly when the tree could otherwise be misread: a right operand
//   of equal precedence keeps its parentheses (`a - (b - c)`), and comparisons never chain.
// - Names: two different variables (or buffers) with one name get `_1`, `_2`, ... in order of
//   first appearance, so the text never merges distinct objects. Null children print `<null>`.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unordered_map>

#include "ir/loop/loop_text.h"

namespace kiln::loop {

namespace {

// Unique spellings for objects compared by identity: the first object with a name keeps it,
// later ones get the first free `name_K`.
class NameTable {
 public:
  const std::string& Get(const void* object, const std::string& name) {
    auto it = names_.find(object);
    if (it != names_.end()) return it->second;
    std::string base = name.empty() ? "_" : name;
    std::string spelling = base;
    for (int k = 1; taken_.count(spelling); ++k) spelling = base + "_" + std::to_string(k);
    taken_.insert(spelling);
    return names_.emplace(object, std::move(spelling)).first->second;
  }

 private:
  std::unordered_map<const void*, std::string> names_;
  std::set<std::string> taken_;
};

// The shortest %g spelling for which `same` holds; always shows a '.' or an exponent.
template <typename Same>
std::string ShortestFloat(double v, int max_precision, Same same) {
  char buf[48];
  for (int prec = 1; prec <= max_precision; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (same(buf)) break;
  }
  // %g writes 100 as `1e+02`; whole numbers of ordinary size read better in full.
  if (std::strchr(buf, 'e') && v == std::trunc(v) && std::fabs(v) < 1e7)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string FloatText(double v, DType t) {
  std::string type(DTypeName(t));
  if (std::isnan(v)) return type + (std::signbit(v) ? "(-nan)" : "(nan)");
  if (std::isinf(v)) return type + (v < 0 ? "(-inf)" : "(inf)");
  switch (t) {
    case DType::kFloat32: {
      float f = static_cast<float>(v);
      return ShortestFloat(f, 9, [&](const char* s) { return std::strtof(s, nullptr) == f; }) + "f";
    }
    case DType::kFloat16: {
      Half h(static_cast<float>(v));
      return ShortestFloat(
                 static_cast<float>(h), 9,
                 [&](const char* s) { return Half(std::strtof(s, nullptr)).bits == h.bits; }) +
             type;
    }
    case DType::kBFloat16: {
      BFloat16 h(static_cast<float>(v));
      return ShortestFloat(
                 static_cast<float>(h), 9,
                 [&](const char* s) { return BFloat16(std::strtof(s, nullptr)).bits == h.bits; }) +
             type;
    }
    default:  // f64, and a float immediate mislabeled with a non-float dtype (Verify rejects it)
      return ShortestFloat(v, 17, [&](const char* s) { return std::strtod(s, nullptr) == v; }) +
             type;
  }
}

std::string IntText(int64_t v, DType t) {
  if (t == DType::kBool) return v ? "true" : "false";
  std::string s = std::to_string(v);
  if (t != DType::kInt64) s += DTypeName(t);
  return s;
}

// Binding strength of an operator; atoms (calls, loads, names, immediates) bind tightest.
constexpr int kPrecNot = 6;
constexpr int kPrecAtom = 7;
int OpPrecedence(BinaryOp op) {
  switch (op) {
    case BinaryOp::kOr:
      return 1;
    case BinaryOp::kAnd:
      return 2;
    case BinaryOp::kEQ:
    case BinaryOp::kNE:
    case BinaryOp::kLT:
    case BinaryOp::kLE:
    case BinaryOp::kGT:
    case BinaryOp::kGE:
      return 3;
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      return 4;
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:
    case BinaryOp::kFloorMod:
      return 5;
    case BinaryOp::kMin:
    case BinaryOp::kMax:
    case BinaryOp::kShl:
    case BinaryOp::kShr:
      return kPrecAtom;  // printed as calls
  }
  return kPrecAtom;
}

int Precedence(const Expr& e) {
  if (const BinaryNode* b = AsBinary(e)) return OpPrecedence(b->op);
  if (AsNot(e)) return kPrecNot;
  return kPrecAtom;
}

// Concatenates in order. Names are assigned when first printed, so the pieces of one line must
// be produced left to right: the elements of a braced list are, the operands of `+` are not.
std::string Cat(std::initializer_list<std::string> parts) {
  std::string s;
  for (const std::string& p : parts) s += p;
  return s;
}

class Printer {
 public:
  std::string Func(const PrimFunc& f) {
    if (!f) return "func <null>\n";
    std::string out = "func @" + f->name + "(";
    for (size_t i = 0; i < f->buffer_params.size(); ++i) {
      const Buffer& b = f->buffer_params[i];
      out += (i ? ", %" : "%") + BufferDecl(b);
    }
    if (!f->scalar_params.empty()) {
      out += "; ";
      for (size_t i = 0; i < f->scalar_params.size(); ++i) {
        const Var& v = f->scalar_params[i];
        out += (i ? ", " : "") + Name(v.get());
        if (v) out += ": " + std::string(DTypeName(v->dtype));
      }
    }
    out += ")";
    int usual_inputs = std::max<int>(0, static_cast<int>(f->buffer_params.size()) - 1);
    if (f->num_inputs != usual_inputs) out += " num_inputs=" + std::to_string(f->num_inputs);
    if (!f->attrs.empty()) {
      out += " attrs {";
      bool first = true;
      for (const auto& [key, value] : f->attrs.values()) {
        out += (first ? "" : ", ") + key + " = " + AttrValueToString(value);
        first = false;
      }
      out += "}";
    }
    out_ = out + " {\n";
    Body(f->body, 1);
    return out_ + "}\n";
  }

  std::string TopStmt(const Stmt& s) {
    Body(s, 0);
    return out_;
  }

  std::string E(const Expr& e) {
    if (!e) return "<null>";
    switch (e->kind) {
#define KILN_LOOP_EXPR(N) \
  case ExprKind::k##N:    \
    return Print##N(static_cast<const N##Node*>(e.get()));
#include "ir/loop/loop_nodes.def"
    }
    return "<?>";
  }

 private:
  // ---- expressions ----

  std::string Operand(const Expr& e, bool parens) {
    return parens ? Cat({"(", E(e), ")"}) : E(e);
  }

  std::string Exprs(const std::vector<Expr>& es) {
    std::string s;
    for (size_t i = 0; i < es.size(); ++i) s += (i ? ", " : "") + E(es[i]);
    return s;
  }

  std::string Name(const VarNode* v) {
    return v ? vars_.Get(v, v->name) : "<null>";
  }
  std::string Name(const Buffer& b) {
    return b ? buffers_.Get(b.get(), b->name) : "<null>";
  }

  std::string PrintIntImm(const IntImmNode* n) {
    return IntText(n->value, n->dtype);
  }
  std::string PrintFloatImm(const FloatImmNode* n) {
    return FloatText(n->value, n->dtype);
  }
  std::string PrintVar(const VarNode* n) {
    return Name(n);
  }

  std::string PrintBinary(const BinaryNode* n) {
    if (n->op == BinaryOp::kMin || n->op == BinaryOp::kMax || n->op == BinaryOp::kShl ||
        n->op == BinaryOp::kShr)
      return Cat({BinaryOpName(n->op), "(", E(n->a), ", ", E(n->b), ")"});
    int p = OpPrecedence(n->op);
    // Comparisons do not chain: `a < b < c` would be read as one or the other tree.
    bool left_parens = IsComparison(n->op) ? Precedence(n->a) <= p : Precedence(n->a) < p;
    return Cat({Operand(n->a, left_parens), " ", BinaryOpName(n->op), " ",
                Operand(n->b, Precedence(n->b) <= p)});
  }

  std::string PrintNot(const NotNode* n) {
    return "!" + Operand(n->a, Precedence(n->a) < kPrecNot);
  }
  std::string PrintSelect(const SelectNode* n) {
    return Cat({"select(", E(n->cond), ", ", E(n->true_value), ", ", E(n->false_value), ")"});
  }
  std::string PrintCast(const CastNode* n) {
    return std::string(DTypeName(n->dtype)) + "(" + E(n->value) + ")";
  }
  std::string PrintLoad(const LoadNode* n) {
    return Cat({Name(n->buffer), "[", Exprs(n->indices), "]"});
  }
  std::string PrintCall(const CallNode* n) {
    return std::string(IntrinsicName(n->fn)) + "(" + Exprs(n->args) + ")";
  }
  std::string PrintRamp(const RampNode* n) {
    return "ramp(" + E(n->base) + ", " + std::to_string(n->stride) + ", " +
           std::to_string(n->lanes) + ")";
  }
  std::string PrintBroadcast(const BroadcastNode* n) {
    return "broadcast(" + E(n->value) + ", " + std::to_string(n->lanes) + ")";
  }
  std::string PrintReduce(const ReduceNode* n) {
    std::string s = std::string(ReduceKindName(n->combiner)) + "(" + E(n->source);
    for (const IterVar& axis : n->axes) s += ", " + Axis(axis);
    return s + ")";
  }

  // `v in [0, extent)`: the range of a reduction axis or block iter_var.
  std::string Axis(const IterVar& iv) {
    return Cat({Name(iv.var.get()), " in [0, ", E(iv.extent), ")"});
  }

  // min + extent, folded when both are integer constants, for half-open ranges.
  std::string End(const Expr& min, const Expr& extent) {
    int64_t lo = 0, n = 0;
    if (IsConstInt(min, &lo) && lo == 0) return E(extent);
    if (!min || !extent) return Cat({E(min), " + ", E(extent)});
    int64_t sum;
    if (IsConstInt(min, &lo) && IsConstInt(extent, &n) && !__builtin_add_overflow(lo, n, &sum))
      return IntText(sum, min->dtype);
    // Printed as the tree it would be, without MakeBinary's type check: the printer must show
    // ill-typed IR too.
    return E(
        std::make_shared<const BinaryNode>(BinaryOp::kAdd, min, extent, min->dtype, min->lanes));
  }

  std::string BufferDecl(const Buffer& b) {
    std::string s = Name(b);
    if (!b) return s;
    s += ": " + std::string(DTypeName(b->dtype)) + "[" + Exprs(b->shape) + "]";
    if (!b->strides.empty()) s += " strides [" + Exprs(b->strides) + "]";
    if (b->scope == BufferNode::Scope::kLocal) s += " local";
    return s;
  }

  std::string Region(const BufferRegion& r) {
    std::string s = Name(r.buffer) + "[";
    for (size_t d = 0; d < std::max(r.min.size(), r.extent.size()); ++d) {
      Expr min = d < r.min.size() ? r.min[d] : nullptr;
      Expr extent = d < r.extent.size() ? r.extent[d] : nullptr;
      int64_t one;
      s += d ? ", " : "";
      s += E(min);
      if (!(IsConstInt(extent, &one) && one == 1)) {
        s += ":";
        s += End(min, extent);
      }
    }
    return s + "]";
  }

  // ---- statements ----

  void Line(int indent, const std::string& text) {
    out_.append(2 * indent, ' ');
    out_ += text;
    out_ += '\n';
  }

  // A statement list: a Seq's statements, or the one statement.
  void Body(const Stmt& s, int indent) {
    if (const SeqNode* seq = AsSeq(s)) {
      for (size_t i = 0; i < seq->stmts.size(); ++i)
        S(seq->stmts[i], indent, i + 1 == seq->stmts.size());
    } else {
      S(s, indent, true);
    }
  }

  // `last`: whether `s` ends its block, so that a let in it may scope over the rest unbraced.
  void S(const Stmt& s, int indent, bool last) {
    if (!s) return Line(indent, "<null>");
    switch (s->kind) {
#define KILN_LOOP_STMT(N)                                         \
  case StmtKind::k##N:                                            \
    Print##N(static_cast<const N##Node*>(s.get()), indent, last); \
    return;
#include "ir/loop/loop_nodes.def"
    }
  }

  void Braced(const std::string& head, const Stmt& body, int indent) {
    Line(indent, head + " {");
    Body(body, indent + 1);
    Line(indent, "}");
  }

  void PrintLetStmt(const LetStmtNode* n, int indent, bool last) {
    std::string head = Cat({"let ", Name(n->var.get()), " = ", E(n->value)});
    if (!last) return Braced(head, n->body, indent);
    Line(indent, head + ";");
    Body(n->body, indent);
  }
  void PrintStore(const StoreNode* n, int indent, bool) {
    Line(indent, Cat({Name(n->buffer), "[", Exprs(n->indices), "] = ", E(n->value)}));
  }
  void PrintAlloc(const AllocNode* n, int indent, bool) {
    Line(indent, "alloc " + BufferDecl(n->buffer));
  }
  void PrintFree(const FreeNode* n, int indent, bool) {
    Line(indent, "free " + Name(n->buffer));
  }
  void PrintIfThenElse(const IfThenElseNode* n, int indent, bool) {
    Line(indent, "if (" + E(n->cond) + ") {");
    Body(n->then_case, indent + 1);
    if (n->else_case) {
      Line(indent, "} else {");
      Body(n->else_case, indent + 1);
    }
    Line(indent, "}");
  }
  void PrintFor(const ForNode* n, int indent, bool) {
    std::string head =
        Cat({"for ", Name(n->var.get()), " in [", E(n->min), ", ", End(n->min, n->extent), ")"});
    if (n->for_kind != ForKind::kSerial) head += std::string(" ") + ForKindName(n->for_kind);
    Braced(head, n->body, indent);
  }
  void PrintEvaluate(const EvaluateNode* n, int indent, bool) {
    Line(indent, "evaluate(" + E(n->value) + ")");
  }
  void PrintPrefetch(const PrefetchNode* n, int indent, bool) {
    Line(indent, "prefetch(" + E(n->target) + ")");
  }
  void PrintScheduleBlock(const ScheduleBlockNode* n, int indent, bool) {
    std::string head = "block " + n->name + "(";
    for (size_t i = 0; i < n->iter_vars.size(); ++i) {
      bool reduce = i < n->is_reduce.size() && n->is_reduce[i];
      head += Cat({i ? ", " : "", reduce ? "reduce " : "", Axis(n->iter_vars[i]), " = ",
                   i < n->bindings.size() ? E(n->bindings[i]) : "<missing>"});
    }
    Line(indent, head + ") {");
    for (const auto& [word, regions] : {std::pair{"reads ", &n->reads}, {"writes ", &n->writes}}) {
      if (regions->empty()) continue;
      std::string line = word;
      for (size_t i = 0; i < regions->size(); ++i) line += (i ? ", " : "") + Region((*regions)[i]);
      Line(indent + 1, line);
    }
    if (n->init) Braced("init", n->init, indent + 1);
    Body(n->body, indent + 1);
    Line(indent, "}");
  }
  void PrintSeq(const SeqNode* n, int indent, bool last) {
    // Only reached for a Seq nested in a Seq, which Seq() never builds; printed inline.
    for (size_t i = 0; i < n->stmts.size(); ++i)
      S(n->stmts[i], indent, last && i + 1 == n->stmts.size());
  }

  NameTable vars_, buffers_;
  std::string out_;
};

}  // namespace

std::string Print(const Expr& e) {
  return Printer().E(e);
}
std::string Print(const Stmt& s) {
  return Printer().TopStmt(s);
}
std::string Print(const PrimFunc& f) {
  return Printer().Func(f);
}

}  // namespace kiln::loop
