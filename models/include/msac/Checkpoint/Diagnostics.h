//===- Diagnostics.h - Problems found in a checkpoint -----------*- C++ -*-===//
//
// Part of msac. The checkpoint readers never stop at the first problem: they
// collect every error and warning, each naming the file and tensor involved,
// so that a user fixes a broken checkpoint in one round.
//
// This library does not depend on LLVM (the runtime and msac-synth use it).
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_DIAGNOSTICS_H
#define MSAC_CHECKPOINT_DIAGNOSTICS_H

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

namespace msac::ckpt {

enum class Severity { Note, Warning, Error };

struct Diagnostic {
  Severity severity;
  /// The file the problem is in (may be a folder or empty).
  std::string file;
  /// The tensor or config field the problem is about (may be empty).
  std::string subject;
  std::string message;
};

/// An ordered list of diagnostics.
class Diagnostics {
public:
  void error(std::string file, std::string subject, std::string message);
  void warning(std::string file, std::string subject, std::string message);
  void note(std::string file, std::string subject, std::string message);

  bool hasErrors() const { return numErrors > 0; }
  size_t errorCount() const { return numErrors; }
  size_t warningCount() const { return numWarnings; }
  const std::vector<Diagnostic> &all() const { return list; }

  /// True when some diagnostic's message contains `text` (for tests).
  bool contains(const std::string &text) const;

  /// Prints one line per diagnostic:
  /// `error: FILE: tensor 'NAME': MESSAGE` (omitting empty parts).
  void print(std::ostream &os) const;

private:
  std::vector<Diagnostic> list;
  size_t numErrors = 0;
  size_t numWarnings = 0;
};

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_DIAGNOSTICS_H
