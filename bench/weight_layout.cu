// What the order of the weights in memory costs the 2-16-token fused
// prologue's stream. bench/grid_shapes.cu found the grid-wide stride of
// read_floor 0.6 us faster than the same grid with each CTA over one
// contiguous share (H100, M3's dense layer). The prologue's tensor-core
// cluster kernel (part 3) reads its weights in place: CTA r of head h's
// cluster reads, per 128-channel chunk, a 128-byte piece of each of the
// head's 128 rows (6,144 bytes apart), lane (q, i) of warp w 32 bytes of
// row 32 w + 8 t + q of tile t at byte 32 i, for chunks 0..5 of its 768
// channels. This probe reads the same bytes per CTA with the same lane
// mapping, 8 loads of 16 bytes per lane per chunk and the next chunk's
// loads issued before the current one's are consumed, from three layouts:
//   in place     row-major [rows, 6,144] (today's);
//   interleaved  row-major, but CTA r's chunk c at channel (8 c + r) x 128
//                instead of r x 768 + c x 128 (the cluster's 8 CTAs read
//                1,024 neighbouring bytes of each row at once;
//                --gpu-prologue-cluster-mma-interleave);
//   CTA-major    each CTA's 6 chunks of 16 KB one after another;
//   chunk-major  chunk c of every CTA side by side (CTA b's at (c x 576 +
//                b) x 16 KB), so that the CTAs, moving through their chunks
//                at about the same pace, read neighbouring bytes;
//   head-major   each head's 768 KB where row-major has it, inside it
//                chunk c of the cluster's 8 CTAs side by side (CTA r's at
//                (8 c + r) x 16 KB): the chunk-major order within a head,
//                whose chunk stride (128 KB) is the same for every weight;
// and read_floor's stream for reference; 576 CTAs of 128 threads in
// clusters of 8, 20 copies in one CUDA graph, median over replays. Then
// the one-token kernel's loads (part 2: a warp per weight row, 4 rows'
// loads together, each lane 8 bytes per 256 channels of the CTA's 768-byte
// piece of the row, rows 16 at a time per CTA) from the in-place and the
// chunk-major orders, as the latter would serve part 2 if the weights were
// stored for part 3. A measurement probe for docs/perf.md, not part of
// msac.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o weight_layout bench/weight_layout.cu &&
//   ./weight_layout
#include "probe_common.cuh"

constexpr int kK = 6144, kHeads = 72, kCluster = 8, kRows = 128;
constexpr int kChunks = kK / kCluster / 128, kCtas = kHeads * kCluster;
constexpr size_t kChunkBytes = size_t(kRows) * 128;

enum Layout {
  InPlace = 0,
  CtaMajor = 1,
  ChunkMajor = 2,
  Interleaved = 3,
  HeadMajor = 4
};

/// Byte offset of row `row` (of the head's 128), byte `b` (of 128) of
/// chunk c of CTA `cta`.
template <int L>
__device__ __forceinline__ size_t offsetOf(int cta, int c, int row, int b) {
  const int h = cta / kCluster, r = cta % kCluster;
  if (L == InPlace)
    return size_t(h * kRows + row) * kK + r * (kK / kCluster) + c * 128 + b;
  if (L == Interleaved)
    return size_t(h * kRows + row) * kK + (c * kCluster + r) * 128 + b;
  if (L == CtaMajor)
    return (size_t(cta) * kChunks + c) * kChunkBytes + row * 128 + b;
  if (L == HeadMajor)
    return ((size_t(h) * kChunks + c) * kCluster + r) * kChunkBytes +
           row * 128 + b;
  return (size_t(c) * kCtas + cta) * kChunkBytes + row * 128 + b;
}

template <int L>
__global__ void __launch_bounds__(128)
    layoutKernel(const uint8_t *w, unsigned *out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q = lane / 4, i = lane % 4;
  unsigned acc = 0;
  uint4 cur[8], next[8];
  auto load = [&](int c, uint4 *v) {
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        v[2 * t + h] = *reinterpret_cast<const uint4 *>(
            w +
            offsetOf<L>(blockIdx.x, c, 32 * warp + 8 * t + q, 32 * i + 16 * h));
  };
  load(0, cur);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if (c + 1 < kChunks)
      load(c + 1, next);
#pragma unroll
    for (int u = 0; u < 8; ++u)
      acc ^= cur[u].x ^ cur[u].y ^ cur[u].z ^ cur[u].w;
#pragma unroll
    for (int u = 0; u < 8; ++u)
      cur[u] = next[u];
  }
  sinkWord(acc, out);
}

/// The one-token kernel's pattern: round k of the CTA's 8 takes rows 16 k
/// + 4 w .. + 3 in warp w, lane l reading bytes 256 s + 8 l (s = 0..2) of
/// the CTA's 768-byte piece of each row, all 12 loads issued together.
template <int L>
__global__ void __launch_bounds__(128)
    oneTokenKernel(const uint8_t *w, unsigned *out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned acc = 0;
  for (int round = 0; round < kRows / 16; ++round) {
    uint2 v[12];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int s = 0; s < 3; ++s) {
        const int b = 256 * s + 8 * lane; // byte of the CTA's piece
        v[3 * j + s] = *reinterpret_cast<const uint2 *>(
            w + offsetOf<L>(blockIdx.x, b / 128, 16 * round + 4 * warp + j,
                            b % 128));
      }
#pragma unroll
    for (int u = 0; u < 12; ++u)
      acc ^= v[u].x ^ v[u].y;
  }
  sinkWord(acc, out);
}

int main() {
  const int sms = openDevice();
  const size_t bytes = size_t(kHeads) * kRows * kK, n16 = bytes / 16;
  const WeightStreams ws = weightStreams(bytes, 4);
  std::printf("%.1f MB of weights, %d CTAs of 128 threads in clusters of "
              "%d; us per launch, median of replays (min-max)\n",
              bytes / 1e6, kCtas, kCluster);
  void (*kernels[5])(const uint8_t *, unsigned *) = {
      layoutKernel<InPlace>, layoutKernel<CtaMajor>, layoutKernel<ChunkMajor>,
      layoutKernel<Interleaved>, layoutKernel<HeadMajor>};
  const char *names[5] = {"in place   ", "CTA-major  ", "chunk-major",
                          "interleaved", "head-major "};
  auto clusterLaunch = [&](void (*kernel)(const uint8_t *, unsigned *), int i) {
    launchInClusters(
        kernel, kCtas, 128, kCluster, ws.stream,
        static_cast<const uint8_t *>(ws.copies[i % ws.copies.size()]), ws.out);
  };
  for (int pass = 0; pass < 3; ++pass) {
    const GraphTime f = timeInGraph(ws.stream, 20, 30, [&](int i) {
      streamKernel<<<2 * sms, 512, 0, ws.stream>>>(
          reinterpret_cast<const uint4 *>(ws.copies[i % ws.copies.size()]), n16,
          ws.out);
    });
    std::printf("pass %d stream     : %.2f us (%.2f-%.2f), %.2f TB/s\n", pass,
                f.median, f.min, f.max, bytes / f.median / 1e6);
    for (int l = 0; l < 5; ++l) {
      const GraphTime g = timeInGraph(
          ws.stream, 20, 30, [&](int i) { clusterLaunch(kernels[l], i); });
      std::printf("pass %d %s: %.2f us (%.2f-%.2f), %.2f TB/s\n", pass,
                  names[l], g.median, g.min, g.max, bytes / g.median / 1e6);
    }
  }
  void (*oneToken[3])(const uint8_t *, unsigned *) = {
      oneTokenKernel<InPlace>, oneTokenKernel<ChunkMajor>,
      oneTokenKernel<HeadMajor>};
  const int oneTokenNames[3] = {0, 2, 4};
  for (int pass = 0; pass < 2; ++pass)
    for (int l = 0; l < 3; ++l) {
      const GraphTime g = timeInGraph(
          ws.stream, 20, 30, [&](int i) { clusterLaunch(oneToken[l], i); });
      std::printf("pass %d one token, %s: %.2f us (%.2f-%.2f), %.2f TB/s\n",
                  pass, names[oneTokenNames[l]], g.median, g.min, g.max,
                  bytes / g.median / 1e6);
    }
  return 0;
}
