//===- Nvfp4CacheCases.h - Hand-computed NVFP4 cache blocks -----*- C++ -*-===//
//
// Part of msac's tests. 16-value blocks stored in an NVFP4 cache and read
// back, each expected value worked out by hand from msa-m3-spec.md §4.2
// and the quantization recipe (TensorRT-LLM's NVFP4 kernel with global
// scale 1 and exact divisions; docs/architecture.md):
//   scale = E4M3(amax / 6)   FP32 division, nearest even, saturating at 448
//   code  = E2M1(x / scale)  nearest, ties to the even code, saturating at
//                            6; all codes 0 when the scale is 0
//   read  = E4M3(clamp(e2m1(code) * scale, -448, 448))   (§4.2 dequant)
// E2M1 values: 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0-7; 8-15 negative);
// midpoints 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 go to codes 0, 2, 2, 4, 4,
// 6, 6. E4M3 byte = (exponent + 7) << 3 | mantissa; 1.0 = 0x38, 448 = 0x7E.
// Shared by the kernel builder's test (unittests/Codegen) and the
// reference's (unittests/Reference), two independent implementations.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_UNITTESTS_NVFP4CACHECASES_H
#define MSAC_UNITTESTS_NVFP4CACHECASES_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace msac::testing {

struct Nvfp4BlockCase {
  const char *what;
  float x[16];       ///< the values inserted (unlisted ones are 0)
  uint8_t scale;     ///< the E4M3 scale byte
  uint8_t codes[16]; ///< the E2M1 codes (packed two per byte, low first)
  float read[16];    ///< the values attention reads back
};

inline const std::vector<Nvfp4BlockCase> &nvfp4BlockCases() {
  const float inf = INFINITY, nan = NAN;
  static const std::vector<Nvfp4BlockCase> cases = {
      {"amax 6 gives scale 1.0; every midpoint goes to the even code",
       {6, 3, -1.5f, 0.5f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -5,
        -0.25f, 0, -0.0f, 4},
       0x38,
       {7, 5, 0xB, 1, 0, 2, 2, 4, 4, 6, 6, 0xE, 8, 0, 8, 6},
       {6, 3, -1.5f, 0.5f, 0, 1, 1, 2, 2, 4, 4, -4, -0.0f, 0, -0.0f, 4}},
      // 10 / 6 = 1.667 -> 1.625 (0x3D); 10 / 1.625 = 6.15 -> 6; 1 / 1.625
      // = 0.615 -> 0.5; 2 / 1.625 = 1.23 -> 1; 3 / 1.625 = 1.85 -> 2.
      // Read: 6 * 1.625 = 9.75 -> E4M3 10 (steps of 1 in [8, 16)).
      {"scale rounds to the nearest E4M3, codes saturate at 6",
       {10, 1, 2, -3},
       0x3D,
       {7, 1, 2, 0xC},
       {10, 0.8125f, 1.625f, -3.25f}},
      {"all-zero block: scale 0, codes 0", {}, 0x00, {}, {}},
      // 1e-4 / 6 is below half the smallest E4M3 subnormal (2^-10).
      {"a scale that rounds to zero gives zero codes (no -0)",
       {1e-4f, -1e-4f},
       0x00,
       {},
       {}},
      // 10000 / 6 = 1667 -> 448; 3000 / 448 = 6.7 -> 6; 2688 = 6 * 448;
      // 100 / 448 = 0.22 -> 0. Read: 6 * 448 = 2688 clamps to 448.
      {"values beyond 6 x 448 saturate: scale 448, codes +-6",
       {3000, -10000, 2688, 448, 100},
       0x7E,
       {7, 0xF, 7, 2, 0},
       {448, -448, 448, 448, 0}},
      {"an infinity saturates like a finite overflow",
       {inf, -1},
       0x7E,
       {7, 8},
       {448, -0.0f}},
      // 6.375 / 6 = 1.0625, the midpoint of 1.0 and 1.125: even 1.0.
      // 2.75 -> 3 (midpoint 2.5 is below).
      {"E4M3 scale tie goes to the even mantissa (1.0625 -> 1.0)",
       {6.375f, -6.375f, 2.75f},
       0x38,
       {7, 0xF, 5},
       {6, -6, 3}},
      // 7.125 / 6 = 1.1875, the midpoint of 1.125 and 1.25: even 1.25
      // (0x3A); then x / 1.25 = 5.7, 0.25, 0.75, 2.5, -5 exactly.
      {"E4M3 scale tie to 1.25, then E2M1 ties at 0.25, 0.75, 2.5 and 5",
       {7.125f, 0.3125f, 0.9375f, 3.125f, -6.25f},
       0x3A,
       {7, 0, 2, 4, 0xE},
       {7.5f, 0, 1.25f, 2.5f, -5}},
      // 0.01 / 6 = 0.00167 -> 1 x 2^-9 (0x01); 0.01 / 2^-9 = 5.12 -> 6;
      // -0.004 / 2^-9 = -2.05 -> -2. Read: 6 x 2^-9 and -2 x 2^-9 exactly.
      {"subnormal scale (2^-9)",
       {0.01f, -0.004f},
       0x01,
       {7, 0xC},
       {0.01171875f, -0.00390625f}},
      {"a NaN makes the scale NaN (0x7F) and the block reads as NaN",
       {1, nan},
       0x7F,
       {},
       {nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan,
        nan, nan}},
  };
  return cases;
}

} // namespace msac::testing

#endif // MSAC_UNITTESTS_NVFP4CACHECASES_H
