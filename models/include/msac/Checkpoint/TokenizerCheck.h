//===- TokenizerCheck.h - Does msac-run read a tokenizer.json? --*- C++ -*-===//
//
// Part of msac. `msac-run generate` reads byte-level BPE tokenizers only
// (runtime/include/msac/Runtime/Tokenizer.h). The compiler checks the
// checkpoint's tokenizer.json up front and warns, naming the model type it
// found, so that an unsupported one is not first noticed at generate time;
// compiling goes on, since inspecting and benchmarking an artifact need no
// tokenizer.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_TOKENIZERCHECK_H
#define MSAC_CHECKPOINT_TOKENIZERCHECK_H

#include "msac/Checkpoint/Diagnostics.h"

#include <string>

namespace msac::ckpt {

/// Warns in `diags` when the tokenizer.json at `path` is not a byte-level
/// BPE tokenizer (model.type BPE with a ByteLevel pre_tokenizer) or cannot
/// be read as JSON. Nothing is reported for a supported file.
void checkTokenizer(const std::string &path, Diagnostics &diags);

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_TOKENIZERCHECK_H
