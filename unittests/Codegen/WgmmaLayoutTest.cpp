//===- WgmmaLayoutTest.cpp - Layouts of the warpgroup-MMA GEMM ------------===//
//
// Part of msac.
//
// The layouts the wgmma tile GEMM of msa.linear relies on (WgmmaLayout.h),
// checked on the host: the 16-byte copies fill every element of a stage's
// tiles exactly once at the byte of the core-matrix layout; the descriptors
// of each k-step make the hardware's canonical no-swizzle K-major layout
// read exactly those bytes; the descriptor bits; and the accumulator
// fragment covers the 64 x 128 result once, in column pairs. The wide
// tile: 128-row A tiles copied by 256 threads, each warpgroup's
// descriptors on its 64-row strip, its shared-memory budget.
//
//===----------------------------------------------------------------------===//

#include "../../codegen/lib/WgmmaLayout.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

using namespace msac::kernels::wgmma;

namespace {

/// Copies j = 0.. of a `rows` x kChunkK tile, made by `threads` threads
/// (copy j = t, t + threads, ...), write every element of the tile exactly
/// once, copy j bytes 16 j.. in order.
void expectCopiesFillTile(int64_t rows, int64_t threads) {
  SCOPED_TRACE(rows);
  const int64_t copies = rows * kChunkK / 8;
  EXPECT_EQ(copies % threads, 0);
  std::vector<int> seen(rows * kChunkK, 0);
  for (int64_t j = 0; j < copies; ++j) {
    const int64_t r = copyRow(j), k = copyChannel(j);
    ASSERT_LT(r, rows);
    ASSERT_LT(k + 7, kChunkK);
    for (int64_t e = 0; e < 8; ++e) {
      EXPECT_EQ(tileByte(r, k + e), 16 * j + 2 * e);
      ++seen[r * kChunkK + k + e];
    }
  }
  for (int v : seen)
    EXPECT_EQ(v, 1);
}

TEST(WgmmaLayout, CopiesFillEveryElementOnce) {
  for (int64_t rows : {kTileM, kTileN})
    expectCopiesFillTile(rows, kThreads);
  EXPECT_EQ(tileByte(9, 20), 792);
}

TEST(WgmmaLayout, DescriptorsAddressTheTile) {
  // Every k-step of a chunk reads, for each row and its 16 channels, the
  // bytes the copies wrote (A and B tiles alike; B starts kABytes later).
  for (int64_t rows : {kTileM, kTileN})
    for (int64_t s = 0; s < kChunkK / 16; ++s)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t kk = 0; kk < 16; ++kk)
          ASSERT_EQ(canonicalByte(stepByte(s), kLeadingByteOffset,
                                  kStrideByteOffset, r, kk),
                    tileByte(r, 16 * s + kk))
              << "rows " << rows << " step " << s << " r " << r << " k " << kk;
  EXPECT_EQ(kABytes + kBBytes, 12288);
  EXPECT_EQ(kStages * (kABytes + kBBytes), 48 * 1024); // static smem limit
}

TEST(WgmmaLayout, DescriptorBits) {
  // LBO 128 B -> 8 in bits 16-29, SBO 512 B -> 32 in bits 32-45, no
  // swizzle, base offset 0 (the constant ptxas sees in the generated PTX).
  EXPECT_EQ(descriptorFixedBits(kLeadingByteOffset, kStrideByteOffset),
            0x0000002000080000ull);
  // The start address keeps bits 4-17 of the shared-window address.
  EXPECT_EQ(descriptor(0x9100, kLeadingByteOffset, kStrideByteOffset),
            0x0000002000080910ull);
  EXPECT_EQ(descriptor(0x49100, kLeadingByteOffset, kStrideByteOffset) & 0x3FFF,
            0x910u);
}

TEST(WgmmaLayout, AccumulatorsCoverTheTileOnce) {
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t t = 0; t < kThreads; ++t)
    for (int64_t i = 0; i < kTileN / 2; ++i) {
      const int64_t row = accumulatorRow(i, t), col = accumulatorCol(i, t);
      ASSERT_LT(row, kTileM);
      ASSERT_LT(col, kTileN);
      EXPECT_TRUE(seen.insert({row, col}).second);
      if (i % 2 == 0) {
        EXPECT_EQ(accumulatorRow(i + 1, t), row);
        EXPECT_EQ(accumulatorCol(i + 1, t), col + 1);
      }
    }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), kTileM * kTileN);
  // Spot checks from the PTX ISA's figure: thread 0 holds (0, 0), (0, 1),
  // (8, 0), (8, 1); thread 37 (warp 1, lane 5) starts at (17, 2).
  EXPECT_EQ(accumulatorRow(2, 0), 8);
  EXPECT_EQ(accumulatorCol(2, 0), 0);
  EXPECT_EQ(accumulatorRow(0, 37), 17);
  EXPECT_EQ(accumulatorCol(0, 37), 2);
  EXPECT_EQ(accumulatorCol(4, 37), 10);
}

TEST(WgmmaLayout, WideTileCopiesFillEveryElementOnce) {
  // The wide tile's A (kWideTileM rows) and B tiles, copied by
  // kWideThreads threads.
  for (int64_t rows : {kWideTileM, kTileN})
    expectCopiesFillTile(rows, kWideThreads);
  EXPECT_EQ(kWideABytes, 2 * kABytes);
}

TEST(WgmmaLayout, WideTileStripsAddressTheirRows) {
  // Warpgroup w's A descriptor starts w kABytes into the stage: its
  // 64-row canonical layout reads rows 64 w.. of the kWideTileM-row tile;
  // B (shared by both) starts kWideABytes into the stage.
  for (int64_t w = 0; w < kWideWarpgroups; ++w)
    for (int64_t s = 0; s < kChunkK / 16; ++s)
      for (int64_t r = 0; r < kTileM; ++r)
        for (int64_t kk = 0; kk < 16; ++kk)
          ASSERT_EQ(canonicalByte(stepByte(s) + w * kABytes, kLeadingByteOffset,
                                  kStrideByteOffset, r, kk),
                    tileByte(64 * w + r, 16 * s + kk))
              << "warpgroup " << w << " step " << s << " r " << r << " k "
              << kk;
  for (int64_t s = 0; s < kChunkK / 16; ++s)
    for (int64_t r = 0; r < kTileN; ++r)
      for (int64_t kk = 0; kk < 16; ++kk)
        ASSERT_EQ(canonicalByte(kWideABytes + stepByte(s), kLeadingByteOffset,
                                kStrideByteOffset, r, kk),
                  kWideABytes + tileByte(r, 16 * s + kk));
  // The accumulator rows of warp v (0..7) of the CTA, 16 v + ..., are the
  // wide tile's rows: warpgroup v / 4's strip, row 16 (v % 4) + ... in it.
  for (int64_t t = 0; t < kWideThreads; ++t)
    for (int64_t i = 0; i < kTileN / 2; ++i)
      EXPECT_EQ(64 * (t / 128) + accumulatorRow(i, t % 128),
                16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2));
}

TEST(WgmmaLayout, WideTileSharedMemory) {
  // 16 KiB stages, 96 KiB in all: two CTAs per SM fit the H200's 228 KiB
  // (1 KiB reserved per CTA), and the same bytes hold both warpgroups'
  // 48 KiB rings of the narrow tile.
  EXPECT_EQ(kWideStageBytes, 16 * 1024);
  EXPECT_EQ(kWideSharedBytes, 96 * 1024);
  EXPECT_EQ(kWideWarpgroups * kRingBytes, kWideSharedBytes);
  EXPECT_LE(kWideCtasPerSM * (kWideSharedBytes + 1024), 228 * 1024);
  // Every stage (and each warpgroup's ring) starts 16-byte aligned, as the
  // descriptors' start address (bits 4-17) needs.
  EXPECT_EQ(kWideStageBytes % 16, 0);
  EXPECT_EQ(kRingBytes % 16, 0);
}

TEST(WgmmaLayout, SwizzledCopiesFillEveryElementOnce) {
  // The 64-byte swizzled layout: every element of a rows x kChunkK tile
  // once; eight consecutive copies (one phase of a warp's 16-byte copies)
  // read two whole rows and write 128 contiguous bytes.
  for (int64_t rows : {kTileM, kWideTileM, kTileN}) {
    SCOPED_TRACE(rows);
    std::vector<int> seen(rows * kChunkK, 0);
    for (int64_t j = 0; j < rows * kCoreCols; ++j) {
      const int64_t r = swizzledCopyRow(j), k = swizzledCopyChannel(j);
      ASSERT_LT(r, rows);
      ASSERT_LT(k + 7, kChunkK);
      for (int64_t e = 0; e < 8; ++e) {
        EXPECT_EQ(swizzledTileByte(r, k + e), swizzledTileByte(r, k) + 2 * e);
        ++seen[r * kChunkK + k + e];
      }
    }
    for (int v : seen)
      EXPECT_EQ(v, 1);
    for (int64_t j0 = 0; j0 < rows * kCoreCols; j0 += 8) {
      std::set<int64_t> pieces;
      for (int64_t j = j0; j < j0 + 8; ++j) {
        EXPECT_EQ(swizzledCopyRow(j) / 2, j0 / 8);
        pieces.insert(
            swizzledTileByte(swizzledCopyRow(j), swizzledCopyChannel(j)) / 16);
      }
      EXPECT_EQ(*pieces.begin(), 16 * j0 / 16);
      EXPECT_EQ(pieces.size(), 8u);
      EXPECT_EQ(*pieces.rbegin(), 16 * j0 / 16 + 7);
    }
  }
  // Row 2 is swizzled by 1: channels 0-7 go to its second piece.
  EXPECT_EQ(swizzledTileByte(2, 0), 2 * 64 + 16);
  EXPECT_EQ(swizzledTileByte(7, 24), 7 * 64 + (3 ^ 3) * 16);
}

TEST(WgmmaLayout, SwizzledDescriptorsAddressTheTile) {
  // Every k-step's descriptor (start = stage + strip + 32 s, SBO 512,
  // 64-byte swizzle) makes the hardware read, for each row and its 16
  // channels, the bytes the copies wrote: the A tile (each wide-tile
  // warpgroup's 64-row strip at w kABytes) and B, in stages at multiples
  // of the 512-byte swizzle atom.
  EXPECT_EQ(kWideStageBytes % kSwizzleAtomBytes, 0);
  EXPECT_EQ((kABytes + kBBytes) % kSwizzleAtomBytes, 0);
  EXPECT_EQ(kRingBytes % kSwizzleAtomBytes, 0);
  EXPECT_EQ(kABytes % kSwizzleAtomBytes, 0);
  for (int64_t stage : {int64_t(0), kWideStageBytes, 5 * kWideStageBytes,
                        kRingBytes + kABytes + kBBytes})
    for (int64_t s = 0; s < kChunkK / 16; ++s) {
      for (int64_t w = 0; w < kWideWarpgroups; ++w)
        for (int64_t r = 0; r < kTileM; ++r)
          for (int64_t kk = 0; kk < 16; ++kk)
            ASSERT_EQ(
                swizzledCanonicalByte(stage + w * kABytes + swizzledStepByte(s),
                                      kSwizzleStrideByteOffset, r, kk),
                stage + swizzledTileByte(64 * w + r, 16 * s + kk))
                << "stage " << stage << " warpgroup " << w << " step " << s
                << " r " << r << " k " << kk;
      for (int64_t r = 0; r < kTileN; ++r)
        for (int64_t kk = 0; kk < 16; ++kk)
          ASSERT_EQ(
              swizzledCanonicalByte(stage + kWideABytes + swizzledStepByte(s),
                                    kSwizzleStrideByteOffset, r, kk),
              stage + kWideABytes + swizzledTileByte(r, 16 * s + kk));
    }
  // Descriptor bits: LBO 16 B -> 1, SBO 512 B -> 32, layout type 2.
  EXPECT_EQ(
      descriptorFixedBits(kSwizzleLeadingByteOffset, kSwizzleStrideByteOffset) |
          kSwizzle64Bits,
      0x8000002000010000ull);
}

} // namespace
