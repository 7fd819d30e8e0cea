// The graph IR's text format: a printer and a parser that read each other's output back
// exactly, so golden tests, dumps and error messages all speak the same language.
//
//   def @main(%x: f32[batch, 784], %w: f32[784, 10]) -> f32[batch, 10] {
//     %fc: f32[batch, 10] = matmul(%x, %w)
//     %1 = sum(%fc, axes=[1])
//     %2 = (%fc, %1)
//     %3 = %2.0
//     %f = fn(%p: f32[2]) attrs{primitive=true} {
//       relu(%p)
//     }
//     %f(%3)
//   }
//
// Grammar (comments `// ...` and `/* ... */` are skipped; inside a tensor type's brackets
// `//` is floor division, so only `/* */` comments work there):
//
//   module    := (adt | def)*
//   adt       := 'type' IDENT ['[' IDENT {',' IDENT} ']'] '{' ctor {',' ctor} '}'
//   ctor      := IDENT ['(' type {',' type} ')']
//   def       := 'def' GLOBAL ['<' tparam {',' tparam} '>'] fn_tail
//   tparam    := IDENT ':' ('Type' | 'Shape' | 'BaseType' | 'ShapeVar')
//   fn_tail   := '(' [param {',' param}] ')' ['->' type] ['where' constraint {',' constraint}]
//                ['attrs' '{' [attr {',' attr}] '}'] '{' body '}'
//   constraint:= type '=' OPNAME '(' [type {',' type}] ')'
//   param     := LOCAL [':' type]
//   body      := {LOCAL [':' type] '=' expr} expr
//   expr      := primary {'.' INT}                                  -- tuple get-item
//   primary   := LOCAL ['(' [expr {',' expr}] ')']                  -- '(' right after the name
//              | OPNAME '(' [expr {',' expr}] {',' attr} ')'        -- attrs after positionals
//              | '(' ')' | '(' expr ')' | '(' expr ',' [expr {',' expr} [',']] ')'
//              | 'const' '(' type ',' (value | '[' [value {',' value}] ']' | meta) ')'
//              | meta
//              | 'fn' fn_tail
//              | GLOBAL ['<' targ {',' targ} '>'] ['(' [expr {',' expr}] ')']
//              | CTOR ['(' [expr {',' expr}] ')']                  -- a constructor call
//              | 'match' '(' expr ')' '{' {pattern '=>' '{' body '}' [',']} '}'
//   targ      := type | '(' [dim {',' dim}] ')' | DTYPE | dim  -- by the callee's kinds
//   pattern   := '_' | LOCAL [':' type] | CTOR ['(' pattern {',' pattern} ')']
//              | '(' [pattern {',' pattern}] ')'
//   meta      := 'meta' '[' INT ']'
//   attr      := (IDENT | STRING) '=' attr_value
//   attr_value:= number | STRING | 'true' | 'false' | DTYPE | '[' [number {',' number}] ']'
//   number    := ['-'] (INT | FLOAT | 'inf' | 'nan')
//   value     := number | 'true' | 'false'
//   type      := '?' | DTYPE '[' [dim {',' dim}] ']' | '(' ')' | '(' type ',' ')'
//              | '(' type {',' type} ')' | 'fn' '(' [type {',' type}] ')' '->' type
//              | IDENT                                      -- a type parameter of kind Type
//              | 'Tensor' '[' (IDENT | '(' [dim {',' dim}] ')') ',' (DTYPE | IDENT) ']'
//              | ADT ['[' type {',' type} ']']              -- `List[i32[]]`; List is built in
//   dim       := ['-'] prod {('+' | '-') prod}        -- a leading '-' negates the product
//   prod      := dim_atom {('*' | '//' | '%') dim_atom}
//   dim_atom  := INT | SYMBOL | STRING | ('min' | 'max') '(' dim ',' dim ')' | '(' dim ')'
//   LOCAL     := '%' (NAME | STRING)      GLOBAL := '@' (NAME | STRING)
//   NAME      := [A-Za-z0-9_]+            OPNAME := identifier, '.' allowed between parts
//
// Names: a binding's name becomes the node's source `name` unless it is an unquoted all-digit
// counter (`%3`); a quoted name (`%"3"`, `%"fc1/MatMul:0"`) is always a source name. A nested
// function sees the names bound around it; a name may not be bound again while it is visible.
// The printer makes names unique across a whole def, counters included.
//
// Type arguments in a call are read by the kinds of the callee's type parameters, which the
// parser reads ahead from every def that starts a line. An ADT is known from its definition
// on (its own constructors may use it), so `type` definitions come before their uses; the
// printer writes them first. A match clause's body is a scope of its own.
//
// The graph has no let: a binding that the result does not reach is dropped by the parser.
// What the printer binds: every Call, Tuple, TupleGetItem and nested Function, and constants
// used more than once (so sharing survives the round trip). A body's result is written inline
// when nothing else needs a name for it: used once, no source name, no type shown. `: type`
// is printed for a bound node whose `type` is set (and show_types), and the parser restores
// it. Call attributes equal to the op's schema default are not printed; the parser refills
// them through MakeCall. Function attributes are not schema-checked, so an empty float list
// there reads back as an empty int list.
//
// Constant values are flat and row-major; floats use the shortest spelling that reads back
// to the same bits (`nan` and `-nan` do not keep NaN payloads).
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace kiln {

struct PrintOptions {
  // Constants with more elements than this print as `const(f32[...], meta[i])`, the tensor
  // appended to the table given to Print. 0 means never; with no table, all print in full.
  size_t max_inline_constant = 64;
  // Print the `type` of bound nodes. Var annotations and return types always print.
  bool show_types = true;
  // Print every node as if it had no name (`%0`, `%1`, ...), so functions that differ only in
  // their names print alike: the text identifies a computation (the disk cache keys kernels by
  // it, as the in-memory cache's structural equality ignores names). Does not round-trip names.
  bool anonymous = false;
};

// `meta`, when given, is appended to; the indices printed refer to positions in it.
std::string Print(const IRModule& module, const PrintOptions& options = {},
                  std::vector<Tensor>* meta = nullptr);
// An expression alone, for messages and debugging: bindings then the result, no braces. A
// Function prints as `fn(...) {...}`. Free variables print by name.
std::string Print(const Expr& expr, const PrintOptions& options = {},
                  std::vector<Tensor>* meta = nullptr);
// `f32[batch * 2, 10]`; like TypeToString, but symbols that are not identifiers are quoted so
// that ParseType reads them back.
std::string PrintType(const Type& type);

// All parse errors are kiln::Error(kParseError) with a `line:column: ` prefix; malformed
// input never crashes. `meta` resolves `meta[i]` references.
IRModule ParseModule(const std::string& text, const std::vector<Tensor>* meta = nullptr);
// A body (bindings then the result expression) or a single expression. `vars` are the free
// variables it may use, by name without the '%'.
Expr ParseExpr(const std::string& text, const std::map<std::string, Var>& vars = {},
               const std::vector<Tensor>* meta = nullptr);
Type ParseType(const std::string& text);

std::ostream& operator<<(std::ostream& os, const Expr& expr);
std::ostream& operator<<(std::ostream& os, const IRModule& module);

}  // namespace kiln
