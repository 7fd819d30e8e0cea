#include "ir/attrs.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ir/error.h"

namespace kiln {

const char* AttrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kString:
      return "string";
    case AttrKind::kInts:
      return "ints";
    case AttrKind::kFloats:
      return "floats";
    case AttrKind::kDType:
      return "dtype";
    case AttrKind::kBool:
      return "bool";
  }
  return "?";
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  // The shortest of %.{1..17}g that reads back to the same double.
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  double mag = std::fabs(v);
  if (s.find('e') != std::string::npos && mag >= 1e-4 && mag < 1e16) {
    // %g chose an exponent (e.g. 100 -> "1e+02"); plain digits read better.
    for (int decimals = 0; decimals <= 20; ++decimals) {
      std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    s = buf;
  }
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

namespace {
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}
}  // namespace

std::string AttrValueToString(const AttrValue& v) {
  switch (KindOf(v)) {
    case AttrKind::kInt:
      return std::to_string(std::get<int64_t>(v));
    case AttrKind::kFloat:
      return FormatDouble(std::get<double>(v));
    case AttrKind::kString:
      return Quote(std::get<std::string>(v));
    case AttrKind::kInts: {
      const auto& xs = std::get<std::vector<int64_t>>(v);
      std::string s = "[";
      for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
      return s + "]";
    }
    case AttrKind::kFloats: {
      const auto& xs = std::get<std::vector<double>>(v);
      std::string s = "[";
      for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + FormatDouble(xs[i]);
      return s + "]";
    }
    case AttrKind::kDType:
      return std::string(DTypeName(std::get<DType>(v)));
    case AttrKind::kBool:
      return std::get<bool>(v) ? "true" : "false";
  }
  return "?";
}

const AttrValue* Attrs::Find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

namespace {
template <typename T>
const T& GetAs(const Attrs& a, const std::string& name, AttrKind kind) {
  const AttrValue* v = a.Find(name);
  KILN_CHECK(v != nullptr, "attribute '", name, "' is missing");
  KILN_CHECK(KindOf(*v) == kind, "attribute '", name, "' is ", AttrKindName(KindOf(*v)),
             ", read as ", AttrKindName(kind));
  return std::get<T>(*v);
}
}  // namespace

int64_t Attrs::GetInt(const std::string& n) const {
  return GetAs<int64_t>(*this, n, AttrKind::kInt);
}
double Attrs::GetFloat(const std::string& n) const {
  return GetAs<double>(*this, n, AttrKind::kFloat);
}
const std::string& Attrs::GetString(const std::string& n) const {
  return GetAs<std::string>(*this, n, AttrKind::kString);
}
const std::vector<int64_t>& Attrs::GetInts(const std::string& n) const {
  return GetAs<std::vector<int64_t>>(*this, n, AttrKind::kInts);
}
const std::vector<double>& Attrs::GetFloats(const std::string& n) const {
  return GetAs<std::vector<double>>(*this, n, AttrKind::kFloats);
}
DType Attrs::GetDType(const std::string& n) const {
  return GetAs<DType>(*this, n, AttrKind::kDType);
}
bool Attrs::GetBool(const std::string& n) const {
  return GetAs<bool>(*this, n, AttrKind::kBool);
}

namespace {
bool SameDouble(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}
bool SameValue(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (KindOf(a) == AttrKind::kFloat) return SameDouble(std::get<double>(a), std::get<double>(b));
  if (KindOf(a) == AttrKind::kFloats) {
    const auto& x = std::get<std::vector<double>>(a);
    const auto& y = std::get<std::vector<double>>(b);
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!SameDouble(x[i], y[i])) return false;
    return true;
  }
  return a == b;
}
}  // namespace

bool Attrs::operator==(const Attrs& o) const {
  if (values_.size() != o.values_.size()) return false;
  for (auto it = values_.begin(), jt = o.values_.begin(); it != values_.end(); ++it, ++jt) {
    if (it->first != jt->first || !SameValue(it->second, jt->second)) return false;
  }
  return true;
}

size_t Attrs::Hash() const {
  size_t h = 0xa77;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (const auto& [k, v] : values_) {
    mix(std::hash<std::string>()(k));
    mix(std::hash<std::string>()(AttrValueToString(v)));
  }
  return h;
}

}  // namespace kiln
