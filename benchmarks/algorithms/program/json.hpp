#pragma once
// A minimal streaming JSON writer for the result files of qsgd-algorithms:
// objects, arrays, strings, numbers (non-finite numbers become null), and
// raw fragments that are already JSON (problem descriptions).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace qsgd::algorithms::program {

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

inline std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

class Json {
 public:
  Json& begin_object() { return open('{'); }
  Json& end_object() { return close('}'); }
  Json& begin_array() { return open('['); }
  Json& end_array() { return close(']'); }
  Json& key(const std::string& k) {
    comma();
    os_ << json_string(k) << ":";
    after_key_ = true;
    return *this;
  }
  Json& value(const std::string& s) { return raw(json_string(s)); }
  Json& value(const char* s) { return raw(json_string(s)); }
  Json& value(double x) { return raw(json_number(x)); }
  Json& value(std::uint64_t x) { return raw(std::to_string(x)); }
  Json& value(std::int64_t x) { return raw(std::to_string(x)); }
  Json& value(int x) { return raw(std::to_string(x)); }
  Json& value(bool b) { return raw(b ? "true" : "false"); }
  template <class T>
  Json& value(const std::vector<T>& v) {
    begin_array();
    for (const T& e : v) value(e);
    return end_array();
  }
  template <class T>
  Json& field(const std::string& k, const T& v) {
    key(k);
    return value(v);
  }
  // A fragment that is already valid JSON.
  Json& raw(const std::string& fragment) {
    comma();
    os_ << fragment;
    return *this;
  }
  std::string str() const { return os_.str(); }

 private:
  Json& open(char c) {
    comma();
    os_ << c;
    first_.push_back(true);
    return *this;
  }
  Json& close(char c) {
    first_.pop_back();
    os_ << c;
    return *this;
  }
  void comma() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) os_ << ",";
      first_.back() = false;
    }
  }
  std::ostringstream os_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace qsgd::algorithms::program
