// The text IR parser: recursive descent over an on-demand lexer. See ir/text.h for the
// grammar.
//
// Robustness: every failure is a kiln::Error(kParseError) carrying `line:column:`. Recursion
// is capped at kMaxDepth levels so hostile nesting cannot overflow the stack, and a constant's
// values are counted before its tensor is allocated, so a huge declared shape cannot make the
// parser allocate more than the text itself justifies.
//
// The lexer is ir/text_lexer.h.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <unordered_map>

#include "ir/text.h"
#include "ir/text_lexer.h"

namespace kiln {

namespace {

using text::IsDigit;
using text::kMaxDepth;
using text::Tok;
using text::Token;

// One literal of a constant's value list, converted once the dtype and count are checked.
struct Literal {
  Tok kind;
  std::string text;  // with its '-' sign, if any
  size_t pos;
};

bool IsAllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!IsDigit(c)) return false;
  return true;
}

class Parser : public text::TextLexer {
 public:
  Parser(const std::string& src, const std::vector<Tensor>* meta) : TextLexer(src), meta_(meta) {}

  IRModule Module() {
    std::map<std::string, Function> fns;
    ScanTypeParams();
    while (Peek().kind != Tok::kEnd) {
      Token kw = Next();
      if (kw.kind == Tok::kIdent && kw.text == "type") {
        ParseAdt(kw);
        continue;
      }
      if (kw.kind != Tok::kIdent || kw.text != "def")
        Fail(kw.begin, "expected 'def' or 'type', got " + Describe(kw));
      Token name = Next();
      if (name.kind != Tok::kGlobal)
        Fail(name.begin, "expected a function name '@name' after 'def', got " + Describe(name));
      if (fns.count(name.text)) Fail(name.begin, "redefinition of function " + Source(name));
      scopes_.clear();
      type_params_.clear();
      if (PeekPunct("<")) type_params_ = ParseTypeParams();
      fns[name.text] = FunctionTail(type_params_);
    }
    // What the read-ahead told must match what was defined: it reads raw lines, so a header
    // inside a comment could have misled it.
    for (const auto& [name, pos] : kinds_used_) {
      auto it = fns.find(name);
      std::vector<ParamKind> kinds;
      if (it != fns.end())
        for (const Type& t : it->second->type_params) kinds.push_back(AsTypeVar(t)->param_kind);
      if (it == fns.end() || kinds != global_kinds_[name])
        Fail(pos, "type arguments for @" + name + ", which has no such type parameters");
    }
    for (const auto& [name, pos] : adts_used_) {
      auto it = adts_.find(name);
      if (it == adts_.end() || it->second->type_params.size() != adt_arity_[name])
        Fail(pos, "unknown type '" + name + "' (or not of that arity)");
    }
    IRModule m(std::move(fns));
    for (const auto& [name, adt] : adts_) m = m.WithAdt(adt);
    return m;
  }

  Expr Standalone(const std::map<std::string, Var>& vars) {
    scopes_.emplace_back();
    for (const auto& [name, v] : vars) scopes_.back()[name] = v;
    Expr e = Body();
    ExpectEnd();
    return e;
  }

  Type StandaloneType() {
    Type t = ParseType();
    ExpectEnd();
    return t;
  }

 private:
  // number := ['-'] (INT | FLOAT | 'inf' | 'nan'); false when the next token starts none.
  bool ParseNumber(AttrValue* out) {
    bool negative = Accept("-");
    Token t = Peek();
    if (t.kind == Tok::kInt) {
      *out = IntValue(Next(), negative);
    } else if (t.kind == Tok::kFloat) {
      Token f = Next();
      *out = FloatValue((negative ? "-" : "") + f.text, f.begin);
    } else if (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan")) {
      double v = t.text == "inf" ? std::numeric_limits<double>::infinity()
                                 : std::numeric_limits<double>::quiet_NaN();
      Next();
      *out = negative ? -v : v;
    } else {
      if (negative) Fail(t.begin, "expected a number after '-', got " + Describe(t));
      return false;
    }
    return true;
  }

  AttrValue ParseAttrValue() {
    Token t = Peek();
    AttrValue v;
    if (ParseNumber(&v)) return v;
    if (t.kind == Tok::kString) return Next().text;
    if (t.kind == Tok::kIdent) {
      Token id = Next();
      if (id.text == "true") return true;
      if (id.text == "false") return false;
      DType d;
      if (ParseDType(id.text, &d)) return d;
      Fail(id.begin, "unknown attribute value " + Source(id));
    }
    if (PeekPunct("[")) {
      Next();
      std::vector<AttrValue> items;
      if (!PeekPunct("]")) {
        do {
          AttrValue item;
          if (!ParseNumber(&item))
            Fail(Peek().begin, "expected a number in an attribute list, got " + Describe(Peek()));
          items.push_back(std::move(item));
        } while (Accept(","));
      }
      Expect("]", "after the attribute list");
      bool any_float = false;
      for (const AttrValue& i : items) any_float = any_float || KindOf(i) == AttrKind::kFloat;
      if (!any_float) {
        std::vector<int64_t> ints;
        for (const AttrValue& i : items) ints.push_back(std::get<int64_t>(i));
        return ints;
      }
      std::vector<double> floats;
      for (const AttrValue& i : items)
        floats.push_back(KindOf(i) == AttrKind::kInt ? static_cast<double>(std::get<int64_t>(i))
                                                     : std::get<double>(i));
      return floats;
    }
    Fail(t.begin, "expected an attribute value, got " + Describe(t));
  }

  // (IDENT | STRING) '=' attr_value, into `attrs`.
  void ParseAttr(Attrs* attrs) {
    Token key = Next();
    if (key.kind != Tok::kIdent && key.kind != Tok::kString)
      Fail(key.begin, "expected an attribute name, got " + Describe(key));
    Expect("=", "after the attribute name");
    if (attrs->Has(key.text)) Fail(key.begin, "duplicate attribute " + Source(key));
    attrs->Set(key.text, ParseAttrValue());
  }

  // ---- Types --------------------------------------------------------------------------------

  Type ParseType() {
    DepthGuard guard(this, Peek().begin);
    Token t = Next();
    if (t.kind == Tok::kPunct && t.text == "?") return IncompleteType();
    if (t.kind == Tok::kPunct && t.text == "(") {
      if (Accept(")")) return TupleType({});
      std::vector<Type> fields{ParseType()};
      if (Accept(")")) return fields[0];  // grouping; a 1-tuple is written `(t,)`
      Expect(",", "in a tuple type");
      while (!PeekPunct(")")) {
        fields.push_back(ParseType());
        if (!Accept(",")) break;
      }
      Expect(")", "after the tuple type's fields");
      return TupleType(std::move(fields));
    }
    if (t.kind == Tok::kIdent && t.text == "fn") {
      Expect("(", "after 'fn' in a function type");
      std::vector<Type> params;
      if (!PeekPunct(")")) {
        do params.push_back(ParseType());
        while (Accept(","));
      }
      Expect(")", "after the parameter types");
      Expect("->", "in a function type");
      return FuncType(std::move(params), ParseType());
    }
    if (t.kind != Tok::kIdent) Fail(t.begin, "expected a type, got " + Describe(t));
    DType dtype;
    if (t.text == "Tensor") return ParseTensorOf();
    if (FindTypeParam(t.text)) return KindedParam(t, ParamKind::kType, "a type");
    Adt adt = FindAdt(t.text);
    auto ahead = adt_arity_.find(t.text);
    if (adt || ahead != adt_arity_.end()) {
      if (!adt) adts_used_.emplace(t.text, t.begin);
      const size_t arity = adt ? adt->type_params.size() : ahead->second;
      std::vector<Type> args;
      if (Accept("[")) {
        do args.push_back(ParseType());
        while (Accept(","));
        Expect("]", "after the type arguments");
      }
      if (args.size() != arity)
        Fail(t.begin,
             StrCat("ADT ", t.text, " takes ", arity, " type arguments, got ", args.size()));
      return TypeCall(t.text, std::move(args));
    }
    if (!ParseDType(t.text, &dtype)) Fail(t.begin, "unknown type " + Source(t));
    Expect("[", "after the dtype");
    SetMode(Mode::kDims);
    Shape shape;
    if (!PeekPunct("]")) {
      do shape.push_back(ParseDim());
      while (Accept(","));
    }
    Expect("]", "after the dimensions");
    SetMode(Mode::kNormal);
    return TensorType(std::move(shape), dtype);
  }

  // `Tensor[s, f32]`, `Tensor[(n, 3), d]`: a shape parameter or `(dims)`, then a dtype or a
  // dtype parameter.
  Type ParseTensorOf() {
    Expect("[", "after 'Tensor'");
    Type shape_var;
    Shape shape;
    if (PeekPunct("(")) {
      shape = ParseTypeArg(ParamKind::kShape).shape;
    } else {
      Token s = Next();
      if (s.kind != Tok::kIdent) Fail(s.begin, "expected a shape, got " + Describe(s));
      shape_var = KindedParam(s, ParamKind::kShape, "a tensor's shape");
    }
    Expect(",", "after the tensor's shape");
    Token d = Next();
    Type dtype_var;
    DType dtype = DType::kFloat32;
    if (d.kind != Tok::kIdent) Fail(d.begin, "expected a dtype, got " + Describe(d));
    if (FindTypeParam(d.text)) {
      dtype_var = KindedParam(d, ParamKind::kBaseType, "a tensor's dtype");
    } else if (!ParseDType(d.text, &dtype)) {
      Fail(d.begin, "unknown dtype " + Source(d));
    }
    Expect("]", "after the tensor's dtype");
    return TensorTypeOf(shape_var, dtype_var, std::move(shape), dtype);
  }

  // Dim arithmetic throws on overflow or division by zero; report it at the operator.
  template <typename Fn>
  Dim DimOp(size_t pos, Fn&& fn) {
    try {
      return fn();
    } catch (const Error& e) {
      Fail(pos, e.what());
    }
  }

  Dim ParseDim() {
    DepthGuard guard(this, Peek().begin);
    Dim acc;
    if (PeekPunct("-")) {
      size_t pos = Next().begin;
      Dim p = ParseDimProduct();
      acc = DimOp(pos, [&] { return Dim(0) - p; });
    } else {
      acc = ParseDimProduct();
    }
    while (PeekPunct("+") || PeekPunct("-")) {
      Token op = Next();
      Dim rhs = ParseDimProduct();
      acc = DimOp(op.begin, [&] { return op.text == "+" ? acc + rhs : acc - rhs; });
    }
    return acc;
  }

  Dim ParseDimProduct() {
    Dim acc = ParseDimAtom();
    while (PeekPunct("*") || PeekPunct("//") || PeekPunct("%")) {
      Token op = Next();
      Dim rhs = ParseDimAtom();
      acc = DimOp(op.begin, [&] {
        if (op.text == "*") return acc * rhs;
        if (op.text == "//") return FloorDiv(acc, rhs);
        return Mod(acc, rhs);
      });
    }
    return acc;
  }

  Dim ParseDimAtom() {
    Token t = Next();
    if (t.kind == Tok::kInt) return Dim(IntValue(t, false));
    if (t.kind == Tok::kString) return Dim::Symbol(t.text);
    if (t.kind == Tok::kIdent) {
      if ((t.text == "min" || t.text == "max") && PeekPunct("(")) {
        Next();
        Dim a = ParseDim();
        Expect(",", StrCat("between the operands of ", t.text));
        Dim b = ParseDim();
        Expect(")", StrCat("after the operands of ", t.text));
        return DimOp(t.begin, [&] { return t.text == "min" ? Min(a, b) : Max(a, b); });
      }
      return Dim::Symbol(t.text);
    }
    if (t.kind == Tok::kPunct && t.text == "(") {
      Dim d = ParseDim();
      Expect(")", "after the parenthesized dimension");
      return d;
    }
    Fail(t.begin, "expected a dimension, got " + Describe(t));
  }

  // ---- Type parameters and ADTs -------------------------------------------------------------

  // The kinds of each def's type parameters, read ahead so that a call may give type arguments
  // to a function defined later (or to itself).
  // Reads the header of each def and type that starts a line (as the printer writes them), so
  // calls may give type arguments to functions defined later and types may name ADTs defined
  // later (mutual recursion included); linear in the text. A header it cannot read is left to
  // the parse proper to report.
  void ScanTypeParams() {
    const Mark start = Save();
    for (size_t p = 0; p < src_.size(); p = src_.find('\n', p) + 1) {
      size_t q = src_.find_first_not_of(" \t", p);
      if (q == std::string::npos) break;
      if (src_.compare(q, 5, "type ") == 0) {
        try {
          Restore({q, false});
          Next();  // 'type'
          Token name = Next();
          size_t arity = 0;
          if (name.kind == Tok::kIdent && Accept("[")) {
            do {
              if (Next().kind != Tok::kIdent) break;
              ++arity;
            } while (Accept(","));
          }
          if (name.kind == Tok::kIdent) adt_arity_[name.text] = arity;
        } catch (const Error&) {
        }
      }
      if (src_.compare(q, 4, "def ") == 0) {
        try {
          Restore({q, false});
          Next();  // 'def'
          Token name = Next();
          if (name.kind == Tok::kGlobal && PeekPunct("<")) {
            std::vector<Type> params = ParseTypeParams();
            std::vector<ParamKind>& kinds = global_kinds_[name.text];
            kinds.clear();
            for (const Type& t : params) kinds.push_back(AsTypeVar(t)->param_kind);
          }
        } catch (const Error&) {
        }
      }
      if (src_.find('\n', p) == std::string::npos) break;
    }
    Restore(start);
  }

  // `<s : Shape, t : Type>`
  std::vector<Type> ParseTypeParams() {
    Expect("<", "to start the type parameters");
    std::vector<Type> params;
    do {
      Token name = Next();
      if (name.kind != Tok::kIdent)
        Fail(name.begin, "expected a type parameter name, got " + Describe(name));
      for (const Type& p : params)
        if (AsTypeVar(p)->name == name.text)
          Fail(name.begin, "type parameter " + Source(name) + " is declared twice");
      Expect(":", "after the type parameter's name");
      Token kind = Next();
      ParamKind k;
      if (kind.kind != Tok::kIdent || !ParseParamKind(kind.text, &k))
        Fail(kind.begin,
             "expected a kind (Type, Shape, BaseType or ShapeVar), got " + Describe(kind));
      params.push_back(TypeVar(name.text, k));
    } while (Accept(","));
    Expect(">", "after the type parameters");
    return params;
  }

  const TypeVarNode* FindTypeParam(const std::string& name) const {
    for (const Type& p : type_params_)
      if (AsTypeVar(p)->name == name) return AsTypeVar(p);
    return nullptr;
  }

  // The type parameter `t` names, checked to be of kind `want` for `place`.
  Type KindedParam(const Token& t, ParamKind want, const char* place) {
    const TypeVarNode* v = FindTypeParam(t.text);
    if (!v) Fail(t.begin, "unknown type parameter " + Source(t));
    if (v->param_kind != want)
      Fail(t.begin, StrCat("kind error: '", t.text, "' has kind ", ParamKindName(v->param_kind),
                           ", but ", place, " needs kind ", ParamKindName(want)));
    return TypeVar(v->name, v->param_kind);
  }

  Adt FindAdt(const std::string& name) const {
    if (name == ListAdt()->name) return ListAdt();
    auto it = adts_.find(name);
    return it == adts_.end() ? nullptr : it->second;
  }

  // The ADT with a constructor of that name, and the constructor's tag.
  std::pair<Adt, int> FindConstructor(const std::string& name) const {
    if (int tag = ListAdt()->Find(name); tag >= 0) return {ListAdt(), tag};
    for (const auto& [n, adt] : adts_)
      if (int tag = adt->Find(name); tag >= 0) return {adt, tag};
    return {nullptr, -1};
  }

  // `type Tree[a] { Leaf, Node(a, Tree[a], Tree[a]) }`; the name is known inside (recursion).
  void ParseAdt(const Token& kw) {
    Token name = Next();
    if (name.kind != Tok::kIdent) Fail(name.begin, "expected an ADT name, got " + Describe(name));
    DType dummy;
    if (FindAdt(name.text) || ParseDType(name.text, &dummy) || name.text == "Tensor" ||
        name.text == "fn")
      Fail(name.begin, "type " + Source(name) + " is already defined");
    auto adt = std::make_shared<AdtDef>();
    adt->name = name.text;
    if (Accept("[")) {
      do {
        Token p = Next();
        if (p.kind != Tok::kIdent)
          Fail(p.begin, "expected a type parameter name, got " + Describe(p));
        for (const Type& q : adt->type_params)
          if (AsTypeVar(q)->name == p.text)
            Fail(p.begin, "type parameter " + Source(p) + " is declared twice");
        adt->type_params.push_back(TypeVar(p.text));
      } while (Accept(","));
      Expect("]", "after the ADT's type parameters");
    }
    adts_[adt->name] = adt;  // visible to its own constructors' fields
    type_params_ = adt->type_params;
    Expect("{", "to start the constructors");
    do {
      if (PeekPunct("}")) break;
      Token c = Next();
      if (c.kind != Tok::kIdent) Fail(c.begin, "expected a constructor name, got " + Describe(c));
      if (FindConstructor(c.text).first || adt->Find(c.text) >= 0)
        Fail(c.begin, "constructor " + Source(c) + " is already defined");
      if (IsReserved(c.text))
        Fail(c.begin, "constructor " + Source(c) + " would hide an op or a keyword");
      AdtConstructor ctor{c.text, {}};
      if (Accept("("))
        CommaList(")", "after the constructor's fields", [&] {
          size_t pos = Peek().begin;
          ctor.fields.push_back(ParseType());
          if (!IsComplete(ctor.fields.back()))
            Fail(pos, "a constructor's field type must be complete");
        });
      adt->constructors.push_back(std::move(ctor));
    } while (Accept(","));
    Expect("}", "after the constructors");
    type_params_.clear();
    (void)kw;
  }

  // Names a constructor may not take: they already mean something in an expression.
  static bool IsReserved(const std::string& name) {
    for (const char* k : {"fn", "const", "meta", "match", "_", "def", "type", "attrs", "where"})
      if (name == k) return true;
    return OpRegistry::Global().Find(name) != nullptr;
  }

  // A type argument of kind `kind`: a type, `(dims)`, a dtype, or a dim.
  TypeArg ParseTypeArg(ParamKind kind) {
    TypeArg a;
    a.kind = kind;
    switch (kind) {
      case ParamKind::kType:
        a.type = ParseType();
        break;
      case ParamKind::kShape:
        Expect("(", "to start a shape argument");
        SetMode(Mode::kDims);
        CommaList(")", "after the shape argument", [&] {
          if (!PeekPunct(")")) a.shape.push_back(ParseDim());
        });
        SetMode(Mode::kNormal);
        break;
      case ParamKind::kBaseType: {
        Token t = Next();
        if (t.kind != Tok::kIdent || !ParseDType(t.text, &a.dtype))
          Fail(t.begin, "expected a dtype argument, got " + Describe(t));
        break;
      }
      case ParamKind::kShapeVar:
        SetMode(Mode::kDims);
        a.dim = ParseDim();
        SetMode(Mode::kNormal);
        break;
    }
    return a;
  }

  // `Cons(_, %t)`, `(%a, _)`, `%x`, `_`; variables are declared in the current scope.
  Pattern ParsePattern() {
    DepthGuard guard(this, Peek().begin);
    Token t = Next();
    if (t.kind == Tok::kIdent && t.text == "_") return WildcardPattern();
    if (t.kind == Tok::kLocal) {
      Type type;
      if (Accept(":")) type = ParseType();
      Var v = MakeVar(NodeName(t), std::move(type));
      Declare(t, v);
      return VarPattern(v);
    }
    if (t.kind == Tok::kPunct && t.text == "(") {
      std::vector<Pattern> fields;
      CommaList(")", "after the tuple pattern", [&] {
        if (!PeekPunct(")")) fields.push_back(ParsePattern());
      });
      return TuplePattern(std::move(fields));
    }
    if (t.kind == Tok::kIdent) {
      auto [adt, tag] = FindConstructor(t.text);
      if (!adt) Fail(t.begin, "unknown constructor " + Source(t) + " in a pattern");
      std::vector<Pattern> fields;
      if (Accept("("))
        CommaList(")", "after the constructor pattern's fields",
                  [&] { fields.push_back(ParsePattern()); });
      try {
        return ConstructorPattern(adt, tag, std::move(fields));
      } catch (const Error& e) {
        Fail(t.begin, e.what());
      }
    }
    Fail(t.begin, "expected a pattern, got " + Describe(t));
  }

  // `match (%l) { Cons(%h, %t) => { body }, Nil => { body } }`
  Expr ParseMatch() {
    Next();  // 'match'
    Expect("(", "after 'match'");
    Expr data = ParseExpr().e;
    Expect(")", "after the matched value");
    Expect("{", "to start the match clauses");
    std::vector<MatchClause> clauses;
    while (!PeekPunct("}")) {
      scopes_.emplace_back();
      Pattern p = ParsePattern();
      Expect("=>", "after the pattern");
      Expect("{", "to start the clause body");
      Expr body = Body();
      Expect("}", "at the end of the clause body");
      scopes_.pop_back();
      clauses.push_back({std::move(p), std::move(body)});
      Accept(",");
    }
    Expect("}", "after the match clauses");
    if (clauses.empty()) Fail(Peek().begin, "a match needs at least one clause");
    return MakeMatch(std::move(data), std::move(clauses));
  }

  // `@f`, `@f(args)`, `@f<type args>(args)`.
  Expr ParseGlobal() {
    Token name = Next();
    Expr g = MakeGlobalVar(name.text);
    std::vector<TypeArg> type_args;
    if (PeekPunct("<") && Peek().begin == name.end) {
      Token open = Next();
      auto it = global_kinds_.find(name.text);
      const size_t n = it == global_kinds_.end() ? 0 : it->second.size();
      kinds_used_.emplace(name.text, open.begin);
      do {
        if (type_args.size() >= n)
          Fail(Peek().begin, StrCat("@", name.text, " has ", n, " type parameters"));
        type_args.push_back(ParseTypeArg(it->second[type_args.size()]));
      } while (Accept(","));
      Expect(">", "after the type arguments");
      (void)open;
    }
    if (!(PeekPunct("(") && Peek().begin == Save().pos)) {
      if (!type_args.empty()) Fail(Peek().begin, "expected '(' after the type arguments");
      return g;
    }
    Next();
    std::vector<Expr> args;
    CommaList(")", "after arguments", [&] { args.push_back(ParseExpr().e); });
    auto c = std::make_shared<CallNode>(*AsCall(MakeFnCall(g, std::move(args))));
    c->type_args = std::move(type_args);
    return c;
  }

  Expr ParseConstructorCall(const Adt& adt, int tag) {
    Token name = Next();
    std::vector<Expr> args;
    if (PeekPunct("(") && Peek().begin == name.end) {
      Next();
      CommaList(")", "after the constructor's arguments", [&] { args.push_back(ParseExpr().e); });
    }
    return MakeFnCall(MakeConstructor(adt, adt->constructors[tag].name), std::move(args));
  }

  // ---- Scopes -------------------------------------------------------------------------------

  Expr Lookup(const Token& t) const {
    for (size_t i = scopes_.size(); i-- > 0;) {
      auto it = scopes_[i].find(t.text);
      if (it != scopes_[i].end()) return it->second;
    }
    Fail(t.begin, "unknown variable " + Source(t));
  }

  void Declare(const Token& t, Expr e) {
    for (const auto& scope : scopes_)
      if (scope.count(t.text)) Fail(t.begin, "redefinition of " + Source(t));
    scopes_.back()[t.text] = std::move(e);
  }

  // An unquoted all-digit name is a printer counter, not a source name.
  static std::string NodeName(const Token& t) {
    return t.quoted || !IsAllDigits(t.text) ? t.text : std::string();
  }

  // ---- Expressions --------------------------------------------------------------------------

  // A parsed expression, and whether its node was created by this expression (so a binding may
  // give it a name and type) rather than being a reference to an existing one.
  struct Parsed {
    Expr e;
    bool fresh;
  };

  Function FunctionTail(const std::vector<Type>& type_params = {}) {
    Expect("(", "to start the parameter list");
    scopes_.emplace_back();
    std::vector<Var> params;
    auto kinds = [&](const Type& type, size_t pos) {
      if (type_params.empty()) return;
      try {
        CheckKinds(type, type_params, "the annotation");
      } catch (const Error& e) {
        Fail(pos, e.what());
      }
    };
    if (!PeekPunct(")")) {
      do {
        Token name = Next();
        if (name.kind != Tok::kLocal)
          Fail(name.begin, "expected a parameter '%name', got " + Describe(name));
        Type type;
        if (Accept(":")) {
          size_t pos = Peek().begin;
          type = ParseType();
          kinds(type, pos);
        }
        Var v = MakeVar(NodeName(name), std::move(type));
        Declare(name, v);
        params.push_back(std::move(v));
      } while (Accept(","));
    }
    Expect(")", "after the parameters");
    Type ret;
    if (Accept("->")) {
      size_t pos = Peek().begin;
      ret = ParseType();
      kinds(ret, pos);
    }
    std::vector<TypeConstraint> constraints;
    if (PeekIdent("where")) {
      if (type_params.empty())
        Fail(Peek().begin, "'where' constraints need type parameters to constrain");
      Next();
      do constraints.push_back(ParseConstraint());
      while (Accept(","));
    }
    Attrs attrs;
    if (PeekIdent("attrs")) {
      Next();
      Expect("{", "after 'attrs'");
      if (!PeekPunct("}")) {
        do ParseAttr(&attrs);
        while (Accept(","));
      }
      Expect("}", "after the function attributes");
    }
    Expect("{", "to start the function body");
    Expr body = Body();
    Expect("}", "at the end of the function body");
    scopes_.pop_back();
    if (type_params.empty() && constraints.empty())
      return MakeFunction(std::move(params), std::move(body), std::move(ret), std::move(attrs));
    auto f = std::make_shared<FunctionNode>(*MakePolyFunction(
        type_params, std::move(params), std::move(body), std::move(ret), std::move(constraints)));
    f->attrs = std::move(attrs);
    return f;
  }

  // `t3 = add(t1, t2)`
  TypeConstraint ParseConstraint() {
    TypeConstraint c;
    c.result = ParseType();
    Expect("=", "in a type constraint");
    Token op = Next();
    if (op.kind != Tok::kIdent || !OpRegistry::Global().Find(op.text))
      Fail(op.begin, "expected an op name in a type constraint, got " + Describe(op));
    c.op = op.text;
    Expect("(", "after the constraint's op");
    CommaList(")", "after the constraint's types", [&] { c.args.push_back(ParseType()); });
    return c;
  }

  Expr Body() {
    while (Peek().kind == Tok::kLocal) {
      Token second = PeekSecond();
      if (second.kind != Tok::kPunct || (second.text != ":" && second.text != "=")) break;
      Token name = Next();
      Type type;
      if (Accept(":")) type = ParseType();
      Expect("=", "after the binding name");
      size_t rhs_pos = Peek().begin;
      Parsed rhs = ParseExpr();
      Expr e = rhs.e;
      if (rhs.fresh) {
        e = Renamed(e, NodeName(name), type);
      } else if (type) {
        Fail(rhs_pos,
             "a type annotation on a binding of an existing value; annotate where it is "
             "defined");
      }
      Declare(name, std::move(e));
    }
    return ParseExpr().e;
  }

  // A copy of a node this parser just created, with the binding's name and type.
  static Expr Renamed(const Expr& e, const std::string& name, const Type& type) {
    if (name.empty() && !type) return e;
    switch (e->kind) {
#define KILN_EXPR_NODE(N)                                                      \
  case ExprKind::k##N: {                                                       \
    auto n = std::make_shared<N##Node>(*static_cast<const N##Node*>(e.get())); \
    n->name = name;                                                            \
    if (type) n->type = type;                                                  \
    return n;                                                                  \
  }
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE
    }
    return e;
  }

  Parsed ParseExpr() {
    DepthGuard guard(this, Peek().begin);
    Parsed p = ParsePrimary();
    while (PeekPunct(".")) {
      Next();
      Token idx = Next();
      if (idx.kind != Tok::kInt)
        Fail(idx.begin, "expected a tuple index after '.', got " + Describe(idx));
      int64_t i = IntValue(idx, false);
      if (i > std::numeric_limits<int>::max())
        Fail(idx.begin, "tuple index " + Source(idx) + " is out of range");
      p = {MakeTupleGetItem(p.e, static_cast<int>(i)), true};
    }
    return p;
  }

  Parsed ParsePrimary() {
    Token t = Peek();
    if (t.kind == Tok::kLocal) {
      Token name = Next();
      Expr e = Lookup(name);
      // The call's '(' must touch the name, so a result tuple on the next line is not a call.
      if (PeekPunct("(") && Peek().begin == name.end) {
        Next();
        std::vector<Expr> args;
        if (!PeekPunct(")")) {
          do args.push_back(ParseExpr().e);
          while (Accept(","));
        }
        Expect(")", "after arguments");
        return {MakeFnCall(e, std::move(args)), true};
      }
      return {e, false};
    }
    if (t.kind == Tok::kPunct && t.text == "(") {
      Next();
      if (Accept(")")) return {MakeTuple({}), true};
      Parsed first = ParseExpr();
      if (Accept(")")) return first;  // grouping; a 1-tuple is written `(x,)`
      Expect(",", "or ')' after a tuple field");
      std::vector<Expr> fields{first.e};
      while (!PeekPunct(")")) {
        fields.push_back(ParseExpr().e);
        if (!Accept(",")) break;
      }
      Expect(")", "after the tuple fields");
      return {MakeTuple(std::move(fields)), true};
    }
    if (t.kind == Tok::kGlobal) {
      Expr g = ParseGlobal();
      return {g, AsCall(g) != nullptr};  // a bare reference keeps the callee's name
    }
    if (t.kind == Tok::kIdent) {
      if (t.text == "fn") {
        Next();
        return {FunctionTail(), true};
      }
      if (t.text == "match" && PeekSecond().kind == Tok::kPunct && PeekSecond().text == "(")
        return {ParseMatch(), true};
      if (auto [adt, tag] = FindConstructor(t.text); adt)
        return {ParseConstructorCall(adt, tag), true};
      if (t.text == "const") return {ParseConstant(), true};
      if (t.text == "meta") {
        size_t pos = t.begin;
        Tensor value = ParseMetaRef();
        if (!value.defined()) Fail(pos, "the metadata entry is an undefined tensor");
        return {MakeConstant(value), true};
      }
      return {ParseOpCall(), true};
    }
    Fail(t.begin, "expected an expression, got " + Describe(t));
  }

  Expr ParseOpCall() {
    Token name = Next();
    if (!PeekPunct("(")) Fail(name.begin, "expected an expression, got " + Source(name));
    const OpDef* op = OpRegistry::Global().Find(name.text);
    if (!op) Fail(name.begin, "unknown op " + Source(name));
    Next();
    std::vector<Expr> args;
    Attrs attrs;
    if (!PeekPunct(")")) {
      do {
        bool is_attr = false;
        if (Peek().kind == Tok::kIdent) {
          Token second = PeekSecond();
          is_attr = second.kind == Tok::kPunct && second.text == "=";
        }
        if (is_attr) {
          ParseAttr(&attrs);
        } else {
          if (!attrs.empty()) Fail(Peek().begin, "a positional argument after attributes");
          args.push_back(ParseExpr().e);
        }
      } while (Accept(","));
    }
    Expect(")", "after arguments");
    try {
      return MakeCall(op, std::move(args), attrs);
    } catch (const Error& e) {
      Fail(name.begin, e.what());
    }
  }

  Tensor ParseMetaRef() {
    Token kw = Next();
    Expect("[", "after 'meta'");
    Token idx = Next();
    if (idx.kind != Tok::kInt) Fail(idx.begin, "expected a metadata index, got " + Describe(idx));
    int64_t i = IntValue(idx, false);
    Expect("]", "after the metadata index");
    if (!meta_) Fail(kw.begin, "meta[" + idx.text + "] used, but no metadata table was given");
    if (static_cast<uint64_t>(i) >= meta_->size())
      Fail(idx.begin,
           StrCat("meta[", i, "] is out of range: the table has ", meta_->size(), " entries"));
    return (*meta_)[i];
  }

  Expr ParseConstant() {
    Next();  // 'const'
    Expect("(", "after 'const'");
    size_t type_pos = Peek().begin;
    Type type = ParseType();
    const TensorTypeNode* tt = AsTensor(type);
    if (!tt) Fail(type_pos, "a constant's type must be a tensor type, got " + PrintType(type));
    if (!IsConstShape(tt->shape))
      Fail(type_pos, "a constant's shape must be concrete, got " + PrintType(type));
    std::vector<int64_t> shape = ConstShape(tt->shape);
    int64_t numel;
    try {
      numel = CheckedNumel(shape, "constant");
    } catch (const Error& e) {
      Fail(type_pos, e.what());
    }
    Expect(",", "after the constant's type");
    Tensor value;
    if (PeekIdent("meta")) {
      size_t pos = Peek().begin;
      value = ParseMetaRef();
      if (!value.defined() || value.dtype() != tt->dtype || value.shape() != shape)
        Fail(pos, StrCat("the metadata entry is ",
                         value.defined() ? value.TypeString() : std::string("undefined"),
                         ", but the constant is declared ", PrintType(type)));
    } else {
      size_t values_pos = Peek().begin;
      std::vector<Literal> literals;
      if (Accept("[")) {
        if (!PeekPunct("]")) {
          do literals.push_back(ParseLiteral());
          while (Accept(","));
        }
        Expect("]", "after the constant's values");
      } else {
        literals.push_back(ParseLiteral());
      }
      if (static_cast<int64_t>(literals.size()) != numel)
        Fail(values_pos, StrCat("constant ", PrintType(type), " needs ", numel, " values, got ",
                                literals.size()));
      value = Tensor::Empty(tt->dtype, shape);
      for (size_t i = 0; i < literals.size(); ++i) StoreLiteral(value, i, literals[i]);
    }
    Expect(")", "after the constant's values");
    return MakeConstant(std::move(value));
  }

  Literal ParseLiteral() {
    size_t pos = Peek().begin;
    bool negative = Accept("-");
    Token t = Next();
    bool ok = t.kind == Tok::kInt || t.kind == Tok::kFloat ||
              (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan" ||
                                         (!negative && (t.text == "true" || t.text == "false"))));
    if (!ok) Fail(t.begin, "expected a constant value, got " + Describe(t));
    return Literal{t.kind, (negative ? "-" : "") + t.text, pos};
  }

  void StoreLiteral(Tensor& tensor, size_t i, const Literal& lit) {
    DType dtype = tensor.dtype();
    std::string type_name(DTypeName(dtype));
    DispatchDType(dtype, [&]<typename T>() {
      T* data = static_cast<T*>(tensor.raw_data());
      if constexpr (std::is_same_v<T, bool>) {
        if (lit.kind != Tok::kIdent || (lit.text != "true" && lit.text != "false"))
          Fail(lit.pos, "expected true or false in a bool constant, got '" + lit.text + "'");
        data[i] = lit.text == "true";
      } else if constexpr (std::is_integral_v<T>) {
        if (lit.kind != Tok::kInt)
          Fail(lit.pos,
               "expected an integer in an " + type_name + " constant, got '" + lit.text + "'");
        Token digits{Tok::kInt, lit.text[0] == '-' ? lit.text.substr(1) : lit.text, false, lit.pos,
                     lit.pos + lit.text.size()};
        int64_t v = IntValue(digits, lit.text[0] == '-');
        if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            v > static_cast<int64_t>(std::numeric_limits<T>::max()))
          Fail(lit.pos, "value " + lit.text + " is out of range for " + type_name);
        data[i] = static_cast<T>(v);
      } else {
        if (lit.kind == Tok::kIdent && (lit.text == "true" || lit.text == "false"))
          Fail(lit.pos,
               "expected a number in an " + type_name + " constant, got '" + lit.text + "'");
        bool is_special = lit.kind == Tok::kIdent;
        if (is_special) {
          bool neg = lit.text[0] == '-';
          bool inf = lit.text.ends_with("inf");
          double v = inf ? std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
          if (neg) v = -v;
          if constexpr (std::is_same_v<T, double>) {
            data[i] = v;
          } else {
            data[i] = T(static_cast<float>(v));
          }
          return;
        }
        FloatValue(lit.text, lit.pos);  // rejects malformed and overflowing text
        if constexpr (std::is_same_v<T, double>) {
          data[i] = std::strtod(lit.text.c_str(), nullptr);
        } else {
          // Read f32 text directly as float: going through double could round twice.
          float f = std::strtof(lit.text.c_str(), nullptr);
          T v = T(f);
          if (std::isinf(static_cast<float>(v)))
            Fail(lit.pos, "value " + lit.text + " is out of range for " + type_name);
          data[i] = v;
        }
      }
    });
  }

  std::vector<Type> type_params_;  // of the def being parsed
  std::map<std::string, std::vector<ParamKind>> global_kinds_;
  std::map<std::string, Adt> adts_;
  std::map<std::string, size_t> adt_arity_;   // read ahead: every type's name and arity
  std::map<std::string, size_t> kinds_used_;  // defs given type arguments: where first
  std::map<std::string, size_t> adts_used_;   // types named before their definition: where
  const std::vector<Tensor>* meta_;
  std::vector<std::unordered_map<std::string, Expr>> scopes_;
};

}  // namespace

IRModule ParseModule(const std::string& text, const std::vector<Tensor>* meta) {
  return Parser(text, meta).Module();
}

Expr ParseExpr(const std::string& text, const std::map<std::string, Var>& vars,
               const std::vector<Tensor>* meta) {
  return Parser(text, meta).Standalone(vars);
}

Type ParseType(const std::string& text) {
  return Parser(text, nullptr).StandaloneType();
}

}  // namespace kiln
