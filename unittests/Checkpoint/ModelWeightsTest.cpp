//===- ModelWeightsTest.cpp - Resolving the tensors of a model ------------===//
//
// Part of msac. Bug cases B47 (tied embeddings), B20 (global-scale
// convention comes from the quantization method), B22 (E8M0 scales arrive
// as bytes; 0xFF is rejected), plus missing tensors, wrong shapes and
// dtypes, inconsistent experts and unused tensors.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFixtures.h"

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/ModelWeights.h"

#include "gtest/gtest.h"

using namespace msac::ckpt;
using msac::test::describe;
using msac::test::ExtraTensor;
using msac::test::replaceOnce;
using msac::test::smallConfig;
using msac::test::TempDir;
using msac::test::withoutTensors;
using msac::test::writeSmallCheckpoint;

namespace {

/// `quantization_config` members for smallConfig's second argument.
const char *const kModelOptNVFP4 =
    "\"quantization_config\":{\"quant_method\":\"modelopt\","
    "\"quant_algo\":\"NVFP4\"},";
const char *const kModelOptMXFP8 =
    "\"quantization_config\":{\"quant_method\":\"modelopt\","
    "\"quant_algo\":\"MXFP8\"},";
const char *const kCompressedNVFP4 =
    "\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
    "\"format\":\"nvfp4-pack-quantized\"},";

struct Loaded {
  std::optional<ModelConfig> config;
  std::unique_ptr<Checkpoint> checkpoint;
  std::optional<ModelWeights> weights;
  Diagnostics diags;
};

std::unique_ptr<Loaded> load(const std::string &dir) {
  auto l = std::make_unique<Loaded>();
  l->config = readModelConfig(dir, l->diags);
  if (l->config)
    l->checkpoint = Checkpoint::open(dir, l->diags);
  if (l->checkpoint)
    l->weights = resolveWeights(*l->config, *l->checkpoint, l->diags);
  return l;
}

TEST(ModelWeights, SpecsFollowTheSchedule) {
  Diagnostics diags;
  auto config = parseModelConfig(smallConfig(), "config.json", diags);
  ASSERT_TRUE(config) << describe(diags);
  std::vector<WeightSpec> specs = modelWeightSpecs(*config);
  auto has = [&](const std::string &name) {
    for (const WeightSpec &s : specs)
      if (s.name == name)
        return true;
    return false;
  };
  EXPECT_TRUE(has("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_FALSE(has("model.layers.0.self_attn.index_q_proj.weight"));
  EXPECT_TRUE(has("model.layers.1.self_attn.index_k_proj.weight"));
  EXPECT_TRUE(has("model.layers.1.block_sparse_moe.experts.1.w2.weight"));
  EXPECT_TRUE(has("model.layers.1.block_sparse_moe.e_score_correction_bias"));
  EXPECT_FALSE(has("model.layers.1.mlp.gate_proj.weight"));
}

TEST(ModelWeights, FloatCheckpointResolves) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(dir.path, smallConfig()));
  auto l = load(dir.path);
  ASSERT_TRUE(l->weights) << describe(l->diags);
  EXPECT_EQ(l->weights->prefix, "language_model.");
  const ResolvedWeight *q =
      l->weights->get("model.layers.1.self_attn.q_proj.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->format, WeightFormat::Float);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(q->data, "language_model.model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(l->diags.warningCount(), 0u) << describe(l->diags);
}

TEST(ModelWeights, EveryMissingOrMisshapenTensorIsListed) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path, smallConfig(),
      [](std::string &name, DType &dtype, std::vector<int64_t> &shape) {
        if (name.find("layers.1.self_attn.k_norm") != std::string::npos)
          return false;
        if (name.find("layers.0.self_attn.o_proj") != std::string::npos)
          shape = {32, 48};
        if (name.find("layers.0.input_layernorm") != std::string::npos)
          dtype = DType::I32;
        return true;
      }));
  auto l = load(dir.path);
  EXPECT_FALSE(l->weights);
  EXPECT_EQ(l->diags.errorCount(), 3u) << describe(l->diags);
  EXPECT_TRUE(l->diags.contains("is missing; the config implies shape [16]"));
  EXPECT_TRUE(
      l->diags.contains("has shape [32, 48] but the config implies [32, 64]"));
  EXPECT_TRUE(l->diags.contains("has dtype I32"));
}

// B47 (a): tied and no lm_head: the head is the embedding.
TEST(ModelWeights, B47TiedWithoutLmHead) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(dir.path,
                                   smallConfig("\"tie_word_embeddings\":true,"),
                                   withoutTensors("lm_head")));
  auto l = load(dir.path);
  ASSERT_TRUE(l->weights) << describe(l->diags);
  EXPECT_TRUE(l->weights->lmHeadTied);
  EXPECT_EQ(l->weights->get("lm_head.weight")->data,
            "language_model.model.embed_tokens.weight");
}

// B47 (b): untied and no lm_head: a hard error.
TEST(ModelWeights, B47UntiedWithoutLmHead) {
  TempDir dir;
  ASSERT_TRUE(
      writeSmallCheckpoint(dir.path, smallConfig(), withoutTensors("lm_head")));
  auto l = load(dir.path);
  EXPECT_FALSE(l->weights);
  EXPECT_TRUE(l->diags.contains("is missing and tie_word_embeddings is false"));
}

// B47 (c): tied but a physical lm_head exists: use it, with a warning.
TEST(ModelWeights, B47TiedWithPhysicalLmHead) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path, smallConfig("\"tie_word_embeddings\":true,")));
  auto l = load(dir.path);
  ASSERT_TRUE(l->weights) << describe(l->diags);
  EXPECT_FALSE(l->weights->lmHeadTied);
  EXPECT_EQ(l->weights->get("lm_head.weight")->data,
            "language_model.lm_head.weight");
  EXPECT_TRUE(l->diags.contains("using the checkpoint's lm_head"));
}

/// Replaces one projection with quantized tensors.
std::function<bool(std::string &, DType &, std::vector<int64_t> &)>
dropModule(const std::string &module) {
  return [module](std::string &name, DType &, std::vector<int64_t> &) {
    return name != "language_model." + module + ".weight";
  };
}

const std::string kModule = "model.layers.1.self_attn.q_proj"; // [64, 32]
const std::string kFull = "language_model." + kModule;

// B20: the same NVFP4 weight in ModelOpt form (multiplier) and in
// compressed-tensors form (divisor); the method decides, not the value.
TEST(ModelWeights, B20GlobalScaleConventionFollowsTheMethod) {
  float modelOptScale = 0.784f / 2688.0f, ctScale = 2688.0f / 0.784f;
  std::string mo(reinterpret_cast<char *>(&modelOptScale), 4);
  std::string ctb(reinterpret_cast<char *>(&ctScale), 4);

  TempDir a;
  ASSERT_TRUE(writeSmallCheckpoint(
      a.path, smallConfig("", kModelOptNVFP4), dropModule(kModule),
      {{kFull + ".weight", DType::U8, {64, 16}, ""},
       {kFull + ".weight_scale", DType::F8_E4M3, {64, 2}, ""},
       {kFull + ".weight_scale_2", DType::F32, {}, mo},
       {kFull + ".input_scale", DType::F32, {}, mo}}));
  auto la = load(a.path);
  ASSERT_TRUE(la->weights) << describe(la->diags);
  const ResolvedWeight *wa = la->weights->get(kModule + ".weight");
  EXPECT_EQ(wa->format, WeightFormat::NVFP4);
  EXPECT_EQ(wa->globalScale, kFull + ".weight_scale_2");
  EXPECT_FALSE(wa->globalScaleIsDivisor);
  EXPECT_EQ(wa->inputScale, kFull + ".input_scale");

  TempDir b;
  ASSERT_TRUE(writeSmallCheckpoint(
      b.path, smallConfig("", kCompressedNVFP4), dropModule(kModule),
      {{kFull + ".weight_packed", DType::U8, {64, 16}, ""},
       {kFull + ".weight_scale", DType::F8_E4M3, {64, 2}, ""},
       {kFull + ".weight_global_scale", DType::F32, {1}, ctb}}));
  auto lb = load(b.path);
  ASSERT_TRUE(lb->weights) << describe(lb->diags);
  const ResolvedWeight *wb = lb->weights->get(kModule + ".weight");
  EXPECT_EQ(wb->format, WeightFormat::NVFP4);
  EXPECT_TRUE(wb->globalScaleIsDivisor);
  EXPECT_EQ(wb->globalScaleShape, (std::vector<int64_t>{1}));

  // compressed-tensors tensors under a ModelOpt config: refused.
  TempDir c;
  ASSERT_TRUE(writeSmallCheckpoint(
      c.path, smallConfig("", kModelOptNVFP4), dropModule(kModule),
      {{kFull + ".weight_packed", DType::U8, {64, 16}, ""},
       {kFull + ".weight_scale", DType::F8_E4M3, {64, 2}, ""},
       {kFull + ".weight_global_scale", DType::F32, {1}, ctb}}));
  auto lc = load(c.path);
  EXPECT_FALSE(lc->weights);
  EXPECT_TRUE(
      lc->diags.contains("needs quantization method compressed-tensors"))
      << describe(lc->diags);

  // Quantized tensors but no quantization config at all: refused.
  TempDir d;
  ASSERT_TRUE(writeSmallCheckpoint(
      d.path, smallConfig(), dropModule(kModule),
      {{kFull + ".weight", DType::U8, {64, 16}, ""},
       {kFull + ".weight_scale", DType::F8_E4M3, {64, 2}, ""}}));
  auto ld = load(d.path);
  EXPECT_FALSE(ld->weights);
  EXPECT_TRUE(ld->diags.contains("but the config declares none"));
}

// B22: E8M0 scales stored with the E8M0 dtype or as U8 arrive bit-exact;
// byte 0xFF (NaN) is rejected at load.
TEST(ModelWeights, B22E8M0ScalesAreBytes) {
  // q_proj is [64, 32]: one E8M0 scale per row (32 / 32).
  std::string scales;
  const uint8_t pattern[] = {0, 1, 120, 125, 127, 130, 140, 254};
  for (int i = 0; i < 64; ++i)
    scales += static_cast<char>(pattern[i % 8]);
  for (DType scaleType : {DType::F8_E8M0, DType::U8}) {
    TempDir dir;
    ASSERT_TRUE(writeSmallCheckpoint(
        dir.path, smallConfig("", kModelOptMXFP8), dropModule(kModule),
        {{kFull + ".weight", DType::F8_E4M3, {64, 32}, ""},
         {kFull + ".weight_scale", scaleType, {64, 1}, scales}}));
    auto l = load(dir.path);
    ASSERT_TRUE(l->weights) << describe(l->diags);
    const ResolvedWeight *w = l->weights->get(kModule + ".weight");
    EXPECT_EQ(w->format, WeightFormat::MXFP8);
    const Checkpoint::Entry *e = l->checkpoint->find(w->scale);
    ASSERT_TRUE(e);
    EXPECT_EQ(std::string(
                  reinterpret_cast<const char *>(e->file->data(*e->info)), 64),
              scales);
  }
  std::string bad = scales;
  bad[5] = static_cast<char>(0xFF);
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path, smallConfig("", kModelOptMXFP8), dropModule(kModule),
      {{kFull + ".weight", DType::F8_E4M3, {64, 32}, ""},
       {kFull + ".weight_scale", DType::U8, {64, 1}, bad}}));
  auto l = load(dir.path);
  EXPECT_FALSE(l->weights);
  EXPECT_TRUE(l->diags.contains("E8M0 scale byte 0xFF (NaN) at element 5"));
}

TEST(ModelWeights, BlockFP8AndScaleShapes) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path,
      smallConfig("", "\"quantization_config\":{\"quant_method\":\"fp8\","
                      "\"weight_block_size\":[128,128]},"),
      dropModule(kModule),
      {{kFull + ".weight", DType::F8_E4M3, {64, 32}, ""},
       {kFull + ".weight_scale_inv", DType::F32, {1, 1}, ""}}));
  auto l = load(dir.path);
  ASSERT_TRUE(l->weights) << describe(l->diags);
  EXPECT_EQ(l->weights->get(kModule + ".weight")->format,
            WeightFormat::FP8Block);

  TempDir bad;
  ASSERT_TRUE(writeSmallCheckpoint(
      bad.path, smallConfig("", kModelOptNVFP4), dropModule(kModule),
      {{kFull + ".weight", DType::U8, {64, 16}, ""},
       {kFull + ".weight_scale", DType::F8_E4M3, {64, 4}, ""}}));
  auto lb = load(bad.path);
  EXPECT_FALSE(lb->weights);
  EXPECT_TRUE(lb->diags.contains(
      "NVFP4 block scale has shape [64, 4] but the config implies [64, 2]"))
      << describe(lb->diags);
}

TEST(ModelWeights, ExpertsMustShareOneFormat) {
  const std::string e0 = "model.layers.1.block_sparse_moe.experts.0.w1";
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path,
      smallConfig("", "\"quantization_config\":{\"quant_method\":\"modelopt\","
                      "\"quant_algo\":\"MIXED_PRECISION\"},"),
      dropModule(e0),
      {{"language_model." + e0 + ".weight", DType::U8, {32, 16}, ""},
       {"language_model." + e0 + ".weight_scale",
        DType::F8_E4M3,
        {32, 2},
        ""}}));
  auto l = load(dir.path);
  EXPECT_FALSE(l->weights);
  EXPECT_TRUE(l->diags.contains("the experts of a layer must share one format"))
      << describe(l->diags);
}

TEST(ModelWeights, UnusedAndVisionTensors) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path, smallConfig(), nullptr,
      {{"vision_tower.patch_embed.weight", DType::BF16, {4, 4}, ""},
       {"language_model.model.layers.0.self_attn.rotary_emb.inv_freq",
        DType::F32,
        {4},
        ""}}));
  auto l = load(dir.path);
  ASSERT_TRUE(l->weights) << describe(l->diags);
  EXPECT_TRUE(l->diags.contains("ignored 1 vision-tower tensors"));
  EXPECT_TRUE(l->diags.contains("1 tensors are not used by the model graph: "
                                "language_model.model.layers.0.self_attn."
                                "rotary_emb.inv_freq"))
      << describe(l->diags);
}

TEST(ModelWeights, NoEmbeddingAtAll) {
  // The other tensors still give the naming away: the embedding alone is
  // missing (not every tensor under the other prefix).
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(dir.path, smallConfig(),
                                   withoutTensors("embed_tokens")));
  auto l = load(dir.path);
  EXPECT_FALSE(l->weights);
  EXPECT_TRUE(l->diags.contains("is missing; the config implies shape"))
      << describe(l->diags);
  EXPECT_EQ(l->diags.errorCount(), 1u) << describe(l->diags);
}

TEST(ModelWeights, NoModelTensorsAtAll) {
  TempDir dir;
  ASSERT_TRUE(
      writeSmallCheckpoint(dir.path, smallConfig(), withoutTensors("model.")));
  auto l = load(dir.path);
  EXPECT_FALSE(l->weights);
  EXPECT_TRUE(l->diags.contains("is this a MiniMax-M3 text checkpoint"))
      << describe(l->diags);
}

} // namespace

namespace {
TEST(ModelWeights, BugHuntDTypeChecks) {
  // An MX payload must be FP8 (or E2M1 pairs): I32 is refused, not a crash.
  TempDir a;
  ASSERT_TRUE(writeSmallCheckpoint(
      a.path, smallConfig("", kModelOptMXFP8), dropModule(kModule),
      {{kFull + ".weight", DType::I32, {64, 32}, ""},
       {kFull + ".weight_scale", DType::U8, {64, 1}, ""}}));
  auto la = load(a.path);
  EXPECT_FALSE(la->weights);
  EXPECT_TRUE(la->diags.contains("an MX payload must be F8_E4M3 or F8_E5M2"))
      << describe(la->diags);
  // compressed-tensors scales must be E4M3.
  TempDir b;
  ASSERT_TRUE(writeSmallCheckpoint(
      b.path, smallConfig("", kCompressedNVFP4), dropModule(kModule),
      {{kFull + ".weight_packed", DType::U8, {64, 16}, ""},
       {kFull + ".weight_scale", DType::I64, {64, 2}, ""},
       {kFull + ".weight_global_scale", DType::F32, {1}, ""}}));
  auto lb = load(b.path);
  EXPECT_FALSE(lb->weights);
  EXPECT_TRUE(lb->diags.contains("NVFP4 block scales must be F8_E4M3, got I64"))
      << describe(lb->diags);
  // The router bias must be F32.
  TempDir c;
  ASSERT_TRUE(writeSmallCheckpoint(
      c.path, smallConfig(),
      [](std::string &name, DType &dtype, std::vector<int64_t> &) {
        if (name.find("correction_bias") != std::string::npos)
          dtype = DType::BF16;
        return true;
      }));
  auto lc = load(c.path);
  EXPECT_FALSE(lc->weights);
  EXPECT_TRUE(lc->diags.contains("the router correction bias must be F32"));
}
} // namespace
