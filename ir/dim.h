// Tensor dimensions: a constant, a symbol (`batch`), or arithmetic over them.
//
// Every Dim is kept in one canonical form, so that equal shapes compare equal with a plain
// structural comparison: a sum of terms `coef * f1 * f2 ...` with like terms collected, the
// terms in a fixed order and the constant last. The factors are symbols or the operations
// that are not polynomial (floordiv, mod, min, max), whose own operands are canonical too.
// Examples: `n + 0 -> n`, `(n * 2) // 2 -> n`, `a + b - a -> b`, `(n * 4 + 3) // 2 -> n * 2 + 1`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln {

struct DimNode;

// Whether `name` has the form of a symbol kiln makes for itself: `_v<N>` (a dim only values
// decide: TypeRelContext::UnknownDim), `_s<N>` (a segment parameter's dim: engine/segments.h)
// or `unk__<N>` (an ONNX dim without a name). A model's own symbols must not take these forms,
// or they would be equal to kiln's: the ONNX importer renames them (ExternalDimName) and the C
// API refuses them.
bool IsReservedDimName(const std::string& name);
// A model's dim name as a symbol that cannot collide with kiln's own: reserved names, and names
// already carrying the escape prefix `ext:`, get it (once more); others stay as they are. So
// distinct names stay distinct.
std::string ExternalDimName(const std::string& name);

class Dim {
 public:
  Dim() : Dim(int64_t{0}) {}
  Dim(int64_t value);  // NOLINT: a constant dimension converts implicitly
  Dim(int value) : Dim(static_cast<int64_t>(value)) {}  // NOLINT
  static Dim Symbol(const std::string& name);

  bool is_const() const;
  // The value of a constant dimension; only valid when is_const().
  int64_t value() const;
  bool is_symbol() const;
  // The name of a symbol; only valid when is_symbol().
  const std::string& name() const;

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  friend Dim FloorDiv(const Dim& a, const Dim& b);  // rounds toward negative infinity
  friend Dim Mod(const Dim& a, const Dim& b);       // sign of the divisor, as Python's %
  friend Dim Min(const Dim& a, const Dim& b);
  friend Dim Max(const Dim& a, const Dim& b);

  // Structural equality of the canonical forms: true means equal for every binding.
  bool operator==(const Dim& other) const;
  bool operator!=(const Dim& other) const { return !(*this == other); }
  // A total order on canonical forms (used to sort terms); not numeric order.
  static int Compare(const Dim& a, const Dim& b);
  size_t hash() const;

  // `batch * 2 + 1`, `(seq + 1) // 2`, `min(a, b)`: the text IR syntax.
  std::string ToString() const;

  // Value under a binding of every symbol; nullopt if a symbol is unbound or a division by
  // zero happens.
  std::optional<int64_t> TryEval(const std::map<std::string, int64_t>& bindings) const;
  // Replaces symbols for which `fn` returns a value, and re-canonicalizes.
  Dim Substitute(const std::function<std::optional<Dim>(const std::string&)>& fn) const;
  void CollectSymbols(std::set<std::string>* out) const;

  const DimNode* node() const { return node_.get(); }

 private:
  explicit Dim(std::shared_ptr<const DimNode> node) : node_(std::move(node)) {}
  friend struct DimBuilder;
  std::shared_ptr<const DimNode> node_;
};

using Shape = std::vector<Dim>;

// Integer division rounding toward negative infinity (b != 0), and its remainder (the sign of
// b): what `//` and `%` mean for dims and in the loop IR.
int64_t FloorDivInt(int64_t a, int64_t b);
int64_t FloorModInt(int64_t a, int64_t b);

std::string ShapeToString(const Shape& shape);  // `[batch, 10]`
size_t HashShape(const Shape& shape);
// True when every dimension is a constant.
bool IsConstShape(const Shape& shape);
// The constant dims of a fully constant shape; throws kInternal otherwise.
std::vector<int64_t> ConstShape(const Shape& shape);
Shape ShapeFromInts(const std::vector<int64_t>& dims);
// Product of the dims (canonicalized).
Dim ShapeNumel(const Shape& shape);

}  // namespace kiln

template <>
struct std::hash<kiln::Dim> {
  size_t operator()(const kiln::Dim& d) const { return d.hash(); }
};
