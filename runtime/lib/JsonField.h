//===- JsonField.h - JSON fields that know their path -----------*- C++ -*-===//
//
// Part of the msac runtime (internal).
//
// nlohmann's own errors ("type must be number, but is string", "key 'x' not
// found") do not say which field of a file is wrong. A JsonField is a value
// together with its path in the document (`model.hidden_size`,
// `buffers[3].shape[0]`); its typed accessors throw a JsonFieldError that
// names the path, the type expected and the value found.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_RUNTIME_LIB_JSONFIELD_H
#define MSAC_RUNTIME_LIB_JSONFIELD_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace msac::runtime::detail {

/// A field of the wrong type, or a required field that is missing.
class JsonFieldError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class JsonField {
public:
  JsonField(const nlohmann::json &value, std::string path)
      : value(&value), fieldPath(std::move(path)) {}

  const nlohmann::json &json() const { return *value; }
  const std::string &path() const { return fieldPath; }

  /// True when this is an object with a non-null member `key`.
  bool has(const char *key) const {
    if (!value->is_object())
      return false;
    auto it = value->find(key);
    return it != value->end() && !it->is_null();
  }

  /// The required member `key` of this object.
  JsonField at(const char *key) const {
    expectObject();
    auto it = value->find(key);
    if (it == value->end() || it->is_null())
      throw JsonFieldError(member(key) + " is missing");
    return JsonField(*it, member(key));
  }

  /// The elements of this array.
  std::vector<JsonField> elements() const {
    if (!value->is_array())
      fail("an array");
    std::vector<JsonField> out;
    for (size_t i = 0; i < value->size(); ++i)
      out.emplace_back((*value)[i], fieldPath + "[" + std::to_string(i) + "]");
    return out;
  }

  int64_t integer() const {
    if (!value->is_number_integer() ||
        (value->is_number_unsigned() &&
         value->get<uint64_t>() >
             static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail("an integer");
    return value->get<int64_t>();
  }
  uint64_t unsignedInteger() const {
    if (!value->is_number_integer() ||
        (!value->is_number_unsigned() && value->get<int64_t>() < 0))
      fail("a non-negative integer");
    return value->get<uint64_t>();
  }
  std::string string() const {
    if (!value->is_string())
      fail("a string");
    return value->get<std::string>();
  }
  bool boolean() const {
    if (!value->is_boolean())
      fail("true or false");
    return value->get<bool>();
  }
  std::vector<int64_t> integers() const {
    std::vector<int64_t> out;
    for (const JsonField &e : elements())
      out.push_back(e.integer());
    return out;
  }

  /// Optional members: `fallback` when absent or null.
  int64_t integer(const char *key, int64_t fallback) const {
    return has(key) ? at(key).integer() : fallback;
  }
  uint64_t unsignedInteger(const char *key, uint64_t fallback) const {
    return has(key) ? at(key).unsignedInteger() : fallback;
  }
  std::string string(const char *key, const std::string &fallback) const {
    return has(key) ? at(key).string() : fallback;
  }
  bool boolean(const char *key, bool fallback) const {
    return has(key) ? at(key).boolean() : fallback;
  }

  /// Throws: this field is not `expected` ("an integer", ...).
  [[noreturn]] void fail(const std::string &expected) const {
    throw JsonFieldError(fieldPath + " must be " + expected + ", but is " +
                         describe());
  }

private:
  std::string member(const char *key) const {
    return fieldPath.empty() ? std::string(key) : fieldPath + "." + key;
  }
  void expectObject() const {
    if (!value->is_object())
      fail("an object");
  }
  /// "a string (\"abc\")", "an array", ...: the type and a short value.
  std::string describe() const {
    switch (value->type()) {
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::null:
      return "null";
    default:
      break;
    }
    std::string shown = value->dump();
    if (shown.size() > 64) {
      size_t cut = 60; // not inside a UTF-8 sequence
      while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80)
        --cut;
      shown = shown.substr(0, cut) + "...";
    }
    const char *type = value->is_string()    ? "a string"
                       : value->is_boolean() ? "a boolean"
                                             : "a number";
    return std::string(type) + " (" + shown + ")";
  }

  const nlohmann::json *value;
  std::string fieldPath;
};

} // namespace msac::runtime::detail

#endif // MSAC_RUNTIME_LIB_JSONFIELD_H
