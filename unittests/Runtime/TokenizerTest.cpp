//===- TokenizerTest.cpp - Byte-level BPE tokenizer -----------------------===//
//
// Part of msac's tests. A hand-written tokenizer.json whose merges fix the
// expected ids, plus round trips through the tokenizer msac-synth writes.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/Engine.h"
#include "msac/Runtime/Tokenizer.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace msac::runtime;

namespace {

std::string writeTemp(const std::string &name, const std::string &text) {
  std::string path =
      (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

/// Vocabulary: the 256 byte symbols get ids 0..255 in GPT-2 order is not
/// needed here; a tiny vocabulary with explicit ids for the symbols used.
/// "Ġ" is the byte-level symbol of a space.
const char *kTiny = R"({
  "version": "1.0",
  "added_tokens": [{"id": 100, "content": "<s>", "special": true},
                   {"id": 101, "content": "</s>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": " ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE",
    "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "abc": 5, "Ġab": 6,
              "1": 7, "2": 8, "12": 9, "!": 10},
    "merges": ["a b", "ab c", "Ġ ab", "1 2"]}
})";

TEST(Tokenizer, MergesAndAddedTokens) {
  std::string error;
  auto tok = Tokenizer::load(writeTemp("msac-tok-tiny.json", kTiny), error);
  ASSERT_TRUE(tok) << error;
  // "abc" -> a b c -> ab c -> abc; " ab" -> Ġ a b -> Ġ ab -> Ġab.
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(tok->encode("abc ab"), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(tok->encode("<s>abc</s>"), (std::vector<int32_t>{100, 5, 101}));
  EXPECT_EQ(tok->encode("12!"), (std::vector<int32_t>{9, 10}));
  EXPECT_EQ(tok->encode("cab"), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(tok->decode({5, 6, 100}), "abc ab<s>");
  EXPECT_TRUE(tok->isSpecial(101));
  EXPECT_FALSE(tok->isSpecial(5));
}

TEST(Tokenizer, RejectsUnsupportedFiles) {
  std::string error;
  EXPECT_FALSE(Tokenizer::load(writeTemp("msac-tok-bad1.json", "{not json"), error));
  EXPECT_NE(error.find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(Tokenizer::load(
      writeTemp("msac-tok-nul.json", std::string(kTiny) + '\0' + "{"), error));
  EXPECT_NE(error.find("contains a NUL byte at offset"), std::string::npos)
      << error;
  EXPECT_FALSE(Tokenizer::load(
      writeTemp("msac-tok-bad2.json", R"({"model": {"type": "Unigram"}})"), error));
  EXPECT_NE(error.find("model.type 'Unigram' is not supported"), std::string::npos);
  std::string meta = kTiny;
  meta.replace(meta.find("\"normalizer\": null"), 18,
               "\"normalizer\": {\"type\": \"Lowercase\"}");
  EXPECT_FALSE(Tokenizer::load(writeTemp("msac-tok-bad3.json", meta), error));
  EXPECT_NE(error.find("normalizer 'Lowercase' is not supported"), std::string::npos);
  EXPECT_FALSE(Tokenizer::load("/nonexistent/tokenizer.json", error));
}

TEST(Utf8Stream, HoldsCharactersSplitAcrossTokens) {
  Utf8Stream s;
  EXPECT_EQ(s.push("h"), "h");
  EXPECT_EQ(s.push("\xC3"), ""); // é = C3 A9
  EXPECT_EQ(s.push("\xA9!"), "\xC3\xA9!");
  EXPECT_EQ(s.push("\xE2"), ""); // € = E2 82 AC, one byte a token
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(s.push("a\xF0\x9F"), "a"); // 😀 = F0 9F 98 80
  EXPECT_EQ(s.push("\x98\x80"
                   "b"),
            "\xF0\x9F\x98\x80"
            "b");
  EXPECT_EQ(s.finish(), "");
}

TEST(Utf8Stream, ReplacesInvalidBytes) {
  const std::string fffd = "\xEF\xBF\xBD";
  Utf8Stream s;
  // Bytes that start no character: a lone continuation byte, F5..FF.
  EXPECT_EQ(s.push("a\x80"
                   "b"),
            "a" + fffd + "b");
  EXPECT_EQ(s.push("\xFF"), fffd);
  // A character cut short by a byte that cannot continue it: one U+FFFD
  // for the bytes so far, and the next byte read afresh.
  EXPECT_EQ(s.push("\xE2\x82"), "");
  EXPECT_EQ(s.push("x"), fffd + "x");
  EXPECT_EQ(s.push("\xDE"
                   "f"),
            fffd + "f");
  // Overlong forms and surrogates: every byte is its own ill-formed part.
  EXPECT_EQ(s.push("\xC0\xAF"), fffd + fffd);
  EXPECT_EQ(s.push("\xED\xA0\x80"), fffd + fffd + fffd);
  EXPECT_EQ(s.push("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);
  // An unfinished character at the end of the stream.
  EXPECT_EQ(s.push("z\xF0\x9F\x98"), "z");
  EXPECT_EQ(s.finish(), fffd);
  EXPECT_EQ(s.finish(), "");
}

TEST(Utf8Stream, DecodesByteLevelTokens) {
  // "Ã" and "©" are the byte-level symbols of bytes C3 and A9 (é split
  // over two tokens); "ÿ" is byte FF, never valid UTF-8.
  std::string json = kTiny;
  json.replace(json.find("\"!\": 10"), 7,
               "\"!\": 10, \"\u00c3\": 11, \"\u00a9\": 12, "
               "\"\u00ff\": 13");
  std::string error;
  auto tok = Tokenizer::load(writeTemp("msac-tok-bytes.json", json), error);
  ASSERT_TRUE(tok) << error;
  EXPECT_EQ(tok->tokenBytes(11), "\xC3");
  EXPECT_EQ(tok->tokenBytes(12), "\xA9");
  Utf8Stream s;
  std::string text;
  for (int32_t id : {6, 11, 12, 10, 13, 0, 11})
    text += s.push(tok->tokenBytes(id));
  text += s.finish();
  EXPECT_EQ(text, " ab\xC3\xA9!\xEF\xBF\xBD"
                  "a\xEF\xBF\xBD");
}

TEST(Tokenizer, SynthTokenizerRoundTrips) {
  const char *dir = std::getenv("MSAC_TINY_MODEL");
  if (!dir)
    GTEST_FAIL() << "set MSAC_TINY_MODEL to a msac-synth checkpoint";
  std::string error;
  auto tok = Tokenizer::load(std::string(dir) + "/tokenizer.json", error);
  ASSERT_TRUE(tok) << error;
  for (const std::string text :
       {"The compiler reads a checkpoint folder.", "prefill, decode; 2048 tokens!",
        "  spaces\tand\nnewlines  ", "UTF-8: naïve café — 日本語 🙂", ""}) {
    std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(tok->decode(ids), text);
    for (int32_t id : ids)
      EXPECT_LT(id, 510);
  }
  // Learned merges make common words single tokens.
  EXPECT_LT(tok->encode(" the").size(), 4u);
}

TEST(Sampling, GreedyTopKTopP) {
  std::vector<float> logits = {0.1f, 3.0f, 2.9f, -1.0f, 0.0f};
  std::mt19937_64 rng(1);
  SamplingParams greedy;
  EXPECT_EQ(sampleToken(logits.data(), 5, greedy, rng), 1);
  SamplingParams topK;
  topK.temperature = 1.0f;
  topK.topK = 2;
  for (int i = 0; i < 200; ++i) {
    int32_t t = sampleToken(logits.data(), 5, topK, rng);
    EXPECT_TRUE(t == 1 || t == 2);
  }
  // top_p small enough keeps only the most likely token.
  SamplingParams topP;
  topP.temperature = 1.0f;
  topP.topP = 0.1f;
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(sampleToken(logits.data(), 5, topP, rng), 1);
  // The same seed gives the same sequence.
  SamplingParams warm;
  warm.temperature = 2.0f;
  std::mt19937_64 a(7), b(7);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(sampleToken(logits.data(), 5, warm, a),
              sampleToken(logits.data(), 5, warm, b));
}

} // namespace
