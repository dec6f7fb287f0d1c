//===- QuantizeWeightsTest.cpp - msac compile --quantize-weights ----------===//
//
// Part of msac. The recipes' block quantizers on hand-computed blocks (the
// expected bytes are worked out from the format definitions in the
// comments, not taken from the code), and the checkpoint transform: the
// formats each recipe gives, the ModelOpt tensors it lays over the
// checkpoint, and its errors.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFixtures.h"

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/ModelWeights.h"
#include "msac/Checkpoint/QuantizeWeights.h"
#include "msac/Numerics/BlockQuantize.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace msac::ckpt;
using msac::test::describe;
using msac::test::ExtraTensor;
using msac::test::replaceOnce;
using msac::test::smallConfig;
using msac::test::TempDir;
using msac::test::writeSmallCheckpoint;
namespace numerics = msac::numerics;

namespace {

std::vector<uint8_t> bytes(std::initializer_list<int> list) {
  return std::vector<uint8_t>(list.begin(), list.end());
}

//===----------------------------------------------------------------------===//
// NVFP4
//===----------------------------------------------------------------------===//

TEST(QuantizeWeights, NVFP4RepresentableAmax) {
  // One [2, 16] tensor, amax 2688 = 6 * 448: global scale 2688 / 2688 = 1.
  // Row 0: block amax 2688 -> scale E4M3(2688 / 6) = 448 = 0x7E; codes
  // x / 448: 6 -> 7, 3 -> 5, -1.5 -> 0xB, 0.5 -> 1, 0 -> 0.
  // Row 1: block amax 6 -> scale E4M3(1) = 0x38; codes x / 1.
  std::vector<float> w(32, 0.0f);
  float row0[] = {2688, 1344, -672, 224};
  float row1[] = {6, -4, 2, 1};
  for (int i = 0; i < 4; ++i) {
    w[i] = row0[i];
    w[16 + i] = row1[i];
  }
  QuantizedWeight q = quantizeWeight(WeightFormat::NVFP4, w.data(), 2, 16);
  ASSERT_TRUE(q.globalScale);
  EXPECT_EQ(*q.globalScale, 1.0f);
  EXPECT_EQ(q.dtype, DType::U8);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(q.scaleDType, DType::F8_E4M3);
  EXPECT_EQ(q.scaleShape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(q.scale, bytes({0x7E, 0x38}));
  // Element 2i in the low nibble of byte i.
  EXPECT_EQ(q.data, bytes({0x57, 0x1B, 0, 0, 0, 0, 0, 0, //
                           0xE7, 0x24, 0, 0, 0, 0, 0, 0}));
}

TEST(QuantizeWeights, NVFP4Ties) {
  // Global 1, block amax 6: scale 1, codes E2M1(x). Ties go to the even
  // code: 0.25 -> 0 (0), 0.75 -> 1.0 (2), 1.25 -> 1.0 (2), 1.75 -> 2.0
  // (4), 2.5 -> 2.0 (4), 3.5 -> 4.0 (6), 5 -> 4.0 (6); signs kept.
  float x[16] = {6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.75f, -5};
  uint8_t codes[16];
  EXPECT_EQ(numerics::quantizeNVFP4WeightBlock(x, 1.0f, codes), 0x38);
  uint8_t expected[16] = {7, 0, 2, 2, 4, 4, 6, 6, 0xA, 0xE};
  EXPECT_EQ(std::memcmp(codes, expected, 16), 0);
  // A tie in the block scale: amax 6.375 -> 6.375 / 6 = 1.0625, halfway
  // between E4M3 1.0 (0x38) and 1.125 (0x39): the even 0x38; 6.375 / 1
  // then saturates to 6 (code 7).
  float y[16] = {6.375f};
  EXPECT_EQ(numerics::quantizeNVFP4WeightBlock(y, 1.0f, codes), 0x38);
  EXPECT_EQ(codes[0], 7);
  // A global scale of 0.5: block amax 3 -> scale E4M3(3 / 3) = 1, step 0.5.
  float z[16] = {3, -1.5f, 0.25f};
  EXPECT_EQ(numerics::quantizeNVFP4WeightBlock(z, 0.5f, codes), 0x38);
  EXPECT_EQ(codes[0], 7);   // 3 / 0.5 = 6
  EXPECT_EQ(codes[1], 0xD); // -1.5 / 0.5 = -3
  EXPECT_EQ(codes[2], 1);   // 0.25 / 0.5 = 0.5
}

TEST(QuantizeWeights, NVFP4AllZero) {
  // An all-zero tensor: global scale 1.0, block scale 0, codes 0.
  std::vector<float> w(32, 0.0f);
  QuantizedWeight q = quantizeWeight(WeightFormat::NVFP4, w.data(), 1, 32);
  EXPECT_EQ(*q.globalScale, 1.0f);
  EXPECT_EQ(q.scale, bytes({0, 0}));
  EXPECT_EQ(q.data, std::vector<uint8_t>(16, 0));
  // A zero block next to a non-zero one keeps scale 0.
  w[16] = 2688;
  q = quantizeWeight(WeightFormat::NVFP4, w.data(), 1, 32);
  EXPECT_EQ(q.scale, bytes({0, 0x7E}));
}

//===----------------------------------------------------------------------===//
// MXFP8
//===----------------------------------------------------------------------===//

TEST(QuantizeWeights, MXFP8RepresentableAmax) {
  // amax 448 = 1.75 * 2^8: e = 8 - 8 = 0, scale byte 127; elements E4M3(x):
  // 448 -> 0x7E, 1 -> 0x38, -2 -> 0xC0, 0.5 -> 0x30.
  float x[32] = {448, 1, -2, 0.5f};
  uint8_t e[32];
  EXPECT_EQ(numerics::quantizeMXFP8Block(x, e), 127);
  EXPECT_EQ(e[0], 0x7E);
  EXPECT_EQ(e[1], 0x38);
  EXPECT_EQ(e[2], 0xC0);
  EXPECT_EQ(e[3], 0x30);
  EXPECT_EQ(e[4], 0);
  // amax 1 = 2^0: e = -8, byte 119; 1 / 2^-8 = 256 -> 0x78, 0.5 -> 0x70.
  float y[32] = {1, 0.5f};
  EXPECT_EQ(numerics::quantizeMXFP8Block(y, e), 119);
  EXPECT_EQ(e[0], 0x78);
  EXPECT_EQ(e[1], 0x70);
  // amax 500: e = 0, 500 > 448 saturates to 0x7E.
  float z[32] = {-500};
  EXPECT_EQ(numerics::quantizeMXFP8Block(z, e), 127);
  EXPECT_EQ(e[0], 0xFE);
}

TEST(QuantizeWeights, MXFP8Ties) {
  // Scale 2^0 (amax 256): 1.0625 lies halfway between E4M3 1.0 (0x38) and
  // 1.125 (0x39) -> 0x38; 1.1875 between 1.125 (0x39) and 1.25 (0x3A) ->
  // 0x3A; 0.5 * 2^-9 halfway between 0 and the smallest subnormal -> 0.
  float x[32] = {256, 1.0625f, 1.1875f, std::ldexp(1.0f, -10)};
  uint8_t e[32];
  EXPECT_EQ(numerics::quantizeMXFP8Block(x, e), 127);
  EXPECT_EQ(e[0], 0x78);
  EXPECT_EQ(e[1], 0x38);
  EXPECT_EQ(e[2], 0x3A);
  EXPECT_EQ(e[3], 0x00);
}

TEST(QuantizeWeights, MXFP8SmallestScaleAndZero) {
  // amax 2^-130: floor(log2) - 8 = -138 clamps to -127 (byte 0), the
  // smallest E8M0 scale; 2^-130 / 2^-127 = 2^-3 -> E4M3 0x20 (exponent
  // field 4); -2^-133 / 2^-127 = -2^-6 -> 0x88 (exponent field 1).
  float x[32] = {std::ldexp(1.0f, -130), -std::ldexp(1.0f, -133)};
  uint8_t e[32];
  EXPECT_EQ(numerics::quantizeMXFP8Block(x, e), 0);
  EXPECT_EQ(e[0], 0x20);
  EXPECT_EQ(e[1], 0x88);
  // All zero: the smallest scale too, elements 0.
  float zero[32] = {};
  EXPECT_EQ(numerics::quantizeMXFP8Block(zero, e), 0);
  EXPECT_EQ(std::count(e, e + 32, 0), 32);
  // The largest E8M0 exponent is never exceeded by a finite FP32 amax.
  EXPECT_EQ(numerics::mxScaleExponent(3.0e38f, 8), 127 - 8);
}

TEST(QuantizeWeights, MXFP8Layout) {
  // [2, 64]: two scales per row, row-major.
  std::vector<float> w(128, 0.0f);
  w[0] = 448;     // row 0 block 0: byte 127
  w[32] = 1;      // row 0 block 1: byte 119
  w[64 + 32] = 2; // row 1 block 1: byte 120
  QuantizedWeight q = quantizeWeight(WeightFormat::MXFP8, w.data(), 2, 64);
  EXPECT_EQ(q.dtype, DType::F8_E4M3);
  EXPECT_EQ(q.scaleDType, DType::U8);
  EXPECT_EQ(q.scaleShape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(q.scale, bytes({127, 119, 0, 120}));
  EXPECT_FALSE(q.globalScale);
  EXPECT_EQ(q.data[96], 0x78); // 2 / 2^-7 = 256
}

//===----------------------------------------------------------------------===//
// FP8 per tensor
//===----------------------------------------------------------------------===//

TEST(QuantizeWeights, FP8PerTensor) {
  // amax 896 -> scale 896 / 448 = 2; 896 -> 448 (0x7E), -448 -> -224
  // (1.75 * 2^7: 0xF6), 2 -> 1 (0x38), 0 -> 0.
  float w[4] = {896, -448, 2, 0};
  QuantizedWeight q = quantizeWeight(WeightFormat::FP8Tensor, w, 1, 4);
  EXPECT_EQ(q.data, bytes({0x7E, 0xF6, 0x38, 0}));
  ASSERT_EQ(q.scale.size(), 4u);
  float scale;
  std::memcpy(&scale, q.scale.data(), 4);
  EXPECT_EQ(scale, 2.0f);
  EXPECT_TRUE(q.scaleShape.empty());
}

TEST(QuantizeWeights, FP8Block) {
  // [1, 130]: two 128 x 128 tiles along K, the second partial. Tile 0 amax
  // 896 -> scale 2, 896 -> 0x7E; tile 1 amax 1 -> scale 1 / 448 (FP32),
  // 1 -> 448 (0x7E), -0.5 -> -224 (0xF6) (the quotients are within 2^-23
  // of 448 and 224, which E4M3 rounds to them).
  std::vector<float> w(130, 0.0f);
  w[0] = 896;
  w[128] = 1;
  w[129] = -0.5f;
  QuantizedWeight q = quantizeWeight(WeightFormat::FP8Block, w.data(), 1, 130);
  EXPECT_EQ(q.scaleShape, (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(q.scale.size(), 8u);
  float scales[2];
  std::memcpy(scales, q.scale.data(), 8);
  EXPECT_EQ(scales[0], 2.0f);
  EXPECT_EQ(scales[1], 1.0f / 448.0f);
  EXPECT_EQ(q.data[0], 0x7E);
  EXPECT_EQ(q.data[1], 0);
  EXPECT_EQ(q.data[128], 0x7E);
  EXPECT_EQ(q.data[129], 0xF6);
  // An all-zero tile: scale 1.
  std::vector<float> zero(4, 0.0f);
  q = quantizeWeight(WeightFormat::FP8Block, zero.data(), 2, 2);
  std::memcpy(scales, q.scale.data(), 4);
  EXPECT_EQ(scales[0], 1.0f);
}

//===----------------------------------------------------------------------===//
// The checkpoint transform
//===----------------------------------------------------------------------===//

TEST(QuantizeWeights, RecipeNames) {
  EXPECT_EQ(parseWeightRecipe("nvfp4-experts"), WeightRecipe::NVFP4Experts);
  EXPECT_EQ(parseWeightRecipe("mxfp8"), WeightRecipe::MXFP8);
  EXPECT_EQ(parseWeightRecipe("fp8"), WeightRecipe::FP8);
  EXPECT_FALSE(parseWeightRecipe("nvfp4"));
  EXPECT_FALSE(parseWeightRecipe(""));
}

struct Quantized {
  std::optional<ModelConfig> config;
  std::unique_ptr<Checkpoint> checkpoint;
  std::optional<ModelWeights> weights;
  Diagnostics diags;
  bool quantized = false;
};

std::unique_ptr<Quantized> quantize(const std::string &dir,
                                    WeightRecipe recipe) {
  auto l = std::make_unique<Quantized>();
  l->config = readModelConfig(dir, l->diags);
  if (l->config)
    l->checkpoint = Checkpoint::open(dir, l->diags);
  if (!l->checkpoint)
    return l;
  l->quantized =
      quantizeCheckpointWeights(*l->config, *l->checkpoint, recipe, l->diags);
  if (l->quantized)
    l->weights = resolveWeights(*l->config, *l->checkpoint, l->diags);
  return l;
}

TEST(QuantizeWeights, NVFP4ExpertsLayout) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(dir.path, smallConfig()));
  auto l = quantize(dir.path, WeightRecipe::NVFP4Experts);
  ASSERT_TRUE(l->weights) << describe(l->diags);
  EXPECT_EQ(l->config->quantization.method, QuantMethod::ModelOpt);
  auto format = [&](const std::string &name) {
    const ResolvedWeight *w = l->weights->get(name);
    return w ? w->format : WeightFormat::Float;
  };
  const std::string moe = "model.layers.1.block_sparse_moe.";
  EXPECT_EQ(format(moe + "experts.0.w1.weight"), WeightFormat::NVFP4);
  EXPECT_EQ(format(moe + "experts.1.w2.weight"), WeightFormat::NVFP4);
  EXPECT_EQ(format(moe + "shared_experts.down_proj.weight"),
            WeightFormat::MXFP8);
  EXPECT_EQ(format("model.layers.1.self_attn.q_proj.weight"),
            WeightFormat::MXFP8);
  EXPECT_EQ(format("model.layers.1.self_attn.index_k_proj.weight"),
            WeightFormat::MXFP8);
  EXPECT_EQ(format("model.layers.0.mlp.down_proj.weight"), WeightFormat::MXFP8);
  EXPECT_EQ(format(moe + "gate.weight"), WeightFormat::Float);
  EXPECT_EQ(format("lm_head.weight"), WeightFormat::Float);
  EXPECT_EQ(format("model.embed_tokens.weight"), WeightFormat::Float);
  EXPECT_EQ(format("model.norm.weight"), WeightFormat::Float);
  // ModelOpt's tensors: U8 payload [N, K/2], E4M3 scales [N, K/16], FP32
  // weight_scale_2 (all-zero weights: global scale 1).
  const ResolvedWeight *w1 = l->weights->get(moe + "experts.0.w1.weight");
  EXPECT_EQ(w1->dataShape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(w1->scaleShape, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(w1->scaleDType, DType::F8_E4M3);
  ASSERT_EQ(w1->globalScale,
            "language_model." + moe + "experts.0.w1.weight_scale_2");
  const Checkpoint::Entry *g = l->checkpoint->find(w1->globalScale);
  float global;
  std::memcpy(&global, g->file->data(*g->info), 4);
  EXPECT_EQ(global, 1.0f);
}

TEST(QuantizeWeights, FP8AndMXFP8Recipes) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(dir.path, smallConfig()));
  auto mx = quantize(dir.path, WeightRecipe::MXFP8);
  ASSERT_TRUE(mx->weights) << describe(mx->diags);
  EXPECT_EQ(
      mx->weights->get("model.layers.1.block_sparse_moe.experts.0.w3.weight")
          ->format,
      WeightFormat::MXFP8);
  auto fp8 = quantize(dir.path, WeightRecipe::FP8);
  ASSERT_TRUE(fp8->weights) << describe(fp8->diags);
  const ResolvedWeight *o =
      fp8->weights->get("model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(o->format, WeightFormat::FP8Block);
  EXPECT_EQ(o->scaleShape, (std::vector<int64_t>{1, 1})); // [32, 64]
  EXPECT_EQ(fp8->config->quantization.weightBlockSize,
            (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(fp8->weights->get("lm_head.weight")->format, WeightFormat::Float);
}

TEST(QuantizeWeights, AlreadyQuantizedIsRefused) {
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path, smallConfig("", "\"quantization_config\":{\"quant_method\":"
                                "\"modelopt\",\"quant_algo\":\"MXFP8\"},")));
  auto l = quantize(dir.path, WeightRecipe::NVFP4Experts);
  EXPECT_FALSE(l->quantized);
  std::string text = describe(l->diags);
  EXPECT_NE(text.find("--quantize-weights=nvfp4-experts needs a "
                      "bf16/f16/f32 checkpoint, but this one is already "
                      "quantized (method modelopt, MXFP8)"),
            std::string::npos)
      << text;
  // No config declaration, but an FP8 tensor: named.
  TempDir fp8;
  ASSERT_TRUE(writeSmallCheckpoint(
      fp8.path, smallConfig(),
      [](std::string &name, DType &dtype, std::vector<int64_t> &) {
        if (name.find("layers.0.self_attn.q_proj") != std::string::npos)
          dtype = DType::F8_E4M3;
        return true;
      }));
  auto t = quantize(fp8.path, WeightRecipe::FP8);
  EXPECT_FALSE(t->quantized);
  text = describe(t->diags);
  EXPECT_NE(text.find("tensor 'language_model.model.layers.0.self_attn."
                      "q_proj.weight' | is already quantized (dtype "
                      "F8_E4M3); --quantize-weights=fp8 needs"),
            std::string::npos)
      << text;
}

TEST(QuantizeWeights, BlockSizeAndNonFinite) {
  // dense_intermediate_size 48: the dense down projection's K = 48 is no
  // multiple of 32 (MXFP8) but block FP8 takes it (partial tiles).
  TempDir dir;
  ASSERT_TRUE(writeSmallCheckpoint(
      dir.path, replaceOnce(smallConfig(), "\"dense_intermediate_size\":64",
                            "\"dense_intermediate_size\":48")));
  auto l = quantize(dir.path, WeightRecipe::MXFP8);
  EXPECT_FALSE(l->quantized);
  std::string text = describe(l->diags);
  EXPECT_NE(text.find("tensor 'language_model.model.layers.0.mlp.down_proj."
                      "weight' | has in_features 48, not a multiple of the "
                      "mxfp8 block size 32 that --quantize-weights=mxfp8 "
                      "needs"),
            std::string::npos)
      << text;
  EXPECT_TRUE(quantize(dir.path, WeightRecipe::FP8)->weights);

  // A NaN in a weight (BF16 0x7FC0 at element 5).
  TempDir nan;
  std::string q(64 * 32 * 2, '\0');
  q[10] = static_cast<char>(0xC0);
  q[11] = 0x7F;
  const std::string name = "language_model.model.layers.1.self_attn.q_proj."
                           "weight";
  ASSERT_TRUE(
      writeSmallCheckpoint(nan.path, smallConfig(),
                           [&](std::string &n, DType &,
                               std::vector<int64_t> &) { return n != name; },
                           {ExtraTensor{name, DType::BF16, {64, 32}, q}}));
  auto n = quantize(nan.path, WeightRecipe::NVFP4Experts);
  EXPECT_FALSE(n->quantized);
  text = describe(n->diags);
  EXPECT_NE(text.find("holds a non-finite value at element 5 (row 0)"),
            std::string::npos)
      << text;
}

} // namespace
