//===- CliErrors.h - CLI11 parse errors in msac's words ---------*- C++ -*-===//
//
// Part of msac.
//
// Shared by the CLI11-based tools (msac-run, msac-synth): parse errors read
// like the tools' other errors and like msac's (LLVM cl) ones, e.g. a
// single-value option given twice, a missing subcommand.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_TOOLS_CLIERRORS_H
#define MSAC_TOOLS_CLIERRORS_H

#include <CLI/CLI.hpp>

#include <string>

namespace msac::tools {

/// The message of CLI11 parse error `e` of `app`, reworded where CLI11's
/// own text is cryptic: "--x: At Most 1 required but received 2" becomes
/// "--x is given more than once; give it once", and "A subcommand is
/// required" lists the subcommands.
inline std::string cliErrorText(const CLI::App *app, const CLI::Error &e) {
  std::string text = e.what();
  const std::string atMost = ": At Most 1 required but received ";
  if (size_t at = text.find(atMost); at != std::string::npos)
    return text.substr(0, at) + " is given more than once; give it once";
  if (text == "A subcommand is required") {
    std::string names;
    for (const CLI::App *sub :
         app->get_subcommands([](const CLI::App *) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    return "a command is required: one of " + names;
  }
  return text;
}

} // namespace msac::tools

#endif // MSAC_TOOLS_CLIERRORS_H
