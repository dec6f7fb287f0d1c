// Does a load that hits L2 wait behind a warp's earlier loads that go to
// HBM? The fused prologue's 2-16-token kernel issues its first chunk
// group's weight loads (4 KB per warp, before griddepcontrol.wait) and
// then the step's input rows (L2 hits: the RMSNorm before it has just
// written them); if the input's data returned only after the weights',
// the input's f16 fill would wait for the whole first group. This probe
// times, per warp (clock64), a 16-byte load of an L2-resident line issued
// after 0, 2 or 8 16-byte streaming loads per lane of HBM-resident bytes,
// with every multiprocessor busy (4 CTAs of 128 threads per SM, each warp
// doing the same); and the same bytes read by a bulk copy (the TMA unit,
// which does not go through the warps' load path) or by a warp that issued
// no streaming loads itself while the CTA's other warps did, to tell a
// queue of the warp's own loads from one of the multiprocessor's. A
// measurement probe for docs/perf.md, not part of msac.
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

/// How the hot bytes are read (kMode): 0 by each warp's lanes with
/// ld.global after its own streaming loads; 1 by a bulk copy
/// (cp.async.bulk, the TMA unit) of the warp's 512 bytes into shared
/// memory, issued by lane 0 after the warp's streaming loads and waited on
/// with an mbarrier; 2 and 3 as 0 and 1, but warp 0 of each CTA issues no
/// streaming loads and reads the hot bytes after a CTA barrier that the
/// other warps reach once theirs are issued (only warp 0's cycles are
/// recorded, from the barrier).
enum Mode { kLoad = 0, kBulk = 1, kOtherLoad = 2, kOtherBulk = 3 };

/// Each warp: `before` streaming loads per lane (4 KB per warp at 8), then
/// the hot bytes (kMode); records the cycles from the first load's issue
/// to the hot bytes' arrival in registers (and to the last streaming
/// load's data).
template <int kBefore, int kMode>
__global__ void __launch_bounds__(128)
    orderKernel(const uint4 *cold, const uint4 *hot, long long *hotCycles,
                long long *coldCycles, unsigned *out) {
  __shared__ alignas(128) uint4 staged[4][32];
  __shared__ uint64_t bars[4];
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool other = kMode == kOtherLoad || kMode == kOtherBulk;
  const bool bulk = kMode == kBulk || kMode == kOtherBulk;
  if (bulk && lane == 0) {
    mbarInit(&bars[w], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  const size_t base = size_t(warp) * 32 * 8;
  const bool streams = !other || w != 0;
  uint4 v[kBefore > 0 ? kBefore : 1];
  long long t0 = clk();
  if (streams) {
#pragma unroll
    for (int u = 0; u < kBefore; ++u)
      v[u] = load(cold + base + u * 32 + lane, true);
  }
  if (other) {
    __syncthreads();
    t0 = clk();
  }
  const uint4 *hotAt = hot + (warp % 64) * 32;
  uint4 h;
  if (bulk) {
    if (lane == 0) {
      mbarExpectTx(&bars[w], 32 * sizeof(uint4));
      bulkCopy(staged[w], hotAt, 32 * sizeof(uint4), &bars[w]);
    }
    mbarWait(&bars[w], 0);
    h = staged[w][lane];
  } else {
    h = load(hotAt + lane, false);
  }
  unsigned acc = h.x ^ h.y ^ h.z ^ h.w;
  asm volatile("" ::"r"(acc) : "memory");
  const long long t1 = clk();
  if (streams) {
#pragma unroll
    for (int u = 0; u < kBefore; ++u)
      acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
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
  static const char *const modeNames[] = {
      "ld.global", "bulk copy", "ld.global by a warp without streaming loads",
      "bulk copy by a warp without streaming loads"};
  using Kernel = void (*)(const uint4 *, const uint4 *, long long *,
                          long long *, unsigned *);
  const Kernel kernels[4][3] = {
      {orderKernel<0, kLoad>, orderKernel<2, kLoad>, orderKernel<8, kLoad>},
      {orderKernel<0, kBulk>, orderKernel<2, kBulk>, orderKernel<8, kBulk>},
      {orderKernel<0, kOtherLoad>, orderKernel<2, kOtherLoad>,
       orderKernel<8, kOtherLoad>},
      {orderKernel<0, kOtherBulk>, orderKernel<2, kOtherBulk>,
       orderKernel<8, kOtherBulk>}};
  const int befores[3] = {0, 2, 8};
  for (int mode = 0; mode < 4; ++mode)
    for (int b = 0; b < 3; ++b)
      for (int rep = 0; rep < 8; ++rep) {
        const uint4 *cp = reinterpret_cast<const uint4 *>(cold[rep % 8]);
        const uint4 *hp = reinterpret_cast<const uint4 *>(hot[0]);
        kernels[mode][b]<<<ctas, 128>>>(cp, hp, hc, cc, out);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        if (rep < 7) // the first seven touch L2 and warm up
          continue;
        CK(cudaMemcpy(h.data(), hc, warps * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(c.data(), cc, warps * 8, cudaMemcpyDeviceToHost));
        std::vector<long long> hw = h, cw = c;
        if (mode >= 2) { // only warp 0 of each CTA reads the hot bytes
          hw.clear();
          cw.clear();
          for (int i = 0; i < warps; i += 4) {
            hw.push_back(h[i]);
            cw.push_back(c[i]);
          }
        }
        std::printf("%s, %d streaming loads per lane before: hot bytes after "
                    "%lld cycles (median of %zu warps, max %lld), the "
                    "streaming loads' after %lld\n",
                    modeNames[mode], befores[b], median(hw), hw.size(),
                    *std::max_element(hw.begin(), hw.end()), median(cw));
      }
  return 0;
}
