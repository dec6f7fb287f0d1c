//===- ModelConfigTest.cpp - config.json of the MiniMax-M3 family ---------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFixtures.h"

#include "msac/Checkpoint/ModelConfig.h"

#include "gtest/gtest.h"

#include <fstream>
#include <sstream>

using namespace msac::ckpt;
using msac::test::describe;
using msac::test::replaceOnce;
using msac::test::smallConfig;

namespace {


std::optional<ModelConfig> parse(const std::string &text, Diagnostics &diags,
                                 const std::string *hf = nullptr) {
  return parseModelConfig(text, "config.json", diags, hf);
}

TEST(ModelConfig, RealMiniMaxM3Config) {
  Diagnostics diags;
  std::optional<ModelConfig> c =
      readModelConfig(MSAC_SOURCE_DIR "/models/minimax-m3", diags);
  ASSERT_TRUE(c) << describe(diags);
  EXPECT_EQ(diags.warningCount(), 0u) << describe(diags);
  // msa-m3-spec.md §1.2 / §1.3.
  EXPECT_TRUE(c->multimodalWrapper);
  EXPECT_EQ(c->hiddenSize, 6144);
  EXPECT_EQ(c->numLayers, 60);
  EXPECT_EQ(c->numHeads, 64);
  EXPECT_EQ(c->numKVHeads, 4);
  EXPECT_EQ(c->headDim, 128);
  EXPECT_EQ(c->vocabSize, 200064);
  EXPECT_EQ(c->rotaryDim, 64);
  EXPECT_DOUBLE_EQ(c->ropeTheta, 5e6);
  EXPECT_TRUE(c->gemmaNorm);
  EXPECT_EQ(c->numExperts, 128);
  EXPECT_EQ(c->expertsPerToken, 4);
  EXPECT_EQ(c->numSharedExperts, 1);
  EXPECT_DOUBLE_EQ(c->routedScalingFactor, 2.0);
  EXPECT_TRUE(c->routingBias);
  EXPECT_EQ(c->sparse.topkBlocks, 16);
  EXPECT_EQ(c->sparse.blockSize, 128);
  EXPECT_EQ(c->sparse.indexHeads, 4);
  EXPECT_EQ(c->sparse.indexDim, 128);
  EXPECT_EQ(c->sparse.localBlocks, 1);
  EXPECT_EQ(c->sparse.initBlocks, 0);
  // Layers 0-2 dense attention + dense MLP, 3-59 MSA + MoE, from the file.
  for (int64_t l = 0; l < 60; ++l) {
    EXPECT_EQ(c->layers[l].attention,
              l < 3 ? AttentionKind::Dense : AttentionKind::Sparse);
    EXPECT_EQ(c->layers[l].mlp, l < 3 ? MlpKind::Dense : MlpKind::MoE);
  }
  EXPECT_EQ(c->numSparseLayers(), 57);
  EXPECT_EQ(c->quantization.method, QuantMethod::None);
}

TEST(ModelConfig, ScheduleComesFromTheFile) {
  // M3.1-Flash style: MSA in every layer.
  std::string text = smallConfig();
  size_t at = text.find("\"sparse_attention_freq\":[0,1]");
  text.replace(at, 29, "\"sparse_attention_freq\":[1,1]");
  at = text.find("\"sparse_disable_index_value\":[0,1]");
  text.replace(at, 34, "\"sparse_disable_index_value\":[1,1]");
  Diagnostics diags;
  auto c = parse(text, diags);
  ASSERT_TRUE(c) << describe(diags);
  EXPECT_EQ(c->numSparseLayers(), 2);
  EXPECT_EQ(c->layers[0].mlp, MlpKind::Dense);
}

TEST(ModelConfig, UnknownFieldsWarn) {
  Diagnostics diags;
  auto c = parse(smallConfig("\"shiny_new_knob\": 3,", "\"top_level_knob\":1,"),
                 diags);
  ASSERT_TRUE(c) << describe(diags);
  EXPECT_TRUE(diags.contains("unknown field ignored"));
  EXPECT_EQ(diags.warningCount(), 2u) << describe(diags);
}

struct BadCase {
  const char *extra;
  const char *expected;
};

TEST(ModelConfig, UnsupportedOrContradictoryFieldsAreErrors) {
  const BadCase cases[] = {
      {"\"hidden_act\":\"silu\",", "'silu' is not supported"},
      {"\"attention_output_gate\":true,", "no output gate"},
      {"\"attention_bias\":true,", "have no bias"},
      {"\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4},",
       "RoPE scaling"},
      {"\"n_group\":8,", "grouped expert routing"},
      {"\"scoring_func\":\"softmax\",", "'softmax' is not supported"},
      {"\"qk_norm_type\":\"per_layer\",", "'per_layer' is not supported"},
      {"\"use_qk_norm\":false,", "normalizes q and k per head"},
      {"\"layer_types\":[\"full_attention\",\"full_attention\"],",
       "contradicts"},
      {"\"sliding_window\":4096,", "sliding-window"},
  };
  for (const BadCase &bad : cases) {
    Diagnostics diags;
    // Later keys win in JSON objects only for duplicates; use replacements
    // of existing keys by putting the bad key first and removing the good.
    std::string text = smallConfig(bad.extra);
    for (const char *key : {"\"hidden_act\":\"swigluoai\",",
                            "\"scoring_func\":\"sigmoid\",",
                            "\"qk_norm_type\":\"per_head\",",
                            "\"use_qk_norm\":true,"}) {
      std::string k(key);
      if (std::string(bad.extra).find(k.substr(0, k.find(':'))) !=
          std::string::npos) {
        size_t at = text.rfind(k);
        if (at != std::string::npos)
          text.erase(at, k.size());
      }
    }
    EXPECT_FALSE(parse(text, diags)) << bad.extra;
    EXPECT_TRUE(diags.contains(bad.expected)) << bad.extra << "\n" << describe(diags);
  }
}

TEST(ModelConfig, StructuralErrors) {
  const std::string base = smallConfig();
  struct Case {
    std::string text;
    const char *expected;
  } cases[] = {
      {replaceOnce(base, "\"moe_layer_freq\":[0,1]", "\"moe_layer_freq\":[0,1,1]"),
       "has 3 entries but num_hidden_layers is 2"},
      {replaceOnce(base, "\"moe_layer_freq\":[0,1],", ""),
       "per-layer MoE schedule is never guessed"},
      {replaceOnce(base, "\"moe_layer_freq\":[0,1]", "\"moe_layer_freq\":1"),
       "integer period is ambiguous"},
      {replaceOnce(base, "\"sparse_num_index_heads\":2", "\"sparse_num_index_heads\":1"),
       "must equal num_key_value_heads 2"},
      {replaceOnce(base, "\"sparse_score_type\":\"max\"", "\"sparse_score_type\":\"softmax-sum\""),
       "pools block scores with max"},
      {replaceOnce(base, "\"sparse_disable_index_value\":[0,1]", "\"sparse_disable_index_value\":[0,0]"),
       "selection-only"},
      {replaceOnce(base, "\"rotary_dim\":8", "\"rotary_dim\":12"),
       "contradicts partial_rotary_factor"},
      {replaceOnce(base, "\"num_key_value_heads\":2", "\"num_key_value_heads\":3"),
       "not a multiple of num_key_value_heads 3"},
      {replaceOnce(base, "\"hidden_size\":32,", ""), "is required"},
      {replaceOnce(base, "\"hidden_size\":32", "\"hidden_size\":\"32\""),
       "must be an integer"},
      {replaceOnce(base, "\"num_experts_per_tok\":1", "\"num_experts_per_tok\":3"),
       "exceeds num_local_experts 2"},
      {replaceOnce(base, "\"sparse_topk_blocks\":16", "\"sparse_topk_blocks\":0"),
       "must be >= 1"},
      {"[1,2,3]", "must hold a JSON object"},
      {"{\"text_config\":", "is not valid JSON"},
      // nlohmann ends the parse at a NUL; the trailing garbage must not be
      // dropped silently.
      {base + std::string(1, '\0') + "{{{", "contains a NUL byte at offset"},
  };
  for (const Case &c : cases) {
    Diagnostics diags;
    EXPECT_FALSE(parse(c.text, diags)) << c.expected;
    EXPECT_TRUE(diags.contains(c.expected)) << c.expected << "\n" << describe(diags);
  }
  // The JSON parser's position, without the library's error id.
  Diagnostics diags;
  EXPECT_FALSE(parse("{\"text_config\": x}", diags));
  EXPECT_TRUE(
      diags.contains("is not valid JSON: parse error at line 1, column 17"))
      << describe(diags);
  EXPECT_FALSE(diags.contains("json.exception")) << describe(diags);
}

TEST(ModelConfig, QuantizationMethods) {
  Diagnostics d1;
  auto modelopt = parse(smallConfig("", "\"quantization_config\":{\"quant_method\":\"modelopt\",\"quant_algo\":\"NVFP4\"},"), d1);
  ASSERT_TRUE(modelopt) << describe(d1);
  EXPECT_EQ(modelopt->quantization.method, QuantMethod::ModelOpt);

  Diagnostics d2;
  auto ct = parse(smallConfig("", "\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"nvfp4-pack-quantized\"},"), d2);
  ASSERT_TRUE(ct) << describe(d2);
  EXPECT_EQ(ct->quantization.method, QuantMethod::CompressedTensors);

  Diagnostics d3;
  auto fp8 = parse(smallConfig("", "\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[128,128]},"), d3);
  ASSERT_TRUE(fp8) << describe(d3);
  EXPECT_EQ(fp8->quantization.weightBlockSize, (std::vector<int64_t>{128, 128}));

  Diagnostics d4;
  EXPECT_FALSE(parse(smallConfig("", "\"quantization_config\":{\"quant_method\":\"gptq\"},"), d4));
  EXPECT_TRUE(d4.contains("'gptq' is not supported"));

  // ModelOpt's hf_quant_config.json alone sets the method.
  std::string hf = R"({"producer":{"name":"modelopt"},"quantization":{"quant_algo":"MIXED_PRECISION"}})";
  Diagnostics d5;
  auto fromHf = parse(smallConfig(), d5, &hf);
  ASSERT_TRUE(fromHf) << describe(d5);
  EXPECT_EQ(fromHf->quantization.method, QuantMethod::ModelOpt);
  EXPECT_EQ(fromHf->quantization.algorithm, "MIXED_PRECISION");

  // ... and must not contradict config.json.
  Diagnostics d6;
  EXPECT_FALSE(parse(smallConfig("", "\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"nvfp4-pack-quantized\"},"), d6, &hf));
  EXPECT_TRUE(d6.contains("contradicts config.json"));

  // Problems in hf_quant_config.json name its path inside the folder.
  msac::test::TempDir dir;
  msac::test::writeFile(dir.file("config.json"), smallConfig());
  msac::test::writeFile(dir.file("hf_quant_config.json"), "{\"quantization\":{}}");
  Diagnostics d7;
  EXPECT_FALSE(readModelConfig(dir.path, d7));
  ASSERT_EQ(d7.errorCount(), 1u) << describe(d7);
  EXPECT_EQ(d7.all()[0].file, dir.file("hf_quant_config.json"));
}

} // namespace

namespace {
TEST(ModelConfig, AbsurdSizesAreRefusedBeforeAllocating) {
  const std::string base = smallConfig();
  const std::pair<std::string, const char *> cases[] = {
      {replaceOnce(base, "\"num_hidden_layers\":2", "\"num_hidden_layers\":1000000000"),
       "must be <= 512"},
      {replaceOnce(base, "\"num_local_experts\":2", "\"num_local_experts\":100000000"),
       "must be <= 1024"},
      {replaceOnce(base, "\"hidden_size\":32", "\"hidden_size\":1000000000000"),
       "must be <= 131072"},
      {replaceOnce(base, "\"vocab_size\":64", "\"vocab_size\":18446744073709551615"),
       "is out of range"},
      {replaceOnce(base, "\"num_hidden_layers\":2", "\"num_hidden_layers\":0"),
       "must be >= 1"},
  };
  for (const auto &[text, expected] : cases) {
    Diagnostics diags;
    EXPECT_FALSE(parseModelConfig(text, "config.json", diags)) << expected;
    EXPECT_TRUE(diags.contains(expected)) << expected << "\n" << describe(diags);
  }
}
} // namespace

namespace {
TEST(ModelConfig, BugHuntRegressions) {
  const std::string base = smallConfig();
  const std::pair<std::string, const char *> bad[] = {
      {replaceOnce(base, "\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":1e-60"),
       "outside the FP32 range"},
      {replaceOnce(base, "\"sparse_index_dim\":16", "\"sparse_index_dim\":4"),
       "is smaller than rotary_dim 8"},
      {smallConfig("\"eos_token_id\":64,"), "token id 64 is outside the vocabulary [0, 64)"},
      {smallConfig("\"bos_token_id\":-1,"), "must be >= 0"},
      {smallConfig("\"hidden_size\":48,"), "appears more than once"},
  };
  for (const auto &[text, expected] : bad) {
    Diagnostics diags;
    EXPECT_FALSE(parseModelConfig(text, "config.json", diags)) << expected;
    EXPECT_TRUE(diags.contains(expected)) << expected << "\n" << describe(diags);
  }
  // A dense-only config may spell its schedule with layer_types alone.
  std::string dense = replaceOnce(base, "\"moe_layer_freq\":[0,1]", "\"moe_layer_freq\":[0,0]");
  size_t s = dense.find(",\n      \"sparse_attention_config\"");
  dense = dense.substr(0, s) +
          ",\"layer_types\":[\"full_attention\",\"full_attention\"]}}";
  Diagnostics diags;
  auto config = parseModelConfig(dense, "config.json", diags);
  ASSERT_TRUE(config) << describe(diags);
  EXPECT_EQ(config->numSparseLayers(), 0);
}
} // namespace

TEST(ModelConfig, LongValuesAreClippedInMessages) {
  // A corrupt config with a megabyte-long string must not print it whole;
  // the clip keeps both ends and never splits a UTF-8 character.
  std::string huge = "x" + std::string(1 << 20, 'a');
  for (int i = 0; i < 4000; ++i)
    huge += "\xC3\xA9"; // U+00E9, two bytes
  Diagnostics diags;
  EXPECT_FALSE(parse(smallConfig("", "\"quantization_config\":{\"quant_method\":\"" +
                                         huge + "\"},"),
                     diags));
  ASSERT_TRUE(diags.contains("bytes omitted")) << describe(diags).substr(0, 2000);
  for (const Diagnostic &d : diags.all()) {
    EXPECT_LE(d.message.size(), 1200u);
    EXPECT_LE(d.subject.size(), 1200u);
    // Valid UTF-8 around the cut: no continuation byte follows ASCII text.
    for (size_t i = 1; i < d.message.size(); ++i)
      if ((static_cast<unsigned char>(d.message[i]) & 0xC0) == 0x80)
        EXPECT_GE(static_cast<unsigned char>(d.message[i - 1]), 0x80u) << i;
  }
}
