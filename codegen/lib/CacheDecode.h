//===- CacheDecode.h - FP8 / NVFP4 cache values as bf16 mma operands -*- C++
//-*-===//
//
// Part of msac.
//
// Private to the codegen library: the exact decode of NVFP4 cache values to
// the f16 (or bf16) operands of the GPU kernels' tensor-core products. An
// NVFP4 value is read as the host kernels read it (KernelBuilder.h:
// nvfp4ToFP8Value; msa-m3-spec.md §4.2 `inference.dequant`): E2M1 code times
// the FP32 value of the E4M3 block scale, in FP32, rounded to E4M3 (nearest
// even, saturating at ±448); every E4M3 value is exact in f16 and in bf16.
// Per scale byte the 8 magnitudes are a compile-time table (nvfp4F16Table,
// nvfp4BF16Table), looked up with a byte permute per 4 codes
// (perf-anchors.md §3.3, the `prmt` byte lookup).
//
// Targets with hardware FP4 conversions (GpuTarget::e2m1Convert: sm_100a)
// convert instead (GpuKernels.cpp, nvfp4QuadsToBF16E2M1), per 2 codes:
//   cvt.rn.f16x2.e2m1x2           codes -> f16x2 (exact: E2M1 values are
//                                 0, 0.5, 1, 1.5, 2, 3, 4, 6, signed)
//   mul.rn.f16x2                  times the block's scale, converted once
//                                 per block by cvt.rn.f16x2.e4m3x2 (exact;
//                                 the NaN bytes 0x7F / 0xFF give NaN)
//   cvt.rn.satfinite.e4m3x2.f16x2 the product to E4M3: nearest even, |x| >
//                                 448 to ±448, NaN to NaN
//   cvt.rn.f16x2.e4m3x2           to the f16 operands, as an FP8 cache's
//                                 bytes (bf16 operands: then f16 -> FP32
//                                 -> bf16).
// The product is exact in f16 as it is in FP32, so rounding it once to E4M3
// is the spec's rounding: an E2M1 value has at most 2 significant bits and
// an E4M3 scale at most 4, so the product has at most 6 (f16 holds 11); it
// is 0 or at least 0.5 * 2^-9 = 2^-10 (the smallest E4M3 subnormal scale),
// above f16's smallest normal 2^-14, so no subnormal and no flush to zero
// enters; and at most 6 * 448 = 2688, below f16's largest finite 65504.
// Signs are the IEEE product's in both (negative scale bytes, -0 codes);
// a NaN scale gives NaN for every code, 0 included, as 0 * NaN does in
// FP32. unittests/Codegen/E2M1DecodeTest.cpp checks the sequence against
// a model of each instruction for every code and scale byte.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CODEGEN_LIB_CACHEDECODE_H
#define MSAC_CODEGEN_LIB_CACHEDECODE_H

#include "KernelBuilder.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

namespace msac::kernels {

/// The FP32 value of E4M3FN byte `b` (bias 7, subnormals m * 2^-9,
/// 0x7F / 0xFF NaN).
inline float e4m3Value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7)
    return NAN;
  const float mag =
      e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (b & 0x80) ? -mag : mag;
}

/// `x` (finite or not) rounded to an E4M3 value: nearest, ties to the even
/// code, |x| >= 448 saturating to ±448, NaN kept. By search over the 127
/// finite magnitudes (independent of KB::encodeE4M3's bit arithmetic).
inline float roundToE4M3(float x) {
  if (std::isnan(x))
    return NAN;
  const float a = std::fabs(x);
  float best = 0;
  if (a >= 448.0f) {
    best = 448.0f;
  } else {
    int bestCode = 0;
    for (int c = 1; c < 0x7F; ++c) {
      const float v = e4m3Value(uint8_t(c)), bv = e4m3Value(uint8_t(bestCode));
      const float dv = std::fabs(v - a), db = std::fabs(bv - a);
      if (dv < db || (dv == db && (c & 1) == 0))
        bestCode = c;
    }
    best = e4m3Value(uint8_t(bestCode));
  }
  return std::signbit(x) ? -best : best;
}

/// bf16 bits of an FP32 value that bf16 holds exactly (NaN -> 0x7FC0).
inline uint16_t exactBF16Bits(float v) {
  if (std::isnan(v))
    return 0x7FC0;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return uint16_t(u >> 16);
}

/// The f16 range test of queryWordsToF16 on one bf16 half `h` (bits):
/// adding kF16OverflowBias to |h| (h & 0x7FFF) sets bit 15 iff the half is
/// at least 0x4780, i.e. |value| >= 2^16 (or Inf / NaN): exactly the bf16
/// values whose conversion to f16 overflows (the largest bf16 value below
/// 2^16, 65,280, is below f16's 65,504). The kernels test both halves of a
/// word at once (0x7FFF7FFF, then the bias in both halves: no carry
/// crosses, as 0x7FFF + 0x3880 < 0x10000).
constexpr uint32_t kF16OverflowBias = 0x3880;
constexpr bool bf16OverflowsF16(uint16_t h) {
  return (((h & 0x7FFFu) + kF16OverflowBias) & 0x8000u) != 0;
}

/// The power of two queryWordsToF16 divides a warp's queries by when their
/// largest bf16 exponent field is `e` (>= 143: some value reaches 2^16):
/// 2^(e - kF16QueryShiftBase), which brings every value below 2^16 and the
/// largest to [2^14, 2^16).
constexpr int kF16QueryShiftBase = 141;

/// The shift queryWordsToF16 takes when some query of the warp fails the
/// range test and `e` is the largest exponent field of the warp's finite
/// values (Inf and NaN, field 255, are left out: they stay Inf and NaN in
/// f16, and a shift by them would flush every other value to zero):
/// values are divided by 2^f16QueryShift(e).
constexpr int f16QueryShift(int e) {
  return e - kF16QueryShiftBase > 0 ? e - kF16QueryShiftBase : 0;
}

/// The power of two rowsDot's f16 rows (rowsToF16 in GpuKernels.cpp)
/// multiply a row of bf16 x by when its largest exponent field is `e`:
/// 2^f16RowShift(e) brings the largest magnitude into [2^14, 2^15), so
/// that no value overflows f16 and every value of exponent field e - 28
/// or more is an f16 normal number (converted exactly). Clamped to
/// +-kF16RowShiftMax, so that 2^s and 2^-s are normal FP32 numbers (only
/// rows whose largest value is below 2^-112 reach it; Inf / NaN, field
/// 255, give -114).
constexpr int kF16RowShiftMax = 126;
constexpr int f16RowShift(int e) {
  const int s = kF16QueryShiftBase - e;
  return s > kF16RowShiftMax    ? kF16RowShiftMax
         : s < -kF16RowShiftMax ? -kF16RowShiftMax
                                : s;
}

/// f16 bits of an FP32 value that f16 holds exactly as a normal number or
/// zero, as every E4M3 value is (|v| in [2^-9, 448]; NaN -> 0x7E00).
inline uint16_t exactF16Bits(float v) {
  if (std::isnan(v))
    return 0x7E00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (v == 0)
    return sign;
  int e;
  const float f = std::frexp(std::fabs(v), &e); // |v| = f 2^e, f in [0.5, 1)
  // |v| = (1 + m / 1024) 2^(e - 1): biased exponent e - 1 + 15.
  const auto mantissa = static_cast<uint16_t>((2 * f - 1) * 1024);
  return sign | static_cast<uint16_t>((e + 14) << 10) | mantissa;
}

/// Per E4M3 scale byte s (256 rows of 4 words, 16-byte aligned rows): the
/// bf16 bits (or with `f16` the f16 bits) of the NVFP4 values of the 8
/// positive E2M1 codes m = 0..7 (0, 0.5, 1, 1.5, 2, 3, 4, 6) with scale s,
/// E4M3(m * s) as nvfp4ToFP8Value. Word 0 holds the low bytes of codes
/// 0..3 (code i in byte i), word 1 those of codes 4..7, words 2 and 3 the
/// high bytes. Both formats keep the sign in bit 15, so nvfp4Words and
/// nvfp4OctetWords decode either table.
inline std::array<int32_t, 1024> nvfp4OperandTable(bool f16) {
  static const float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  std::array<int32_t, 1024> t{};
  for (int s = 0; s < 256; ++s) {
    const float scale = e4m3Value(uint8_t(s));
    uint32_t w[4] = {0, 0, 0, 0};
    for (int m = 0; m < 8; ++m) {
      const float v = roundToE4M3(kE2M1[m] * scale);
      const uint16_t h = f16 ? exactF16Bits(v) : exactBF16Bits(v);
      w[m / 4] |= uint32_t(h & 0xFF) << (8 * (m % 4));
      w[2 + m / 4] |= uint32_t(h >> 8) << (8 * (m % 4));
    }
    for (int i = 0; i < 4; ++i)
      t[4 * s + i] = int32_t(w[i]);
  }
  return t;
}

/// nvfp4OperandTable's bf16 bits.
inline std::array<int32_t, 1024> nvfp4BF16Table() {
  return nvfp4OperandTable(/*f16=*/false);
}

/// nvfp4OperandTable's f16 bits: the table of the tensor-core attention
/// kernels, which take FP8 and NVFP4 cache values as f16 operands (one
/// conversion per E4M3 pair instead of four for bf16). The indexer
/// multiplies E4M3 bytes instead (nvfp4E4M3Table).
inline std::array<int32_t, 1024> nvfp4F16Table() {
  return nvfp4OperandTable(/*f16=*/true);
}

/// A byte permute `prmt.b32 d, lo, hi, sel` (default mode): byte i of the
/// result is byte (sel >> 4i) & 7 of the 8 bytes {hi, lo} (lo bytes 0-3).
/// The selectors built here never set bit 3 of a nibble.
using BytePermute = std::function<Value(Value lo, Value hi, Value sel)>;

/// Decodes the 4 NVFP4 codes in bits 0-15 of `codes` (i32; code i in bits
/// 4i..4i+3, i.e. two cache bytes) with scale-table row `row` (the 4 words
/// of nvfp4BF16Table for the block's scale byte) to 2 words of bf16 pairs:
/// word 0 = codes 0 (low half) and 1, word 1 = codes 2 and 3. The E2M1 sign
/// bit flips the looked-up value's sign (XOR, so a negative scale byte
/// gives the product's sign, as nvfp4ToFP8Value).
inline std::array<Value, 2> nvfp4Words(KB &k, const BytePermute &prmt,
                                       Value codes, ArrayRef<Value> row) {
  auto andI = [&](Value x, int64_t m) {
    return arith::AndIOp::create(k.b, k.loc, x, k.ci(m)).getResult();
  };
  Value sel = andI(codes, 0x7777);
  Value lo = prmt(row[0], row[1], sel), hi = prmt(row[2], row[3], sel);
  // Sign of code i (bit 4i + 3) to bit 8i + 7: byte 2j + 1 of the result
  // is byte j of `codes` (code 2j + 1's sign in bit 7), byte 2j is byte j
  // of codes << 4 (code 2j's sign in bit 7).
  Value shifted = arith::ShLIOp::create(k.b, k.loc, codes, k.ci(4));
  Value sign = andI(prmt(codes, shifted, k.ci(0x1504)), 0x80808080);
  hi = arith::XOrIOp::create(k.b, k.loc, hi, sign);
  return {prmt(lo, hi, k.ci(0x5140)), prmt(lo, hi, k.ci(0x7362))};
}

/// Decodes the 8 NVFP4 codes of `codes` (i32; code i in bits 4i..4i+3,
/// i.e. four cache bytes of one 16-value block) with scale-table row `row`
/// to 4 words of bf16 pairs (word j = codes 2j (low half) and 2j + 1): the
/// bits of nvfp4Words on each 16-bit half, with the code mask and the sign
/// shift done once for the word (`prmt` reads only bits 0-15 of its
/// selector, so the low half's selector needs no shift).
/// The byte-lookup selectors and signs of the 8 NVFP4 codes of `codes`
/// (code i in bits 4i..4i+3), per half h (codes 4h..4h+3): sel[h] holds
/// their magnitudes (code & 7) in its nibbles 0-3 (`prmt` reads only bits
/// 0-15 of a selector, so the low half needs no shift), and byte i of
/// sign[h] has the sign of code 4h + i in bit 7 (other bits unspecified;
/// see nvfp4Words: bytes of codes << 4 hold the even codes' signs there).
struct Nvfp4OctetSelectors {
  Value sel[2], sign[2];
};
inline Nvfp4OctetSelectors nvfp4OctetSelectors(KB &k, const BytePermute &prmt,
                                               Value codes) {
  Value mags = arith::AndIOp::create(k.b, k.loc, codes, k.ci(0x77777777));
  Value high = arith::ShRUIOp::create(k.b, k.loc, mags, k.ci(16));
  Value shifted = arith::ShLIOp::create(k.b, k.loc, codes, k.ci(4));
  return {
      {mags, high},
      {prmt(codes, shifted, k.ci(0x1504)), prmt(codes, shifted, k.ci(0x3726))}};
}

inline std::array<Value, 4> nvfp4OctetWords(KB &k, const BytePermute &prmt,
                                            Value codes, ArrayRef<Value> row) {
  auto [sel, sign] = nvfp4OctetSelectors(k, prmt, codes);
  std::array<Value, 4> out;
  for (int h = 0; h < 2; ++h) {
    Value lo = prmt(row[0], row[1], sel[h]), hi = prmt(row[2], row[3], sel[h]);
    hi = arith::XOrIOp::create(
        k.b, k.loc, hi,
        arith::AndIOp::create(k.b, k.loc, sign[h], k.ci(0x80808080)));
    out[2 * h] = prmt(lo, hi, k.ci(0x5140));
    out[2 * h + 1] = prmt(lo, hi, k.ci(0x7362));
  }
  return out;
}

/// The words of nvfp4E4M3Table (256 rows of 2).
constexpr int64_t kNvfp4E4M3TableWords = 512;

/// Per E4M3 scale byte s (256 rows of 2 words, 8-byte aligned rows): the
/// E4M3 bytes of the NVFP4 values of the 8 positive E2M1 codes m = 0..7
/// with scale s, E4M3(m * s) as nvfp4ToFP8Value (code m in byte m % 4 of
/// word m / 4). The tensor-core indexer's table, which multiplies E4M3
/// bytes (nvfp4OctetE4M3).
inline std::array<int32_t, kNvfp4E4M3TableWords> nvfp4E4M3Table() {
  static const float kE2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  std::array<int32_t, kNvfp4E4M3TableWords> t{};
  for (int s = 0; s < 256; ++s) {
    const float scale = e4m3Value(uint8_t(s));
    uint32_t w[2] = {0, 0};
    for (int m = 0; m < 8; ++m)
      w[m / 4] |= uint32_t(numerics::floatToE4M3(roundToE4M3(kE2M1[m] * scale)))
                  << (8 * (m % 4));
    t[2 * s] = int32_t(w[0]);
    t[2 * s + 1] = int32_t(w[1]);
  }
  return t;
}

/// Decodes the 8 NVFP4 codes of `codes` (i32; code i in bits 4i..4i+3)
/// with nvfp4E4M3Table's row `row` (2 words) to 2 words of E4M3 bytes
/// (code 4h + i in byte i of word h): per half, one byte lookup of the
/// magnitudes and the code's sign bit XORed into bit 7 (so a negative
/// scale byte gives the product's sign, and a NaN stays NaN, as
/// nvfp4ToFP8Value).
inline std::array<Value, 2> nvfp4OctetE4M3(KB &k, const BytePermute &prmt,
                                           Value codes, ArrayRef<Value> row) {
  auto [sel, sign] = nvfp4OctetSelectors(k, prmt, codes);
  std::array<Value, 2> out;
  for (int h = 0; h < 2; ++h)
    out[h] = arith::XOrIOp::create(
        k.b, k.loc, prmt(row[0], row[1], sel[h]),
        arith::AndIOp::create(k.b, k.loc, sign[h], k.ci(0x80808080)));
  return out;
}

/// E4M3 to bf16 by integer operations (the tile GEMM's weight operands with
/// --gpu-e4m3-integer-decode), instead of four conversions per pair
/// (cvt.rn.f16x2.e4m3x2, two f16 -> FP32, cvt.rn.bf16x2.f32), which issue
/// at a fraction of the integer rate. e4m3ScaledBF16Bits moves an E4M3
/// byte's sign to bit 15 and its 7 magnitude bits (4 exponent, 3 mantissa)
/// to bits 4-10, bf16's low exponent and high mantissa bits: the bf16
/// number e4m3(byte) * 2^-120 (exponent biases 127 and 7; E4M3 subnormals
/// 0.mmm * 2^-6 land on bf16 subnormals 0.mmm0000 * 2^-126, the same
/// factor). One `mul.rn.bf16x2` by 2^120 (kBF16x2Pow2To120) then gives
/// every finite E4M3 value exactly (a power-of-two product inside bf16's
/// normal range: 2^-9 ... 448). The NaN bytes 0x7F / 0xFF come out as
/// +-480 (1.875 * 2^8), not NaN: the decode is for weights, which the
/// loader reads as stored (a NaN weight is a corrupt checkpoint either way).
/// unittests/Codegen/Fp8KernelTest.cpp checks every byte on the host and
/// bench/gpu_conformance.py on the GPU (msac-gpu-conformance's
/// `e4m3bf16` kernel).
constexpr uint16_t e4m3ScaledBF16Bits(uint8_t byte) {
  const uint32_t x = uint32_t(byte) << 8; // as prmt places it (byte 1)
  return static_cast<uint16_t>(((x >> 4) & 0x07F0u) | (x & 0x8000u));
}
/// prmt selectors placing bytes 2p and 2p + 1 of a word in bytes 1 and 3
/// (bytes 0 and 2 from the zero `hi` operand), for pair p; the masks of
/// the shifted magnitudes and of the signs in both halves; 2^120 as bf16
/// (exponent 247) in both halves.
constexpr int32_t kE4M3PairSelectors[2] = {0x1404, 0x3424};
constexpr int32_t kE4M3MagnitudeMask = 0x07F007F0;
constexpr int32_t kE4M3SignMask = static_cast<int32_t>(0x80008000u);
constexpr int32_t kBF16x2Pow2To120 = 0x7B807B80;

/// The 4 E4M3 bytes of the i32 `word` as 2 words of e4m3ScaledBF16Bits
/// pairs (bytes 2p, 2p + 1 in word p, the first in the low half: the values
/// times 2^-120): per pair one prmt, a shift and two logic operations.
inline std::array<Value, 2> e4m3WordToScaledBF16(KB &k, const BytePermute &prmt,
                                                 Value word) {
  std::array<Value, 2> out;
  for (int p = 0; p < 2; ++p) {
    Value x = prmt(word, k.ci(0), k.ci(kE4M3PairSelectors[p]));
    Value magnitude = arith::AndIOp::create(
        k.b, k.loc, arith::ShRUIOp::create(k.b, k.loc, x, k.ci(4)),
        k.ci(kE4M3MagnitudeMask));
    out[p] = arith::OrIOp::create(
        k.b, k.loc, magnitude,
        arith::AndIOp::create(k.b, k.loc, x, k.ci(kE4M3SignMask)));
  }
  return out;
}

/// The 4 E4M3 bytes of the i32 `word` as 2 words of bf16 pairs (bytes 2p,
/// 2p + 1 in word p, the first in the low half), exact (NaN bytes give
/// +-480): e4m3WordToScaledBF16, then one mul.rn.bf16x2 by 2^120 per word
/// (GPU targets: the host lowers a bf16 product through a runtime call).
inline std::array<Value, 2> e4m3WordToBF16(KB &k, const BytePermute &prmt,
                                           Value word) {
  auto bf16x2 = VectorType::get({2}, k.b.getBF16Type());
  Value rescale =
      LLVM::BitcastOp::create(k.b, k.loc, bf16x2, k.ci(kBF16x2Pow2To120));
  std::array<Value, 2> out = e4m3WordToScaledBF16(k, prmt, word);
  for (Value &w : out)
    w = LLVM::BitcastOp::create(
        k.b, k.loc, k.i32,
        arith::MulFOp::create(k.b, k.loc,
                              LLVM::BitcastOp::create(k.b, k.loc, bf16x2, w),
                              rescale));
  return out;
}

} // namespace msac::kernels

#endif // MSAC_CODEGEN_LIB_CACHEDECODE_H
