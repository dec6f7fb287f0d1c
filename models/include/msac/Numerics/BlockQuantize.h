//===- BlockQuantize.h - Block-scaled weight quantization -------*- C++ -*-===//
//
// Part of msac. Header-only, LLVM-free quantizers that turn FP32 weight
// values into the block-scaled formats NVIDIA ModelOpt checkpoints store,
// written from the formats' definitions. Every element and scale rounding
// is one of LowPrecision.h's conversions (round to nearest, ties to even,
// saturating), so each rounding rule has one definition.
//
// - NVFP4 (ModelOpt `NVFP4QTensor`): an FP32 per-tensor global scale
//   g = amax(tensor) / (6 * 448); per 16 values along K an E4M3 block
//   scale s = E4M3(amax(block) / (6 * g)); elements E2M1(x / (s * g))
//   (FP32 divisions and products). A block whose scale is 0 (all zero, or
//   an amax below the smallest E4M3 step) gets all codes 0; ModelOpt stores
//   scale 1.0 for an all-zero block, which dequantizes to the same zeros.
// - MXFP8 (OCP Microscaling Formats v1.0, §5.3 / §6.3): per 32 values an
//   E8M0 scale 2^e with e = floor(log2(amax(block))) - 8 (8 = emax of
//   E4M3), clamped to the E8M0 range [-127, 127] (an all-zero block takes
//   the smallest scale 2^-127); elements E4M3(x / 2^e), saturating at
//   +-448 (amax / 2^e lies in [256, 512)).
// - FP8 per tensor (ModelOpt FP8) or per 128 x 128 tile (block FP8, the
//   DeepSeek-V3 / MiniMax `weight_scale_inv` form): scale = amax / 448 in
//   FP32 over the tensor or the tile, elements E4M3(x / scale).
//
// An all-zero tensor or tile gets global / FP8 scale 1.0 (its values are
// zero either way). Inputs must be finite; callers check.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_NUMERICS_BLOCKQUANTIZE_H
#define MSAC_NUMERICS_BLOCKQUANTIZE_H

#include "msac/Numerics/LowPrecision.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace msac::numerics {

/// Values per NVFP4 block scale and per MX block scale.
inline constexpr int64_t kNVFP4BlockSize = 16;
inline constexpr int64_t kMXBlockSize = 32;
/// Largest finite magnitudes of E2M1 and E4M3.
inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kE4M3Max = 448.0f;
/// emax of the E4M3 element format (448 = 1.75 * 2^8), OCP MX §5.3.
inline constexpr int kE4M3Emax = 8;

/// max |x| over `n` finite values (0 for none).
inline float absMax(const float *x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

/// ModelOpt's NVFP4 per-tensor global scale: amax / (6 * 448), or 1.0 for
/// an all-zero tensor.
inline float nvfp4GlobalScale(float tensorAmax) {
  return tensorAmax > 0 ? tensorAmax / (kE2M1Max * kE4M3Max) : 1.0f;
}

/// Quantizes one NVFP4 block of 16 finite values with global scale
/// `global`: returns the E4M3 block-scale byte and writes 16 E2M1 codes
/// (one per byte, low nibble).
inline uint8_t quantizeNVFP4WeightBlock(const float *x, float global,
                                        uint8_t *codes) {
  const float amax = absMax(x, kNVFP4BlockSize);
  const uint8_t scale = floatToE4M3(amax / (kE2M1Max * global));
  const float step = e4m3ToFloat(scale) * global;
  for (int64_t i = 0; i < kNVFP4BlockSize; ++i)
    codes[i] = step > 0 ? floatToE2M1(x[i] / step) : 0;
  return scale;
}

/// The unbiased E8M0 exponent of an MX block with element emax `emaxElem`
/// (OCP MX §6.3): floor(log2(amax)) - emaxElem, clamped to [-127, 127];
/// -127 for amax 0.
inline int mxScaleExponent(float amax, int emaxElem) {
  if (!(amax > 0))
    return -127;
  int exp;
  std::frexp(amax, &exp); // amax = f * 2^exp, f in [0.5, 1): exact
  return std::clamp(exp - 1 - emaxElem, -127, 127);
}

/// Quantizes one MXFP8 (E4M3) block of 32 finite values: returns the E8M0
/// scale byte (exponent + 127) and writes 32 E4M3 bytes.
inline uint8_t quantizeMXFP8Block(const float *x, uint8_t *elements) {
  const int e = mxScaleExponent(absMax(x, kMXBlockSize), kE4M3Emax);
  const float scale = std::ldexp(1.0f, e); // 2^-127 is an FP32 subnormal
  for (int64_t i = 0; i < kMXBlockSize; ++i)
    elements[i] = floatToE4M3(x[i] / scale);
  return static_cast<uint8_t>(e + 127);
}

/// Rows and columns of a block-FP8 scale tile.
inline constexpr int64_t kFP8BlockSize = 128;

/// An FP8 weight scale (per tensor or per tile): amax / 448, or 1.0 when
/// every value is zero.
inline float fp8Scale(float amax) { return amax > 0 ? amax / kE4M3Max : 1.0f; }

} // namespace msac::numerics

#endif // MSAC_NUMERICS_BLOCKQUANTIZE_H
