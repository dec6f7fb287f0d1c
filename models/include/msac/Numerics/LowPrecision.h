//===- LowPrecision.h - Exact conversions to and from narrow floats -*- C++ -*-===//
//
// Part of msac. Header-only, LLVM-free conversions between FP32 and the
// narrow formats of checkpoints and KV caches: BF16, FP8 E4M3FN and E5M2
// (OCP 8-bit floating point), E2M1 (FP4) and E8M0 (MX scales). Every
// FP32 -> narrow conversion rounds to nearest, ties to even, and saturates:
// a finite or infinite input beyond the largest finite value becomes that
// value (E4M3: 448, E5M2: 57344, E2M1: 6), so overflow never becomes NaN
// (msa-m3-spec.md §4.2; bug cases B15, B16). NaN stays NaN.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_NUMERICS_LOWPRECISION_H
#define MSAC_NUMERICS_LOWPRECISION_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace msac::numerics {

inline uint32_t floatBits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
inline float bitsToFloat(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

/// FP32 -> BF16, round to nearest even; NaN stays a quiet NaN.
inline uint16_t floatToBF16(float x) {
  uint32_t b = floatBits(x);
  if (std::isnan(x))
    return static_cast<uint16_t>((b >> 16) | 0x40);
  uint32_t rounding = 0x7FFF + ((b >> 16) & 1);
  return static_cast<uint16_t>((b + rounding) >> 16);
}
inline float bf16ToFloat(uint16_t h) {
  return bitsToFloat(static_cast<uint32_t>(h) << 16);
}
/// IEEE binary16 (F16 in safetensors) to FP32, exactly (subnormals,
/// infinities and NaN included).
inline float f16ToFloat(uint16_t h) {
  const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? std::numeric_limits<float>::quiet_NaN()
            : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(1.0f + man / 1024.0f, static_cast<int>(exp) - 15);
  return (h >> 15) ? -v : v;
}

namespace detail {
/// Encodes |x| (finite, >= 0) in a float format with `mantissaBits`
/// explicit mantissa bits, exponent bias `bias`, subnormals, and largest
/// finite magnitude `maxFinite` at code `maxCode`. Round to nearest even,
/// saturating. Returns the code without the sign bit.
inline uint32_t encodeMagnitude(double x, int mantissaBits, int bias,
                                double maxFinite, uint32_t maxCode) {
  if (x >= maxFinite)
    return maxCode;
  const int minNormalExp = 1 - bias;
  int exp;
  std::frexp(x, &exp); // x = f * 2^exp, f in [0.5, 1)
  int e = exp - 1;     // x = g * 2^e, g in [1, 2)
  if (x == 0 || e < minNormalExp) {
    // Subnormal: units of 2^(minNormalExp - mantissaBits).
    double q = std::nearbyint(std::ldexp(x, mantissaBits - minNormalExp));
    return static_cast<uint32_t>(q); // q == 2^mantissaBits is the min normal
  }
  double m = std::nearbyint(std::ldexp(x, mantissaBits - e)) -
             std::ldexp(1.0, mantissaBits);
  if (m >= std::ldexp(1.0, mantissaBits)) {
    m = 0;
    ++e;
  }
  uint32_t code = (static_cast<uint32_t>(e + bias) << mantissaBits) |
                  static_cast<uint32_t>(m);
  return code > maxCode ? maxCode : code;
}
} // namespace detail

/// FP32 -> FP8 E4M3FN (bias 7, no infinities, 0x7F = NaN, max 448).
inline uint8_t floatToE4M3(float x) {
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x))
    return sign | 0x7F;
  if (std::isinf(x))
    return sign | 0x7E;
  return sign | static_cast<uint8_t>(
                    detail::encodeMagnitude(std::fabs(x), 3, 7, 448.0, 0x7E));
}
inline float e4m3ToFloat(uint8_t v) {
  float sign = (v & 0x80) ? -1.0f : 1.0f;
  uint32_t e = (v >> 3) & 0xF, m = v & 7;
  if (e == 0xF && m == 7)
    return std::nanf("");
  if (e == 0)
    return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(1.0f + m / 8.0f, static_cast<int>(e) - 7);
}

/// FP32 -> FP8 E5M2 (bias 15, max 57344), saturating.
inline uint8_t floatToE5M2(float x) {
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x))
    return sign | 0x7F;
  if (std::isinf(x))
    return sign | 0x7B;
  return sign | static_cast<uint8_t>(detail::encodeMagnitude(
                    std::fabs(x), 2, 15, 57344.0, 0x7B));
}
inline float e5m2ToFloat(uint8_t v) {
  float sign = (v & 0x80) ? -1.0f : 1.0f;
  uint32_t e = (v >> 2) & 0x1F, m = v & 3;
  if (e == 0x1F)
    return m ? std::nanf("") : sign * INFINITY;
  if (e == 0)
    return sign * std::ldexp(static_cast<float>(m), -16);
  return sign * std::ldexp(1.0f + m / 4.0f, static_cast<int>(e) - 15);
}

/// FP32 -> FP4 E2M1 code (4 bits: sign, 2 exponent, 1 mantissa; values
/// 0, 0.5, 1, 1.5, 2, 3, 4, 6), saturating at 6; NaN maps to 0 (E2M1 has
/// no NaN, callers must not pass one).
inline uint8_t floatToE2M1(float x) {
  uint8_t sign = std::signbit(x) ? 0x8 : 0;
  if (std::isnan(x))
    return 0;
  double a = std::isinf(x) ? 6.0 : std::fabs(x);
  return sign | static_cast<uint8_t>(
                    detail::encodeMagnitude(a, 1, 1, 6.0, 0x7));
}
inline float e2m1ToFloat(uint8_t code) {
  static const float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f,
                                   2.0f, 3.0f, 4.0f, 6.0f};
  float v = kValues[code & 7];
  return (code & 8) ? -v : v;
}

/// E8M0 scale byte -> 2^(byte - 127); 0xFF is NaN.
inline float e8m0ToFloat(uint8_t byte) {
  if (byte == 0xFF)
    return std::nanf("");
  return std::ldexp(1.0f, static_cast<int>(byte) - 127);
}

} // namespace msac::numerics

#endif // MSAC_NUMERICS_LOWPRECISION_H
