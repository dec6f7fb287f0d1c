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

template <int kInFlight>
__global__ void __launch_bounds__(512)
    depthKernel(const uint4 *w, size_t n16, unsigned *out) {
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kInFlight - 1) * stride < n16; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      v[u] = __ldcs(w + i + u * stride);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    uint4 v = __ldcs(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) // never, as far as the compiler knows
    out[0] = acc;
}

int main() {
  const int sms = openDevice();
  constexpr int kCopies = 4, kGraphCopies = 20;
  const int rows = 9216;
  const size_t bytes = size_t(rows) * kK, n16 = bytes / 16;
  const std::vector<uint8_t> host = lcgBytes(bytes, 12345);
  const std::vector<uint8_t *> w = deviceCopies(host, kCopies);
  unsigned *out;
  CK(cudaMalloc(&out, sizeof(unsigned)));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
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
