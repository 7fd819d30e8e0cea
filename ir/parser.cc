// The text IR parser: recursive descent over an on-demand lexer. See ir/text.h for the
// grammar.
//
// Robustness: every failure is a kiln::Error(kParseError) carrying `line:column:`. Recursion
// is capped at kMaxDepth levels so hostile nesting cannot overflow the stack, and a constant's
// values are counted before its tensor is allocated, so a huge declared shape cannot make the
// parser allocate more than the text itself justifies.
//
// The lexer is ir/text_lexer.h; the parser class is declared in ir/parser_internal.h, and the
// members for types, dims, type parameters, ADTs and patterns are in ir/parser_types.cc.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "ir/parser_internal.h"

namespace kiln {
namespace parser_internal {

IRModule Parser::Module() {
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

Expr Parser::Standalone(const std::map<std::string, Var>& vars) {
  scopes_.emplace_back();
  for (const auto& [name, v] : vars) scopes_.back()[name] = v;
  Expr e = Body();
  ExpectEnd();
  return e;
}

Type Parser::StandaloneType() {
  Type t = ParseType();
  ExpectEnd();
  return t;
}

// number := ['-'] (INT | FLOAT | 'inf' | 'nan'); false when the next token starts none.
bool Parser::ParseNumber(AttrValue* out) {
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

AttrValue Parser::ParseAttrValue() {
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
void Parser::ParseAttr(Attrs* attrs) {
  Token key = Next();
  if (key.kind != Tok::kIdent && key.kind != Tok::kString)
    Fail(key.begin, "expected an attribute name, got " + Describe(key));
  Expect("=", "after the attribute name");
  if (attrs->Has(key.text)) Fail(key.begin, "duplicate attribute " + Source(key));
  attrs->Set(key.text, ParseAttrValue());
}

Expr Parser::Lookup(const Token& t) const {
  for (size_t i = scopes_.size(); i-- > 0;) {
    auto it = scopes_[i].find(t.text);
    if (it != scopes_[i].end()) return it->second;
  }
  Fail(t.begin, "unknown variable " + Source(t));
}

void Parser::Declare(const Token& t, Expr e) {
  for (const auto& scope : scopes_)
    if (scope.count(t.text)) Fail(t.begin, "redefinition of " + Source(t));
  scopes_.back()[t.text] = std::move(e);
}

// An unquoted all-digit name is a printer counter, not a source name.
std::string Parser::NodeName(const Token& t) {
  return t.quoted || !IsAllDigits(t.text) ? t.text : std::string();
}

Function Parser::FunctionTail(const std::vector<Type>& type_params) {
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
TypeConstraint Parser::ParseConstraint() {
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

Expr Parser::Body() {
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
Expr Parser::Renamed(const Expr& e, const std::string& name, const Type& type) {
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

Parser::Parsed Parser::ParseExpr() {
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

Parser::Parsed Parser::ParsePrimary() {
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

Expr Parser::ParseOpCall() {
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

Tensor Parser::ParseMetaRef() {
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

Expr Parser::ParseConstant() {
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

Literal Parser::ParseLiteral() {
  size_t pos = Peek().begin;
  bool negative = Accept("-");
  Token t = Next();
  bool ok = t.kind == Tok::kInt || t.kind == Tok::kFloat ||
            (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan" ||
                                       (!negative && (t.text == "true" || t.text == "false"))));
  if (!ok) Fail(t.begin, "expected a constant value, got " + Describe(t));
  return Literal{t.kind, (negative ? "-" : "") + t.text, pos};
}

void Parser::StoreLiteral(Tensor& tensor, size_t i, const Literal& lit) {
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
        Fail(lit.pos, "expected a number in an " + type_name + " constant, got '" + lit.text + "'");
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

}  // namespace parser_internal

using parser_internal::Parser;

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
