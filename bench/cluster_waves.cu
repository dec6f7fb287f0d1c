// How many thread-block clusters of the prologue's part-3 shape start at
// once: clusters of 8 CTAs of 128 threads, 5 CTAs per SM at most (as
// msac's 2-16-token prologue kernel, whose 96 registers per thread allow
// 5; here 40 KB of shared memory per CTA does), each CTA holding its SM
// for a fixed time. For grids of C clusters, prints
// cudaOccupancyMaxActiveClusters and how many clusters started within
// 2 us of the first (the rest ran in a later wave). Then where M3's 72
// (dense layer) and 77 (MSA layer) clusters run, at 5 CTAs per SM and at
// the one-token kernel's 6: CTAs per SM, and clusters per GPC (the GPCs
// inferred from the SMs that host CTAs of one cluster, which CUDA places
// in one GPC). Last, the time of a launch whose CTAs each stream 96 KB
// (part 3's CTA reads 128 weight rows of 768 bytes in M3), by number of
// clusters: time proportional to the clusters is DRAM-bound, a step at
// some count a placement limit. A probe for
// docs/perf.md (issue 6), not part of msac.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o cluster_waves bench/cluster_waves.cu
//   ./cluster_waves
#include "probe_common.cuh"

namespace {
constexpr int kCluster = 8, kThreads = 128;
/// Shared memory per CTA for 5 CTAs per SM (part 3) and 6 (part 2).
constexpr int kShared = 40 * 1024, kShared6 = 36 * 1024;

__device__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Thread 0 of each CTA writes its start time (ns) and SM; the CTA then
/// holds the SM for `holdNs`.
__global__ void __launch_bounds__(kThreads)
    holdKernel(uint64_t *start, unsigned *sm, uint64_t holdNs) {
  extern __shared__ unsigned char pad[];
  const uint64_t t0 = globalTimer();
  if (threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    start[blockIdx.x] = t0;
    sm[blockIdx.x] = id;
    pad[0] = 1;
  }
  while (globalTimer() - t0 < holdNs) {
  }
}
} // namespace

namespace {
/// The launch configuration of `clusters` clusters of kCluster CTAs with
/// `shared` bytes of dynamic shared memory each.
struct ClusterLaunch {
  ClusterLaunch(int clusters, int shared) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = kCluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = shared;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cfg.gridDim = dim3(clusters * kCluster);
  }
  ClusterLaunch(const ClusterLaunch &) = delete;
  cudaLaunchAttribute attr[1] = {};
  cudaLaunchConfig_t cfg = {};
};

/// One launch of `clusters` clusters with `shared` bytes per CTA: each
/// CTA's start time and SM.
void launch(int clusters, int shared, std::vector<uint64_t> &t,
            std::vector<unsigned> &sms, uint64_t *start, unsigned *sm) {
  ClusterLaunch config(clusters, shared);
  const cudaLaunchConfig_t &cfg = config.cfg;
  CK(cudaLaunchKernelEx(&cfg, holdKernel, start, sm, uint64_t(20000)));
  CK(cudaDeviceSynchronize());
  t.resize(clusters * kCluster);
  sms.resize(clusters * kCluster);
  CK(cudaMemcpy(t.data(), start, t.size() * sizeof(uint64_t),
                cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(sms.data(), sm, sms.size() * sizeof(unsigned),
                cudaMemcpyDeviceToHost));
}

int findRoot(std::vector<int> &parent, int a) {
  while (parent[a] != a)
    a = parent[a] = parent[parent[a]];
  return a;
}
/// Each CTA reads its `perCta16` 16-byte pieces, 8 per thread in flight
/// (128 bytes, as part 3's 32 registers of weights).
__global__ void __launch_bounds__(kThreads)
    streamCtaKernel(const uint4 *w, size_t perCta16, unsigned *out) {
  extern __shared__ unsigned char pad[];
  const uint4 *base = w + blockIdx.x * perCta16;
  unsigned acc = 0;
  for (size_t i = threadIdx.x; i < perCta16; i += 8 * kThreads) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j] = i + j * kThreads < perCta16 ? base[i + j * kThreads]
                                         : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (acc == 0x12345678u)
    out[blockIdx.x] = acc + pad[0];
}
} // namespace

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int numSMs = prop.multiProcessorCount;
  std::printf("card: %s, %d SMs\n", prop.name, numSMs);
  CK(cudaFuncSetAttribute(
      holdKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  const int most = 100;
  uint64_t *start;
  unsigned *sm;
  CK(cudaMalloc(&start, most * kCluster * sizeof(uint64_t)));
  CK(cudaMalloc(&sm, most * kCluster * sizeof(unsigned)));
  for (int shared : {kShared, kShared6}) {
    ClusterLaunch one(1, shared);
    const cudaLaunchConfig_t &cfg = one.cfg;
    int maxClusters = 0;
    CK(cudaOccupancyMaxActiveClusters(&maxClusters, holdKernel, &cfg));
    std::printf("cudaOccupancyMaxActiveClusters: %d (8 CTAs of %d threads, "
                "%d B shared)\n",
                maxClusters, kThreads, shared);
  }
  std::vector<uint64_t> t;
  std::vector<unsigned> sms;
  for (int clusters : {64, 70, 72, 74, 76, 77, 78, 80, 84, 88}) {
    std::vector<int> firstWave;
    for (int rep = 0; rep < 5; ++rep) {
      launch(clusters, kShared, t, sms, start, sm);
      const uint64_t t0 = *std::min_element(t.begin(), t.end());
      int early = 0;
      for (int c = 0; c < clusters; ++c) {
        uint64_t first = t[c * kCluster];
        for (int r = 1; r < kCluster; ++r)
          first = std::min(first, t[c * kCluster + r]);
        early += first - t0 < 2000;
      }
      firstWave.push_back(early);
    }
    std::printf("%3d clusters: started in the first 2 us (5 runs):", clusters);
    for (int e : firstWave)
      std::printf(" %d", e);
    std::printf("\n");
  }
  // The GPCs: SMs that hosted CTAs of one cluster, over many launches.
  std::vector<int> parent(numSMs);
  for (int i = 0; i < numSMs; ++i)
    parent[i] = i;
  for (int shared : {kShared, kShared6})
    for (int clusters : {72, 77, 88})
      for (int rep = 0; rep < 10; ++rep) {
        launch(clusters, shared, t, sms, start, sm);
        for (int c = 0; c < clusters; ++c)
          for (int r = 1; r < kCluster; ++r)
            parent[findRoot(parent, sms[c * kCluster + r])] =
                findRoot(parent, sms[c * kCluster]);
      }
  std::vector<int> gpcOf(numSMs, -1), gpcSize;
  for (int i = 0; i < numSMs; ++i) {
    const int root = findRoot(parent, i);
    if (gpcOf[root] < 0) {
      gpcOf[root] = static_cast<int>(gpcSize.size());
      gpcSize.push_back(0);
    }
    gpcOf[i] = gpcOf[root];
    ++gpcSize[gpcOf[i]];
  }
  std::printf("inferred GPCs (SMs each):");
  for (int n : gpcSize)
    std::printf(" %d", n);
  std::printf("\n");
  for (int shared : {kShared, kShared6})
    for (int clusters : {72, 77}) {
      for (int rep = 0; rep < 3; ++rep) {
        launch(clusters, shared, t, sms, start, sm);
        std::vector<int> perSM(numSMs, 0), perGpc(gpcSize.size(), 0);
        for (unsigned id : sms)
          ++perSM[id];
        for (int c = 0; c < clusters; ++c)
          ++perGpc[gpcOf[sms[c * kCluster]]];
        std::vector<int> hist(9, 0);
        for (int n : perSM)
          ++hist[std::min(n, 8)];
        std::printf("%d clusters, %d CTAs per SM at most: SMs with 0..6 "
                    "CTAs:",
                    clusters, shared == kShared ? 5 : 6);
        for (int n = 0; n <= 6; ++n)
          std::printf(" %d", hist[n]);
        std::printf("; clusters / most that fit, per GPC:");
        for (size_t g = 0; g < gpcSize.size(); ++g)
          std::printf(" %d/%d", perGpc[g],
                      gpcSize[g] * (shared == kShared ? 5 : 6) / kCluster);
        std::printf("\n");
      }
    }
  CK(cudaFuncSetAttribute(
      streamCtaKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  const size_t perCta16 = 128 * 768 / 16;
  uint4 *w;
  CK(cudaMalloc(&w, most * kCluster * perCta16 * sizeof(uint4)));
  CK(cudaMemset(w, 1, most * kCluster * perCta16 * sizeof(uint4)));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int shared : {kShared, kShared6})
    for (int clusters : {64, 68, 72, 74, 76, 77, 80, 84, 88}) {
      ClusterLaunch config(clusters, shared);
      const cudaLaunchConfig_t &cfg = config.cfg;
      std::vector<float> us;
      for (int rep = 0; rep < 25; ++rep) {
        CK(cudaEventRecord(e0));
        CK(cudaLaunchKernelEx(&cfg, streamCtaKernel, (const uint4 *)w, perCta16,
                              sm));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep >= 5)
          us.push_back(ms * 1000);
      }
      std::sort(us.begin(), us.end());
      const double mb = clusters * kCluster * perCta16 * 16 / 1e6;
      std::printf("stream %d KB per CTA, %d per SM at most, %2d clusters "
                  "(%.1f MB): %.2f us (%.2f TB/s), single launches, median "
                  "of 20\n",
                  int(perCta16 * 16 / 1024), shared == kShared ? 5 : 6,
                  clusters, mb, us[us.size() / 2], mb / us[us.size() / 2]);
    }
  return 0;
}
