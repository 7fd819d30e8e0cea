// The text IR's lexer (ir/parser.cc is its one user): tokens on demand from a source text,
// with the position, mode and nesting depth a recursive-descent parser needs, and errors that
// carry `line:column:`.
//
// The lexer is modal because `//` means two things: a comment in normal text, floor division
// between the brackets of a tensor type. Tokens are lexed when first peeked, so switching the
// mode just drops the peeked token.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "ir/error.h"

namespace kiln::text {

constexpr int kMaxDepth = 500;

enum class Tok { kEnd, kIdent, kInt, kFloat, kString, kLocal, kGlobal, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;     // the identifier, number or punctuation; a string's or name's value
  bool quoted = false;  // %"..." or @"..."
  size_t begin = 0, end = 0;
};

inline bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
inline bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool IsNameChar(char c) {
  return IsIdentStart(c) || IsDigit(c);
}

// Holds `src` by reference: it must outlive the lexer. One thread at a time.
class TextLexer {
 public:
  explicit TextLexer(const std::string& src) : src_(src) {}

 protected:
  enum class Mode { kNormal, kDims };

  // ---- Errors -------------------------------------------------------------------------------

  [[noreturn]] void Fail(size_t offset, const std::string& message) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    Throw(ErrorCode::kParseError, line, ":", col, ": ", message);
  }

  std::string Source(const Token& t) const {
    constexpr size_t kMax = 32;
    std::string s = src_.substr(t.begin, std::min(t.end - t.begin, kMax));
    for (char& c : s)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return "'" + s + (t.end - t.begin > kMax ? "...'" : "'");
  }

  std::string Describe(const Token& t) const {
    return t.kind == Tok::kEnd ? "end of input" : Source(t);
  }

  struct DepthGuard {
    DepthGuard(TextLexer* p, size_t offset) : p(p) {
      if (++p->depth_ > kMaxDepth)
        p->Fail(offset, StrCat("nesting is too deep (more than ", kMaxDepth, " levels)"));
    }
    ~DepthGuard() { --p->depth_; }
    TextLexer* p;
  };

  // ---- Lexer --------------------------------------------------------------------------------

  const Token& Peek() {
    if (!peeked_) peeked_ = Lex(pos_);
    return *peeked_;
  }

  Token Next() {
    Token t = Peek();
    peeked_.reset();
    pos_ = t.end;
    after_dot_ = t.kind == Tok::kPunct && t.text == ".";
    return t;
  }

  bool PeekPunct(const char* p) {
    const Token& t = Peek();
    return t.kind == Tok::kPunct && t.text == p;
  }
  bool PeekIdent(const char* id) {
    const Token& t = Peek();
    return t.kind == Tok::kIdent && t.text == id;
  }
  bool Accept(const char* p) {
    if (!PeekPunct(p)) return false;
    Next();
    return true;
  }
  void Expect(const char* p, const std::string& where) {
    if (!PeekPunct(p))
      Fail(Peek().begin, StrCat("expected '", p, "' ", where, ", got ", Describe(Peek())));
    Next();
  }
  // Items separated by commas up to `close` (consumed; `where` names it in the error). The
  // item parser is called once per item; an empty list is fine.
  template <typename Item>
  void CommaList(const char* close, const std::string& where, const Item& item) {
    if (!PeekPunct(close)) {
      do item();
      while (Accept(","));
    }
    Expect(close, where);
  }

  void ExpectEnd() {
    if (Peek().kind != Tok::kEnd)
      Fail(Peek().begin, "expected end of input, got " + Describe(Peek()));
  }

  void SetMode(Mode m) {
    mode_ = m;
    peeked_.reset();
  }

  struct Mark {
    size_t pos;
    bool after_dot;
  };
  Mark Save() const { return {pos_, after_dot_}; }
  void Restore(const Mark& m) {
    pos_ = m.pos;
    after_dot_ = m.after_dot;
    peeked_.reset();
  }

  // The token after the next one; the lexer state is left as it was.
  Token PeekSecond() {
    Mark m = Save();
    Next();
    Token t = Peek();
    Restore(m);
    return t;
  }

  Token Lex(size_t p) {
    const size_t n = src_.size();
    while (p < n) {
      char c = src_[p];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++p;
      } else if (c == '/' && p + 1 < n && src_[p + 1] == '/' && mode_ == Mode::kNormal) {
        while (p < n && src_[p] != '\n') ++p;
      } else if (c == '/' && p + 1 < n && src_[p + 1] == '*') {
        size_t close = src_.find("*/", p + 2);
        if (close == std::string::npos) Fail(p, "unterminated comment");
        p = close + 2;
      } else {
        break;
      }
    }
    Token t;
    t.begin = p;
    if (p >= n) {
      t.end = p;
      return t;
    }
    char c = src_[p];
    if ((c == '%' && mode_ == Mode::kNormal) || c == '@') {
      t.kind = c == '%' ? Tok::kLocal : Tok::kGlobal;
      if (p + 1 < n && src_[p + 1] == '"') {
        t.text = LexString(p + 1, &t.end);
        t.quoted = true;
      } else {
        size_t e = p + 1;
        while (e < n && IsNameChar(src_[e])) ++e;
        if (e == p + 1) Fail(p, StrCat("expected a name after '", c, "'"));
        t.text = src_.substr(p + 1, e - p - 1);
        t.end = e;
      }
      return t;
    }
    if (c == '"') {
      t.kind = Tok::kString;
      t.text = LexString(p, &t.end);
      return t;
    }
    if (IsDigit(c)) return LexNumber(p);
    if (IsIdentStart(c)) {
      size_t e = p;
      while (true) {
        while (e < n && IsNameChar(src_[e])) ++e;
        // Dotted op names (`nn.conv2d`); `.0` after a name is a tuple index, not part of it.
        if (e + 1 < n && src_[e] == '.' && IsIdentStart(src_[e + 1])) {
          ++e;
          continue;
        }
        break;
      }
      t.kind = Tok::kIdent;
      t.text = src_.substr(p, e - p);
      t.end = e;
      return t;
    }
    t.kind = Tok::kPunct;
    static const char* const kTwoChar[] = {"->", "//", "=>"};
    for (const char* two : kTwoChar) {
      if (src_.compare(p, 2, two) == 0) {
        t.text = two;
        t.end = p + 2;
        return t;
      }
    }
    if (std::string_view("()[]{},:=.?+-*%<>").find(c) != std::string_view::npos) {
      t.text = std::string(1, c);
      t.end = p + 1;
      return t;
    }
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      Fail(p, StrCat("unexpected byte 0x", "0123456789abcdef"[(c >> 4) & 0xf],
                     "0123456789abcdef"[c & 0xf]));
    Fail(p, StrCat("unexpected character '", c, "'"));
  }

  // A "..." literal starting at `p`; returns its value and sets *end past the closing quote.
  std::string LexString(size_t p, size_t* end) {
    std::string out;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size() || src_[i] == '\n') Fail(p, "unterminated string");
      char c = src_[i];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) Fail(p, "unterminated string");
      char e = src_[i + 1];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
          out += '\\';
          break;
        case '"':
          out += '"';
          break;
        case 'x': {
          auto hex = [](char h) {
            if (IsDigit(h)) return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          int hi = i + 2 < src_.size() ? hex(src_[i + 2]) : -1;
          int lo = i + 3 < src_.size() ? hex(src_[i + 3]) : -1;
          if (hi < 0 || lo < 0) Fail(i, "expected two hex digits after '\\x' in a string");
          out += static_cast<char>(hi * 16 + lo);
          i += 2;
          break;
        }
        default:
          Fail(i, StrCat("unknown escape '\\", e, "' in a string"));
      }
      i += 2;
    }
    *end = i + 1;
    return out;
  }

  Token LexNumber(size_t p) {
    const size_t n = src_.size();
    Token t;
    t.begin = p;
    t.kind = Tok::kInt;
    size_t e = p;
    while (e < n && IsDigit(src_[e])) ++e;
    // Right after a '.', digits are a tuple index: `%t.0.1` is two get-items, not `0.1`.
    if (!after_dot_) {
      if (e + 1 < n && src_[e] == '.' && IsDigit(src_[e + 1])) {
        t.kind = Tok::kFloat;
        ++e;
        while (e < n && IsDigit(src_[e])) ++e;
      }
      if (e < n && (src_[e] == 'e' || src_[e] == 'E')) {
        size_t x = e + 1;
        if (x < n && (src_[x] == '+' || src_[x] == '-')) ++x;
        if (x < n && IsDigit(src_[x])) {
          t.kind = Tok::kFloat;
          e = x;
          while (e < n && IsDigit(src_[e])) ++e;
        }
      }
    }
    if (e < n && IsNameChar(src_[e])) {
      size_t bad = e;
      while (bad < n && IsNameChar(src_[bad])) ++bad;
      Fail(p, "bad number '" + src_.substr(p, bad - p) + "'");
    }
    t.text = src_.substr(p, e - p);
    t.end = e;
    return t;
  }

  // ---- Literals (checked conversions of a token's text) -----------------------------------

  int64_t IntValue(const Token& t, bool negative) const {
    uint64_t mag = 0;
    for (char c : t.text) {
      if (__builtin_mul_overflow(mag, uint64_t{10}, &mag) ||
          __builtin_add_overflow(mag, static_cast<uint64_t>(c - '0'), &mag))
        Fail(t.begin, "integer literal " + Source(t) + " is out of range");
    }
    uint64_t limit =
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    if (mag > limit) Fail(t.begin, "integer literal " + Source(t) + " is out of range");
    if (negative)
      return mag == limit ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(mag);
    return static_cast<int64_t>(mag);
  }

  double FloatValue(const std::string& text, size_t pos) const {
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) Fail(pos, "bad number '" + text + "'");
    if (errno == ERANGE && std::isinf(v)) Fail(pos, "float literal '" + text + "' is out of range");
    return v;
  }

  const std::string& src_;
  size_t pos_ = 0;
  bool after_dot_ = false;
  Mode mode_ = Mode::kNormal;
  std::optional<Token> peeked_;
  int depth_ = 0;
};

}  // namespace kiln::text
