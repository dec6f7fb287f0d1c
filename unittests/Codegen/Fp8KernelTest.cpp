//===- Fp8KernelTest.cpp - FP8 E4M3 conversions of generated kernels ------===//
//
// Part of msac.
//
// The FP8 (E4M3FN) cache conversions the kernel builder emits (KB::storeF /
// KB::loadF with an f8E4M3FN storage type, used by kv_cache_insert and the
// attention and indexer kernels) compiled for the host and compared bit for
// bit with the independent conversions of msac/Numerics/LowPrecision.h:
// every byte decoded; every E4M3 value, the midpoints between neighbours
// (ties to even), one FP32 ulp around each, the saturation range (448 and
// beyond, infinities), NaNs, signed zeros, subnormals and FP32 denormals,
// plus a sweep of FP32 bit patterns, encoded (msa-m3-spec.md §4.2; bug-cases
// family 2). And the exhaustive NVFP4 -> FP8 dequantization table: every
// E2M1 code times every non-negative E4M3 scale byte (0x00-0x7E), the FP32
// product rounded to E4M3 with saturation (§4.2 `inference.dequant`),
// through the decoders the `bsq.dequantize` kernels use.
//
// And the NVFP4 cache rows (KernelBuilder.h: storeCacheRow, the quantizer
// of kv_cache_insert; forEachCacheValue / dotCacheRow, the reads of the
// attention and indexer kernels): the hand-computed blocks of
// unittests/Nvfp4CacheCases.h byte for byte at the page layout the spec
// and docs/architecture.md give, every code x scale read back through a
// cache row, and random blocks against the recipe written here with the
// conversions of LowPrecision.h.
//
//===----------------------------------------------------------------------===//

#include "../../codegen/lib/CacheDecode.h"
#include "../../codegen/lib/KernelBuilder.h"
#include "../Nvfp4CacheCases.h"
#include "ConversionKernels.h"
#include "msac/Codegen/HostProgram.h"
#include "msac/Numerics/LowPrecision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

using namespace mlir;
using namespace msac;
using namespace msac::kernels;
using namespace msac::kernels::testing;

namespace {

using Kernel = void (*)(void **, const int64_t *);

uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// The E4M3 byte of the NVFP4 value of E2M1 `code` with E4M3 `scale`: the
/// FP32 product rounded to E4M3, saturating at +-448 (msa-m3-spec.md §4.2
/// `inference.dequant`), from LowPrecision.h's conversions.
uint8_t nvfp4ToE4M3Byte(int code, int scale) {
  return numerics::floatToE4M3(
      numerics::e2m1ToFloat(static_cast<uint8_t>(code)) *
      numerics::e4m3ToFloat(static_cast<uint8_t>(scale)));
}

/// A kernel `void NAME(void **buffers, const int64_t *scalars)` whose body
/// `emit` builds through a KB, compiled for the host like the generated
/// kernels (lowerKernelsToLLVM, emitHostSharedObject) and loaded.
class HostKernel {
public:
  HostKernel(MLIRContext &ctx, const std::string &name,
             const std::function<void(KB &)> &emit) {
    ctx.loadDialect<LLVM::LLVMDialect, scf::SCFDialect, math::MathDialect,
                    arith::ArithDialect, func::FuncDialect>();
    OpBuilder b(&ctx);
    Location loc = b.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    emitKernelFunction(b, loc, name, emit);
    if (failed(lowerKernelsToLLVM(*module))) {
      ADD_FAILURE() << "lowering " << name << " failed";
      return;
    }
    soPath = ::testing::TempDir() + "/msac-" + name + "-" +
             std::to_string(::getpid()) + ".so";
    std::string error =
        emitHostSharedObject(*module, soPath, "/usr/lib/llvm-22/bin/ld.lld");
    if (!error.empty()) {
      ADD_FAILURE() << error;
      return;
    }
    library = ::dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      ADD_FAILURE() << ::dlerror();
      return;
    }
    function = reinterpret_cast<Kernel>(::dlsym(library, name.c_str()));
  }
  ~HostKernel() {
    if (library)
      ::dlclose(library);
    if (!soPath.empty())
      ::unlink(soPath.c_str());
  }
  Kernel function = nullptr;

private:
  void *library = nullptr;
  std::string soPath;
};

TEST(Fp8KernelTest, GeneratedConversionsMatchLowPrecision) {
  MLIRContext ctx;
  HostKernel compiled(ctx, "fp8", emitFp8Kernel);
  Kernel kernel = compiled.function;
  ASSERT_NE(kernel, nullptr);

  std::vector<float> inputs = fp8EncodeInputs();
  std::vector<uint8_t> out(inputs.size()), bytes(256), table(16 * 0x7F);
  std::vector<float> decoded(256), decoded2(256);
  for (int i = 0; i < 256; ++i)
    bytes[i] = static_cast<uint8_t>(i);
  void *buffers[] = {inputs.data(),  out.data(),   bytes.data(),
                     decoded.data(), table.data(), decoded2.data()};
  const int64_t scalars[3] = {static_cast<int64_t>(inputs.size()), 0, 0};
  kernel(buffers, scalars);

  int mismatches = 0;
  for (size_t i = 0; i < inputs.size() && mismatches < 10; ++i) {
    uint8_t want = numerics::floatToE4M3(inputs[i]);
    if (out[i] != want) {
      ++mismatches;
      ADD_FAILURE() << "encode " << inputs[i] << " (0x" << std::hex
                    << floatToBits(inputs[i]) << "): got 0x" << int(out[i])
                    << ", want 0x" << int(want) << std::dec;
    }
  }
  for (int i = 0; i < 256; ++i) {
    float want = numerics::e4m3ToFloat(static_cast<uint8_t>(i));
    for (const std::vector<float> *d : {&decoded, &decoded2}) {
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan((*d)[i])) << "byte " << i;
      else
        EXPECT_EQ(floatToBits((*d)[i]), floatToBits(want)) << "byte " << i;
    }
  }
  for (int scale = 0; scale < 0x7F; ++scale)
    for (int code = 0; code < 16; ++code) {
      uint8_t want = nvfp4ToE4M3Byte(code, scale);
      EXPECT_EQ(int(table[scale * 16 + code]), int(want))
          << "E2M1 code " << code << " x E4M3 scale 0x" << std::hex << scale;
    }
}

//===----------------------------------------------------------------------===//
// NVFP4 cache rows
//===----------------------------------------------------------------------===//

/// The cache of the NVFP4 tests: 2 heads, 4-token pages, 32 channels (two
/// blocks of 16 per row), so a page is 2 x 4 x (16 + 2) = 144 bytes.
constexpr int64_t kHeads = 2, kPage = 4, kDim = 32;
constexpr int64_t kPageBytes = kHeads * kPage * (kDim / 2 + kDim / 16);

/// Row r of the tests lives at page r / 8, head (r / 4) % 2, slot r % 4.
int64_t rowPage(int64_t r) { return r / (kHeads * kPage); }
int64_t rowHead(int64_t r) { return (r / kPage) % kHeads; }
int64_t rowSlot(int64_t r) { return r % kPage; }
/// Byte offsets of row r's codes and scales, from the layout stated in
/// docs/architecture.md: per page, codes [heads, page, D/2], then scales
/// [heads, page, D/16].
int64_t codeOffset(int64_t r) {
  return rowPage(r) * kPageBytes +
         (rowHead(r) * kPage + rowSlot(r)) * (kDim / 2);
}
int64_t scaleOffset(int64_t r) {
  return rowPage(r) * kPageBytes + kHeads * kPage * (kDim / 2) +
         (rowHead(r) * kPage + rowSlot(r)) * (kDim / 16);
}

/// `nvfp4`: for r < scalars[0], stores row r of in (f32 [R, 32]) into the
/// cache (buffer 1) with storeCacheRow, unless scalars[1] is 1 (then the
/// cache is given); reads it back into out (buffer 2, f32 [R, 32]) with
/// forEachCacheValue, and dots[r] (buffer 4) = dotCacheRow(q[r], row) with
/// q (buffer 3, f32 [R, 32]).
void emitNvfp4Kernel(KB &k) {
  MLIRContext *ctx = k.b.getContext();
  ctx->loadDialect<msa::MSADialect, bsq::BSQDialect>();
  auto type =
      msa::PagedCacheType::get(ctx, kHeads, kPage, kDim,
                               bsq::NVFP4Type::get(ctx, /*globalScale=*/false));
  Value in = k.ptr(0), cache = k.ptr(1), out = k.ptr(2), q = k.ptr(3),
        dots = k.ptr(4);
  Value store = k.icmp(arith::CmpIPredicate::eq, k.scalar(1), k.c(0));
  k.loop(k.c(0), k.scalar(0), [&](Value r) {
    Value page = k.idiv(r, k.c(kHeads * kPage));
    Value head = k.irem(k.idiv(r, k.c(kPage)), k.c(kHeads));
    CacheRow row = cacheRow(k, cache, type, page, head, k.irem(r, k.c(kPage)));
    Value base = k.imul(r, k.c(kDim));
    k.ifThen(store, [&] {
      storeCacheRow(
          k, row, [&](Value i) { return k.loadF(in, k.iadd(base, i), k.f32); });
    });
    forEachCacheValue(k, row, [&](Value i, Value x) {
      k.storeF(out, k.iadd(base, i), x, k.f32);
    });
    k.storeF(dots, r, dotCacheRow(k, q, base, k.f32, row), k.f32);
  });
}

struct Nvfp4Run {
  std::vector<uint8_t> cache;
  std::vector<float> out, dots;
};
/// Runs `kernel` on rows `in` (or, with `given`, on the cache `given`).
Nvfp4Run runNvfp4(Kernel kernel, const std::vector<float> &in,
                  const std::vector<float> &q,
                  const std::vector<uint8_t> *given = nullptr) {
  const int64_t rows = static_cast<int64_t>(q.size()) / kDim;
  Nvfp4Run run;
  run.cache =
      given ? *given
            : std::vector<uint8_t>((rowPage(rows - 1) + 1) * kPageBytes, 0xAA);
  run.out.assign(q.size(), -1.0f);
  run.dots.assign(rows, -1.0f);
  void *buffers[] = {const_cast<float *>(in.data()), run.cache.data(),
                     run.out.data(), const_cast<float *>(q.data()),
                     run.dots.data()};
  const int64_t scalars[3] = {rows, given ? 1 : 0, 0};
  kernel(buffers, scalars);
  return run;
}

::testing::AssertionResult sameFloat(float got, float want) {
  if (std::isnan(want) ? std::isnan(got)
                       : floatToBits(got) == floatToBits(want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

/// sum_i q[i] * x[i] in channel order, FP32 (what dotCacheRow computes).
float dotInOrder(const float *q, const float *x) {
  float acc = 0;
  for (int64_t i = 0; i < kDim; ++i)
    acc = acc + q[i] * x[i];
  return acc;
}

TEST(Nvfp4CacheRowTest, HandComputedBlocksAtTheSpecLayout) {
  MLIRContext ctx;
  HostKernel compiled(ctx, "nvfp4", emitNvfp4Kernel);
  ASSERT_NE(compiled.function, nullptr);
  // Two cases per row of 32 channels: case c in block c % 2 of row
  // 3 * (c / 2) (rows 0, 3, 6, 9, 12 cover both heads of pages 0 and 1);
  // the rows between hold zeros, rows 13-15 of page 1 are not written.
  const auto &cases = msac::testing::nvfp4BlockCases();
  auto caseRow = [](size_t c) { return static_cast<int64_t>(c / 2) * 3; };
  const int64_t used = caseRow(cases.size() - 1) + 1;
  std::vector<float> inputs(used * kDim, 0.0f), q(used * kDim);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float &x : q)
    x = unit(rng);
  for (size_t c = 0; c < cases.size(); ++c)
    for (int i = 0; i < 16; ++i)
      inputs[caseRow(c) * kDim + (c % 2) * 16 + i] = cases[c].x[i];
  Nvfp4Run run = runNvfp4(compiled.function, inputs, q);

  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(cases[c].what);
    const int64_t r = caseRow(c), block = c % 2;
    EXPECT_EQ(int(run.cache[scaleOffset(r) + block]), int(cases[c].scale));
    for (int i = 0; i < 8; ++i) {
      int want = cases[c].codes[2 * i] | cases[c].codes[2 * i + 1] << 4;
      EXPECT_EQ(int(run.cache[codeOffset(r) + block * 8 + i]), want)
          << "byte " << i;
    }
    for (int i = 0; i < 16; ++i)
      EXPECT_TRUE(
          sameFloat(run.out[r * kDim + block * 16 + i], cases[c].read[i]))
          << "element " << i;
  }
  // Zero rows quantize to zero bytes; the rows after the last one written
  // keep the fill byte (no stray stores); every row's dot product is the
  // one of its read-back values.
  for (int64_t r = 0; r < 2 * kHeads * kPage; ++r) {
    if (r < used && r % 3 == 0)
      continue;
    const int want = r < used ? 0 : 0xAA;
    for (int64_t i = 0; i < kDim / 2; ++i)
      EXPECT_EQ(int(run.cache[codeOffset(r) + i]), want) << "row " << r;
    for (int64_t i = 0; i < kDim / 16; ++i)
      EXPECT_EQ(int(run.cache[scaleOffset(r) + i]), want) << "row " << r;
  }
  for (int64_t r = 0; r < used; ++r)
    EXPECT_TRUE(
        sameFloat(run.dots[r], dotInOrder(&q[r * kDim], &run.out[r * kDim])))
        << "row " << r;
}

TEST(Nvfp4CacheRowTest, EveryCodeTimesEveryScaleReadsAsFP8) {
  MLIRContext ctx;
  HostKernel compiled(ctx, "nvfp4", emitNvfp4Kernel);
  ASSERT_NE(compiled.function, nullptr);
  // Row s / 2, block s % 2 holds codes 0..15 with scale byte s (0x00-0x7E),
  // written directly into the cache bytes.
  const int64_t rows = 64;
  std::vector<uint8_t> cache((rowPage(rows - 1) + 1) * kPageBytes, 0);
  for (int s = 0; s < 0x7F; ++s) {
    const int64_t r = s / 2, block = s % 2;
    cache[scaleOffset(r) + block] = static_cast<uint8_t>(s);
    for (int i = 0; i < 8; ++i)
      cache[codeOffset(r) + block * 8 + i] =
          static_cast<uint8_t>(2 * i | (2 * i + 1) << 4);
  }
  std::vector<float> q(rows * kDim, 1.0f), none;
  Nvfp4Run run = runNvfp4(compiled.function, none, q, &cache);
  for (int s = 0; s < 0x7F; ++s)
    for (int code = 0; code < 16; ++code) {
      float want = numerics::e4m3ToFloat(nvfp4ToE4M3Byte(code, s));
      EXPECT_TRUE(
          sameFloat(run.out[(s / 2) * kDim + (s % 2) * 16 + code], want))
          << "E2M1 code " << code << " x E4M3 scale 0x" << std::hex << s;
    }
}

TEST(Nvfp4CacheRowTest, RandomBlocksMatchTheRecipe) {
  MLIRContext ctx;
  HostKernel compiled(ctx, "nvfp4", emitNvfp4Kernel);
  ASSERT_NE(compiled.function, nullptr);
  // BF16 values (what the insert receives) at magnitudes from 2^-14 to
  // 2^14, so that scales cover subnormals, normals and saturation.
  const int64_t rows = 256;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> in(rows * kDim), q(rows * kDim);
  for (int64_t block = 0; block < rows * kDim / 16; ++block) {
    float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 29) - 14);
    for (int64_t i = 0; i < 16; ++i) {
      float x = normal(rng) * magnitude;
      in[block * 16 + i] = numerics::bf16ToFloat(numerics::floatToBF16(x));
    }
  }
  for (float &x : q)
    x = normal(rng);
  Nvfp4Run run = runNvfp4(compiled.function, in, q);
  int mismatches = 0;
  for (int64_t r = 0; r < rows && mismatches < 10; ++r)
    for (int64_t block = 0; block < kDim / 16; ++block) {
      // The recipe (Nvfp4CacheCases.h) with LowPrecision.h's conversions.
      const float *x = &in[r * kDim + block * 16];
      float amax = 0;
      for (int i = 0; i < 16; ++i)
        amax = std::max(amax, std::fabs(x[i]));
      uint8_t scale = numerics::floatToE4M3(amax / 6.0f);
      float s = numerics::e4m3ToFloat(scale);
      if (run.cache[scaleOffset(r) + block] != scale) {
        ++mismatches;
        ADD_FAILURE() << "row " << r << " block " << block << ": scale 0x"
                      << std::hex << int(run.cache[scaleOffset(r) + block])
                      << ", want 0x" << int(scale);
      }
      for (int i = 0; i < 16; ++i) {
        uint8_t code = s == 0 ? 0 : numerics::floatToE2M1(x[i] / s);
        uint8_t byte = run.cache[codeOffset(r) + block * 8 + i / 2];
        if (((byte >> (4 * (i % 2))) & 15) != code) {
          ++mismatches;
          ADD_FAILURE() << "row " << r << " element " << block * 16 + i << " ("
                        << x[i] << ", scale " << s << "): code "
                        << ((byte >> (4 * (i % 2))) & 15) << ", want "
                        << int(code);
        }
      }
    }
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_TRUE(
        sameFloat(run.dots[r], dotInOrder(&q[r * kDim], &run.out[r * kDim])))
        << "row " << r;
}

//===----------------------------------------------------------------------===//
// NVFP4 -> bf16 decode of the GPU tensor-core kernels
//===----------------------------------------------------------------------===//

/// The body of `nvfp4bf16` on the host: prmt from arith ops.
void emitNvfp4Bf16HostKernel(KB &k) {
  emitNvfp4Bf16Kernel(k, [&](Value lo, Value hi, Value sel) {
    return emulatedPrmt(k, lo, hi, sel);
  });
}

// Every E2M1 code at every position of a 4-code quad and of an 8-code
// word (the attention kernels' decode), times every E4M3
// scale byte (0x00-0xFF: negative and NaN scales too), decoded to bf16
// through the table and the byte lookup: the bits of the reference's
// E4M3(e2m1 * scale) (msa-m3-spec.md §4.2 `inference.dequant`), which bf16
// holds exactly; NaN where the reference gives NaN.
TEST(Fp8KernelTest, Nvfp4ToBF16DecodeMatchesLowPrecision) {
  MLIRContext ctx;
  HostKernel compiled(ctx, "nvfp4bf16", emitNvfp4Bf16HostKernel);
  Kernel kernel = compiled.function;
  ASSERT_NE(kernel, nullptr);
  const std::array<int32_t, 1024> table = nvfp4BF16Table();
  std::vector<int32_t> codes, scales;
  nvfp4QuadCases(codes, scales);
  std::vector<int32_t> out(2 * codes.size()), octets(2 * codes.size());
  void *buffers[] = {const_cast<int32_t *>(table.data()), codes.data(),
                     scales.data(), out.data(), octets.data()};
  const int64_t scalars[3] = {static_cast<int64_t>(codes.size()), 0, 0};
  kernel(buffers, scalars);
  int failures = 0;
  for (size_t n = 0; n < codes.size() && failures < 20; ++n)
    for (int i = 0; i < 4; ++i) {
      const int code = (codes[n] >> (4 * i)) & 15, s = scales[n];
      const float want = numerics::e4m3ToFloat(nvfp4ToE4M3Byte(code, s));
      // The quad decode, then the 8-code decode of the same codes.
      for (const std::vector<int32_t> *words : {&out, &octets}) {
        const uint16_t got = static_cast<uint16_t>(
            uint32_t((*words)[2 * n + i / 2]) >> (16 * (i % 2)));
        const bool gotNan = (got & 0x7F80) == 0x7F80 && (got & 0x7F);
        const bool ok =
            std::isnan(want) ? gotNan : got == numerics::floatToBF16(want);
        if (!ok) {
          ++failures;
          ADD_FAILURE() << (words == &out ? "quad" : "octet") << " E2M1 code "
                        << code << " x E4M3 scale 0x" << std::hex << s
                        << ": got bf16 0x" << got << ", want " << std::dec
                        << want;
        }
      }
    }
}

//===----------------------------------------------------------------------===//
// E4M3 -> bf16 by integer operations (the tile GEMM's weight decode)
//===----------------------------------------------------------------------===//

// The bit move alone: every byte's e4m3ScaledBF16Bits, as a bf16 number
// times 2^120, is the byte's value (msa-m3-spec.md §4: E4M3FN, bias 7,
// subnormals 0.mmm * 2^-6), subnormals and both zeros included; the NaN
// bytes read 1.875 * 2^-112 (480 after the rescale).
TEST(Fp8KernelTest, E4M3ScaledBF16BitsAreTheValueTimes2ToMinus120) {
  for (int byte = 0; byte < 256; ++byte) {
    const uint16_t bits = e4m3ScaledBF16Bits(static_cast<uint8_t>(byte));
    uint32_t f32bits = uint32_t(bits) << 16;
    float scaled;
    std::memcpy(&scaled, &f32bits, sizeof scaled);
    const float want = numerics::e4m3ToFloat(static_cast<uint8_t>(byte));
    const float got = std::ldexp(scaled, 120);
    if ((byte & 0x7F) == 0x7F) {
      EXPECT_EQ(got, byte & 0x80 ? -480.0f : 480.0f) << "byte " << byte;
      continue;
    }
    EXPECT_EQ(got, want) << "byte 0x" << std::hex << byte;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << "byte " << byte;
  }
}

/// The body of `e4m3bf16` on the host: e4m3WordToScaledBF16 with prmt
/// from arith ops, then each half times 2^120 in FP32 (exact, so its high
/// 16 bits are the bf16 product; the host has no bf16 multiply without a
/// runtime call). The GPU kernel's mul.rn.bf16x2 is checked on the GPU
/// (msac-gpu-conformance).
void emitE4M3BF16HostKernel(KB &k) {
  emitE4M3BF16Kernel(k, [](KB &k, Value word) {
    std::array<Value, 2> w = e4m3WordToScaledBF16(
        k,
        [&](Value lo, Value hi, Value sel) {
          return emulatedPrmt(k, lo, hi, sel);
        },
        word);
    for (Value &v : w) {
      Value halves[2];
      for (int h = 0; h < 2; ++h) {
        Value high = k.ci(static_cast<int32_t>(0xFFFF0000u));
        Value bits =
            h ? arith::AndIOp::create(k.b, k.loc, v, high).getResult()
              : arith::ShLIOp::create(k.b, k.loc, v, k.ci(16)).getResult();
        Value f = k.mul(arith::BitcastOp::create(k.b, k.loc, k.f32, bits),
                        k.cf(std::ldexp(1.0f, 120)));
        Value r = arith::BitcastOp::create(k.b, k.loc, k.i32, f);
        halves[h] =
            h ? arith::AndIOp::create(k.b, k.loc, r, high).getResult()
              : arith::ShRUIOp::create(k.b, k.loc, r, k.ci(16)).getResult();
      }
      v = arith::OrIOp::create(k.b, k.loc, halves[0], halves[1]);
    }
    return w;
  });
}

// The generated integer decode (prmt, shift, masks) and the rescale by
// 2^120 on every byte: the bf16 bits of the byte's value, +-480 for the
// NaN bytes.
TEST(Fp8KernelTest, E4M3IntegerDecodeToBF16MatchesLowPrecision) {
  MLIRContext ctx;
  HostKernel compiled(ctx, "e4m3bf16", emitE4M3BF16HostKernel);
  Kernel kernel = compiled.function;
  ASSERT_NE(kernel, nullptr);
  std::vector<uint8_t> bytes(256);
  for (int i = 0; i < 256; ++i)
    bytes[i] = static_cast<uint8_t>(i);
  std::vector<uint16_t> out(256, 0x5555);
  void *buffers[] = {bytes.data(), out.data()};
  const int64_t scalars[3] = {0, 0, 0};
  kernel(buffers, scalars);
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(out[i], e4m3IntegerDecodeWant(static_cast<uint8_t>(i)))
        << "byte 0x" << std::hex << i;
}

/// The body of `nvfp4e4m3` on the host: prmt from arith ops.
void emitNvfp4E4M3HostKernel(KB &k) {
  emitNvfp4E4M3Kernel(k, [&](Value lo, Value hi, Value sel) {
    return emulatedPrmt(k, lo, hi, sel);
  });
}

// Every E2M1 code at every position of an 8-code word times every E4M3
// scale byte (negative and NaN scales too), decoded to E4M3 bytes through
// nvfp4E4M3Table and the byte lookups of the E4M3 indexer: the reference's
// byte E4M3(e2m1 * scale) (msa-m3-spec.md §4.2 `inference.dequant`), or
// NaN where it is NaN (the sign of a NaN may differ).
TEST(Fp8KernelTest, Nvfp4ToE4M3DecodeMatchesLowPrecision) {
  MLIRContext ctx;
  HostKernel compiled(ctx, "nvfp4e4m3", emitNvfp4E4M3HostKernel);
  Kernel kernel = compiled.function;
  ASSERT_NE(kernel, nullptr);
  const std::array<int32_t, kNvfp4E4M3TableWords> table = nvfp4E4M3Table();
  std::vector<int32_t> codes, scales;
  nvfp4QuadCases(codes, scales);
  std::vector<int32_t> out(codes.size());
  void *buffers[] = {const_cast<int32_t *>(table.data()), codes.data(),
                     scales.data(), out.data()};
  const int64_t scalars[3] = {static_cast<int64_t>(codes.size()), 0, 0};
  kernel(buffers, scalars);
  int failures = 0;
  for (size_t n = 0; n < codes.size() && failures < 20; ++n)
    for (int i = 0; i < 4; ++i) {
      const int code = (codes[n] >> (4 * i)) & 15, s = scales[n];
      const uint8_t want = nvfp4ToE4M3Byte(code, s);
      const auto got = static_cast<uint8_t>(uint32_t(out[n]) >> (8 * i));
      const bool nan = (want & 0x7F) == 0x7F;
      if (nan ? (got & 0x7F) != 0x7F : got != want) {
        ++failures;
        ADD_FAILURE() << "E2M1 code " << code << " x E4M3 scale 0x" << std::hex
                      << s << ": got E4M3 0x" << int(got) << ", want 0x"
                      << int(want);
      }
    }
}

// The tables the host dot products read packed weight codes from
// (KernelBuilder.h: weightCodeValue, hostDecodeTable) hold LowPrecision.h's
// values, bit for bit, for every E4M3 byte (the generated decoder of the
// load-time dequantization, decodeByteFloat, is checked against the same
// function in GeneratedConversionsMatchLowPrecision, so the packed and
// dequantized paths read the same values), every E2M1 code (-0 for code
// 8), and every E5M2 byte but those of exponent 31, which loadWeight reads
// as NaN (infinities included) where LowPrecision.h keeps the infinities.
TEST(Fp8KernelTest, HostWeightDecodeTablesMatchLowPrecision) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (int b = 0; b < 256; ++b) {
    SCOPED_TRACE(b);
    const float e4m3 = weightCodeValue(WeightCode::E4M3, b);
    const float want4 = numerics::e4m3ToFloat(static_cast<uint8_t>(b));
    if (std::isnan(want4))
      EXPECT_TRUE(std::isnan(e4m3));
    else
      EXPECT_EQ(bits(e4m3), bits(want4));
    const float e5m2 = weightCodeValue(WeightCode::E5M2, b);
    if (((b >> 2) & 31) == 31)
      EXPECT_TRUE(std::isnan(e5m2));
    else
      EXPECT_EQ(bits(e5m2),
                bits(numerics::e5m2ToFloat(static_cast<uint8_t>(b))));
  }
  for (int c = 0; c < 16; ++c)
    EXPECT_EQ(bits(weightCodeValue(WeightCode::E2M1, c)),
              bits(numerics::e2m1ToFloat(static_cast<uint8_t>(c))))
        << c;
  EXPECT_TRUE(std::signbit(weightCodeValue(WeightCode::E2M1, 8)));
  EXPECT_EQ(weightCodeValue(WeightCode::E4M3, 0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(weightCodeValue(WeightCode::E4M3, 0x7E), 448.0f);
}

} // namespace
