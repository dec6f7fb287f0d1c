//===- JsonKeys.h - Duplicate keys and NUL bytes in JSON inputs -*- C++ -*-===//
//
// Part of msac (internal to the checkpoint library).
//
// A plain JSON parse keeps only the last value of a repeated key. This SAX
// pass lists the keys that appear more than once in the objects at a given
// nesting depth, in linear time (nlohmann's callback parser rescans the
// parent object after every member, which is quadratic in the member count).
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_LIB_CHECKPOINT_JSONKEYS_H
#define MSAC_LIB_CHECKPOINT_JSONKEYS_H

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace msac::ckpt::detail {

/// Collects keys repeated within one object at depth `depth` (1 = the
/// members of the root object). When `parentKey` is set, only objects that
/// are the value of that member of the root count (depth 2).
class DuplicateKeys : public nlohmann::json_sax<nlohmann::json> {
public:
  DuplicateKeys(int depth, std::string parentKey = "")
      : wanted(depth), parent(std::move(parentKey)) {}

  std::vector<std::string> duplicates;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override {
    ++depth;
    if (depth == wanted)
      seen.clear();
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
  bool key(string_t &k) override {
    if (depth == 1)
      currentTop = k;
    if (depth == wanted && (parent.empty() || currentTop == parent) &&
        !seen.insert(k).second)
      duplicates.push_back(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &) override {
    return false;
  }

private:
  int wanted;
  std::string parent;
  int depth = 0;
  std::string currentTop;
  std::set<std::string> seen;
};

/// Keys repeated in the root object (depth 1) or in member `parentKey` of
/// the root (depth 2) of `text`. Malformed JSON yields no duplicates (the
/// regular parse reports it).
template <typename Iterator>
std::vector<std::string> findDuplicateKeys(Iterator first, Iterator last,
                                           int depth,
                                           const std::string &parentKey = "") {
  DuplicateKeys handler(depth, parentKey);
  nlohmann::json::sax_parse(first, last, &handler);
  return handler.duplicates;
}

/// Offset of the first NUL byte in [first, last), or -1. nlohmann's lexer
/// reads NUL outside a string as the end of the input and would silently
/// ignore everything after it, so inputs are checked before parsing.
template <typename Byte>
long long findNulByte(const Byte *first, const Byte *last) {
  for (const Byte *p = first; p != last; ++p)
    if (*p == 0)
      return p - first;
  return -1;
}

/// The message for a NUL byte at `offset` of a JSON input.
inline std::string nulByteMessage(long long offset) {
  return "contains a NUL byte at offset " + std::to_string(offset) +
         ", which JSON does not allow; the file is corrupt";
}

} // namespace msac::ckpt::detail

#endif // MSAC_LIB_CHECKPOINT_JSONKEYS_H
