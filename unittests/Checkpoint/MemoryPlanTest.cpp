//===- MemoryPlanTest.cpp - msac plan numbers for MiniMax-M3 --------------===//
//
// Part of msac. Every expected number is computed by hand from the config
// values of msa-m3-spec.md §1.2-§1.3 (written out below), or copied from
// the spec's byte-accounting table §4.4; none is taken from the planner.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/MemoryPlan.h"

#include "gtest/gtest.h"

using namespace msac::ckpt;

namespace {

ModelConfig m3() {
  Diagnostics diags;
  std::optional<ModelConfig> c =
      readModelConfig(MSAC_SOURCE_DIR "/models/minimax-m3", diags);
  EXPECT_TRUE(c);
  return *c;
}

int64_t group(const MemoryPlan &plan, const std::string &name) {
  for (const ParameterGroup &g : plan.groups)
    if (g.name == name)
      return g.parameters;
  return -1;
}

TEST(MemoryPlan, MiniMaxM3Parameters) {
  MemoryPlan plan =
      planMemory(m3(), nullptr, CacheDType::BF16, CacheDType::BF16, 4096, 0);
  const int64_t H = 6144, V = 200064, L = 60, S = 57, D = 128, Hq = 64,
                Hkv = 4, E = 128, I = 3072, Is = 3072, Dd = 12288, dI = 128;
  // Embedding and untied LM head.
  EXPECT_EQ(group(plan, "embedding"), V * H);
  EXPECT_EQ(group(plan, "lm_head"), V * H);
  // q, k, v, o projections plus the two [128] Q/K norms, every layer.
  EXPECT_EQ(group(plan, "attention"),
            L * (Hq * D * H + 2 * Hkv * D * H + H * Hq * D + 2 * D));
  // index_q [4*128, H], index_k [128, H], two [128] norms, MSA layers.
  EXPECT_EQ(group(plan, "index branch"), S * (4 * dI * H + dI * H + 2 * dI));
  EXPECT_EQ(group(plan, "dense MLP"), 3 * 3 * Dd * H);
  EXPECT_EQ(group(plan, "routed experts"), S * E * 3 * I * H);
  EXPECT_EQ(group(plan, "shared expert"), S * 3 * Is * H);
  EXPECT_EQ(group(plan, "router"), S * (E * H + E));
  EXPECT_EQ(group(plan, "norms"), L * 2 * H + H);
  // §1.1: about 426 B text parameters.
  EXPECT_EQ(plan.totalParameters, 426174572928);
  EXPECT_NEAR(static_cast<double>(plan.totalParameters), 426e9, 1e9);
  // Active: all but the embedding table and the 124 idle experts per layer.
  EXPECT_EQ(plan.activeParameters,
            plan.totalParameters - V * H - S * (E - 4) * 3 * I * H);
  // BF16 weights, FP32 router and bias.
  EXPECT_EQ(plan.bytesByFormat.at("f32"),
            static_cast<uint64_t>(4 * S * (E * H + E)));
}

TEST(MemoryPlan, MiniMaxM3CacheBytesMatchSpecTable) {
  struct Row {
    CacheDType kv, index;
    int64_t perLayerKV, perLayerIndex, total;
  } rows[] = {
      // msa-m3-spec.md §4.4.
      {CacheDType::BF16, CacheDType::BF16, 2048, 256, 137472},
      {CacheDType::FP8, CacheDType::FP8, 1024, 128, 68736},
      {CacheDType::NVFP4, CacheDType::FP8, 576, 128, 41856},
      {CacheDType::NVFP4, CacheDType::NVFP4, 576, 72, 38664},
  };
  for (const Row &r : rows) {
    MemoryPlan plan = planMemory(m3(), nullptr, r.kv, r.index, 1048576, 0);
    EXPECT_EQ(plan.kvBytesPerTokenPerLayer, r.perLayerKV);
    EXPECT_EQ(plan.indexBytesPerTokenPerLayer, r.perLayerIndex);
    EXPECT_EQ(plan.cacheBytesPerToken, r.total);
    EXPECT_EQ(plan.kvLayers, 60);
    EXPECT_EQ(plan.indexLayers, 57);
  }
  // "FP8 K/V only (60 x 1024) = 61,440" and "NVFP4 K/V only = 34,560".
  EXPECT_EQ(planMemory(m3(), nullptr, CacheDType::FP8, CacheDType::FP8, 1, 0)
                .kvBytesPerToken,
            61440);
  EXPECT_EQ(planMemory(m3(), nullptr, CacheDType::NVFP4, CacheDType::FP8, 1, 0)
                .kvBytesPerToken,
            34560);
}

TEST(MemoryPlan, SequencesThatFit) {
  // FP8 + FP8 index: 68,736 B/token. 131,072 tokens = 1024 pages exactly:
  // 9,009,364,992 B per sequence; 80 GiB holds 9 of them.
  MemoryPlan plan = planMemory(m3(), nullptr, CacheDType::FP8, CacheDType::FP8,
                               131072, 80ull << 30);
  EXPECT_EQ(plan.bytesPerSequence, 131072ull * 68736);
  EXPECT_EQ(plan.sequencesThatFit, 9);
  // Pages are whole: 129 tokens take two 128-token pages.
  MemoryPlan partial = planMemory(m3(), nullptr, CacheDType::FP8,
                                  CacheDType::FP8, 129, 0);
  EXPECT_EQ(partial.bytesPerSequence, 256ull * 68736);
}

TEST(MemoryPlan, ParseByteSize) {
  EXPECT_EQ(parseByteSize("80GiB"), 80ull << 30);
  EXPECT_EQ(parseByteSize("141GB"), 141000000000ull);
  EXPECT_EQ(parseByteSize("512mib"), 512ull << 20);
  EXPECT_EQ(parseByteSize("1.5T"), 1500000000000ull);
  EXPECT_EQ(parseByteSize("4096"), 4096u);
  EXPECT_FALSE(parseByteSize("lots"));
  EXPECT_FALSE(parseByteSize("12parsecs"));
  EXPECT_FALSE(parseByteSize(""));
  EXPECT_FALSE(parseByteSize("1e300GB"));
}

TEST(MemoryPlan, CacheDTypeNames) {
  EXPECT_EQ(parseCacheDType("fp8"), CacheDType::FP8);
  EXPECT_EQ(parseCacheDType("nvfp4"), CacheDType::NVFP4);
  EXPECT_FALSE(parseCacheDType("int4"));
  EXPECT_EQ(cacheBytesPerVector(CacheDType::NVFP4, 128), 72);
}

TEST(MemoryPlan, NVFP4CachesNeedMultiplesOf16) {
  ModelConfig config;
  config.headDim = 40;
  config.sparse.indexDim = 24;
  EXPECT_EQ(checkCacheDTypes(config, CacheDType::FP8, CacheDType::NVFP4), "");
  EXPECT_EQ(checkCacheDTypes(config, CacheDType::NVFP4, CacheDType::BF16),
            "--kv-cache-dtype nvfp4 needs head_dim to be a multiple of 16 (one "
            "E4M3 scale per 16 values), but it is 40");
  config.headDim = 128;
  EXPECT_EQ(checkCacheDTypes(config, CacheDType::NVFP4, CacheDType::NVFP4), "");
  config.layers.resize(1);
  config.layers[0].attention = AttentionKind::Sparse;
  ASSERT_EQ(config.numSparseLayers(), 1);
  EXPECT_EQ(checkCacheDTypes(config, CacheDType::NVFP4, CacheDType::NVFP4),
            "--index-cache-dtype nvfp4 needs sparse_index_dim to be a multiple "
            "of 16 (one E4M3 scale per 16 values), but it is 24");
}

} // namespace
