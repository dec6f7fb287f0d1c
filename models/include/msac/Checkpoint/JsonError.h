//===- JsonError.h - nlohmann/json error text for users ---------*- C++ -*-===//
//
// Part of msac.
//
// nlohmann/json prefixes its exception messages with the library's error id
// ("[json.exception.parse_error.101] parse error at line 1, column 5: ...");
// the user needs the rest (line, column, what was read). Header-only, shared
// by the checkpoint library, the runtime and the tools.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_JSONERROR_H
#define MSAC_CHECKPOINT_JSONERROR_H

#include <string>

namespace msac::ckpt {

/// `what` (an nlohmann/json exception's message) without its leading
/// "[json.exception.<kind>.<id>] " tag; other text unchanged.
inline std::string jsonErrorText(const char *what) {
  std::string text(what);
  if (text.rfind("[json.exception.", 0) == 0)
    if (size_t end = text.find("] "); end != std::string::npos)
      return text.substr(end + 2);
  return text;
}

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_JSONERROR_H
