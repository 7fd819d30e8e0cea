#include "devices/target.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "ir/error.h"

namespace kiln {

namespace {

// --- attribute checks named in KILN_TARGET_ATTRS: "" or what a valid value looks like ---

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '+';
}

// Names travel through both printed forms unquoted, so they are restricted to characters
// that need no escaping in either.
std::string CheckName(const TargetAttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  if (!std::all_of(s.begin(), s.end(), IsNameChar))
    return "a name of letters, digits and '_', '.', '-', '+'";
  return "";
}

std::string CheckFeatures(const TargetAttrValue& v) {
  const auto& features = std::get<std::vector<std::string>>(v);
  for (size_t i = 0; i < features.size(); ++i) {
    const std::string& f = features[i];
    if (f.size() < 2 || (f[0] != '+' && f[0] != '-') ||
        !std::all_of(f.begin() + 1, f.end(), IsNameChar))
      return StrCat("features like +avx2 or -fma ('", f, "' is not one)");
    for (size_t j = 0; j < i; ++j)
      if (features[j].substr(1) == f.substr(1))
        return StrCat("each feature once ('", f.substr(1), "' is given twice)");
  }
  return "";
}

std::string CheckNonNegative(const TargetAttrValue& v) {
  return std::get<int64_t>(v) >= 0 ? "" : "an integer >= 0";
}

std::string CheckPositive(const TargetAttrValue& v) {
  return std::get<int64_t>(v) > 0 ? "" : "an integer > 0";
}

std::string CheckArch(const TargetAttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  const std::string_view kPrefix = "sm_";
  size_t digits_end = kPrefix.size();
  while (digits_end < s.size() && s[digits_end] >= '0' && s[digits_end] <= '9') ++digits_end;
  bool ok = s.starts_with(kPrefix) && digits_end > kPrefix.size() &&
            (digits_end == s.size() ||
             (digits_end + 1 == s.size() && s.back() >= 'a' && s.back() <= 'z'));
  return ok ? "" : "a GPU architecture like sm_90 or sm_90a";
}

// --- the schema, from KILN_TARGET_ATTRS ---

struct AttrSpec {
  TargetKind kind;
  std::string name;
  TargetAttrType type;
  TargetAttrValue default_value;
  std::string (*check)(const TargetAttrValue&);
};

// The attributes of `kind`, in canonical order.
const std::vector<AttrSpec>& Schema(TargetKind kind) {
  static const std::map<TargetKind, std::vector<AttrSpec>> schemas = [] {
    std::map<TargetKind, std::vector<AttrSpec>> m;
#define KILN_X(e, n, d) m[TargetKind::e];
    KILN_TARGET_KINDS(KILN_X)
#undef KILN_X
    // Copy-list-initialized from the listed default, so `{}` reads as an empty list.
    using Int = int64_t;
    using String = std::string;
    using Strings = std::vector<std::string>;
#define KILN_X(kind, name, type, default_value, check)                                      \
  {                                                                                         \
    type value = default_value;                                                             \
    m[TargetKind::kind].push_back(                                                          \
        {TargetKind::kind, #name, TargetAttrType::k##type, TargetAttrValue(value), check}); \
  }
    KILN_TARGET_ATTRS(KILN_X)
#undef KILN_X
    return m;
  }();
  return schemas.at(kind);
}

const char* TypeName(TargetAttrType type) {
  switch (type) {
    case TargetAttrType::kInt:
      return "an integer";
    case TargetAttrType::kString:
      return "a string";
    case TargetAttrType::kStrings:
      return "a list of strings";
  }
  return "unknown";
}

TargetAttrType TypeOf(const TargetAttrValue& v) {
  return static_cast<TargetAttrType>(v.index());
}

std::string ValidKinds() {
  std::string kinds;
#define KILN_X(e, n, d) kinds += StrCat(kinds.empty() ? "" : ", ", n);
  KILN_TARGET_KINDS(KILN_X)
#undef KILN_X
  return kinds;
}

std::optional<TargetKind> FindKind(std::string_view name) {
#define KILN_X(e, n, d) \
  if (name == n) return TargetKind::e;
  KILN_TARGET_KINDS(KILN_X)
#undef KILN_X
  return std::nullopt;
}

TargetKind ParseKind(std::string_view name) {
  std::optional<TargetKind> kind = FindKind(name);
  if (!kind)
    Throw(ErrorCode::kInvalidArgument, "unknown target kind '", name,
          "' (valid kinds: ", ValidKinds(), ")");
  return *kind;
}

// The index of attribute `name` in Schema(kind); kInvalidArgument listing the valid ones.
size_t FindAttr(TargetKind kind, std::string_view name) {
  const std::vector<AttrSpec>& schema = Schema(kind);
  for (size_t i = 0; i < schema.size(); ++i)
    if (schema[i].name == name) return i;
  std::string valid;
  for (const AttrSpec& spec : schema)
    valid += StrCat(valid.empty() ? "" : ", ", spec.name, " (", TypeName(spec.type), ")");
  Throw(ErrorCode::kInvalidArgument, "target '", TargetKindName(kind), "' has no attribute '", name,
        "' (valid: ", valid, ")");
}

std::string ValueToString(const TargetAttrValue& v) {
  switch (TypeOf(v)) {
    case TargetAttrType::kInt:
      return std::to_string(std::get<int64_t>(v));
    case TargetAttrType::kString:
      return std::get<std::string>(v);
    case TargetAttrType::kStrings: {
      std::string s;
      for (const std::string& item : std::get<std::vector<std::string>>(v))
        s += StrCat(s.empty() ? "" : ",", item);
      return s;
    }
  }
  return "";
}

std::string JSONString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += StrCat("\\u00", "0123456789abcdef"[(c >> 4) & 0xf], "0123456789abcdef"[c & 0xf]);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string ValueToJSON(const TargetAttrValue& v) {
  switch (TypeOf(v)) {
    case TargetAttrType::kInt:
      return std::to_string(std::get<int64_t>(v));
    case TargetAttrType::kString:
      return JSONString(std::get<std::string>(v));
    case TargetAttrType::kStrings: {
      std::string s = "[";
      for (const std::string& item : std::get<std::vector<std::string>>(v))
        s += StrCat(s.size() == 1 ? "" : ",", JSONString(item));
      return s + "]";
    }
  }
  return "";
}

// --- the short form: `kind -name=value ...` ---

std::vector<std::string_view> SplitBlanks(std::string_view text) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < text.size()) {
    while (i < text.size() && blank(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !blank(text[i])) ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

// The value `text` spells for an attribute of `type`, as the short form writes it.
TargetAttrValue ParseShortValue(TargetKind kind, const AttrSpec& spec, std::string_view text) {
  switch (spec.type) {
    case TargetAttrType::kInt: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty())
        Throw(ErrorCode::kInvalidArgument, "target attribute '", spec.name, "' of '",
              TargetKindName(kind), "' takes an integer, got '", text, "'");
      return v;
    }
    case TargetAttrType::kString:
      return std::string(text);
    case TargetAttrType::kStrings: {
      std::vector<std::string> items;
      if (text.empty()) return items;
      size_t start = 0;
      for (;;) {
        size_t comma = text.find(',', start);
        items.emplace_back(text.substr(start, comma - start));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      return items;
    }
  }
  return int64_t{0};
}

// --- JSON: just enough for one flat object of strings, integers and arrays of strings ---

class JSONReader {
 public:
  explicit JSONReader(std::string_view text) : text_(text) {}

  // The object's members, in order. Duplicate keys are errors.
  std::vector<std::pair<std::string, TargetAttrValue>> ReadObject() {
    std::vector<std::pair<std::string, TargetAttrValue>> members;
    Expect('{');
    if (Peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        size_t key_pos = SkipBlanks();
        std::string key = ReadString();
        for (const auto& [k, v] : members)
          if (k == key) Fail(key_pos, StrCat("key \"", key, "\" is given twice"));
        Expect(':');
        members.emplace_back(std::move(key), ReadValue());
        char c = Peek();
        if (c == ',') {
          ++pos_;
        } else if (c == '}') {
          ++pos_;
          break;
        } else {
          Fail(pos_, StrCat("expected ',' or '}', found ", Found()));
        }
      }
    }
    if (Peek() != '\0') Fail(pos_, StrCat("expected the end after the object, found ", Found()));
    return members;
  }

 private:
  size_t SkipBlanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
    return pos_;
  }
  // The next non-blank character, not consumed; '\0' at the end.
  char Peek() {
    SkipBlanks();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  std::string Found() const {
    if (pos_ >= text_.size()) return "the end of the text";
    return StrCat("'", text_[pos_], "'");
  }
  void Expect(char c) {
    if (Peek() != c) Fail(pos_, StrCat("expected '", c, "', found ", Found()));
    ++pos_;
  }
  [[noreturn]] void Fail(size_t pos, const std::string& what) const {
    Throw(ErrorCode::kParseError, "target JSON: ", what, " at position ", pos);
  }

  TargetAttrValue ReadValue() {
    char c = Peek();
    if (c == '"') return ReadString();
    if (c == '-' || (c >= '0' && c <= '9')) return ReadInt();
    if (c == '[') {
      ++pos_;
      std::vector<std::string> items;
      if (Peek() == ']') {
        ++pos_;
        return items;
      }
      for (;;) {
        if (Peek() != '"') Fail(pos_, StrCat("expected a string in the array, found ", Found()));
        items.push_back(ReadString());
        char next = Peek();
        ++pos_;
        if (next == ']') return items;
        if (next != ',')
          Fail(pos_ - 1, StrCat("expected ',' or ']', found ",
                                next == '\0' ? "the end of the text" : StrCat("'", next, "'")));
      }
    }
    Fail(pos_, StrCat("expected a string, an integer or an array of strings, found ", Found()));
  }

  std::string ReadString() {
    Expect('"');
    std::string s;
    for (;;) {
      if (pos_ >= text_.size()) Fail(pos_, "unterminated string");
      char c = text_[pos_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) Fail(pos_ - 1, "control character in a string");
      if (c != '\\') {
        s += c;
        continue;
      }
      if (pos_ >= text_.size()) Fail(pos_, "unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          s += e;
          break;
        case 'b':
          s += '\b';
          break;
        case 'f':
          s += '\f';
          break;
        case 'n':
          s += '\n';
          break;
        case 'r':
          s += '\r';
          break;
        case 't':
          s += '\t';
          break;
        case 'u':
          AppendUTF8(ReadHex4(), s);
          break;
        default:
          Fail(pos_ - 2, StrCat("unknown escape '\\", e, "'"));
      }
    }
  }

  unsigned ReadHex4() {
    unsigned v = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      char c = pos_ < text_.size() ? text_[pos_] : '\0';
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) Fail(pos_, "expected 4 hex digits after \\u");
      v = v * 16 + static_cast<unsigned>(digit);
    }
    return v;
  }

  // Surrogate pairs are not joined: no valid attribute value has characters outside ASCII, so
  // such a string is rejected by the attribute's check anyway.
  static void AppendUTF8(unsigned cp, std::string& s) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xc0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      s += static_cast<char>(0xe0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  int64_t ReadInt() {
    size_t start = pos_;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), v);
    if (ec == std::errc::result_out_of_range) Fail(start, "integer out of range");
    if (ec != std::errc()) Fail(start, "expected an integer");
    pos_ = static_cast<size_t>(end - text_.data());
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
      Fail(start, "expected an integer (fractions and exponents are not supported)");
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string_view TargetKindName(TargetKind kind) {
  switch (kind) {
#define KILN_X(e, n, d) \
  case TargetKind::e:   \
    return n;
    KILN_TARGET_KINDS(KILN_X)
#undef KILN_X
  }
  return "unknown";
}

Target::Target(TargetKind kind) : kind_(kind) {
  for (const AttrSpec& spec : Schema(kind)) values_.push_back(spec.default_value);
}

Target Target::Host() {
  return Target(TargetKind::kLLVM);
}

Target Target::Parse(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\n\r");
  if (first != std::string_view::npos && text[first] == '{') return FromJSON(text);
  return FromString(text);
}

Target Target::FromString(std::string_view text) {
  std::vector<std::string_view> tokens = SplitBlanks(text);
  if (tokens.empty())
    Throw(ErrorCode::kParseError, "empty target string: expected a kind (", ValidKinds(),
          ") and -name=value attributes");
  Target target(ParseKind(tokens[0]));
  std::vector<bool> given(target.values_.size(), false);
  for (size_t i = 1; i < tokens.size(); ++i) {
    std::string_view token = tokens[i];
    size_t eq = token.find('=');
    if (token.size() < 2 || token[0] != '-' || eq == std::string_view::npos || eq == 1)
      Throw(ErrorCode::kParseError, "target string '", text, "': expected -name=value, got '",
            token, "'");
    std::string_view name = token.substr(1, eq - 1);
    size_t index = FindAttr(target.kind_, name);
    if (given[index])
      Throw(ErrorCode::kInvalidArgument, "target string '", text, "' gives attribute '", name,
            "' twice");
    given[index] = true;
    const AttrSpec& spec = Schema(target.kind_)[index];
    target.Set(name, ParseShortValue(target.kind_, spec, token.substr(eq + 1)));
  }
  return target;
}

Target Target::FromJSON(std::string_view json) {
  std::vector<std::pair<std::string, TargetAttrValue>> members = JSONReader(json).ReadObject();
  auto kind_it =
      std::find_if(members.begin(), members.end(), [](const auto& m) { return m.first == "kind"; });
  if (kind_it == members.end())
    Throw(ErrorCode::kInvalidArgument, "target JSON has no \"kind\" (valid kinds: ", ValidKinds(),
          ")");
  if (TypeOf(kind_it->second) != TargetAttrType::kString)
    Throw(ErrorCode::kInvalidArgument, "target JSON: \"kind\" must be a string, not ",
          TypeName(TypeOf(kind_it->second)), " (valid kinds: ", ValidKinds(), ")");
  Target target(ParseKind(std::get<std::string>(kind_it->second)));
  for (auto& [key, value] : members)
    if (key != "kind") target.Set(key, std::move(value));
  return target;
}

int64_t Target::GetInt(std::string_view name) const {
  size_t i = FindAttr(kind_, name);
  if (TypeOf(values_[i]) != TargetAttrType::kInt)
    Throw(ErrorCode::kInvalidArgument, "target attribute '", name, "' of '", TargetKindName(kind_),
          "' is ", TypeName(TypeOf(values_[i])), ", not an integer");
  return std::get<int64_t>(values_[i]);
}

const std::string& Target::GetString(std::string_view name) const {
  size_t i = FindAttr(kind_, name);
  if (TypeOf(values_[i]) != TargetAttrType::kString)
    Throw(ErrorCode::kInvalidArgument, "target attribute '", name, "' of '", TargetKindName(kind_),
          "' is ", TypeName(TypeOf(values_[i])), ", not a string");
  return std::get<std::string>(values_[i]);
}

const std::vector<std::string>& Target::GetStrings(std::string_view name) const {
  size_t i = FindAttr(kind_, name);
  if (TypeOf(values_[i]) != TargetAttrType::kStrings)
    Throw(ErrorCode::kInvalidArgument, "target attribute '", name, "' of '", TargetKindName(kind_),
          "' is ", TypeName(TypeOf(values_[i])), ", not a list of strings");
  return std::get<std::vector<std::string>>(values_[i]);
}

void Target::Set(std::string_view name, TargetAttrValue value) {
  size_t i = FindAttr(kind_, name);
  const AttrSpec& spec = Schema(kind_)[i];
  if (TypeOf(value) != spec.type)
    Throw(ErrorCode::kInvalidArgument, "target attribute '", name, "' of '", TargetKindName(kind_),
          "' takes ", TypeName(spec.type), ", not ", TypeName(TypeOf(value)), " (",
          ValueToJSON(value), ")");
  std::string expected = spec.check(value);
  if (!expected.empty())
    Throw(ErrorCode::kInvalidArgument, "target attribute '", name, "' of '", TargetKindName(kind_),
          "' must be ", expected, ", got ", ValueToJSON(value));
  values_[i] = std::move(value);
}

std::string Target::str() const {
  std::string s(TargetKindName(kind_));
  const std::vector<AttrSpec>& schema = Schema(kind_);
  for (size_t i = 0; i < schema.size(); ++i)
    if (values_[i] != schema[i].default_value)
      s += StrCat(" -", schema[i].name, "=", ValueToString(values_[i]));
  return s;
}

std::string Target::ToJSON() const {
  std::string s = StrCat("{\"kind\":", JSONString(TargetKindName(kind_)));
  const std::vector<AttrSpec>& schema = Schema(kind_);
  for (size_t i = 0; i < schema.size(); ++i)
    if (values_[i] != schema[i].default_value)
      s += StrCat(",", JSONString(schema[i].name), ":", ValueToJSON(values_[i]));
  return s + "}";
}

size_t Target::Hash() const {
  return std::hash<std::string>{}(str());
}

std::ostream& operator<<(std::ostream& os, const Target& target) {
  return os << target.str();
}

DeviceType DeviceTypeFor(const Target& target) {
  switch (target.kind()) {
#define KILN_X(e, n, d) \
  case TargetKind::e:   \
    return DeviceType::d;
    KILN_TARGET_KINDS(KILN_X)
#undef KILN_X
  }
  return DeviceType::kCPU;
}

}  // namespace kiln
