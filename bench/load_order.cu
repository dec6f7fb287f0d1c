// Does a load that hits L2 wait behind a warp's earlier loads that go to
// HBM? The fused prologue's 2-16-token kernel issues its first chunk
// group's weight loads (4 KB per warp, before griddepcontrol.wait) and
// then the step's input rows (L2 hits: the RMSNorm before it has just
// written them); if the input's data returned only after the weights',
// the input's f16 fill would wait for the whole first group. This probe
// times, per warp (clock64), a 16-byte load of an L2-resident line issued
// after 0, 2 or 8 16-byte streaming loads per lane of HBM-resident bytes,
// with every multiprocessor busy (4 CTAs of 128 threads per SM, each warp
// doing the same). A measurement probe for docs/perf.md, not part of msac.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o load_order bench/load_order.cu && ./load_order
#include "probe_common.cuh"

__device__ __forceinline__ long long clk() {
  long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}

/// A 16-byte load in program order (volatile asm: neither the compiler nor
/// ptxas moves it across the others).
__device__ __forceinline__ uint4 load(const uint4 *p, bool streaming) {
  uint4 v;
  if (streaming)
    asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  else
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  return v;
}

/// Each warp: `before` streaming loads per lane (4 KB per warp at 8), then
/// one load of the hot buffer; records the cycles from the first load's
/// issue to the hot load's data (and to the last streaming load's data).
template <int kBefore>
__global__ void __launch_bounds__(128)
    orderKernel(const uint4 *cold, const uint4 *hot, long long *hotCycles,
                long long *coldCycles, unsigned *out) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const size_t base = size_t(warp) * 32 * 8;
  uint4 v[kBefore > 0 ? kBefore : 1];
  const long long t0 = clk();
#pragma unroll
  for (int u = 0; u < kBefore; ++u)
    v[u] = load(cold + base + u * 32 + lane, true);
  uint4 h = load(hot + (warp % 64) * 32 + lane, false);
  unsigned acc = h.x ^ h.y ^ h.z ^ h.w;
  asm volatile("" ::"r"(acc) : "memory");
  const long long t1 = clk();
#pragma unroll
  for (int u = 0; u < kBefore; ++u)
    acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  asm volatile("" ::"r"(acc) : "memory");
  const long long t2 = clk();
  if (lane == 0) {
    hotCycles[warp] = t1 - t0;
    coldCycles[warp] = t2 - t0;
  }
  if (acc == 0x9e3779b9u)
    out[0] = acc;
}

int main() {
  const int sms = openDevice();
  const int ctas = 4 * sms, warps = ctas * 4;
  const size_t coldBytes = size_t(warps) * 32 * 8 * 16;
  const std::vector<uint8_t> host = lcgBytes(coldBytes, 7);
  const std::vector<uint8_t *> cold = deviceCopies(host, 8);
  const std::vector<uint8_t> hostHot = lcgBytes(64 * 32 * 16, 9);
  const std::vector<uint8_t *> hot = deviceCopies(hostHot, 1);
  long long *hc, *cc;
  unsigned *out;
  CK(cudaMalloc(&hc, warps * sizeof(long long)));
  CK(cudaMalloc(&cc, warps * sizeof(long long)));
  CK(cudaMalloc(&out, sizeof(unsigned)));
  std::vector<long long> h(warps), c(warps);
  auto median = [](std::vector<long long> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int before : {0, 2, 8})
    for (int rep = 0; rep < 8; ++rep) {
      const uint4 *cp = reinterpret_cast<const uint4 *>(cold[rep % 8]);
      const uint4 *hp = reinterpret_cast<const uint4 *>(hot[0]);
      if (before == 0)
        orderKernel<0><<<ctas, 128>>>(cp, hp, hc, cc, out);
      else if (before == 2)
        orderKernel<2><<<ctas, 128>>>(cp, hp, hc, cc, out);
      else
        orderKernel<8><<<ctas, 128>>>(cp, hp, hc, cc, out);
      CK(cudaDeviceSynchronize());
      if (rep < 7) // the first seven touch L2 and warm up
        continue;
      CK(cudaMemcpy(h.data(), hc, warps * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(c.data(), cc, warps * 8, cudaMemcpyDeviceToHost));
      std::printf("%d streaming loads per lane before: hot load's data after "
                  "%lld cycles (median of %d warps, max %lld), the streaming "
                  "loads' after %lld\n",
                  before, median(h), warps,
                  *std::max_element(h.begin(), h.end()), median(c));
    }
  return 0;
}
