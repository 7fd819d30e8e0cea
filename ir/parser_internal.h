// The text IR parser's class, shared by the two files that define its members: ir/parser.cc
// (modules, attributes, scopes, expressions, constants) and ir/parser_types.cc (types, dims,
// type parameters, ADTs, patterns and match). Not for use elsewhere: ir/text.h is the API.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/text.h"
#include "ir/text_lexer.h"

namespace kiln::parser_internal {

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

inline bool IsAllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!IsDigit(c)) return false;
  return true;
}

class Parser : public text::TextLexer {
 public:
  Parser(const std::string& src, const std::vector<Tensor>* meta) : TextLexer(src), meta_(meta) {}

  IRModule Module();
  Expr Standalone(const std::map<std::string, Var>& vars);
  Type StandaloneType();

 private:
  bool ParseNumber(AttrValue* out);
  AttrValue ParseAttrValue();
  void ParseAttr(Attrs* attrs);

  // ---- Types --------------------------------------------------------------------------------

  Type ParseType();
  Type ParseTensorOf();

  // Dim arithmetic throws on overflow or division by zero; report it at the operator.
  template <typename Fn>
  Dim DimOp(size_t pos, Fn&& fn) {
    try {
      return fn();
    } catch (const Error& e) {
      Fail(pos, e.what());
    }
  }

  Dim ParseDim();
  Dim ParseDimProduct();
  Dim ParseDimAtom();

  // ---- Type parameters and ADTs -------------------------------------------------------------

  void ScanTypeParams();
  std::vector<Type> ParseTypeParams();
  const TypeVarNode* FindTypeParam(const std::string& name) const;
  Type KindedParam(const Token& t, ParamKind want, const char* place);
  Adt FindAdt(const std::string& name) const;
  std::pair<Adt, int> FindConstructor(const std::string& name) const;
  void ParseAdt(const Token& kw);
  static bool IsReserved(const std::string& name);
  TypeArg ParseTypeArg(ParamKind kind);
  Pattern ParsePattern();
  Expr ParseMatch();
  Expr ParseGlobal();
  Expr ParseConstructorCall(const Adt& adt, int tag);

  // ---- Scopes -------------------------------------------------------------------------------

  Expr Lookup(const Token& t) const;
  void Declare(const Token& t, Expr e);
  static std::string NodeName(const Token& t);

  // ---- Expressions --------------------------------------------------------------------------

  // A parsed expression, and whether its node was created by this expression (so a binding may
  // give it a name and type) rather than being a reference to an existing one.
  struct Parsed {
    Expr e;
    bool fresh;
  };
  Function FunctionTail(const std::vector<Type>& type_params = {});
  TypeConstraint ParseConstraint();
  Expr Body();
  static Expr Renamed(const Expr& e, const std::string& name, const Type& type);
  Parsed ParseExpr();
  Parsed ParsePrimary();
  Expr ParseOpCall();
  Tensor ParseMetaRef();
  Expr ParseConstant();
  Literal ParseLiteral();
  void StoreLiteral(Tensor& tensor, size_t i, const Literal& lit);

  std::vector<Type> type_params_;  // of the def being parsed
  std::map<std::string, std::vector<ParamKind>> global_kinds_;
  std::map<std::string, Adt> adts_;
  std::map<std::string, size_t> adt_arity_;   // read ahead: every type's name and arity
  std::map<std::string, size_t> kinds_used_;  // defs given type arguments: where first
  std::map<std::string, size_t> adts_used_;   // types named before their definition: where
  const std::vector<Tensor>* meta_;
  std::vector<std::unordered_map<std::string, Expr>> scopes_;
};

}  // namespace kiln::parser_internal
