//===- Diagnostics.cpp - Problems found in a checkpoint -------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/Diagnostics.h"

#include <ostream>

using namespace msac::ckpt;

void Diagnostics::error(std::string file, std::string subject,
                        std::string message) {
  list.push_back({Severity::Error, std::move(file), std::move(subject),
                  std::move(message)});
  ++numErrors;
}

void Diagnostics::warning(std::string file, std::string subject,
                          std::string message) {
  list.push_back({Severity::Warning, std::move(file), std::move(subject),
                  std::move(message)});
  ++numWarnings;
}

void Diagnostics::note(std::string file, std::string subject,
                       std::string message) {
  list.push_back(
      {Severity::Note, std::move(file), std::move(subject), std::move(message)});
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
