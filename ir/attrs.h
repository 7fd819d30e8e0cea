// Operator attributes: a sorted name -> value map, validated against the op's schema.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

// The variant's alternatives are in AttrKind order.
enum class AttrKind { kInt, kFloat, kString, kInts, kFloats, kDType, kBool };
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, DType, bool>;

inline AttrKind KindOf(const AttrValue& v) {
  return static_cast<AttrKind>(v.index());
}
const char* AttrKindName(
    AttrKind k);  // "int", "float", "string", "ints", "floats", "dtype", "bool"
// The text IR spelling: `3`, `1.5`, `"s"`, `[1, 2]`, `[1.0]`, `f32`, `true`. Floats always show
// a '.', an exponent, `inf` or `nan`, so they read back as floats; they round-trip exactly.
std::string AttrValueToString(const AttrValue& v);
std::string FormatDouble(double v);

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  void Set(const std::string& name, AttrValue v) { values_[name] = std::move(v); }
  const AttrValue* Find(const std::string& name) const;

  // Typed getters. After schema normalization every declared attribute is present with its
  // declared kind; a missing one or a kind mismatch is a kiln bug (kInternal).
  int64_t GetInt(const std::string& name) const;
  double GetFloat(const std::string& name) const;
  const std::string& GetString(const std::string& name) const;
  const std::vector<int64_t>& GetInts(const std::string& name) const;
  const std::vector<double>& GetFloats(const std::string& name) const;
  DType GetDType(const std::string& name) const;
  bool GetBool(const std::string& name) const;

  const std::map<std::string, AttrValue>& values() const { return values_; }
  bool empty() const { return values_.empty(); }
  // Floats compare by value, with NaN equal to NaN, so an attribute map equals itself.
  bool operator==(const Attrs& o) const;
  size_t Hash() const;

 private:
  std::map<std::string, AttrValue> values_;
};

}  // namespace kiln
