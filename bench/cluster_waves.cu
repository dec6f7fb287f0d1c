// How many thread-block clusters of the prologue's part-3 shape start at
// once: clusters of 8 CTAs of 128 threads, 5 CTAs per SM at most (as
// msac's 2-16-token prologue kernel, whose 96 registers per thread allow
// 5; here 40 KB of shared memory per CTA does), each CTA holding its SM
// for a fixed time. For grids of C clusters, prints
// cudaOccupancyMaxActiveClusters and how many clusters started within
// 2 us of the first (the rest ran in a later wave). A probe for
// docs/perf.md (issue 6), not part of msac.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o cluster_waves bench/cluster_waves.cu && ./cluster_waves
#include "probe_common.cuh"

namespace {
constexpr int kCluster = 8, kThreads = 128;
constexpr int kShared = 40 * 1024;

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

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("card: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  CK(cudaFuncSetAttribute(holdKernel,
                          cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  const int most = 100;
  uint64_t *start;
  unsigned *sm;
  CK(cudaMalloc(&start, most * kCluster * sizeof(uint64_t)));
  CK(cudaMalloc(&sm, most * kCluster * sizeof(unsigned)));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kCluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kShared;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cfg.gridDim = dim3(kCluster);
  int maxClusters = 0;
  CK(cudaOccupancyMaxActiveClusters(&maxClusters, holdKernel, &cfg));
  std::printf("cudaOccupancyMaxActiveClusters: %d (8 CTAs of %d threads, "
              "%d B shared)\n",
              maxClusters, kThreads, kShared);
  for (int clusters : {64, 70, 72, 74, 76, 77, 78, 80, 84, 88}) {
    cfg.gridDim = dim3(clusters * kCluster);
    std::vector<int> firstWave;
    for (int rep = 0; rep < 5; ++rep) {
      CK(cudaLaunchKernelEx(&cfg, holdKernel, start, sm, uint64_t(20000)));
      CK(cudaDeviceSynchronize());
      std::vector<uint64_t> t(clusters * kCluster);
      CK(cudaMemcpy(t.data(), start, t.size() * sizeof(uint64_t),
                    cudaMemcpyDeviceToHost));
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
  return 0;
}
