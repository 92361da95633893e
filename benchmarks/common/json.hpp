#pragma once
// JSON for the result files of every program. Strings and numbers are
// written by nlohmann::json (Debian's nlohmann-json3-dev): strings escaped
// per RFC 8259 (invalid UTF-8 replaced by U+FFFD, never an exception),
// numbers as the shortest decimal that reads back as the same double,
// non-finite numbers as null. Json streams a document built in order.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace qsgd::bench {

// A JSON string literal, quotes included.
inline std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A JSON number (null when x is not finite).
inline std::string json_number(double x) { return nlohmann::json(x).dump(); }

// A streaming writer: objects, arrays, strings, numbers, booleans and raw
// fragments that are already JSON, with the commas in between.
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

}  // namespace qsgd::bench
