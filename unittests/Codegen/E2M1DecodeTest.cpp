//===- E2M1DecodeTest.cpp - The sm_100a NVFP4 decode, exhaustively --------===//
//
// Part of msac.
//
// On targets with hardware FP4 conversions (GpuTarget::e2m1Convert:
// sm_100a) the attention and indexer kernels decode NVFP4 cache values by
// an instruction sequence instead of the table of CacheDecode.h
// (GpuKernels.cpp: nvfp4QuadsToBF16E2M1):
//
//   scale = cvt.rn.f16x2.e4m3x2 (s | s << 8)        once per 16-value block
//   h     = cvt.rn.f16x2.e2m1x2 codeByte            2 codes, low nibble first
//   p     = mul.rn.f16x2 h, scale
//   e     = cvt.rn.satfinite.e4m3x2.f16x2 p
//   word  = cvt.rn.f16x2.e4m3x2 e, f16 -> FP32, cvt.rn.bf16x2.f32
//
// No sm_100a GPU is available to this project (sm_100a is compile-checked
// only), so this test is what justifies the sequence: a C++ model of each
// instruction, written from the PTX ISA's description of `cvt` and `mul`
// (packing: the upper nibble / byte / half of the source goes to the upper
// half / byte of the destination; `.rn` nearest even; `.satfinite` to an
// E4M3 destination: NaN stays NaN, |x| > 448 gives ±448; subnormals
// supported) and from the IEEE formats, independently of the table code,
// run over every code byte (each of the 16 E2M1 codes in both nibbles) times
// every E4M3 scale byte 0x00-0xFF (negative scales, subnormal scales, the
// NaN bytes 0x7F / 0xFF), and compared with the spec's definition
// (msa-m3-spec.md §4.2, KernelBuilder.h nvfp4ToFP8Value: E4M3(e2m1 *
// scale) with the product in FP32; roundToE4M3 of CacheDecode.h and the
// conversions of LowPrecision.h) and with the table path (nvfp4BF16Table),
// bit for bit but for NaN payloads (NaN must stay NaN).
//
//===----------------------------------------------------------------------===//

#include "../../codegen/lib/CacheDecode.h"
#include "msac/Numerics/LowPrecision.h"

#include <gtest/gtest.h>

#include <array>
#include <cfenv>
#include <cmath>
#include <cstdint>

using namespace msac;
using namespace msac::kernels;

namespace {

//===----------------------------------------------------------------------===//
// Formats, as exact values (every value below is exact in double)
//===----------------------------------------------------------------------===//

/// A binary floating-point format with an implicit leading 1 for normals:
/// `manBits` fraction bits, exponent bias `bias`, `expBits` exponent bits.
struct Format {
  int expBits, manBits, bias;
};
constexpr Format kF16 = {5, 10, 15};
constexpr Format kE4M3 = {4, 3, 7};
constexpr Format kE2M1 = {2, 1, 1};
constexpr Format kBF16 = {8, 7, 127};

/// The value of the finite encoding `bits` of `f` (sign bit above the
/// exponent; the caller handles NaN and infinity encodings).
double finiteValue(uint32_t bits, Format f) {
  const uint32_t man = bits & ((1u << f.manBits) - 1);
  const int exp = int((bits >> f.manBits) & ((1u << f.expBits) - 1));
  const bool negative = (bits >> (f.manBits + f.expBits)) & 1;
  const double mag = exp == 0 ? std::ldexp(double(man), 1 - f.bias - f.manBits)
                              : std::ldexp(double(man + (1u << f.manBits)),
                                           exp - f.bias - f.manBits);
  return negative ? -mag : mag;
}

/// `x` rounded to the nearest multiple of the spacing of `f` at |x|
/// (ties to even), without an upper exponent limit: the `.rn` rounding.
double roundNearestEven(double x, Format f) {
  if (x == 0 || std::isnan(x))
    return x;
  const int minExp = 1 - f.bias; // the smallest normal exponent
  const int exp = std::max(std::ilogb(x), minExp);
  const double quantum = std::ldexp(1.0, exp - f.manBits);
  // x / quantum is exact; nearbyint rounds ties to even by default.
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
  return std::nearbyint(x / quantum) * quantum;
}

/// The encoding of `v`, a finite value of `f` (a rounding result).
uint32_t encodeExact(double v, Format f) {
  const uint32_t sign = std::signbit(v) ? 1u << (f.expBits + f.manBits) : 0;
  const double a = std::fabs(v);
  if (a == 0)
    return sign;
  const int minExp = 1 - f.bias;
  int exp = std::ilogb(a);
  uint32_t field = 0;
  if (exp < minExp) {
    exp = minExp; // subnormal: exponent field 0
  } else {
    field = uint32_t(exp + f.bias);
  }
  const double man = std::ldexp(a, f.manBits - exp);
  EXPECT_EQ(man, std::floor(man)) << "not a value of the format: " << v;
  const uint32_t fraction = uint32_t(man) & ((1u << f.manBits) - 1);
  return sign | (field << f.manBits) | fraction;
}

// f16: exponent field 31 is infinity (fraction 0) or NaN.
constexpr uint16_t kF16NaN = 0x7FFF;
bool f16IsNaN(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }
double f16Value(uint16_t h) {
  if (f16IsNaN(h))
    return NAN;
  if ((h & 0x7C00) == 0x7C00)
    return (h & 0x8000) ? -INFINITY : INFINITY;
  return finiteValue(h, kF16);
}
/// `x` rounded to f16 (nearest even; beyond the largest finite value
/// 65504 the rounding gives infinity).
uint16_t f16Round(double x) {
  if (std::isnan(x))
    return kF16NaN;
  const double r = roundNearestEven(x, kF16);
  if (std::fabs(r) > 65504)
    return std::signbit(x) ? 0xFC00 : 0x7C00;
  return uint16_t(encodeExact(r, kF16));
}

// E4M3FN: no infinities; 0x7F and 0xFF are NaN.
bool e4m3IsNaN(uint8_t b) { return (b & 0x7F) == 0x7F; }
double e4m3Val(uint8_t b) { return e4m3IsNaN(b) ? NAN : finiteValue(b, kE4M3); }

// E2M1: every code is finite.
double e2m1Val(uint8_t code) { return finiteValue(code & 15, kE2M1); }

//===----------------------------------------------------------------------===//
// The instructions (PTX ISA, `cvt` and `mul`)
//===----------------------------------------------------------------------===//

/// cvt.rn.f16x2.e2m1x2 d, a (a: .b8): d[31:16] = f16(a[7:4]), d[15:0] =
/// f16(a[3:0]); every E2M1 value is exact in f16.
uint32_t cvtF16x2E2M1x2(uint8_t a) {
  return uint32_t(f16Round(e2m1Val(a >> 4))) << 16 | f16Round(e2m1Val(a & 15));
}

/// cvt.rn.f16x2.e4m3x2 d, a (a: .b16): d[31:16] = f16(a[15:8]), d[15:0] =
/// f16(a[7:0]); every E4M3 value is exact in f16, NaN gives NaN.
uint32_t cvtF16x2E4M3x2(uint16_t a) {
  return uint32_t(f16Round(e4m3Val(uint8_t(a >> 8)))) << 16 |
         f16Round(e4m3Val(uint8_t(a)));
}

/// mul.rn.f16 on one half: the exact product (11-bit significands: exact
/// in double) rounded to f16; NaN for a NaN operand or infinity * 0.
uint16_t mulF16(uint16_t a, uint16_t b) {
  return f16Round(f16Value(a) * f16Value(b));
}
/// mul.rn.f16x2 d, a, b: the halves independently.
uint32_t mulF16x2(uint32_t a, uint32_t b) {
  return uint32_t(mulF16(uint16_t(a >> 16), uint16_t(b >> 16))) << 16 |
         mulF16(uint16_t(a), uint16_t(b));
}

/// cvt.rn.satfinite.e4m3 of one f16: NaN -> NaN (0x7F), |x| > 448 (the
/// largest E4M3 value) -> ±448, else nearest even (E4M3 subnormals kept).
uint8_t cvtE4M3SatfiniteF16(uint16_t h) {
  const double x = f16Value(h);
  if (std::isnan(x))
    return 0x7F;
  if (std::fabs(x) > 448)
    return std::signbit(x) ? 0xFE : 0x7E;
  return uint8_t(encodeExact(roundNearestEven(x, kE4M3), kE4M3));
}
/// cvt.rn.satfinite.e4m3x2.f16x2 d, a: d[15:8] = cvt(a[31:16]), d[7:0] =
/// cvt(a[15:0]).
uint16_t cvtE4M3x2F16x2(uint32_t a) {
  return uint16_t(cvtE4M3SatfiniteF16(uint16_t(a >> 16)) << 8 |
                  cvtE4M3SatfiniteF16(uint16_t(a)));
}

/// f16 -> FP32 (exact) -> bf16 by cvt.rn.bf16x2.f32 (nearest even; a NaN
/// stays NaN).
uint16_t bf16OfF16(uint16_t h) {
  const double x = f16Value(h);
  if (std::isnan(x))
    return 0x7FFF;
  return uint16_t(encodeExact(roundNearestEven(x, kBF16), kBF16));
}

/// The sequence of nvfp4QuadsToBF16E2M1 for one code byte (codes 2i, 2i + 1
/// in the low and high nibble) with E4M3 scale byte `s`: one word of bf16
/// pairs (code 2i in the low half). `product`, when given, receives the
/// f16x2 product.
uint32_t decodeByte(uint8_t codes, uint8_t s, uint32_t *product = nullptr) {
  const uint32_t scale = cvtF16x2E4M3x2(uint16_t(s | s << 8));
  const uint32_t p = mulF16x2(cvtF16x2E2M1x2(codes), scale);
  if (product)
    *product = p;
  const uint32_t widened = cvtF16x2E4M3x2(cvtE4M3x2F16x2(p));
  return uint32_t(bf16OfF16(uint16_t(widened >> 16))) << 16 |
         bf16OfF16(uint16_t(widened));
}

bool bf16IsNaN(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F); }

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

// The instruction models themselves on a few hand-checked values.
TEST(E2M1DecodeTest, InstructionModels) {
  // E2M1 codes 0x1 (0.5), 0xF (-6): f16 0x3800 and 0xC600.
  EXPECT_EQ(cvtF16x2E2M1x2(0xF1), 0xC6003800u);
  // E4M3 0x01 (2^-9, subnormal) -> f16 0x1800; 0x7E (448) -> 0x5F00; NaN.
  EXPECT_EQ(cvtF16x2E4M3x2(0x7E01), 0x5F001800u);
  EXPECT_TRUE(f16IsNaN(uint16_t(cvtF16x2E4M3x2(0x007F))));
  EXPECT_TRUE(f16IsNaN(uint16_t(cvtF16x2E4M3x2(0xFF00) >> 16)));
  // 2^-10 ties between 0 and 2^-9: to 0 (even); 1.5 * 2^-9 ties between
  // 2^-9 and 2 * 2^-9: to 0x02 (even); 464 (tie 448 / 480) and 2688
  // saturate to 448; -0 stays -0.
  EXPECT_EQ(cvtE4M3SatfiniteF16(0x1400), 0x00);
  EXPECT_EQ(cvtE4M3SatfiniteF16(0x1A00), 0x02);
  EXPECT_EQ(cvtE4M3SatfiniteF16(0x5F40), 0x7E);
  EXPECT_EQ(cvtE4M3SatfiniteF16(0xE940), 0xFE);
  EXPECT_EQ(cvtE4M3SatfiniteF16(0x8000), 0x80);
  EXPECT_EQ(cvtE4M3SatfiniteF16(kF16NaN), 0x7F);
  // 0 * NaN is NaN.
  EXPECT_TRUE(f16IsNaN(mulF16(0x0000, kF16NaN)));
  EXPECT_EQ(mulF16(0x8000, 0x3C00), 0x8000);
}

// The product of an E2M1 value and an E4M3 scale is exact in f16 (at most
// 2 + 4 significant bits, 0 or within [2^-10, 2688]: f16 normals): the
// modelled mul.rn.f16x2 equals the exact product for every code and every
// non-NaN scale, and is NaN for the NaN scales.
TEST(E2M1DecodeTest, ProductIsExactInF16) {
  for (int s = 0; s < 256; ++s)
    for (int code = 0; code < 16; ++code) {
      uint32_t p;
      decodeByte(uint8_t(code | code << 4), uint8_t(s), &p);
      const double exact = e2m1Val(uint8_t(code)) * e4m3Val(uint8_t(s));
      for (uint16_t half : {uint16_t(p), uint16_t(p >> 16)}) {
        if (std::isnan(exact)) {
          EXPECT_TRUE(f16IsNaN(half)) << code << " x 0x" << std::hex << s;
          continue;
        }
        const double got = f16Value(half);
        EXPECT_EQ(got, exact) << code << " x 0x" << std::hex << s;
        EXPECT_EQ(std::signbit(got), std::signbit(exact))
            << code << " x 0x" << std::hex << s;
        // Never an f16 subnormal (no flush-to-zero question).
        EXPECT_TRUE(got == 0 || std::fabs(got) >= std::ldexp(1.0, -14));
      }
    }
}

// Every code byte (each E2M1 code in the low and the high nibble, next to
// every other) times every E4M3 scale byte through the sequence, against
// the spec's E4M3(e2m1 * scale) in FP32 (CacheDecode.h roundToE4M3 and
// LowPrecision.h) and against the table path's bits (nvfp4BF16Table, the
// E2M1 sign by XOR as nvfp4Words): equal bits, NaN exactly where the spec
// gives NaN.
TEST(E2M1DecodeTest, SequenceMatchesSpecForEveryCodeAndScale) {
  const std::array<int32_t, 1024> table = nvfp4BF16Table();
  int failures = 0;
  for (int s = 0; s < 256 && failures < 20; ++s)
    for (int byte = 0; byte < 256; ++byte) {
      const uint32_t word = decodeByte(uint8_t(byte), uint8_t(s));
      for (int nibble = 0; nibble < 2; ++nibble) {
        const int code = (byte >> (4 * nibble)) & 15;
        const uint16_t got = uint16_t(word >> (16 * nibble));
        // The spec: the FP32 product rounded to E4M3.
        const float product =
            numerics::e2m1ToFloat(uint8_t(code)) * e4m3Value(uint8_t(s));
        const float want = roundToE4M3(product);
        const float want2 = numerics::e4m3ToFloat(
            numerics::floatToE4M3(numerics::e2m1ToFloat(uint8_t(code)) *
                                  numerics::e4m3ToFloat(uint8_t(s))));
        // The table path: magnitude m = code & 7 of row s, sign by XOR.
        const int m = code & 7;
        const uint32_t lo = uint32_t(table[4 * s + m / 4]),
                       hi = uint32_t(table[4 * s + 2 + m / 4]);
        const uint16_t fromTable =
            uint16_t(((lo >> (8 * (m % 4))) & 0xFF) |
                     (((hi >> (8 * (m % 4))) & 0xFF) << 8)) ^
            uint16_t(code & 8 ? 0x8000 : 0);
        bool ok;
        if (std::isnan(want))
          ok = bf16IsNaN(got) && std::isnan(want2) && bf16IsNaN(fromTable);
        else
          ok = got == exactBF16Bits(want) &&
               got == numerics::floatToBF16(want2) && got == fromTable;
        if (!ok && ++failures <= 20)
          ADD_FAILURE() << "E2M1 code " << code << " (nibble " << nibble
                        << ") x E4M3 scale 0x" << std::hex << s
                        << ": got bf16 0x" << got << ", table 0x" << fromTable
                        << ", want " << std::dec << want;
      }
    }
  EXPECT_EQ(failures, 0);
}

// queryWordsToF16's range test and scaling on every bf16 pattern: the test
// fires exactly for the values whose f16 conversion is not finite (|v| at
// least halfway from f16's largest finite value to 2^16, Inf, NaN;
// LowPrecision.h's decoders), and for every exponent field that fires,
// dividing by 2^(e - kF16QueryShiftBase) leaves every value of that or a
// smaller exponent finite in f16 and the field's smallest value at 2^14
// or more.
TEST(E2M1DecodeTest, QueryRangeTestMatchesF16Overflow) {
  const float f16Max = numerics::f16ToFloat(0x7BFF);
  // Nearest even rounds to infinity from halfway to 2^16 up.
  const float overflowFrom = f16Max + std::ldexp(1.0f, 4);
  int failures = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = numerics::bf16ToFloat(uint16_t(h));
    const bool overflows = !std::isfinite(v) || std::fabs(v) >= overflowFrom;
    if (bf16OverflowsF16(uint16_t(h)) != overflows && ++failures <= 10)
      ADD_FAILURE() << "bf16 0x" << std::hex << h << std::dec << " (" << v
                    << "): test " << bf16OverflowsF16(uint16_t(h))
                    << ", overflows " << overflows;
  }
  EXPECT_EQ(failures, 0);
  // Every finite exponent field (a warp with an Inf or NaN query and
  // otherwise small values takes the shift of its largest finite one).
  for (int e = 0; e < 255; ++e) {
    const int shift = f16QueryShift(e);
    // The largest and the smallest bf16 magnitude with exponent field e.
    const float largest = std::ldexp(2.0f - std::ldexp(1.0f, -7), e - 127);
    EXPECT_LT(std::ldexp(largest, -shift), overflowFrom)
        << "exponent field " << e;
    EXPECT_GE(shift, 0) << "exponent field " << e;
    if (e >= 143)
      EXPECT_GE(std::ldexp(1.0f, e - 127 - shift), std::ldexp(1.0f, 14))
          << "exponent field " << e;
    if (e <= kF16QueryShiftBase) // values below 2^15 are left as they are
      EXPECT_EQ(shift, 0) << "exponent field " << e;
  }
}

// rowsDot's f16 rows (f16RowShift): for every largest exponent field e of
// a row, the scaled row does not overflow f16, its largest value lies in
// [2^14, 2^15) unless the clamp applies, every bf16 value of exponent field
// e - 28 .. e scales to an f16 normal number (an exact conversion), and
// 2^s and 2^-s are normal FP32 numbers.
TEST(E2M1DecodeTest, RowShiftKeepsRowsInF16) {
  const float overflowFrom = numerics::f16ToFloat(0x7BFF) + std::ldexp(1.0f, 4);
  for (int e = 0; e < 255; ++e) {
    const int s = f16RowShift(e);
    const float largest = std::ldexp(2.0f - std::ldexp(1.0f, -7), e - 127);
    EXPECT_LT(std::ldexp(largest, s), overflowFrom) << "exponent field " << e;
    EXPECT_TRUE(std::isnormal(std::ldexp(1.0f, s)) &&
                std::isnormal(std::ldexp(1.0f, -s)))
        << "exponent field " << e;
    if (s == kF16RowShiftMax || s == -kF16RowShiftMax)
      continue;
    EXPECT_GE(std::ldexp(1.0f, e - 127 + s), std::ldexp(1.0f, 14))
        << "exponent field " << e;
    EXPECT_LT(std::ldexp(largest, s), std::ldexp(1.0f, 15))
        << "exponent field " << e;
    for (int ev = std::max(1, e - 28); ev <= e; ++ev)
      EXPECT_GE(std::ldexp(1.0f, ev - 127 + s), std::ldexp(1.0f, -14))
          << "exponent fields " << e << ", " << ev;
  }
  // Only rows below 2^-112 reach the clamp.
  EXPECT_EQ(f16RowShift(15), 126);
  EXPECT_EQ(f16RowShift(16), 125);
  EXPECT_EQ(f16RowShift(255), -114);
}

// The f16 table of the tensor-core kernels (nvfp4F16Table): for every
// E4M3 scale byte and E2M1 magnitude, its f16 bits (LowPrecision.h's
// f16ToFloat) equal the spec's E4M3(e2m1 * scale), NaN exactly where the
// spec gives NaN, and the bf16 table's value at the same place: the two
// operand types read the same numbers.
TEST(E2M1DecodeTest, F16TableHoldsTheSameValuesAsTheBF16Table) {
  const std::array<int32_t, 1024> f16 = nvfp4F16Table(),
                                  bf16 = nvfp4BF16Table();
  auto bits = [](const std::array<int32_t, 1024> &t, int s, int m) {
    const uint32_t lo = uint32_t(t[4 * s + m / 4]),
                   hi = uint32_t(t[4 * s + 2 + m / 4]);
    return uint16_t(((lo >> (8 * (m % 4))) & 0xFF) |
                    (((hi >> (8 * (m % 4))) & 0xFF) << 8));
  };
  int failures = 0;
  for (int s = 0; s < 256; ++s)
    for (int m = 0; m < 8; ++m) {
      const float want = numerics::e4m3ToFloat(
          numerics::floatToE4M3(numerics::e2m1ToFloat(uint8_t(m)) *
                                numerics::e4m3ToFloat(uint8_t(s))));
      const float got = numerics::f16ToFloat(bits(f16, s, m));
      const float other = numerics::bf16ToFloat(bits(bf16, s, m));
      const bool ok = std::isnan(want)
                          ? std::isnan(got) && std::isnan(other)
                          : got == want && other == want &&
                                std::signbit(got) == std::signbit(want);
      if (!ok && ++failures <= 20)
        ADD_FAILURE() << "E2M1 magnitude " << m << " x E4M3 scale 0x"
                      << std::hex << s << std::dec << ": f16 " << got
                      << ", bf16 " << other << ", want " << want;
    }
  EXPECT_EQ(failures, 0);
}

} // namespace
