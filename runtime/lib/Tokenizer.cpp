//===- Tokenizer.cpp - Byte-level BPE from a tokenizer.json ---------------===//
//
// Part of the msac runtime.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/Tokenizer.h"

#include "JsonField.h"
#include "msac/Checkpoint/JsonError.h"

#include <nlohmann/json.hpp>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <iterator>

using namespace msac::runtime;
using json = nlohmann::json;
using msac::runtime::detail::JsonField;

namespace {

std::string codepointToUtf8(int cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

/// Splits a UTF-8 string into code point strings.
std::vector<std::string> utf8Chars(const std::string &s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

} // namespace

Tokenizer::~Tokenizer() {
  for (void *re : regexes)
    pcre2_code_free(static_cast<pcre2_code *>(re));
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path,
                                           std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot be read";
    return nullptr;
  }
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // nlohmann's lexer reads a NUL outside a string as the end of the input
  // and would silently drop the rest of the file.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    error = path + ": contains a NUL byte at offset " + std::to_string(nul) +
            "; the file is corrupt";
    return nullptr;
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception &e) {
    error = path + ": not valid JSON: " + msac::ckpt::jsonErrorText(e.what());
    return nullptr;
  }
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  try {
    // GPT-2 byte alphabet.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) ||
                       (b >= 174 && b <= 255);
      t->byteToSymbol[b] = codepointToUtf8(printable ? b : next++);
      t->symbolToByte[t->byteToSymbol[b]] = static_cast<uint8_t>(b);
    }
    // Fields are read through JsonField, whose errors name the field.
    const JsonField root(j, "");
    const JsonField model = root.at("model");
    const std::string modelType = model.string("type", "");
    if (modelType != "BPE") {
      error = path + ": model.type '" + modelType +
              "' is not supported; msac-run reads BPE tokenizers";
      return nullptr;
    }
    const JsonField vocab = model.at("vocab");
    if (!vocab.json().is_object())
      vocab.fail("an object (token -> id)");
    for (auto it = vocab.json().begin(); it != vocab.json().end(); ++it) {
      const json &value = it.value();
      if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
          value.get<int64_t>() > INT32_MAX)
        JsonField(value, "model.vocab[" + json(it.key()).dump() + "]")
            .fail("a token id in [0, 2^31)");
      int32_t id = value.get<int32_t>();
      t->vocab[it.key()] = id;
      t->idToToken[id] = it.key();
    }
    int32_t rank = 0;
    for (const JsonField &m : model.at("merges").elements()) {
      std::string a, b;
      if (m.json().is_string()) {
        std::string s = m.string();
        size_t sp = s.find(' ');
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else {
        std::vector<JsonField> pair = m.elements();
        if (pair.size() != 2)
          m.fail("a pair of strings");
        a = pair[0].string();
        b = pair[1].string();
      }
      t->mergeRank.emplace(a + '\x01' + b, rank++);
    }
    if (root.has("added_tokens"))
      for (const JsonField &a : root.at("added_tokens").elements()) {
        const int64_t id64 = a.at("id").integer();
        if (id64 < 0 || id64 > INT32_MAX)
          a.at("id").fail("a token id in [0, 2^31)");
        const int32_t id = static_cast<int32_t>(id64);
        std::string content = a.at("content").string();
        t->added.push_back({content, id});
        t->idToToken[id] = content;
        if (a.boolean("special", false))
          t->special[id] = content;
      }
    std::sort(t->added.begin(), t->added.end(),
              [](auto &x, auto &y) { return x.first.size() > y.first.size(); });

    if (root.has("normalizer")) {
      const std::string type = root.at("normalizer").string("type", "");
      if (type != "NFC") {
        error =
            path + ": normalizer '" + type + "' is not supported (null or NFC)";
        return nullptr;
      }
      t->nfc = true;
    }
    auto addRegex = [&](const std::string &pattern) -> bool {
      int code;
      PCRE2_SIZE offset;
      pcre2_code *re = pcre2_compile(
          reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
          PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
      if (!re) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof(message));
        error = path + ": pre_tokenizer regex does not compile at offset " +
                std::to_string(offset) + ": " +
                reinterpret_cast<char *>(message);
        return false;
      }
      t->regexes.push_back(re);
      return true;
    };
    std::vector<JsonField> pre;
    if (root.has("pre_tokenizer")) {
      const JsonField p = root.at("pre_tokenizer");
      if (p.string("type", "") == "Sequence")
        pre = p.at("pretokenizers").elements();
      else
        pre.push_back(p);
    }
    for (const JsonField &x : pre) {
      std::string type = x.string("type", "");
      if (type == "Split") {
        if (!addRegex(x.at("pattern").at("Regex").string()))
          return nullptr;
      } else if (type == "ByteLevel") {
        t->byteLevel = true;
        if (x.boolean("use_regex", true) &&
            !addRegex("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                      "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"))
          return nullptr;
      } else {
        error = path + ": pre_tokenizer type '" + type +
                "' is not supported (Split, ByteLevel, Sequence)";
        return nullptr;
      }
    }
    if (!t->byteLevel) {
      error = path + ": only byte-level BPE tokenizers are supported (no "
                     "ByteLevel pre_tokenizer found)";
      return nullptr;
    }
  } catch (const std::exception &e) {
    error =
        path + ": malformed tokenizer: " + msac::ckpt::jsonErrorText(e.what());
    return nullptr;
  }
  return t;
}

std::vector<std::string> Tokenizer::pretokenize(const std::string &text) const {
  std::vector<std::string> pieces = {text};
  for (void *opaque : regexes) {
    auto *re = static_cast<pcre2_code *>(opaque);
    pcre2_match_data *match = pcre2_match_data_create_from_pattern(re, nullptr);
    std::vector<std::string> out;
    for (const std::string &piece : pieces) {
      size_t start = 0;
      while (start < piece.size()) {
        int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(piece.data()),
                             piece.size(), start, 0, match, nullptr);
        if (rc < 0) {
          out.push_back(piece.substr(start));
          break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(match);
        if (ov[0] > start)
          out.push_back(piece.substr(start, ov[0] - start));
        if (ov[1] == ov[0]) { // empty match: step one code point
          size_t n = utf8Chars(piece.substr(ov[0], 4)).front().size();
          out.push_back(piece.substr(ov[0], n));
          start = ov[0] + n;
          continue;
        }
        out.push_back(piece.substr(ov[0], ov[1] - ov[0]));
        start = ov[1];
      }
    }
    pcre2_match_data_free(match);
    pieces = std::move(out);
  }
  return pieces;
}

std::vector<int32_t> Tokenizer::bpe(const std::string &piece) const {
  std::vector<std::string> symbols;
  for (unsigned char byte : piece)
    symbols.push_back(byteToSymbol[byte]);
  while (symbols.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = mergeRank.find(symbols[i] + '\x01' + symbols[i + 1]);
      if (it != mergeRank.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == INT_MAX)
      break;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + at + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string &s : symbols) {
    auto it = vocab.find(s);
    if (it != vocab.end()) {
      ids.push_back(it->second);
      continue;
    }
    // A symbol the vocabulary lacks: fall back to its single bytes.
    for (const std::string &c : utf8Chars(s)) {
      auto byte = vocab.find(c);
      if (byte != vocab.end())
        ids.push_back(byte->second);
    }
  }
  return ids;
}

std::vector<int32_t> Tokenizer::encode(const std::string &input) const {
  std::string text = input;
  if (nfc) {
    utf8proc_uint8_t *normalized =
        utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t *>(input.c_str()));
    if (normalized) {
      text = reinterpret_cast<char *>(normalized);
      free(normalized);
    }
  }
  std::vector<int32_t> ids;
  size_t start = 0;
  auto flush = [&](size_t end) {
    if (end <= start)
      return;
    for (const std::string &piece :
         pretokenize(text.substr(start, end - start))) {
      std::vector<int32_t> part = bpe(piece);
      ids.insert(ids.end(), part.begin(), part.end());
    }
  };
  for (size_t i = 0; i < text.size();) {
    bool matched = false;
    for (const auto &[content, id] : added)
      if (!content.empty() && text.compare(i, content.size(), content) == 0) {
        flush(i);
        ids.push_back(id);
        i += content.size();
        start = i;
        matched = true;
        break;
      }
    if (!matched)
      ++i;
  }
  flush(text.size());
  return ids;
}

std::string Tokenizer::tokenBytes(int32_t id) const {
  auto it = idToToken.find(id);
  if (it == idToToken.end())
    return "";
  for (const auto &[content, addedId] : added)
    if (addedId == id)
      return content;
  std::string bytes;
  for (const std::string &c : utf8Chars(it->second)) {
    auto b = symbolToByte.find(c);
    if (b != symbolToByte.end())
      bytes += static_cast<char>(b->second);
    else
      bytes += c;
  }
  return bytes;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string out;
  for (int32_t id : ids)
    out += tokenBytes(id);
  return out;
}

//===----------------------------------------------------------------------===//
// Utf8Stream
//===----------------------------------------------------------------------===//

namespace {

/// The length of the UTF-8 sequence `lead` starts and the range of its
/// second byte (Unicode Table 3-7); 0 for a byte that starts none.
int sequenceLength(unsigned char lead, unsigned char &lo, unsigned char &hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    return 2;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (lead == 0xE0)
      lo = 0xA0; // no overlong forms
    else if (lead == 0xED)
      hi = 0x9F; // no surrogates
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (lead == 0xF0)
      lo = 0x90; // no overlong forms
    else if (lead == 0xF4)
      hi = 0x8F; // nothing above U+10FFFF
    return 4;
  }
  return 0; // a continuation byte, C0/C1 or F5..FF
}

constexpr const char *kReplacement = "\xEF\xBF\xBD"; // U+FFFD

} // namespace

std::string Utf8Stream::drain(bool atEnd) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    unsigned char lo, hi;
    const int n =
        sequenceLength(static_cast<unsigned char>(pending[i]), lo, hi);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // Count the bytes of the sequence that are there and fit.
    int good = 1;
    while (good < n && i + good < pending.size()) {
      const unsigned char c = static_cast<unsigned char>(pending[i + good]);
      if (c < (good == 1 ? lo : 0x80) || c > (good == 1 ? hi : 0xBF))
        break;
      ++good;
    }
    if (good == n) {
      out.append(pending, i, n);
      i += n;
    } else if (i + good == pending.size() && !atEnd) {
      break; // a character whose next bytes are still to come
    } else {
      out += kReplacement; // the ill-formed subpart; the byte after it
      i += good;           // starts afresh
    }
  }
  pending.erase(0, i);
  return out;
}

std::string Utf8Stream::push(const std::string &bytes) {
  pending += bytes;
  return drain(false);
}

std::string Utf8Stream::finish() { return drain(true); }
