//===- LowPrecisionTest.cpp - FP32 <-> narrow float conversions -----------===//
//
// Part of msac. Expected bytes are bug cases B15 (E4M3 saturates, never
// NaN), B16 (round to nearest even, not truncation) and B22 (E8M0 decode),
// and the E2M1 value table of msa-m3-spec.md §4.2.
//
//===----------------------------------------------------------------------===//

#include "msac/Numerics/LowPrecision.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <vector>

using namespace msac::numerics;

namespace {

TEST(LowPrecision, B15E4M3Saturates) {
  const float in[] = {1000, 448, 464, 465, -1000, INFINITY, -INFINITY,
                      NAN,  1e-3f, std::ldexp(1.0f, -10)};
  const uint8_t expected[] = {0x7E, 0x7E, 0x7E, 0x7E, 0xFE,
                              0x7E, 0xFE, 0x7F, 0x01, 0x00};
  for (size_t i = 0; i < std::size(in); ++i)
    EXPECT_EQ(floatToE4M3(in[i]), expected[i]) << in[i];
  EXPECT_FLOAT_EQ(e4m3ToFloat(0x01), 0.001953125f);
  // No finite input produces the NaN codes.
  for (float x = -500; x <= 500; x += 0.37f) {
    uint8_t b = floatToE4M3(x);
    EXPECT_NE(b & 0x7F, 0x7F) << x;
  }
}

TEST(LowPrecision, B16RoundToNearestEven) {
  EXPECT_EQ(floatToE4M3(1.0625f), 0x38);
  EXPECT_EQ(floatToE4M3(1.1875f), 0x3A);
  EXPECT_EQ(floatToE4M3(1.2f), 0x3A);
  EXPECT_EQ(floatToE4M3(-1.2f), 0xBA);
  EXPECT_EQ(floatToE4M3(1.5f * std::ldexp(1.0f, -9)), 0x02);
  EXPECT_EQ(floatToE4M3(248.0f), 0x78);
  EXPECT_EQ(floatToE5M2(1.125f), 0x3C);
  EXPECT_EQ(floatToE5M2(1.375f), 0x3E);
  EXPECT_EQ(floatToE5M2(1e6f), 0x7B);
}

TEST(LowPrecision, E4M3RoundTripsEveryFiniteCode) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F)
      continue;
    float value = e4m3ToFloat(static_cast<uint8_t>(code));
    uint8_t back = floatToE4M3(value);
    if (value == 0)
      EXPECT_EQ(back & 0x7F, 0);
    else
      EXPECT_EQ(back, code) << value;
  }
}

TEST(LowPrecision, E2M1Table) {
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int code = 0; code < 16; ++code)
    EXPECT_EQ(e2m1ToFloat(static_cast<uint8_t>(code)),
              (code & 8 ? -1 : 1) * values[code & 7]);
  // Ties go to the even code: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2,
  // 2.5 -> 2, 3.5 -> 4, 5 -> 4; beyond 6 saturates.
  const std::pair<float, float> ties[] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 1},
                                          {1.75f, 2}, {2.5f, 2},  {3.5f, 4},
                                          {5.0f, 4},  {7.0f, 6},  {-9.0f, -6}};
  for (auto [in, out] : ties)
    EXPECT_EQ(e2m1ToFloat(floatToE2M1(in)), out) << in;
}

TEST(LowPrecision, B22E8M0Decode) {
  EXPECT_EQ(e8m0ToFloat(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0ToFloat(1), std::ldexp(1.0f, -126));
  EXPECT_EQ(e8m0ToFloat(120), std::ldexp(1.0f, -7));
  EXPECT_EQ(e8m0ToFloat(125), 0.25f);
  EXPECT_EQ(e8m0ToFloat(127), 1.0f);
  EXPECT_EQ(e8m0ToFloat(130), 8.0f);
  EXPECT_EQ(e8m0ToFloat(140), 8192.0f);
  EXPECT_EQ(e8m0ToFloat(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0ToFloat(255)));
  // 0.5 x 2^-127 = 2^-128 is BF16 subnormal 0x0020, not 0 and not -inf.
  EXPECT_EQ(floatToBF16(0.5f * e8m0ToFloat(0)), 0x0020);
}

TEST(LowPrecision, BF16RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(floatToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(floatToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(NAN))));
}

TEST(LowPrecision, F16ToFloat) {
  EXPECT_EQ(f16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(f16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(f16ToFloat(0x7BFF), 65504.0f);              // largest finite
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(f16ToFloat(0x0400), std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_EQ(f16ToFloat(0x7C00), INFINITY);
  EXPECT_EQ(f16ToFloat(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7E00)));
  EXPECT_TRUE(std::signbit(f16ToFloat(0x8000)));
}

// The GPU's one-row products (rowsDot, codegen/lib/GpuKernels.cpp) use an
// FMA where the weight is E4M3 or bf16 and x is bf16, relying on every such
// product being exact in FP32 (at most 8 x 8 significant bits) unless it
// falls below FP32's normal range: then fma(w, x, s) rounds as s + w x
// did with the multiply and the add apart. Every finite E4M3 value (and a
// spread of bf16 weights) against every finite bf16 value.
TEST(LowPrecision, NarrowProductsAreExactInFP32) {
  const double minNormal = std::ldexp(1.0, -126);
  std::vector<float> weights;
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7F) != 0x7F)
      weights.push_back(e4m3ToFloat(static_cast<uint8_t>(b)));
  for (int h = 0; h < 65536; h += 257)
    if (std::isfinite(bf16ToFloat(static_cast<uint16_t>(h))))
      weights.push_back(bf16ToFloat(static_cast<uint16_t>(h)));
  int64_t checked = 0, inexact = 0, differ = 0;
  for (float w : weights)
    for (int h = 0; h < 65536; ++h) {
      const float x = bf16ToFloat(static_cast<uint16_t>(h));
      const double exact = static_cast<double>(w) * static_cast<double>(x);
      if (!std::isfinite(x) || std::fabs(exact) > 3.0e38 ||
          (exact != 0 && std::fabs(exact) < minNormal))
        continue;
      ++checked;
      const float product = std::fma(w, x, 0.0f);
      inexact += static_cast<double>(product) != exact;
      // A running sum of the same order as the product.
      const float sum = static_cast<float>(exact * 0.7109375 + 0.3);
      const float separate = sum + product;
      differ += std::fma(w, x, sum) != separate;
    }
  EXPECT_GT(checked, int64_t(25000000));
  EXPECT_EQ(inexact, 0);
  EXPECT_EQ(differ, 0);
}

} // namespace
