//===- Tokenizer.h - Byte-level BPE from a tokenizer.json -------*- C++ -*-===//
//
// Part of the msac runtime.
//
// Reads a Hugging Face `tokenizer.json` with a BPE model and the byte-level
// alphabet (GPT-2 style): optional NFC normalizer (utf8proc), pre-tokenizer
// `Split` with a regex (PCRE2, Unicode properties) and/or `ByteLevel`,
// added (special) tokens matched verbatim before pre-tokenization, and the
// ByteLevel decoder. Anything else in the file is reported as unsupported,
// naming the field, rather than tokenized differently.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_RUNTIME_TOKENIZER_H
#define MSAC_RUNTIME_TOKENIZER_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace msac::runtime {

class Tokenizer {
public:
  static std::unique_ptr<Tokenizer> load(const std::string &path,
                                         std::string &error);
  ~Tokenizer();

  /// Token ids of `text` (no BOS/EOS added).
  std::vector<int32_t> encode(const std::string &text) const;
  /// The raw bytes token `id` stands for ("" for an unknown id).
  std::string tokenBytes(int32_t id) const;
  /// Concatenated bytes of `ids`.
  std::string decode(const std::vector<int32_t> &ids) const;
  bool isSpecial(int32_t id) const { return special.count(id) > 0; }
  int64_t size() const { return static_cast<int64_t>(idToToken.size()); }
  /// The largest token id of the vocabulary and the added tokens (-1 when
  /// there are none).
  int32_t maxId() const {
    return idToToken.empty() ? -1 : idToToken.rbegin()->first;
  }

private:
  Tokenizer() = default;
  std::vector<int32_t> bpe(const std::string &piece) const;
  std::vector<std::string> pretokenize(const std::string &text) const;

  std::unordered_map<std::string, int32_t> vocab;
  std::map<int32_t, std::string> idToToken;
  std::unordered_map<std::string, int32_t> mergeRank; // "a\x01b" -> rank
  std::vector<std::pair<std::string, int32_t>> added; // longest first
  std::map<int32_t, std::string> special;
  std::vector<void *> regexes; // pcre2_code_8 *
  bool byteLevel = false;
  bool nfc = false;
  std::string byteToSymbol[256];
  std::unordered_map<std::string, uint8_t> symbolToByte;
};

/// Turns the bytes of generated tokens (Tokenizer::tokenBytes, the GPT-2
/// byte-to-unicode mapping undone) into UTF-8 text as they arrive: a
/// character split across tokens is held back until its last byte comes,
/// and bytes that cannot form a character become U+FFFD, one per maximal
/// ill-formed subpart (Unicode §3.9, as Hugging Face's and llama.cpp's
/// decoders do).
class Utf8Stream {
public:
  /// Appends `bytes`; returns the text that is complete now (valid UTF-8).
  std::string push(const std::string &bytes);
  /// Ends the stream: an unfinished character at the end becomes U+FFFD.
  std::string finish();

private:
  std::string drain(bool atEnd);
  std::string pending;
};

} // namespace msac::runtime

#endif // MSAC_RUNTIME_TOKENIZER_H
