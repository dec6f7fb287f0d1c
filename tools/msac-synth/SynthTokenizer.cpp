//===- SynthTokenizer.cpp - A small byte-level BPE tokenizer.json ---------===//
//
// Part of msac-synth.
//
//===----------------------------------------------------------------------===//

#include "SynthTokenizer.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <map>
#include <set>

using namespace msac::synth;

namespace {

// Training text written for msac; any English prose would do.
const char *kCorpus =
    "The compiler reads a checkpoint folder, checks every tensor against the "
    "configuration, and builds the model as a graph of operations. Each "
    "decoder layer normalizes its input, projects queries, keys and values, "
    "and rotates part of every head by the position of the token. The index "
    "branch scores every earlier block of one hundred and twenty eight "
    "tokens and keeps the sixteen best blocks for each group of heads, "
    "always including the block that holds the query itself. Attention then "
    "runs exactly over the selected keys, which is why long contexts stay "
    "fast. After attention, a router picks four experts out of many for "
    "every token, scales their outputs, and adds a shared expert that every "
    "token uses. The runtime keeps keys and values in pages, maps the "
    "weights from disk, and samples the next token with a temperature, a "
    "top k or a top p rule. Numbers such as 2048, 128 and 16 appear in the "
    "tests; so do words like prefill, decode, cache, block, page and token. "
    "When a file is broken, the reader names the file, the tensor and the "
    "problem, and it never crashes. Small models are trained on nothing; "
    "their weights are random, so the text they write is noise, but the "
    "path from prompt to tokens is the real one.\n";

/// GPT-2's reversible byte -> printable code point mapping.
std::vector<std::string> byteAlphabet() {
  std::vector<int> points(256, -1);
  for (int b = 33; b <= 126; ++b)
    points[b] = b;
  for (int b = 161; b <= 172; ++b)
    points[b] = b;
  for (int b = 174; b <= 255; ++b)
    points[b] = b;
  int next = 256;
  for (int b = 0; b < 256; ++b)
    if (points[b] < 0)
      points[b] = next++;
  std::vector<std::string> alphabet(256);
  for (int b = 0; b < 256; ++b) {
    int cp = points[b];
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    alphabet[b] = s;
  }
  return alphabet;
}

/// Splits ASCII text like the GPT-2 pattern: optional space + letters,
/// optional space + digits, optional space + other symbols, whitespace.
std::vector<std::string> pretokenize(const std::string &text) {
  std::vector<std::string> pieces;
  size_t i = 0;
  auto kind = [](char c) {
    if (std::isalpha(static_cast<unsigned char>(c)))
      return 0;
    if (std::isdigit(static_cast<unsigned char>(c)))
      return 1;
    if (std::isspace(static_cast<unsigned char>(c)))
      return 3;
    return 2;
  };
  while (i < text.size()) {
    size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && kind(text[i + 1]) != 3)
      ++i;
    int k = kind(text[i]);
    while (i < text.size() && kind(text[i]) == k)
      ++i;
    pieces.push_back(text.substr(start, i - start));
  }
  return pieces;
}

} // namespace

std::string
msac::synth::buildTokenizerJson(int64_t bpeVocabSize,
                                const std::vector<SpecialToken> &specials) {
  const std::vector<std::string> alphabet = byteAlphabet();
  std::vector<std::string> vocab(alphabet.begin(), alphabet.end());
  std::set<std::string> inVocab(vocab.begin(), vocab.end());

  // Words as sequences of byte-level symbols, with their counts.
  std::map<std::vector<std::string>, int64_t> words;
  for (const std::string &piece : pretokenize(kCorpus)) {
    std::vector<std::string> symbols;
    for (unsigned char byte : piece)
      symbols.push_back(alphabet[byte]);
    ++words[symbols];
  }

  std::vector<std::pair<std::string, std::string>> merges;
  while (static_cast<int64_t>(vocab.size()) < bpeVocabSize) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;
    for (const auto &[symbols, count] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i)
        pairs[{symbols[i], symbols[i + 1]}] += count;
    if (pairs.empty())
      break;
    // Most frequent pair; ties go to the smallest pair (map order).
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second)
        best = it;
    const auto [left, right] = best->first;
    merges.push_back({left, right});
    if (inVocab.insert(left + right).second)
      vocab.push_back(left + right);
    std::map<std::vector<std::string>, int64_t> merged;
    for (const auto &[symbols, count] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left &&
            symbols[i + 1] == right) {
          out.push_back(left + right);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      merged[out] += count;
    }
    words = std::move(merged);
  }
  // The corpus may run out of pairs before the requested size: pad with
  // merges of byte pairs that never occur, so ids stay dense.
  for (size_t a = 0; static_cast<int64_t>(vocab.size()) < bpeVocabSize; ++a)
    for (size_t b = 0; b < 256 && static_cast<int64_t>(vocab.size()) <
                                      bpeVocabSize;
         ++b) {
      std::string token = alphabet[(a + 128) % 256] + alphabet[b];
      if (!inVocab.insert(token).second)
        continue;
      merges.push_back({alphabet[(a + 128) % 256], alphabet[b]});
      vocab.push_back(token);
    }

  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = nlohmann::ordered_json::array();
  for (const SpecialToken &s : specials)
    j["added_tokens"].push_back({{"id", s.id},
                                 {"content", s.content},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                     "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"},
         {"add_prefix_space", false},
         {"trim_offsets", true},
         {"use_regex", false}}}}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", false},
                  {"trim_offsets", true},
                  {"use_regex", false}};
  nlohmann::ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  nlohmann::ordered_json vocabJson = nlohmann::ordered_json::object();
  for (size_t id = 0; id < vocab.size(); ++id)
    vocabJson[vocab[id]] = id;
  model["vocab"] = vocabJson;
  nlohmann::ordered_json mergesJson = nlohmann::ordered_json::array();
  for (const auto &[a, b] : merges)
    mergesJson.push_back({a, b});
  model["merges"] = mergesJson;
  j["model"] = model;
  return j.dump(1) + "\n";
}
