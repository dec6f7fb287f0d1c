// What the fused prologue's input rows cost its weight stream at 1-16
// tokens. Every head's cluster of the 2-16-token kernel reads the step's
// input rows (T x 6,144 bf16 in M3), each of its 8 CTAs its 768-channel
// slice (T x 1,536 bytes, 12 loads of 16 bytes per thread at 16 tokens),
// so a dense layer's 72 clusters read 72 x T x 12,288 bytes from L2 (14.2
// MB at 16 tokens, a quarter of the 56.6 MB of weights) while the weights
// stream past. The probe: bench/read_floor.cu's streaming kernel in the
// prologue's shape (576 CTAs of 128 threads, 8 loads of 16 bytes in flight
// per thread) where every CTA first reads its slice of an L2-resident
// input of T rows into shared memory, for T = 0 (the stream alone), 1, 2,
// 4, 8 and 16, and with each cluster's input a distinct copy (no line
// read by more than one CTA, 72 x the input's bytes, which L2 may or may
// not still hold from the previous launch), timed as msac-run's
// --graph-range times a range (20 copies in one CUDA graph, median over
// replays). A second table launches the same grid in real clusters: of
// 8 (today's kernel, each CTA a 768-channel slice) and of 16, non-portable
// (two heads per cluster, each CTA a 384-channel slice of the rows both
// heads read, half the fill's bytes), to price the fiftieth session's idea of a
// cluster of 16 over two heads before any kernel change. A measurement
// probe for docs/perf.md, not part of msac.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o input_reads bench/input_reads.cu && ./input_reads
#include "probe_common.cuh"

constexpr int kK = 6144, kCluster = 8, kThreads = 128, kHeads = 72;
constexpr int kSlicePieces = kK * 2 / 16 / kCluster; // 16-byte pieces per row
constexpr int kMaxTokens = 16;

/// CTA c (rank c mod `ranks` of head c / `ranks`) copies its slice
/// (kK / `ranks` channels) of `tokens` input rows (row t at
/// x + t * kK * 2 / 16 pieces; with `perHead`, head h's rows at
/// x + h * tokens * kK * 2 / 16) into shared memory, then streams the
/// weights. `ranks` is 8 for today's kernel, 16 for a head over 16 CTAs.
template <int kInFlight = 8>
__global__ void __launch_bounds__(kThreads)
    inputThenStream(const uint4 *x, int tokens, int perHead, int ranks,
                    const uint4 *w, size_t n16, unsigned *out) {
  __shared__ uint4 fill[kMaxTokens * kSlicePieces];
  const int rank = blockIdx.x % ranks, head = blockIdx.x / ranks;
  const int slice = kK * 2 / 16 / ranks;
  const uint4 *rows = x + (perHead ? size_t(head) * tokens * (kK * 2 / 16) : 0);
  const int pieces = tokens * slice;
  for (int p = threadIdx.x; p < pieces; p += kThreads) {
    const int t = p / slice, q = p % slice;
    fill[p] = rows[size_t(t) * (kK * 2 / 16) + rank * slice + q];
  }
  __syncthreads();
  streamBody<kInFlight>(w, n16, out);
  if (pieces > 0 && fill[threadIdx.x % pieces].x == 0x9e3779b9u)
    out[0] = 1; // never, as far as the compiler knows
}

int main() {
  openDevice();
  // The dense layer's 9,216 rows, launches rotating over 4 copies.
  const size_t bytes = size_t(9216) * kK, n16 = bytes / 16;
  const WeightStreams ws = weightStreams(bytes, 4);
  const size_t inputBytes = size_t(kHeads) * kMaxTokens * kK * 2;
  uint8_t *x;
  CK(cudaMalloc(&x, inputBytes));
  CK(cudaMemset(x, 0x3c, inputBytes));
  std::printf("%.1f MB of weights, %d CTAs of %d threads; us per launch, "
              "median of replays (min-max)\n",
              bytes / 1e6, kHeads * kCluster, kThreads);
  for (int perHead : {0, 1})
    for (int tokens : {0, 1, 2, 4, 8, 16}) {
      if (perHead && tokens == 0)
        continue;
      auto launch = [&](int i) {
        inputThenStream<8><<<kHeads * kCluster, kThreads, 0, ws.stream>>>(
            reinterpret_cast<const uint4 *>(x), tokens, perHead, kCluster,
            reinterpret_cast<const uint4 *>(ws.copies[i % ws.copies.size()]),
            n16, ws.out);
      };
      // 20 copies per graph, as read_floor.
      const GraphTime g = timeInGraph(ws.stream, 20, 30, launch);
      const double inputMB =
          double(kHeads) * tokens * kK * 2 / 1e6; // read by all CTAs
      std::printf("%s T=%2d: %5.1f MB of input reads, %.2f us (%.2f-%.2f), "
                  "%.2f TB/s of weights\n",
                  perHead ? "per-head input" : "shared input  ", tokens,
                  inputMB, g.median, g.min, g.max, bytes / g.median / 1e6);
    }
  // Real clusters: 72 clusters of 8 (one head each, 768 channels per
  // CTA) against 36 clusters of 16 (two heads each; the cluster's 16 CTAs
  // split the rows' 6,144 channels, 384 each), an input copy per cluster.
  CK(cudaFuncSetAttribute(inputThenStream<8>,
                          cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int pass = 0; pass < 2; ++pass)
    for (int cluster : {8, 16})
      for (int tokens : {0, 4, 8, 16}) {
        const int ranks = cluster == 8 ? 8 : 16;
        auto launch = [&](int i) {
          launchInClusters(
              inputThenStream<8>, kHeads * kCluster, kThreads, cluster,
              ws.stream, reinterpret_cast<const uint4 *>(x), tokens, 1, ranks,
              reinterpret_cast<const uint4 *>(ws.copies[i % ws.copies.size()]),
              n16, ws.out);
        };
        const GraphTime g = timeInGraph(ws.stream, 20, 30, launch);
        std::printf("pass %d clusters of %2d, %3d channels/CTA, T=%2d: "
                    "%.2f us (%.2f-%.2f)\n",
                    pass, cluster, kK / ranks, tokens, g.median, g.min, g.max);
      }
  // Two heads per CTA (the fifty-third session's question): 288 CTAs of
  // 128 threads in 36 clusters of 8, each CTA the 768-channel slice of
  // 256 weight rows, so twice the loads in flight per thread (16) for the
  // same bytes in flight per multiprocessor, and each cluster's input
  // read once for two heads (half today's fill bytes); against today's
  // shape in the same pass.
  for (int pass = 0; pass < 2; ++pass)
    for (int heads : {1, 2})
      for (int tokens : {0, 4, 8, 16}) {
        const int ctas = kHeads * kCluster / heads;
        auto launch = [&](int i) {
          const auto *w =
              reinterpret_cast<const uint4 *>(ws.copies[i % ws.copies.size()]);
          if (heads == 1)
            launchInClusters(inputThenStream<8>, ctas, kThreads, kCluster,
                             ws.stream, reinterpret_cast<const uint4 *>(x),
                             tokens, 1, kCluster, w, n16, ws.out);
          else
            launchInClusters(inputThenStream<16>, ctas, kThreads, kCluster,
                             ws.stream, reinterpret_cast<const uint4 *>(x),
                             tokens, 1, kCluster, w, n16, ws.out);
        };
        const GraphTime g = timeInGraph(ws.stream, 20, 30, launch);
        std::printf("pass %d %d head(s) per CTA, %3d CTAs in clusters of 8, "
                    "T=%2d: %.2f us (%.2f-%.2f)\n",
                    pass, heads, ctas, tokens, g.median, g.min, g.max);
      }
  CK(cudaFree(x));
  return 0;
}
