#pragma once
// A strict JSON (RFC 8259) recognizer for the harnesses: numbers must be
// finite and well formed, strings may not hold raw control characters.
// Python's json module, which reads the traces' `config` attribute,
// rejects what this rejects (it accepts NaN and Infinity, never `inf`).

#include <cstddef>
#include <string>

namespace qsgd_fuzz {

class JsonCheck {
 public:
  // True when `text` is one JSON value; otherwise `why` says where it fails.
  static bool valid(const std::string& text, std::string& why) {
    JsonCheck j(text);
    const bool ok = j.value(0) && (j.ws(), j.i_ == text.size());
    if (!ok) why = "at byte " + std::to_string(j.i_) + (j.why_.empty() ? "" : ": " + j.why_);
    return ok;
  }

 private:
  explicit JsonCheck(const std::string& t) : t_(t) {}

  bool fail(const char* why) {
    why_ = why;
    return false;
  }
  bool at_end() const { return i_ >= t_.size(); }
  char peek() const { return at_end() ? '\0' : t_[i_]; }
  void ws() {
    while (!at_end() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (t_.compare(i_, w.size(), w) != 0) return fail("unknown literal");
    i_ += w.size();
    return true;
  }
  static bool digit(char c) { return c >= '0' && c <= '9'; }

  bool value(int depth) {
    if (depth > 64) return fail("nested too deeply");
    ws();
    switch (peek()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }
  bool object(int depth) {
    ++i_;
    ws();
    if (peek() == '}') return ++i_, true;
    for (;;) {
      ws();
      if (peek() != '"') return fail("object key is not a string");
      if (!string()) return false;
      ws();
      if (peek() != ':') return fail("missing ':'");
      ++i_;
      if (!value(depth + 1)) return false;
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') return ++i_, true;
      return fail("missing ',' or '}'");
    }
  }
  bool array(int depth) {
    ++i_;
    ws();
    if (peek() == ']') return ++i_, true;
    for (;;) {
      if (!value(depth + 1)) return false;
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == ']') return ++i_, true;
      return fail("missing ',' or ']'");
    }
  }
  bool string() {
    ++i_;
    while (!at_end()) {
      const unsigned char c = static_cast<unsigned char>(t_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return fail("raw control character in a string");
      if (c == '\\') {
        const char e = peek();
        ++i_;
        if (e == 'u') {
          for (int k = 0; k < 4; ++k, ++i_) {
            const char h = peek();
            if (!(digit(h) || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return fail("bad \\u escape");
          }
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos || e == '\0') {
          return fail("bad escape");
        }
      }
    }
    return fail("unterminated string");
  }
  bool number() {
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (digit(peek())) {
      while (digit(peek())) ++i_;
    } else {
      return fail("not a value (a number must start with a digit: inf and nan are not JSON)");
    }
    if (peek() == '.') {
      ++i_;
      if (!digit(peek())) return fail("no digit after '.'");
      while (digit(peek())) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!digit(peek())) return fail("no digit in the exponent");
      while (digit(peek())) ++i_;
    }
    return true;
  }

  const std::string& t_;
  std::size_t i_ = 0;
  std::string why_;
};

}  // namespace qsgd_fuzz
