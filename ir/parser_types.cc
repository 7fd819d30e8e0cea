// The text IR parser (ir/parser.cc): types, dims, type parameters, ADTs, patterns and match.
#include <limits>
#include <optional>

#include "ir/parser_internal.h"

namespace kiln::parser_internal {

Type Parser::ParseType() {
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
      Fail(t.begin, StrCat("ADT ", t.text, " takes ", arity, " type arguments, got ", args.size()));
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
Type Parser::ParseTensorOf() {
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

Dim Parser::ParseDim() {
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

Dim Parser::ParseDimProduct() {
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

Dim Parser::ParseDimAtom() {
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

// The kinds of each def's type parameters, read ahead so that a call may give type arguments
// to a function defined later (or to itself).
// Reads the header of each def and type that starts a line (as the printer writes them), so
// calls may give type arguments to functions defined later and types may name ADTs defined
// later (mutual recursion included); linear in the text. A header it cannot read is left to
// the parse proper to report.
void Parser::ScanTypeParams() {
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
std::vector<Type> Parser::ParseTypeParams() {
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

const TypeVarNode* Parser::FindTypeParam(const std::string& name) const {
  for (const Type& p : type_params_)
    if (AsTypeVar(p)->name == name) return AsTypeVar(p);
  return nullptr;
}

// The type parameter `t` names, checked to be of kind `want` for `place`.
Type Parser::KindedParam(const Token& t, ParamKind want, const char* place) {
  const TypeVarNode* v = FindTypeParam(t.text);
  if (!v) Fail(t.begin, "unknown type parameter " + Source(t));
  if (v->param_kind != want)
    Fail(t.begin, StrCat("kind error: '", t.text, "' has kind ", ParamKindName(v->param_kind),
                         ", but ", place, " needs kind ", ParamKindName(want)));
  return TypeVar(v->name, v->param_kind);
}

Adt Parser::FindAdt(const std::string& name) const {
  if (name == ListAdt()->name) return ListAdt();
  auto it = adts_.find(name);
  return it == adts_.end() ? nullptr : it->second;
}

// The ADT with a constructor of that name, and the constructor's tag.
std::pair<Adt, int> Parser::FindConstructor(const std::string& name) const {
  if (int tag = ListAdt()->Find(name); tag >= 0) return {ListAdt(), tag};
  for (const auto& [n, adt] : adts_)
    if (int tag = adt->Find(name); tag >= 0) return {adt, tag};
  return {nullptr, -1};
}

// `type Tree[a] { Leaf, Node(a, Tree[a], Tree[a]) }`; the name is known inside (recursion).
void Parser::ParseAdt(const Token& kw) {
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
bool Parser::IsReserved(const std::string& name) {
  for (const char* k : {"fn", "const", "meta", "match", "_", "def", "type", "attrs", "where"})
    if (name == k) return true;
  return OpRegistry::Global().Find(name) != nullptr;
}

// A type argument of kind `kind`: a type, `(dims)`, a dtype, or a dim.
TypeArg Parser::ParseTypeArg(ParamKind kind) {
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
Pattern Parser::ParsePattern() {
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
Expr Parser::ParseMatch() {
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
Expr Parser::ParseGlobal() {
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

Expr Parser::ParseConstructorCall(const Adt& adt, int tag) {
  Token name = Next();
  std::vector<Expr> args;
  if (PeekPunct("(") && Peek().begin == name.end) {
    Next();
    CommaList(")", "after the constructor's arguments", [&] { args.push_back(ParseExpr().e); });
  }
  return MakeFnCall(MakeConstructor(adt, adt->constructors[tag].name), std::move(args));
}

}  // namespace kiln::parser_internal
