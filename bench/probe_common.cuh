// Shared pieces of the GPU measurement probes in bench/ (directly or
// through prologue_probe.cuh): error checks, the streaming read kernel
// they compare against, the mbarrier and bulk-copy instructions,
// deterministic bytes, and the timing of a launch as msac-run's
// --graph-range times a range (copies of it captured in one CUDA graph,
// median over replays of the time per copy). Probes for docs/perf.md, not
// part of msac, whose kernels the compiler generates.
#ifndef MSAC_BENCH_PROBE_COMMON_CUH
#define MSAC_BENCH_PROBE_COMMON_CUH

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,          \
                   cudaGetErrorString(e));                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

/// 16-byte streaming (.cs) loads of pieces i, i + stride, ... below `end`,
/// kInFlight in flight per thread; returns their words XOR-ed (so that the
/// loads stay).
template <int kInFlight = 8>
__device__ __forceinline__ unsigned streamRange(const uint4 *w, size_t i,
                                                size_t end, size_t stride) {
  unsigned acc = 0;
  for (; i + (kInFlight - 1) * stride < end; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      v[u] = __ldcs(w + i + u * stride);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < end; i += stride) {
    uint4 v = __ldcs(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  return acc;
}

/// Stores `acc` to out[0] when it equals a constant that it never does, as
/// far as the compiler knows (the probes' loads stay).
__device__ __forceinline__ void sinkWord(unsigned acc, unsigned *out) {
  if (acc == 0x9e3779b9u)
    out[0] = acc;
}

/// Grid-stride streamRange over n16 pieces: the body of streamKernel, also
/// called by probes that find `w` first or vary the loads in flight.
template <int kInFlight = 8>
__device__ __forceinline__ void streamBody(const uint4 *w, size_t n16,
                                           unsigned *out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  sinkWord(streamRange<kInFlight>(
               w, size_t(blockIdx.x) * blockDim.x + threadIdx.x, n16, stride),
           out);
}

/// Launches kernel(args...) on `st` as `ctas` CTAs of `threads` threads in
/// thread-block clusters of `cluster` CTAs along x (1: no clusters to speak
/// of), through cudaLaunchKernelEx.
template <typename... Params, typename... Args>
void launchInClusters(void (*kernel)(Params...), int ctas, int threads,
                      int cluster, cudaStream_t st, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(threads);
  cfg.stream = st;
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

/// streamBody as a kernel (launched as 2 CTAs of 512 threads per SM by the
/// probes).
__global__ void __launch_bounds__(512)
    streamKernel(const uint4 *w, size_t n16, unsigned *out) {
  streamBody(w, n16, out);
}

/// Shared-memory address of p, and the mbarrier and bulk-copy (TMA)
/// instructions the probes' asynchronous copies complete on (PTX ISA,
/// "mbarrier" and "cp.async.bulk").
__device__ __forceinline__ unsigned smemAddr(const void *p) {
  return unsigned(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarInit(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smemAddr(bar)),
               "r"(count));
}
__device__ __forceinline__ void mbarExpectTx(uint64_t *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   smemAddr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarArrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smemAddr(bar))
               : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t *bar, unsigned parity) {
  asm volatile("{\n"
               ".reg .pred p;\n"
               "W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra W;\n"
               "}" ::"r"(smemAddr(bar)),
               "r"(parity)
               : "memory");
}
__device__ __forceinline__ void bulkCopy(void *dst, const void *src,
                                         unsigned bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];" ::"r"(smemAddr(dst)),
               "l"(src), "r"(bytes), "r"(smemAddr(bar))
               : "memory");
}

/// Selects GPU 0, prints its name and returns its multiprocessor count.
inline int openDevice() {
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("card: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  return prop.multiProcessorCount;
}

/// `copies` device copies of `bytes` (launches rotate over them so that L2,
/// 50 MB on the H200, does not hold the weights a launch reads).
inline std::vector<uint8_t *> deviceCopies(const std::vector<uint8_t> &bytes,
                                           int copies) {
  std::vector<uint8_t *> out(copies);
  for (uint8_t *&p : out) {
    CK(cudaMalloc(&p, bytes.size()));
    CK(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  return out;
}

/// `n` bytes of a linear congruential sequence from `seed`, each ANDed
/// with `mask`.
inline std::vector<uint8_t> lcgBytes(size_t n, uint32_t seed,
                                     uint8_t mask = 0xFF) {
  std::vector<uint8_t> out(n);
  for (uint8_t &b : out) {
    seed = seed * 1664525u + 1013904223u;
    b = uint8_t(seed >> 24) & mask;
  }
  return out;
}

/// What the weight-stream probes read: `copies` device copies of `bytes`
/// bytes of lcgBytes(bytes, 12345) (launches rotate over them), a result
/// word for the kernels' never-taken store, and a stream.
struct WeightStreams {
  std::vector<uint8_t *> copies;
  unsigned *out;
  cudaStream_t stream;
};
inline WeightStreams weightStreams(size_t bytes, int copies) {
  WeightStreams ws;
  ws.copies = deviceCopies(lcgBytes(bytes, 12345), copies);
  CK(cudaMalloc(&ws.out, sizeof(unsigned)));
  CK(cudaStreamCreate(&ws.stream));
  return ws;
}

/// Time per copy (us) of launch(i), i = 0..copies-1, captured in one CUDA
/// graph on `st`: median, fastest and slowest of `reps` replays after five
/// plain launches and one untimed replay.
struct GraphTime {
  double median, min, max;
};
template <typename Launch>
GraphTime timeInGraph(cudaStream_t st, int copies, int reps, Launch launch) {
  for (int i = 0; i < 5; ++i)
    launch(i);
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < copies; ++i)
    launch(i);
  CK(cudaStreamEndCapture(st, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphLaunch(exec, st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(exec, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(double(ms) * 1e3 / copies);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

#endif // MSAC_BENCH_PROBE_COMMON_CUH
