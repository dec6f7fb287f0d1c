//===- ReferenceTest.cpp - The MSA reference on hand-made inputs ----------===//
//
// Part of msac's tests. The reference's selection and attention pieces on
// the sparse-attention cases of shared/cases/bug-cases.md family 1 (B01,
// B02, B04, B08, B11, B13) and the top-k edge cases of msa-m3-spec.md §2.5,
// each expected value derived from the case's construction; then the whole
// reference model on a synthetic checkpoint.
//
//===----------------------------------------------------------------------===//

#include "../Nvfp4CacheCases.h"
#include "M3Reference.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

using namespace msac::reference;

namespace {

std::vector<int32_t> range(int32_t first, int32_t last) {
  std::vector<int32_t> v;
  for (int32_t b = first; b <= last; ++b)
    v.push_back(b);
  return v;
}

std::vector<int32_t> padded(std::vector<int32_t> v, size_t k) {
  v.resize(k, -1);
  return v;
}

TEST(SelectBlocks, FewerThanKBlocksSelectsAllInOrder) {
  std::vector<float> scores(40, 1.0f);
  EXPECT_EQ(selectBlocks(scores, 0, 16, 128, 1, 0), padded({0}, 16));
  EXPECT_EQ(selectBlocks(scores, 127, 16, 128, 1, 0), padded({0}, 16));
  EXPECT_EQ(selectBlocks(scores, 128, 16, 128, 1, 0), padded({0, 1}, 16));
  EXPECT_EQ(selectBlocks(scores, 2047, 16, 128, 1, 0), range(0, 15));
}

TEST(SelectBlocks, B04TiesGoToTheLowerBlockId) {
  std::vector<float> zeros(40, 0.0f);
  std::vector<int32_t> expected = range(0, 14);
  expected.push_back(39);
  EXPECT_EQ(selectBlocks(zeros, 39 * 128 + 5, 16, 128, 1, 0), expected);
  // 10 blocks score 5.0 and 20 score exactly 3.0 for the last 5 slots.
  std::vector<float> scores(40, 0.0f);
  for (int b = 20; b < 30; ++b)
    scores[b] = 5.0f;
  for (int b = 0; b < 20; ++b)
    scores[b] = 3.0f;
  std::vector<int32_t> sel = selectBlocks(scores, 5119, 16, 128, 1, 0);
  std::vector<int32_t> want = range(20, 29);
  for (int32_t b : range(0, 4))
    want.push_back(b);
  want.push_back(39);
  EXPECT_EQ(sel, want);
  // Deterministic: the same call always gives the same list.
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(selectBlocks(scores, 5119, 16, 128, 1, 0), sel);
}

TEST(SelectBlocks, ForcedLocalAndInitBlocksAndNaN) {
  std::vector<float> scores(20);
  for (int b = 0; b < 20; ++b)
    scores[b] = static_cast<float>(b); // later blocks score higher
  scores[18] = NAN;
  // L = 19: best 15 of 0..18 are 17..3 (18 is NaN and ranks last).
  std::vector<int32_t> want = range(3, 17);
  std::reverse(want.begin(), want.end());
  want.push_back(19);
  EXPECT_EQ(selectBlocks(scores, 19 * 128, 16, 128, 1, 0), want);
  // One init block, two local blocks.
  std::vector<int32_t> withInit = selectBlocks(scores, 19 * 128, 16, 128, 2, 1);
  EXPECT_EQ(withInit.front(), 0);
  EXPECT_EQ(withInit[14], 18);
  EXPECT_EQ(withInit[15], 19);
  EXPECT_EQ(std::count(withInit.begin(), withInit.end(), 0), 1);
}

TEST(FollowChoices, BlocksWithinTheBoundReplaceTheReferencesChoice) {
  // Position 3 * 128 + 5: blocks 0..3; top 2 = {1, 3} (3 the local block).
  // Block 1 scores 10.0 (last chosen), block 0 9.95 (0.5 % below), block 2
  // 9.0 (10 % below).
  std::vector<float> scores = {9.95f, 10.0f, 9.0f, 1.0f};
  const int64_t position = 3 * 128 + 5;
  std::vector<int32_t> blocks = {1, 3};
  // Block 0 is within 1 %: taken, in the other implementation's order.
  EXPECT_TRUE(followBlocks(scores, position, 128, 10.0f, 1e-2, {3, 0}, blocks));
  EXPECT_EQ(blocks, (std::vector<int32_t>{3, 0}));
  // Block 2 is 10 % below: kept.
  blocks = {1, 3};
  EXPECT_FALSE(
      followBlocks(scores, position, 128, 10.0f, 1e-2, {2, 3}, blocks));
  EXPECT_EQ(blocks, (std::vector<int32_t>{1, 3}));
  // The same set in another order is no change; a block past the
  // position, a padding id or a list of another length is refused.
  EXPECT_FALSE(
      followBlocks(scores, position, 128, 10.0f, 1e-2, {3, 1}, blocks));
  EXPECT_FALSE(
      followBlocks(scores, position, 128, 10.0f, 1e-2, {4, 3}, blocks));
  EXPECT_FALSE(
      followBlocks(scores, position, 128, 10.0f, 1e-2, {-1, 3}, blocks));
  EXPECT_FALSE(followBlocks(scores, position, 128, 10.0f, 1e-2, {0}, blocks));
  EXPECT_EQ(blocks, (std::vector<int32_t>{1, 3}));
  // Scores below 1 in magnitude: the bound is absolute (max(1, |s|)).
  std::vector<float> small = {0.195f, 0.2f, 0.0f, 0.0f};
  blocks = {1, 3};
  EXPECT_TRUE(followBlocks(small, position, 128, 0.2f, 1e-2, {0, 3}, blocks));
}

TEST(FollowChoices, ExpertsWithinTheBoundReplaceTheReferencesChoice) {
  // Biased scores; top 2 = {2, 0}; expert 3 is 0.004 below expert 0, expert
  // 1 0.3 below.
  std::vector<float> biased = {0.50f, 0.20f, 0.90f, 0.496f};
  std::vector<int64_t> order = {2, 0, 3, 1};
  EXPECT_TRUE(followExperts(biased, 2, 1e-2, {3, 2}, order));
  // Ranked by biased score: 2, then 3.
  EXPECT_EQ(order[0], 2);
  EXPECT_EQ(order[1], 3);
  order = {2, 0, 3, 1};
  EXPECT_FALSE(followExperts(biased, 2, 1e-2, {1, 2}, order));
  EXPECT_FALSE(followExperts(biased, 2, 1e-2, {0, 2}, order)); // same set
  EXPECT_FALSE(followExperts(biased, 2, 1e-2, {4, 2}, order)); // no expert 4
  EXPECT_FALSE(followExperts(biased, 2, 1e-2, {3}, order));    // too few
  EXPECT_EQ(order, (std::vector<int64_t>{2, 0, 3, 1}));
}

/// A context of `blocks` full blocks whose index keys are the basis vector
/// e_j for every token of block j (dimension 64).
std::vector<float> basisKeys(int blocks, int dim) {
  std::vector<float> keys(size_t(blocks) * 128 * dim, 0.0f);
  for (int j = 0; j < blocks * 128; ++j)
    keys[size_t(j) * dim + j / 128] = 1.0f;
  return keys;
}

TEST(BlockScores, B01EachGroupSelectsItsOwnBlocks) {
  const int dim = 64;
  std::vector<float> keys = basisKeys(40, dim);
  const int first[4] = {0, 10, 20, 24};
  for (int g = 0; g < 4; ++g) {
    std::vector<float> q(dim, 0.0f);
    for (int j = first[g]; j < first[g] + 15; ++j)
      q[j] = 100.0f - j; // strictly decreasing inside the range
    std::vector<float> scores =
        blockScores(q.data(), keys.data(), 5120, dim, 5119, 128);
    std::vector<int32_t> sel = selectBlocks(scores, 5119, 16, 128, 1, 0);
    std::vector<int32_t> want = range(first[g], first[g] + 14);
    want.push_back(39);
    std::sort(sel.begin(), sel.end());
    EXPECT_EQ(sel, want) << "group " << g;
  }
}

TEST(BlockScores, B13MaxPoolReadsEveryTokenOfTheBlock) {
  const int dim = 4;
  for (int offset : {77, 127, 0}) {
    std::vector<float> keys(5120 * dim, 0.0f);
    keys[size_t(9 * 128 + offset) * dim] = 100.0f; // the needle
    if (offset != 0)
      keys[size_t(9 * 128) * dim] = -50.0f; // block 9's first token lowest
    std::vector<float> q = {1, 0, 0, 0};
    std::vector<float> scores =
        blockScores(q.data(), keys.data(), 5120, dim, 5119, 128);
    EXPECT_EQ(scores[9], 100.0f) << offset;
    std::vector<int32_t> sel = selectBlocks(scores, 5119, 16, 128, 1, 0);
    EXPECT_EQ(sel[0], 9) << offset;
  }
}

TEST(BlockScores, B08EachTokenSeesOnlyItsPast) {
  const int dim = 32;
  std::vector<float> keys = basisKeys(17, dim); // tokens 0..2175
  std::vector<float> q(dim, 1.0f);
  q[16] = 50.0f; // block 16 (from token 2048) scores highest
  for (int64_t p : {2046, 2047, 2048, 2049}) {
    std::vector<float> scores =
        blockScores(q.data(), keys.data(), 17 * 128, dim, p, 128);
    std::vector<int32_t> sel = selectBlocks(scores, p, 16, 128, 1, 0);
    if (p < 2048) {
      EXPECT_EQ(scores.size(), 16u) << "block 16 is not visible at " << p;
      EXPECT_EQ(sel, range(0, 15));
    } else {
      EXPECT_EQ(sel.back(), 16);
      EXPECT_EQ(std::count(sel.begin(), sel.end(), 16), 1);
      EXPECT_EQ(std::count(sel.begin(), sel.end(), -1), 0);
    }
  }
  // Short context: tokens 0..3 see one block, 15 empty slots.
  for (int64_t p = 0; p < 4; ++p)
    EXPECT_EQ(selectBlocks(blockScores(q.data(), keys.data(), 4, dim, p, 128),
                           p, 16, 128, 1, 0),
              padded({0}, 16));
}

TEST(Attend, SingleKeyGivesItsValue) {
  // §3.1: one key, zero query -> output = v, LSE = 0. Under the q8
  // contract too: P = 448 is an E4M3 value, so output = 448 v / 448 = v
  // and LSE = 0 + ln(448 / 448).
  std::vector<float> q(8, 0.0f), k(8, 0.3f), v = {1, 2, 3, 4, 5, 6, 7, 8};
  for (auto *fn : {&attend, &attendQ8}) {
    std::vector<float> out(8);
    float lse = fn(q.data(), k.data(), v.data(), 1, 8, 0, 0.25f, nullptr, 128,
                   out.data());
    EXPECT_EQ(out, v);
    EXPECT_EQ(lse, 0.0f);
  }
}

TEST(Attend, B11OrderAndCausalMaskInsideTheLocalBlock) {
  const int dim = 8, blocks = 22;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> keys(size_t(blocks) * 128 * dim), values(keys.size()),
      q(dim);
  for (float &x : keys)
    x = normal(rng);
  for (float &x : values)
    x = normal(rng);
  for (float &x : q)
    x = normal(rng);
  const int64_t k20 = 20 * 128;
  for (int64_t p : {k20, k20 + 1, k20 + 63, k20 + 64, k20 + 127}) {
    std::vector<int32_t> asc = {3, 7, 20}, desc = {20, 7, 3},
                         shuffled = {7, 20, 3}, beyond = {3, 7, 20, 21};
    std::vector<float> a(dim), b(dim), c(dim), d(dim);
    float la = attend(q.data(), keys.data(), values.data(), blocks * 128, dim,
                      p, 0.35f, &asc, 128, a.data());
    attend(q.data(), keys.data(), values.data(), blocks * 128, dim, p, 0.35f,
           &desc, 128, b.data());
    attend(q.data(), keys.data(), values.data(), blocks * 128, dim, p, 0.35f,
           &shuffled, 128, c.data());
    float ld = attend(q.data(), keys.data(), values.data(), blocks * 128, dim,
                      p, 0.35f, &beyond, 128, d.data());
    EXPECT_TRUE(std::isfinite(la));
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    EXPECT_EQ(a, d); // block 21 lies beyond p and contributes nothing
    EXPECT_EQ(la, ld);
    // Only keys j <= p of block 20: compare with an explicit key list.
    std::vector<float> manual(dim, 0.0f);
    double zmax = -INFINITY, sum = 0;
    std::vector<int64_t> js;
    for (int b0 : {3, 7})
      for (int t = 0; t < 128; ++t)
        js.push_back(b0 * 128 + t);
    for (int64_t j = k20; j <= p; ++j)
      js.push_back(j);
    std::vector<double> z;
    for (int64_t j : js) {
      double dot = 0;
      for (int c0 = 0; c0 < dim; ++c0)
        dot += double(q[c0]) * keys[j * dim + c0];
      z.push_back(dot * 0.35f);
      zmax = std::max(zmax, z.back());
    }
    for (double &zz : z)
      sum += (zz = std::exp(zz - zmax));
    for (int c0 = 0; c0 < dim; ++c0) {
      double acc = 0;
      for (size_t i = 0; i < js.size(); ++i)
        acc += z[i] * values[js[i] * dim + c0];
      EXPECT_NEAR(a[c0], acc / sum, 1e-6);
    }
  }
  // No visible key at all: zero output and -inf LSE, never NaN.
  std::vector<int32_t> none = {-1, -1};
  std::vector<float> out(dim, 1.0f);
  float lse = attend(q.data(), keys.data(), values.data(), blocks * 128, dim,
                     5, 0.35f, &none, 128, out.data());
  EXPECT_EQ(lse, -INFINITY);
  for (float x : out)
    EXPECT_EQ(x, 0.0f);
}

TEST(AttendQ8, ProbabilitiesRoundToE4M3AtTheirBlocksRunningMaximum) {
  // Two keys in blocks of one key, q = (1, 0), scale 1: z0 = 0 and
  // z1 = ln 3, V = the identity. Hand-computed (msa-m3-spec §3.2, decode
  // reference [S14]):
  //   blocks {0, 1}: block 0 sets m = 0, P0 = 448 (an E4M3 value); block 1
  //     raises m to ln 3, the accumulator and the denominator are scaled by
  //     1/3 (FP32), P1 = 448: output (448/3, 448) / (448/3 + 448)
  //     = (1/4, 3/4), the exact softmax.
  //   blocks {1, 0}: m = ln 3 first, P1 = 448, then P0 = 448/3 = 149.33,
  //     which E4M3 rounds to 144 (steps of 16 in [128, 256)), while the
  //     denominator keeps 149.33: output (144, 448) / 597.33
  //     = (0.241071, 0.75).
  //   LSE = ln(e^0 + e^ln 3) = ln 4 either way.
  const float ln3 = std::log(3.0f);
  std::vector<float> q = {1, 0}, keys = {0, 0, ln3, 0}, values = {1, 0, 0, 1};
  std::vector<int32_t> ascending = {0, 1}, descending = {1, 0};
  std::vector<float> a(2), b(2);
  float la = attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f,
                      &ascending, 1, a.data());
  float lb = attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f,
                      &descending, 1, b.data());
  EXPECT_NEAR(a[0], 0.25, 1e-6);
  EXPECT_NEAR(a[1], 0.75, 1e-6);
  EXPECT_NEAR(b[0], 144.0 / (448.0 / 3 + 448.0), 1e-6);
  EXPECT_NEAR(b[1], 0.75, 1e-6);
  EXPECT_NEAR(la, std::log(4.0), 1e-6);
  EXPECT_NEAR(lb, std::log(4.0), 1e-6);
  // The dense order is block 0, 1, ...: as `ascending`.
  std::vector<float> c(2);
  attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f, nullptr, 1,
           c.data());
  EXPECT_EQ(a, c);
}

TEST(AttendQ8, QueriesRoundToE4M3AndSaturate) {
  // One block of two keys, scale 1, V = the identity. q = (1.0625, 0)
  // rounds to 1 (E4M3 steps of 0.125 in [1, 2), a tie to even) and
  // q = (500, 0) saturates at 448, so the scores are 1 * k and 448 * k.
  std::vector<float> keys = {0, 0, 1, 0}, values = {1, 0, 0, 1};
  std::vector<float> q = {1.0625f, 0}, out(2);
  attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f, nullptr, 128,
           out.data());
  // z = (0, 1): P = 448 (e^-1, 1) = (164.81, 448) -> E4M3 (160, 448).
  const double p0 = 448.0 * std::exp(-1.0);
  EXPECT_NEAR(out[0], 160.0 / (p0 + 448.0), 1e-6);
  EXPECT_NEAR(out[1], 448.0 / (p0 + 448.0), 1e-6);
  q = {500.0f, 0};
  float lse = attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f,
                       nullptr, 128, out.data());
  // z = (0, 448): P0 = 448 e^-448 underflows to 0.
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_NEAR(lse, 448.0, 1e-4);
  // No visible key: zero output and -inf LSE.
  std::vector<int32_t> none = {-1};
  std::vector<float> zero(2, 1.0f);
  EXPECT_EQ(attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f, &none,
                     128, zero.data()),
            -INFINITY);
  EXPECT_EQ(zero, std::vector<float>(2, 0.0f));
}

TEST(AttendQ8, NaNPropagatesAsInAttend) {
  // A NaN key (or query) makes the row NaN, as in the exact contract and
  // the kernels (NaN maximum, NaN sum), not "no visible key" (0).
  std::vector<float> q = {1, 0}, keys = {1, 0, NAN, 0}, values = {1, 2, 3, 4};
  std::vector<float> a(2), b(2);
  float la = attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f,
                      nullptr, 128, a.data());
  float lb = attend(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f,
                    nullptr, 128, b.data());
  EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1]));
  EXPECT_TRUE(std::isnan(b[0]) && std::isnan(b[1]));
  EXPECT_TRUE(std::isnan(la));
  EXPECT_TRUE(std::isnan(lb));
  q = {NAN, 0};
  keys = {1, 0, 1, 0};
  attendQ8(q.data(), keys.data(), values.data(), 2, 2, 1, 1.0f, nullptr, 128,
           a.data());
  EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1]));
}

/// Equal as floats, with -0 distinct from +0 and any NaN equal to NaN.
::testing::AssertionResult sameFloat(float got, float want) {
  if (std::isnan(want) ? std::isnan(got)
                       : got == want && std::signbit(got) == std::signbit(want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

TEST(CacheFormats, NVFP4BlocksMatchHandComputedValues) {
  // msa-m3-spec.md §4.2; the cases and their derivations are in
  // unittests/Nvfp4CacheCases.h.
  for (const msac::testing::Nvfp4BlockCase &c :
       msac::testing::nvfp4BlockCases()) {
    SCOPED_TRACE(c.what);
    uint8_t scale = 0xFF, codes[16];
    quantizeNVFP4Block(c.x, scale, codes);
    EXPECT_EQ(int(scale), int(c.scale));
    std::vector<float> x(c.x, c.x + 16);
    roundTripCache(x.data(), 16, CacheFormat::NVFP4);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(int(codes[i]), int(c.codes[i])) << "element " << i;
      EXPECT_TRUE(sameFloat(dequantizeNVFP4ToFP8(codes[i], scale), c.read[i]))
          << "element " << i;
      EXPECT_TRUE(sameFloat(x[i], c.read[i])) << "element " << i;
    }
  }
}

TEST(CacheFormats, NVFP4DequantizesToFP8AsSpecified) {
  // §4.2 dequant: FP32 product, clamped to +-448, rounded to E4M3. A few
  // products worked by hand: 1.5 x 1.125 = 1.6875 (tie of 1.625 and 1.75
  // -> 1.75, even mantissa); 6 x 448 -> 448; 3 x 2^-9 (subnormal) exact;
  // -6 x 1.375 = -8.25 -> -8 (steps of 1 in [8, 16)).
  EXPECT_EQ(dequantizeNVFP4ToFP8(0x3, 0x39), 1.75f);
  EXPECT_EQ(dequantizeNVFP4ToFP8(0x7, 0x7E), 448.0f);
  EXPECT_EQ(dequantizeNVFP4ToFP8(0x5, 0x01), 3.0f / 512);
  EXPECT_EQ(dequantizeNVFP4ToFP8(0xF, 0x3B), -8.0f);
  // FP8 caches round each value once (scale 1, saturating); BF16 keeps it.
  std::vector<float> x = {1.0625f, 500.0f, -0.3f};
  roundTripCache(x.data(), 3, CacheFormat::FP8);
  EXPECT_EQ(x, (std::vector<float>{1.0f, 448.0f, -0.3125f}));
  roundTripCache(x.data(), 3, CacheFormat::BF16);
  EXPECT_EQ(x, (std::vector<float>{1.0f, 448.0f, -0.3125f}));
}

TEST(CacheFormats, RowBytesFollowTheArtifactLayout) {
  // docs/architecture.md "KV and index caches": 2 bytes a BF16 value, one
  // an E4M3 value, NVFP4 half a byte plus one scale byte per 16.
  EXPECT_EQ(cacheRowBytes(CacheFormat::BF16, 32), 64);
  EXPECT_EQ(cacheRowBytes(CacheFormat::FP8, 32), 32);
  EXPECT_EQ(cacheRowBytes(CacheFormat::NVFP4, 32), 18);
}

TEST(CompareCacheRow, BF16ValuesAreLittleEndianAndAdmittedWithinDrift) {
  // 16 values, largest |value| 2: one BF16 step at 1 is 2^-7, the drift
  // allowance 2 / 64.
  std::vector<float> own(16, 0.0f);
  own[0] = 1.0f;
  own[1] = -2.0f;
  own[2] = 0.375f;
  std::vector<uint8_t> bytes(32, 0);
  auto put = [&](int i, uint16_t bits) {
    bytes[2 * i] = bits & 0xFF;
    bytes[2 * i + 1] = bits >> 8;
  };
  put(0, 0x3F80); // 1.0
  put(1, 0xC000); // -2.0
  put(2, 0x3EC0); // 0.375
  std::vector<float> read(16);
  CacheRowComparison c = compareCacheRow(CacheFormat::BF16, own.data(),
                                         bytes.data(), 16, read.data());
  EXPECT_EQ(c.differing, 0);
  EXPECT_TRUE(c.admissible);
  EXPECT_EQ(read, own);
  put(0, 0x3F82); // 1.015625: two BF16 steps, within step + drift
  c = compareCacheRow(CacheFormat::BF16, own.data(), bytes.data(), 16,
                      read.data());
  EXPECT_EQ(read[0], 1.015625f);
  EXPECT_EQ(c.differing, 1);
  EXPECT_TRUE(c.admissible);
  put(0, 0x3F8E); // 1.109375: 0.109 > 2^-7 + 2 / 64
  c = compareCacheRow(CacheFormat::BF16, own.data(), bytes.data(), 16,
                      read.data());
  EXPECT_FALSE(c.admissible);
  put(0, 0xBF80); // -1.0: the sign
  EXPECT_FALSE(compareCacheRow(CacheFormat::BF16, own.data(), bytes.data(), 16,
                               read.data())
                   .admissible);
}

TEST(CompareCacheRow, FP8SmallValuesMayDriftFartherThanTheirOwnStep) {
  // own 4.0 (E4M3 0x48) and 0.05 (1.6 x 2^-5, stored as 1.625 x 2^-5 =
  // 0x15); largest value 4, so the drift allowance is 4 / 64 = 0.0625.
  std::vector<float> own(16, 0.0f);
  own[0] = 4.0f;
  own[1] = 0.05f;
  std::vector<uint8_t> bytes(16, 0);
  bytes[0] = 0x48;
  bytes[1] = 0x15;
  std::vector<float> read(16);
  CacheRowComparison c = compareCacheRow(CacheFormat::FP8, own.data(),
                                         bytes.data(), 16, read.data());
  EXPECT_EQ(c.differing, 0);
  EXPECT_TRUE(c.admissible);
  EXPECT_EQ(read[1], 0.05078125f);
  // 0x13 = 1.375 x 2^-5: two steps of 2^-8 below, within the drift.
  bytes[1] = 0x13;
  c = compareCacheRow(CacheFormat::FP8, own.data(), bytes.data(), 16,
                      read.data());
  EXPECT_EQ(c.differing, 1);
  EXPECT_TRUE(c.admissible);
  // 4.5 (0x49): one step of 0.5 at 4.
  bytes[0] = 0x49;
  c = compareCacheRow(CacheFormat::FP8, own.data(), bytes.data(), 16,
                      read.data());
  EXPECT_EQ(c.differing, 2);
  EXPECT_TRUE(c.admissible);
  // 5.0 (0x4A): two steps, 1.0 > 0.5 + 0.0625.
  bytes[0] = 0x4A;
  EXPECT_FALSE(compareCacheRow(CacheFormat::FP8, own.data(), bytes.data(), 16,
                               read.data())
                   .admissible);
  // NaN (0x7F) where the reference stores 0.
  bytes[0] = 0x48;
  bytes[5] = 0x7F;
  c = compareCacheRow(CacheFormat::FP8, own.data(), bytes.data(), 16,
                      read.data());
  EXPECT_EQ(c.differing, 2);
  EXPECT_FALSE(c.admissible);
}

TEST(CompareCacheRow, NVFP4CodesLowNibbleFirstThenScales) {
  // own {6, 3, 1, 0.5, -6, 0 ...}: amax 6, scale E4M3(1.0) = 0x38; codes
  // 6 = 0x7, 3 = 0x5, 1 = 0x2, 0.5 = 0x1, -6 = 0xF (§4.2). Stored as
  // bytes 0x57, 0x12, 0x0F, 0 ... then the scale after dim / 2 bytes.
  std::vector<float> own(16, 0.0f);
  own[0] = 6.0f;
  own[1] = 3.0f;
  own[2] = 1.0f;
  own[3] = 0.5f;
  own[4] = -6.0f;
  std::vector<uint8_t> bytes(9, 0);
  bytes[0] = 0x57;
  bytes[1] = 0x12;
  bytes[2] = 0x0F;
  bytes[8] = 0x38;
  std::vector<float> read(16);
  CacheRowComparison c = compareCacheRow(CacheFormat::NVFP4, own.data(),
                                         bytes.data(), 16, read.data());
  EXPECT_EQ(c.differing, 0);
  EXPECT_TRUE(c.admissible);
  EXPECT_EQ(read, own);
  // 3 -> 4 (code 0x6): one E2M1 step (1 between 2 and 4).
  bytes[0] = 0x67;
  c = compareCacheRow(CacheFormat::NVFP4, own.data(), bytes.data(), 16,
                      read.data());
  EXPECT_EQ(read[1], 4.0f);
  EXPECT_EQ(c.differing, 1);
  EXPECT_TRUE(c.admissible);
  // 3 -> 6 (code 0x7): 3 > 2 + 0.5 + 6 / 64.
  bytes[0] = 0x77;
  EXPECT_FALSE(compareCacheRow(CacheFormat::NVFP4, own.data(), bytes.data(), 16,
                               read.data())
                   .admissible);
  // The next scale up, 1.125 (0x39), with the same codes: every nonzero
  // value differs (6 x 1.125 = 6.75 -> 7 in E4M3), each within a step.
  bytes[0] = 0x57;
  bytes[8] = 0x39;
  c = compareCacheRow(CacheFormat::NVFP4, own.data(), bytes.data(), 16,
                      read.data());
  EXPECT_EQ(read[0], 7.0f);
  EXPECT_EQ(c.differing, 5);
  EXPECT_TRUE(c.admissible);
  // Two scale steps up (0x3A), or a negative scale, are not admitted.
  bytes[8] = 0x3A;
  EXPECT_FALSE(compareCacheRow(CacheFormat::NVFP4, own.data(), bytes.data(), 16,
                               read.data())
                   .admissible);
  bytes[8] = 0xB8;
  EXPECT_FALSE(compareCacheRow(CacheFormat::NVFP4, own.data(), bytes.data(), 16,
                               read.data())
                   .admissible);
}

/// The reference model on the tiny synthetic checkpoint (written by
/// msac-synth in the lit test that runs this binary with MSAC_TINY_MODEL).
class ReferenceModel : public ::testing::Test {
protected:
  void SetUp() override {
    const char *dir = std::getenv("MSAC_TINY_MODEL");
    if (!dir || !std::filesystem::exists(dir))
      GTEST_FAIL() << "set MSAC_TINY_MODEL to a msac-synth tiny checkpoint";
    msac::ckpt::Diagnostics diags;
    model = M3Reference::load(dir, diags);
    ASSERT_TRUE(model);
  }
  std::unique_ptr<M3Reference> model;
};

TEST_F(ReferenceModel, ChunkedPrefillAndDecodeAgreeWithOneShotPrefill) {
  std::vector<int32_t> prompt(300);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>((i * 37 + 11) % 500);
  auto oneShot = model->newSequence();
  std::vector<float> a = model->forward(oneShot, prompt);
  auto chunked = model->newSequence();
  std::vector<float> b;
  for (size_t start = 0; start < prompt.size(); start += 100) {
    std::vector<int32_t> chunk(prompt.begin() + start,
                               prompt.begin() + start + 100);
    std::vector<float> part = model->forward(chunked, chunk);
    b.insert(b.end(), part.begin(), part.end());
  }
  EXPECT_EQ(a, b);
  for (float x : a)
    ASSERT_TRUE(std::isfinite(x));
}

TEST_F(ReferenceModel, SelectionIsActiveBeyondSixteenBlocks) {
  // 2,100 tokens: the last tokens see 17 blocks, so one block is dropped.
  std::vector<int32_t> prompt(2100);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>((i * 7919 + 3) % 509);
  auto seq = model->newSequence();
  std::vector<float> logits = model->forward(seq, prompt);
  ASSERT_EQ(logits.size(), prompt.size() * 512);
  for (float x : logits)
    ASSERT_TRUE(std::isfinite(x));
  const auto &sel = model->lastSelections();
  ASSERT_EQ(sel.size(), 2u); // layers 1 and 2 are MSA
  for (const auto &[layer, perToken] : sel) {
    const auto &last = perToken.back(); // position 2099, local block 16
    for (const std::vector<int32_t> &groupSel : last) {
      EXPECT_EQ(groupSel.back(), 16);
      EXPECT_EQ(std::count(groupSel.begin(), groupSel.end(), -1), 0);
      std::vector<int32_t> sorted(groupSel);
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
    }
  }
  // Logits are well scaled: neither exploding nor collapsed.
  double sumSq = 0;
  for (float x : logits)
    sumSq += double(x) * x;
  double rms = std::sqrt(sumSq / logits.size());
  EXPECT_GT(rms, 0.05);
  EXPECT_LT(rms, 50.0);
}

} // namespace
