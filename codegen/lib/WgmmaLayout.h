//===- WgmmaLayout.h - Layouts of the warpgroup-MMA GEMM --------*- C++ -*-===//
//
// Part of msac.
//
// Private to the codegen library: the tile shape of the warpgroup-MMA GEMM
// of msa.linear (GpuKernels.cpp) and, as plain constexpr arithmetic, the
// layouts it relies on, so that a host unit test (unittests/Codegen/
// WgmmaLayoutTest.cpp) can check them against the hardware's rules without
// a GPU:
//   * the operand tiles in shared memory: both A (x, tokens x K) and B (w,
//     features x K) K-major, in the 64-byte swizzled layout of
//     wgmma.mma_async (the default) or in its no-swizzle canonical layout,
//     core matrices of 8 rows x 16 bytes (8 bf16 along K) stored as 128
//     contiguous bytes (row i at byte 16 i);
//   * the 64-bit matrix descriptors that point wgmma at them;
//   * the FP32 accumulator fragment of wgmma .m64nNk16 (which thread holds
//     which (row, column) of the 64 x N result), from the PTX ISA.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CODEGEN_LIB_WGMMALAYOUT_H
#define MSAC_CODEGEN_LIB_WGMMALAYOUT_H

#include <cstdint>

namespace msac::kernels::wgmma {

/// The CTA (one warpgroup of 128 threads) computes kTileM tokens x kTileN
/// output features per work item, looping over K in chunks of kChunkK
/// channels staged through kStages shared-memory buffers by cp.async.
constexpr int64_t kTileM = 64;
constexpr int64_t kTileN = 128;
constexpr int64_t kChunkK = 32;
constexpr int64_t kStages = 4;
constexpr int64_t kThreads = 128;
/// The wide tile (sm_90a, opt-in): kWideWarpgroups warpgroups (a CTA of
/// kWideThreads threads) compute kWideTileM = 64 kWideWarpgroups tokens x
/// kTileN features per work item, warpgroup w the 64 x kTileN strip of
/// rows 64 w..64 w + 63, all reading one B (weight) tile per chunk: half
/// the weight bytes per output of kTileM x kTileN tiles, and (64 + 128) /
/// (64 x 128) -> (128 + 128) / (128 x 128) operand bytes per FLOP, 1.5x
/// fewer. Its ring has kWideStages stages of kWideStageBytes in dynamic
/// shared memory (kWideSharedBytes), which also holds the kStages rings of
/// kTileM x kTileN tiles of both warpgroups working as independent
/// workers (steps of at most kTileM tokens), so two CTAs per SM keep the
/// occupancy of four one-warpgroup CTAs.
constexpr int64_t kWideWarpgroups = 2;
constexpr int64_t kWideThreads = kWideWarpgroups * 128;
constexpr int64_t kWideTileM = kWideWarpgroups * 64;
constexpr int64_t kWideStages = 6;
constexpr int64_t kWideCtasPerSM = 2;
/// Core matrices per row of a chunk, and the bytes of one.
constexpr int64_t kCoreCols = kChunkK / 8;
constexpr int64_t kCoreBytes = 128;
/// Bytes of the A and B tiles of one stage.
constexpr int64_t kABytes = kTileM * kChunkK * 2;
constexpr int64_t kBBytes = kTileN * kChunkK * 2;
/// The wide tile's stage: A (kWideTileM rows; warpgroup w's strip starts
/// at byte w kABytes, as tileByte places row 64 w there), then B.
constexpr int64_t kWideABytes = kWideTileM * kChunkK * 2;
constexpr int64_t kWideStageBytes = kWideABytes + kBBytes;
/// One warpgroup's ring of kStages kTileM x kTileN stages.
constexpr int64_t kRingBytes = kStages * (kABytes + kBBytes);
constexpr int64_t kWideSharedBytes = kWideStages * kWideStageBytes;
static_assert(kWideSharedBytes >= kWideWarpgroups * kRingBytes,
              "the wide ring must hold the independent warpgroups' rings");

/// Byte of element (r, k) in an operand tile of one stage: the core matrix
/// of rows 8g..8g+7 and channels 8c..8c+7 starts at byte
/// (g * kCoreCols + c) * 128.
/// Example: (r = 9, k = 20) is at (1 * 4 + 2) * 128 + 16 + 8 = 792.
constexpr int64_t tileByte(int64_t r, int64_t k) {
  return ((r / 8) * kCoreCols + k / 8) * kCoreBytes + (r % 8) * 16 +
         (k % 8) * 2;
}

/// 16-byte copy `j` of a stage's tile (thread t issues j = t, t + 128, ...)
/// fills bytes 16 j..16 j + 15 with channels copyChannel(j)..+7 of row
/// copyRow(j): a warp writes 512 contiguous bytes and reads whole 64-byte
/// pieces of 8 rows.
constexpr int64_t copyRow(int64_t j) {
  return (j / (8 * kCoreCols)) * 8 + j % 8;
}
constexpr int64_t copyChannel(int64_t j) { return ((j / 8) % kCoreCols) * 8; }

/// Leading-dimension byte offset (from a core matrix to the next along K)
/// and stride byte offset (from one 8-row group to the next) of the
/// descriptors, and the byte where k-step s (channels 16 s..16 s + 15)
/// starts in a tile.
constexpr int64_t kLeadingByteOffset = kCoreBytes;
constexpr int64_t kStrideByteOffset = kCoreCols * kCoreBytes;
constexpr int64_t stepByte(int64_t s) { return s * 2 * kCoreBytes; }

/// The byte wgmma reads for element (r, kk) (kk < 16) of a K-major operand
/// with no swizzling, given the descriptor's start byte, leading-dimension
/// and stride byte offsets: the canonical layout ((8, m), (8, 2)) with
/// strides ((16 B, SBO), (2 B, LBO)) (PTX ISA, wgmma shared memory matrix
/// layout).
constexpr int64_t canonicalByte(int64_t start, int64_t lbo, int64_t sbo,
                                int64_t r, int64_t kk) {
  return start + (r / 8) * sbo + (r % 8) * 16 + (kk / 8) * lbo + (kk % 8) * 2;
}

/// The descriptor bits that do not depend on the start address: bits 16-29
/// leading-dimension byte offset >> 4, bits 32-45 stride byte offset >> 4;
/// base offset (bits 49-51) and swizzle mode (bits 62-63) stay 0 (no
/// swizzle). The start address goes to bits 0-13 as (address & 0x3FFFF)
/// >> 4.
constexpr uint64_t descriptorFixedBits(int64_t lbo, int64_t sbo) {
  return (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32);
}
constexpr uint64_t descriptor(uint64_t address, int64_t lbo, int64_t sbo) {
  return ((address & 0x3FFFF) >> 4) | descriptorFixedBits(lbo, sbo);
}

/// The 64-byte-swizzled K-major layout (descriptor layout type 2), which
/// the GEMM uses by default: row r of a stage's tile (its kChunkK channels,
/// 64 bytes) at byte 64 r, its 16-byte piece u (channels 8 u..8 u + 7) at
/// piece u ^ ((r / 2) % 4). Eight threads copying two whole rows write 128
/// contiguous bytes (no bank conflict) and read whole 32-byte sectors,
/// which the no-swizzle layout cannot give both of (8 rows x 16 bytes per
/// 8 threads there: half of each sector read is wasted). Stage tiles must
/// start at a multiple of kSwizzleAtomBytes.
constexpr int64_t kSwizzleRowBytes = kChunkK * 2;
static_assert(kSwizzleRowBytes == 64, "one 64-byte swizzle row per chunk row");
constexpr int64_t kSwizzleAtomBytes = 8 * kSwizzleRowBytes;
constexpr int64_t kSwizzleStrideByteOffset = kSwizzleAtomBytes;
/// Leading-dimension byte offset: unused by swizzled K-major layouts (a
/// k-step's 16 channels lie in one row); 16, as is customary.
constexpr int64_t kSwizzleLeadingByteOffset = 16;
/// Layout type 2 (64-byte swizzle) in descriptor bits 62-63.
constexpr uint64_t kSwizzle64Bits = uint64_t(2) << 62;

constexpr int64_t swizzledTileByte(int64_t r, int64_t k) {
  return r * kSwizzleRowBytes + (((k / 8) ^ ((r / 2) % 4)) * 16) + (k % 8) * 2;
}
/// 16-byte copy `j` reads channels swizzledCopyChannel(j)..+7 of row
/// swizzledCopyRow(j): eight consecutive copies cover two whole rows.
constexpr int64_t swizzledCopyRow(int64_t j) { return j / kCoreCols; }
constexpr int64_t swizzledCopyChannel(int64_t j) { return (j % kCoreCols) * 8; }
/// Byte where k-step s starts, before swizzling.
constexpr int64_t swizzledStepByte(int64_t s) { return s * 32; }

/// The hardware's 64-byte swizzle of a shared-memory byte address: bits
/// 4-5 (the 16-byte piece of a 64-byte row) XOR bits 7-8 (PTX ISA, wgmma
/// shared memory layout, 64-byte swizzling; the repeating pattern is 512
/// bytes).
constexpr int64_t swizzle64(int64_t address) {
  return address ^ (((address >> 7) & 3) << 4);
}
/// The byte wgmma reads for element (r, kk) (kk < 16) of a 64-byte
/// swizzled K-major operand whose descriptor starts at `start`: rows of 64
/// bytes, 8-row groups `sbo` apart, then swizzled.
constexpr int64_t swizzledCanonicalByte(int64_t start, int64_t sbo, int64_t r,
                                        int64_t kk) {
  return swizzle64(start + (r / 8) * sbo + (r % 8) * kSwizzleRowBytes + kk * 2);
}

/// Accumulator i (0 <= i < N / 2) of thread `t` (0..127) of wgmma
/// .m64nNk16 with FP32 D holds (accumulatorRow, accumulatorCol) of the
/// 64 x N result: rows 16 (t / 32) + (t % 32) / 4 (+ 8 for i % 4 >= 2),
/// columns 8 (i / 4) + 2 (t % 4) + i % 2. Pairs (i, i + 1), i even, are
/// adjacent columns of one row.
constexpr int64_t accumulatorRow(int64_t i, int64_t t) {
  return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
}
constexpr int64_t accumulatorCol(int64_t i, int64_t t) {
  return 8 * (i / 4) + 2 * (t % 4) + i % 2;
}

} // namespace msac::kernels::wgmma

#endif // MSAC_CODEGEN_LIB_WGMMALAYOUT_H
