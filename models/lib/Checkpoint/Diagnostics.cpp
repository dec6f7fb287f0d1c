//===- Diagnostics.cpp - Problems found in a checkpoint -------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/Diagnostics.h"

#include <ostream>

using namespace msac::ckpt;

/// Shortens `text` to about kMaxPartBytes by cutting out its middle, so that a
/// corrupt file with a megabyte-long tensor name or string value does not
/// flood the terminal. Cuts fall on UTF-8 character boundaries.
static std::string clip(std::string text) {
  constexpr size_t kMaxPartBytes = 1024;
  constexpr size_t kKeep = kMaxPartBytes / 2;
  if (text.size() <= kMaxPartBytes)
    return text;
  auto isContinuation = [&](size_t i) {
    return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
  };
  size_t head = kKeep;
  while (head > 0 && isContinuation(head))
    --head;
  size_t tail = text.size() - kKeep;
  while (tail < text.size() && isContinuation(tail))
    ++tail;
  return text.substr(0, head) + "...[" + std::to_string(tail - head) +
         " bytes omitted]..." + text.substr(tail);
}

void Diagnostics::error(std::string file, std::string subject,
                        std::string message) {
  list.push_back({Severity::Error, std::move(file), clip(std::move(subject)),
                  clip(std::move(message))});
  ++numErrors;
}

void Diagnostics::warning(std::string file, std::string subject,
                          std::string message) {
  list.push_back({Severity::Warning, std::move(file), clip(std::move(subject)),
                  clip(std::move(message))});
  ++numWarnings;
}

void Diagnostics::note(std::string file, std::string subject,
                       std::string message) {
  list.push_back({Severity::Note, std::move(file), clip(std::move(subject)),
                  clip(std::move(message))});
}

bool Diagnostics::contains(const std::string &text) const {
  for (const Diagnostic &d : list)
    if (d.message.find(text) != std::string::npos ||
        d.subject.find(text) != std::string::npos)
      return true;
  return false;
}

void Diagnostics::print(std::ostream &os) const {
  for (const Diagnostic &d : list) {
    switch (d.severity) {
    case Severity::Error:
      os << "error: ";
      break;
    case Severity::Warning:
      os << "warning: ";
      break;
    case Severity::Note:
      os << "note: ";
      break;
    }
    if (!d.file.empty())
      os << d.file << ": ";
    if (!d.subject.empty())
      os << d.subject << ": ";
    os << d.message << "\n";
  }
}
