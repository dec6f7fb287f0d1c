// How many bytes a multiprocessor must keep in flight for the fused
// prologue's weight stream to reach the read floor: bench/read_floor.cu's
// kernel (grid-stride 16-byte .cs loads of 9,216 x 6,144 E4M3 bytes, the
// dense layer's 56.6 MB) with 1, 2, 4 or 8 loads in flight per thread and
// 1-4 CTAs of 128-512 threads per SM, timed as msac-run's --graph-range
// times a range (20 copies in one CUDA graph, median over replays). The
// prologue's 2-16-token kernel keeps about 4 KB per warp in flight (32
// registers per lane), 16 KB per CTA of 4 warps and 4.4 CTAs per SM on
// M3's 576 CTAs. A measurement probe for docs/perf.md, not part of msac.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o stream_depth bench/stream_depth.cu && ./stream_depth
#include "probe_common.cuh"

constexpr int kK = 6144;

/// streamBody with kInFlight loads in flight per thread.
template <int kInFlight>
__global__ void __launch_bounds__(512)
    depthKernel(const uint4 *w, size_t n16, unsigned *out) {
  streamBody<kInFlight>(w, n16, out);
}

int main() {
  const int sms = openDevice();
  constexpr int kCopies = 4, kGraphCopies = 20;
  const int rows = 9216;
  const size_t bytes = size_t(rows) * kK, n16 = bytes / 16;
  const WeightStreams ws = weightStreams(bytes, kCopies);
  const std::vector<uint8_t *> &w = ws.copies;
  unsigned *out = ws.out;
  cudaStream_t st = ws.stream;
  std::printf("%.1f MB; KB in flight per SM = CTAs x threads x loads x 16 "
              "B\n",
              bytes / 1e6);
  for (int threads : {128, 256, 512})
    for (int ctas : {1, 2, 4})
      for (int depth : {1, 2, 4, 8}) {
        if (threads * ctas > 2048)
          continue;
        auto launch = [&](int i) {
          const uint4 *p = reinterpret_cast<const uint4 *>(w[i % kCopies]);
          dim3 grid(ctas * sms);
          if (depth == 1)
            depthKernel<1><<<grid, threads, 0, st>>>(p, n16, out);
          else if (depth == 2)
            depthKernel<2><<<grid, threads, 0, st>>>(p, n16, out);
          else if (depth == 4)
            depthKernel<4><<<grid, threads, 0, st>>>(p, n16, out);
          else
            depthKernel<8><<<grid, threads, 0, st>>>(p, n16, out);
        };
        const GraphTime g = timeInGraph(st, kGraphCopies, 30, launch);
        std::printf("%d CTAs x %d threads x %d loads per SM (%d KB in "
                    "flight): %.2f us (%.2f TB/s)\n",
                    ctas, threads, depth, ctas * threads * depth * 16 / 1024,
                    g.median, bytes / g.median / 1e6);
      }
  return 0;
}
