// How fast can one kernel read the one-token prologue's weights (M3 MSA
// layer: 77 heads x 128 rows x 6144 FP8 bytes = 60.6 MB) from DRAM?
// (docs/perf.md, fortieth session: the floor issue 6 measures the fused
// prologue against.) Each variant: a flush of 256 MB, then the read, every
// CTA an equal contiguous share, 16-byte non-allocating loads UNROLL deep;
// timed by CUDA events around the read (launch included) and by
// %globaltimer inside the kernel (first CTA's start to last CTA's end: no
// launch). Medians of 50. Also prints a 256 MB read's bandwidth.
//
//   nvcc -arch=sm_90a -O3 -o weight_read bench/weight_read.cu && ./weight_read
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
__device__ unsigned long long gStart, gEnd;
__device__ __forceinline__ unsigned long long now() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
template <int UNROLL>
__global__ void readAll(const uint4 *__restrict__ w, size_t n16, float *out, int timed) {
  if (timed && threadIdx.x == 0) atomicMin(&gStart, now());
  size_t per = (n16 + gridDim.x - 1) / gridDim.x;
  size_t lo = blockIdx.x * per, hi = min(n16, lo + per);
  unsigned acc = 0;
  for (size_t i = lo + threadIdx.x; i < hi; i += (size_t)blockDim.x * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      size_t j = i + (size_t)u * blockDim.x;
      if (j < hi) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                               : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(w + j));
      else v[u] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc += v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
  if (timed) { __syncthreads(); if (threadIdx.x == 0) atomicMax(&gEnd, now()); }
}
int main() {
  const size_t bytes = 77ull * 128 * 6144, n16 = bytes / 16;
  uint4 *w, *flush; float *out;
  cudaMalloc(&w, bytes); cudaMalloc(&out, 1 << 20); cudaMemset(w, 1, bytes);
  const size_t fb = 256ull << 20; cudaMalloc(&flush, fb); cudaMemset(flush, 0, fb);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  // Large-copy bandwidth: 256 MB read.
  {
    std::vector<float> ts;
    for (int it = 0; it < 20; ++it) {
      cudaEventRecord(a); readAll<8><<<sms * 8, 256>>>(flush, fb / 16, out, 0); cudaEventRecord(b);
      cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    printf("256 MB read: %.1f us, %.2f TB/s\n", ts[10] * 1e3, fb / (ts[10] * 1e-3) / 1e12);
  }
  struct V { int ctasPerSM, threads, unroll; };
  std::vector<V> vs = {{4, 128, 4}, {4, 128, 8}, {4, 256, 8}, {8, 256, 4}, {8, 256, 8}, {16, 128, 8}, {16, 256, 4}, {2, 512, 8}, {1, 1024, 8}};
  for (auto &v : vs) {
    std::vector<float> ev, gt;
    for (int it = 0; it < 60; ++it) {
      readAll<8><<<sms * 8, 256>>>(flush, fb / 16, out, 0);
      unsigned long long s0 = ~0ull, e0 = 0;
      cudaMemcpyToSymbol(gStart, &s0, 8); cudaMemcpyToSymbol(gEnd, &e0, 8);
      readAll<8><<<sms * 8, 256>>>(flush, fb / 16, out, 0);
      cudaEventRecord(a);
      int grid = sms * v.ctasPerSM;
      if (v.unroll == 4) readAll<4><<<grid, v.threads>>>(w, n16, out, 1);
      else readAll<8><<<grid, v.threads>>>(w, n16, out, 1);
      cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b);
      unsigned long long s, e; cudaMemcpyFromSymbol(&s, gStart, 8); cudaMemcpyFromSymbol(&e, gEnd, 8);
      if (it >= 10) { ev.push_back(ms * 1e3); gt.push_back((e - s) * 1e-3); }
    }
    std::sort(ev.begin(), ev.end()); std::sort(gt.begin(), gt.end());
    printf("%2d CTAs/SM x %4d threads, unroll %d: events %6.2f us, in-kernel %6.2f us (%.2f TB/s)\n",
           v.ctasPerSM, v.threads, v.unroll, ev[ev.size() / 2], gt[gt.size() / 2],
           bytes / (gt[gt.size() / 2] * 1e-6) / 1e12);
  }
  if (cudaGetLastError()) printf("CUDA error\n");
  return 0;
}
