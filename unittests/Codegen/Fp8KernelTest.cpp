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
//===----------------------------------------------------------------------===//

#include "../../codegen/lib/KernelBuilder.h"
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

namespace {

using Kernel = void (*)(void **, const int64_t *);

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Builds `void fp8(void **buffers, const int64_t *scalars)`: buffers are
/// in (f32[n]), out (f8[n]), bytes (f8[256]), decoded (f32[256]), table
/// (f8[16 * 127]); encodes in -> out, decodes bytes -> decoded and fills
/// the NVFP4 -> FP8 table. Returns the loaded function.
Kernel buildKernel(MLIRContext &ctx, void *&library, std::string &soPath) {
  ctx.loadDialect<LLVM::LLVMDialect, scf::SCFDialect, math::MathDialect,
                  arith::ArithDialect, func::FuncDialect>();
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto ptrT = LLVM::LLVMPointerType::get(&ctx);
  auto fn =
      func::FuncOp::create(b, loc, "fp8", b.getFunctionType({ptrT, ptrT}, {}));
  Block *entry = fn.addEntryBlock();
  OpBuilder body(entry, entry->end());
  KB k(body, loc, entry->getArgument(0), entry->getArgument(1));
  k.entry = entry;
  Type f8 = Float8E4M3FNType::get(&ctx);
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
  func::ReturnOp::create(body, loc);
  if (failed(lowerKernelsToLLVM(*module)))
    return nullptr;
  soPath =
      ::testing::TempDir() + "/msac-fp8-" + std::to_string(::getpid()) + ".so";
  std::string error =
      emitHostSharedObject(*module, soPath, "/usr/lib/llvm-22/bin/ld.lld");
  if (!error.empty()) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  library = ::dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return nullptr;
  return reinterpret_cast<Kernel>(::dlsym(library, "fp8"));
}

TEST(Fp8KernelTest, GeneratedConversionsMatchLowPrecision) {
  MLIRContext ctx;
  void *library = nullptr;
  std::string soPath;
  Kernel kernel = buildKernel(ctx, library, soPath);
  ASSERT_NE(kernel, nullptr) << (library ? "" : ::dlerror());

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
      float product = numerics::e2m1ToFloat(static_cast<uint8_t>(code)) *
                      numerics::e4m3ToFloat(static_cast<uint8_t>(scale));
      uint8_t want = numerics::floatToE4M3(product);
      EXPECT_EQ(int(table[scale * 16 + code]), int(want))
          << "E2M1 code " << code << " x E4M3 scale 0x" << std::hex << scale;
    }
  ::dlclose(library);
  ::unlink(soPath.c_str());
}

} // namespace
