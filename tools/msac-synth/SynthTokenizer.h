//===- SynthTokenizer.h - A small byte-level BPE tokenizer.json -*- C++ -*-===//
//
// Part of msac-synth. Trains a byte-level BPE vocabulary on a built-in
// English text and writes it in Hugging Face `tokenizer.json` form (BPE
// model, GPT-2 byte-to-unicode alphabet, regex Split + ByteLevel
// pre-tokenizer, ByteLevel decoder), so that synthetic checkpoints come with
// a tokenizer the runtime loads exactly like a real one.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_TOOLS_SYNTH_SYNTHTOKENIZER_H
#define MSAC_TOOLS_SYNTH_SYNTHTOKENIZER_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace msac::synth {

struct SpecialToken {
  std::string content;
  int64_t id;
};

/// Returns the tokenizer.json text: 256 byte tokens plus merges until the
/// BPE vocabulary has `bpeVocabSize` entries (ids 0 .. bpeVocabSize-1),
/// plus `specials` as added tokens with their own ids.
std::string buildTokenizerJson(int64_t bpeVocabSize,
                               const std::vector<SpecialToken> &specials);

} // namespace msac::synth

#endif // MSAC_TOOLS_SYNTH_SYNTHTOKENIZER_H
