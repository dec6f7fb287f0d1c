//===- ConversionKernels.h - Kernels of the FP8 / NVFP4 conversion tests -===//
//
// Part of msac.
//
// Test-only kernel bodies built through the kernel builder (KB) from the
// codegen library's conversions, shared by the host unit tests
// (Fp8KernelTest.cpp) and the GPU conformance bundle
// (msac-gpu-conformance, GpuConformance.cpp), which compiles the same
// bodies for an NVIDIA target so that bench/gpu_conformance.py can run them
// on the GPU against the same independent expectations.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_UNITTESTS_CODEGEN_CONVERSIONKERNELS_H
#define MSAC_UNITTESTS_CODEGEN_CONVERSIONKERNELS_H

#include "../../codegen/lib/CacheDecode.h"
#include "../../codegen/lib/KernelBuilder.h"
#include "msac/Numerics/LowPrecision.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace msac::kernels::testing {

using namespace mlir;

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// The body of `fp8`: buffers are in (f32[n]), out (f8[n]), bytes
/// (f8[256]), decoded (f32[256]), table (f8[16 * 127]), decoded2
/// (f32[256]); encodes in -> out, decodes bytes -> decoded (and decoded2,
/// through the weight dequantizer's decoder) and fills the NVFP4 -> FP8
/// table.
inline void emitFp8Kernel(KB &k) {
  OpBuilder &body = k.b;
  Location loc = k.loc;
  Type f8 = Float8E4M3FNType::get(body.getContext());
  Value in = k.ptr(0), out = k.ptr(1), bytes = k.ptr(2), decoded = k.ptr(3);
  k.loop(k.c(0), k.scalar(0),
         [&](Value i) { k.storeF(out, i, k.loadF(in, i, k.f32), f8); });
  k.loop(k.c(0), k.c(256),
         [&](Value i) { k.storeF(decoded, i, k.loadF(bytes, i, f8), k.f32); });
  // The weight dequantizer's byte decoder on the same bytes.
  Value decoded2 = k.ptr(5);
  k.loop(k.c(0), k.c(256), [&](Value i) {
    Value byte = arith::ExtUIOp::create(
        body, loc, k.i32,
        LLVM::LoadOp::create(body, loc, body.getI8Type(),
                             k.gep(bytes, i, body.getI8Type())));
    k.storeF(decoded2, i, decodeByteFloat(k, byte, f8), k.f32);
  });
  // table[scale * 16 + code] = E4M3(e2m1(code) * e4m3(scale)).
  Value table = k.ptr(4);
  k.loop(k.c(0), k.c(16 * 0x7F), [&](Value i) {
    Value i32v = arith::IndexCastOp::create(body, loc, k.i32, i);
    Value code = arith::AndIOp::create(body, loc, i32v, k.ci(15));
    Value scale = arith::ShRUIOp::create(body, loc, i32v, k.ci(4));
    Value product = k.mul(decodeE2M1(k, code), decodeByteFloat(k, scale, f8));
    k.storeF(table, i, product, f8);
  });
}

/// The FP32 inputs of the `fp8` kernel's encode: every finite E4M3
/// magnitude, the midpoints between neighbours (ties), one FP32 ulp around
/// each, both signs; the saturation range, infinities, FP32 extremes and
/// denormals, NaNs; and 200,000 random FP32 values around E4M3's exponent
/// range (fixed seed).
inline std::vector<float> fp8EncodeInputs() {
  std::vector<float> inputs;
  auto add = [&](float x) {
    inputs.push_back(x);
    inputs.push_back(-x);
  };
  for (int code = 0; code < 0x7F; ++code) {
    float v = numerics::e4m3ToFloat(static_cast<uint8_t>(code));
    add(v);
    add(std::nextafter(v, 0.0f));
    add(std::nextafter(v, 1e9f));
    float next = numerics::e4m3ToFloat(static_cast<uint8_t>(code + 1));
    if (code + 1 < 0x7F) {
      float mid = (v + next) / 2; // exact in FP32: a tie
      add(mid);
      add(std::nextafter(mid, 0.0f));
      add(std::nextafter(mid, 1e9f));
    }
  }
  for (float x : {448.0f, 450.0f, 463.99f, 464.0f, 465.0f, 480.0f, 1e6f,
                  std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), 0.0f,
                  std::ldexp(1.0f, -10), 3 * std::ldexp(1.0f, -10),
                  std::ldexp(1.0f, -6) - std::ldexp(1.0f, -30)})
    add(x);
  inputs.push_back(bitsToFloat(0x7FC00000u)); // quiet NaN
  inputs.push_back(bitsToFloat(0xFFC00001u)); // negative NaN with payload
  inputs.push_back(bitsToFloat(0x7F800001u)); // signalling NaN
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Exponents around E4M3's range, random mantissas and signs.
    uint32_t e = 100 + rng() % 40, m = rng() & 0x7FFFFF, s = rng() & 1;
    inputs.push_back(bitsToFloat((s << 31) | (e << 23) | m));
  }
  return inputs;
}

/// prmt.b32 in its default mode, from arith ops (the GPU kernels emit
/// nvvm.prmt): byte i of the result is byte (sel >> 4i) & 7 of {hi, lo}.
inline Value emulatedPrmt(KB &k, Value lo, Value hi, Value sel) {
  OpBuilder &b = k.b;
  Location loc = k.loc;
  auto c64 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value pool = arith::OrIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, k.i64, lo),
      arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, k.i64, hi),
                            c64(32)));
  Value sel64 = arith::ExtUIOp::create(b, loc, k.i64, sel);
  Value out = c64(0);
  for (int64_t i = 0; i < 4; ++i) {
    Value idx = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, sel64, c64(4 * i)), c64(7));
    Value byte = arith::AndIOp::create(
        b, loc,
        arith::ShRUIOp::create(b, loc, pool,
                               arith::MulIOp::create(b, loc, idx, c64(8))),
        c64(0xFF));
    out = arith::OrIOp::create(b, loc, out,
                               arith::ShLIOp::create(b, loc, byte, c64(8 * i)));
  }
  return arith::TruncIOp::create(b, loc, k.i32, out);
}

/// The 8-code word codes[i] | codes[i + 1] << 16 of two 4-code quads
/// (i32 buffer `codes`, codes in bits 0-15).
inline Value nvfp4OctetOfQuads(KB &k, Value codes, Value i) {
  auto load = [&](Value at) -> Value {
    return LLVM::LoadOp::create(k.b, k.loc, k.i32, k.gep(codes, at, k.i32));
  };
  return arith::OrIOp::create(
      k.b, k.loc, load(i),
      arith::ShLIOp::create(k.b, k.loc, load(k.iadd(i, k.c(1))), k.ci(16)));
}

/// The body of `nvfp4bf16`: buffers table (i32[1024], nvfp4BF16Table),
/// codes (i32[n], 4 codes in bits 0-15), scales (i32[n], a byte each), out
/// (i32[2 n]), octets (i32[2 n]); out[2i], out[2i + 1] = nvfp4Words(codes[i],
/// the table row of scales[i]); octets[4j .. 4j + 3] = nvfp4OctetWords(
/// codes[2j] | codes[2j + 1] << 16, the table row of scales[2j]) (n even,
/// scales[2j + 1] = scales[2j]: the same words as out where the cases
/// allow it). Byte lookups by `prmt` (emulatedPrmt on the host, nvvm.prmt
/// on NVIDIA GPUs as in the attention and indexer kernels).
inline void emitNvfp4Bf16Kernel(KB &k, const BytePermute &prmt) {
  OpBuilder &b = k.b;
  Location loc = k.loc;
  Value table = k.ptr(0), codes = k.ptr(1), scales = k.ptr(2), out = k.ptr(3),
        octets = k.ptr(4);
  auto load = [&](Value base, Value i) -> Value {
    return LLVM::LoadOp::create(b, loc, k.i32, k.gep(base, i, k.i32));
  };
  auto tableRow = [&](Value i) {
    Value s =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), load(scales, i));
    SmallVector<Value> row;
    for (int64_t e = 0; e < 4; ++e)
      row.push_back(load(table, k.iadd(k.imul(s, k.c(4)), k.c(e))));
    return row;
  };
  k.loop(k.c(0), k.scalar(0), [&](Value i) {
    std::array<Value, 2> w = nvfp4Words(k, prmt, load(codes, i), tableRow(i));
    for (int64_t e = 0; e < 2; ++e)
      LLVM::StoreOp::create(
          b, loc, w[e], k.gep(out, k.iadd(k.imul(i, k.c(2)), k.c(e)), k.i32));
  });
  k.loop(k.c(0), k.idiv(k.scalar(0), k.c(2)), [&](Value j) {
    Value i = k.imul(j, k.c(2));
    Value word = nvfp4OctetOfQuads(k, codes, i);
    std::array<Value, 4> w = nvfp4OctetWords(k, prmt, word, tableRow(i));
    for (int64_t e = 0; e < 4; ++e)
      LLVM::StoreOp::create(
          b, loc, w[e],
          k.gep(octets, k.iadd(k.imul(j, k.c(4)), k.c(e)), k.i32));
  });
}

/// The body of `nvfp4e4m3`: buffers table (i32[512], nvfp4E4M3Table),
/// codes (i32[n], 4 codes in bits 0-15), scales (i32[n], a byte each), out
/// (i32[n]); out[2j], out[2j + 1] = nvfp4OctetE4M3(codes[2j] | codes[2j +
/// 1] << 16, the table row of scales[2j]) (n even, scales[2j + 1] =
/// scales[2j]): code i of codes[m] as the E4M3 byte i of out[m]. Byte
/// lookups by `prmt` (emulatedPrmt on the host, nvvm.prmt on NVIDIA GPUs as
/// in the tensor-core indexer).
inline void emitNvfp4E4M3Kernel(KB &k, const BytePermute &prmt) {
  OpBuilder &b = k.b;
  Location loc = k.loc;
  Value table = k.ptr(0), codes = k.ptr(1), scales = k.ptr(2), out = k.ptr(3);
  auto load = [&](Value base, Value i) -> Value {
    return LLVM::LoadOp::create(b, loc, k.i32, k.gep(base, i, k.i32));
  };
  k.loop(k.c(0), k.idiv(k.scalar(0), k.c(2)), [&](Value j) {
    Value i = k.imul(j, k.c(2));
    Value word = nvfp4OctetOfQuads(k, codes, i);
    Value s =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), load(scales, i));
    SmallVector<Value> row = {load(table, k.imul(s, k.c(2))),
                              load(table, k.iadd(k.imul(s, k.c(2)), k.c(1)))};
    std::array<Value, 2> w = nvfp4OctetE4M3(k, prmt, word, row);
    for (int64_t e = 0; e < 2; ++e)
      LLVM::StoreOp::create(b, loc, w[e], k.gep(out, k.iadd(i, k.c(e)), k.i32));
  });
}

/// Decodes a word of 4 E4M3 bytes to 2 words of bf16 pairs.
using E4M3WordDecode = std::function<std::array<Value, 2>(KB &, Value)>;

/// The `e4m3bf16` kernel: the 256 E4M3 bytes 0x00-0xFF in 64 words
/// (buffer 0, byte i in byte i % 4 of word i / 4) to 128 words of bf16
/// pairs (buffer 1, byte i's value in half i % 2 of word i / 2) by
/// `decode`: the tile GEMM's integer decode (e4m3WordToBF16 with nvvm.prmt
/// on NVIDIA GPUs; on the host e4m3WordToScaledBF16 with emulatedPrmt and
/// an FP32 rescale, Fp8KernelTest.cpp's emitE4M3BF16HostKernel).
inline void emitE4M3BF16Kernel(KB &k, const E4M3WordDecode &decode) {
  Value in = k.ptr(0), out = k.ptr(1);
  k.loop(k.c(0), k.c(64), [&](Value i) {
    Value word = LLVM::LoadOp::create(k.b, k.loc, k.i32, k.gep(in, i, k.i32));
    std::array<Value, 2> w = decode(k, word);
    for (int64_t e = 0; e < 2; ++e)
      LLVM::StoreOp::create(
          k.b, k.loc, w[e],
          k.gep(out, k.iadd(k.imul(i, k.c(2)), k.c(e)), k.i32));
  });
}

/// The bf16 bits the `e4m3bf16` kernel must give for E4M3 byte `byte`: the
/// byte's value (msac/Numerics/LowPrecision.h, exact in bf16), and for the
/// NaN bytes 0x7F / 0xFF the documented +-480 (e4m3ScaledBF16Bits).
inline uint16_t e4m3IntegerDecodeWant(uint8_t byte) {
  if ((byte & 0x7F) == 0x7F)
    return byte & 0x80 ? 0xC3F0 : 0x43F0;
  return numerics::floatToBF16(numerics::e4m3ToFloat(byte));
}

/// The NVFP4 decode cases: every E4M3 scale byte (0x00-0xFF) with 32
/// quads of 4 codes, quad q holding code (q / 2 + 5 i + 8 (q % 2)) % 16 at
/// position i: every code meets every scale at every position of a quad,
/// and of an 8-code word made of quads 2j and 2j + 1 (j < 16).
inline void nvfp4QuadCases(std::vector<int32_t> &codes,
                           std::vector<int32_t> &scales) {
  for (int s = 0; s < 256; ++s)
    for (int q = 0; q < 32; ++q) {
      int32_t quad = 0;
      for (int i = 0; i < 4; ++i)
        quad |= ((q / 2 + 5 * i + 8 * (q % 2)) % 16) << (4 * i);
      codes.push_back(quad);
      scales.push_back(s);
    }
}

} // namespace msac::kernels::testing

#endif // MSAC_UNITTESTS_CODEGEN_CONVERSIONKERNELS_H
