// Can a one-token attention prologue ride its epilogue in the projection's
// kernel? A probe: each head's 128 weight rows are read by a thread-block
// cluster of S CTAs, each over 1/S of the 6,144 channels (E4M3 weights,
// 16-byte pieces, a warp per row, the products E4M3 x bf16 in FP32 FMAs as
// msac's rowsDot computes them); the CTAs write their partial sums into the
// leader CTA's shared memory (distributed shared memory), meet at one
// cluster barrier, and the leader sums them in rank order and runs a
// per-head epilogue (RMSNorm over the head, NeoX RoPE on 64 channels, bf16
// store, E4M3 store) with no second launch. Timed as msac-run's
// --graph-range times a range (20 copies in one CUDA graph, median time per
// copy over 40 replays), next to read_floor.cu's stream of the same bytes.
// A measurement probe for docs/perf.md (twenty-ninth session), not part of
// msac, whose kernels the compiler generates.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o cluster_prologue bench/cluster_prologue.cu
//   ./cluster_prologue
#include "prologue_probe.cuh"

#include <cooperative_groups.h>

#include <type_traits>

namespace cg = cooperative_groups;

constexpr int kK = 6144;          // M3's hidden size: bytes per E4M3 weight row
constexpr int kHead = kProbeHead; // rows (features) per head

// One cluster of S CTAs of W warps per head. Rank r reads channels
// [r K / S, (r + 1) K / S) of the head's 128 rows: a warp per row, P-byte
// pieces (8 or 16), Rows rows' loads issued together. Epi: the leader's
// epilogue (else it stores the sums).
template <int S, int W, int P, int Rows, int MinCtas, bool Epi>
__global__ void __launch_bounds__(W * 32, MinCtas)
    clusterKernel(const uint8_t *w, const __nv_bfloat16 *x, const float *gamma,
                  const float2 *rope, __nv_bfloat16 *q, uint8_t *cache,
                  int qHeads) {
  constexpr int kSlice = kK / S, kStep = 32 * P, kSteps = kSlice / kStep;
  static_assert(kSteps * kStep == kSlice, "slice not a whole warp step");
  static_assert(kHead % (W * Rows) == 0, "rows not a whole round");
  __shared__ float partial[S][kHead];
  __shared__ float red[4];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int head = blockIdx.x / S;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  // The lane's x: P bf16 values per step (P / 2 words).
  unsigned xw[kSteps][P / 2];
  const unsigned *xs =
      reinterpret_cast<const unsigned *>(x + rank * kSlice + lane * P);
#pragma unroll
  for (int j = 0; j < kSteps; ++j)
#pragma unroll
    for (int e = 0; e < P / 2; ++e)
      xw[j][e] = xs[j * kStep / 2 + e];
  float *leader = cluster.map_shared_rank(&partial[0][0], 0);
  const uint8_t *base =
      w + (size_t(head) * kHead) * kK + rank * kSlice + lane * P;
  for (int r0 = warp; r0 < kHead; r0 += W * Rows) {
    float sum[Rows];
    using Piece = typename std::conditional<P == 16, uint4, uint2>::type;
    Piece a[Rows][kSteps];
#pragma unroll
    for (int i = 0; i < Rows; ++i)
#pragma unroll
      for (int j = 0; j < kSteps; ++j)
        a[i][j] = __ldcs(reinterpret_cast<const Piece *>(
            base + size_t(r0 + i * W) * kK + j * kStep));
    warpRowSums(a, xw, sum);
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < Rows; ++i)
        leader[rank * kHead + r0 + i * W] = sum[i];
  }
  cluster.sync();
  if (rank != 0 || threadIdx.x >= kHead)
    return;
  const int f = threadIdx.x;
  float v = 0;
#pragma unroll
  for (int i = 0; i < S; ++i)
    v += partial[i][f];
  if (!Epi) {
    q[size_t(head) * kHead + f] = __float2bfloat16(v);
    return;
  }
  headEpilogue(v, &partial[0][0], red, gamma, rope, q, cache, head, qHeads);
}

int main() {
  const int sms = openDevice();
  constexpr int kCopies = 4, kGraphCopies = 20, kMaxHeads = 77;
  const ProbeBuffers pb = probeBuffers(kMaxHeads, kHead, kK, kCopies);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  auto timeIt = [&](const char *name, int heads, auto launch) {
    const GraphTime t = timeInGraph(st, kGraphCopies, 40, launch);
    const double mb = double(heads) * kHead * kK / 1e6;
    std::printf("%-52s heads %2d  %6.2f us (%.2f TB/s)  [min %.2f max %.2f]\n",
                name, heads, t.median, mb / t.median, t.min, t.max);
  };
  using Fn = void (*)(const uint8_t *, const __nv_bfloat16 *, const float *,
                      const float2 *, __nv_bfloat16 *, uint8_t *, int);
  struct Variant {
    const char *name;
    Fn fn;
    int s, warps;
  } variants[] = {
      {"S2 W8 P16 R2, sums only", clusterKernel<2, 8, 16, 2, 2, false>, 2, 8},
      {"S3 W8 P16 R2", clusterKernel<3, 8, 16, 2, 2, true>, 3, 8},
      {"S3 W16 P16 R2", clusterKernel<3, 16, 16, 2, 1, true>, 3, 16},
      {"S3 W8 P8 R4", clusterKernel<3, 8, 8, 4, 2, true>, 3, 8},
      {"S6 W8 P16 R2", clusterKernel<6, 8, 16, 2, 2, true>, 6, 8},
      {"S6 W8 P16 R4", clusterKernel<6, 8, 16, 4, 2, true>, 6, 8},
      {"S6 W4 P16 R4", clusterKernel<6, 4, 16, 4, 4, true>, 6, 4},
      {"S6 W8 P8 R4", clusterKernel<6, 8, 8, 4, 2, true>, 6, 8},
      {"S8 W4 P8 R4", clusterKernel<8, 4, 8, 4, 4, true>, 8, 4},
      {"S8 W8 P8 R2", clusterKernel<8, 8, 8, 2, 2, true>, 8, 8},
      {"S8 W8 P8 R4", clusterKernel<8, 8, 8, 4, 2, true>, 8, 8},
      {"S8 W8 P8 R4, sums only", clusterKernel<8, 8, 8, 4, 2, false>, 8, 8},
      {"S12 W4 P16 R4", clusterKernel<12, 4, 16, 4, 4, true>, 12, 4},
      {"S12 W8 P16 R4", clusterKernel<12, 8, 16, 4, 2, true>, 12, 8},
      {"S12 W8 P8 R2", clusterKernel<12, 8, 8, 2, 2, true>, 12, 8},
  };
  for (int heads : {72, 77}) {
    const int qHeads = 64;
    timeIt("stream, 16-byte pieces, 2 CTAs x 512", heads, [&](int i) {
      streamKernel<<<2 * sms, 512, 0, st>>>(
          reinterpret_cast<const uint4 *>(pb.w[i % kCopies]),
          size_t(heads) * kHead * kK / 16, pb.out);
    });
    for (const Variant &v : variants) {
      int regs = 0;
      cudaFuncAttributes attr;
      CK(cudaFuncGetAttributes(&attr, v.fn));
      regs = attr.numRegs;
      if (v.s > 8)
        CK(cudaFuncSetAttribute(
            v.fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      char label[96];
      // One cluster of v.s CTAs per head along x; `cluster` outlives `cfg`.
      cudaLaunchAttribute cluster;
      cluster.id = cudaLaunchAttributeClusterDimension;
      cluster.val.clusterDim.x = v.s;
      cluster.val.clusterDim.y = 1;
      cluster.val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(heads * v.s);
      cfg.blockDim = dim3(v.warps * 32);
      cfg.stream = st;
      cfg.attrs = &cluster;
      cfg.numAttrs = 1;
      int clusters = 0;
      CK(cudaOccupancyMaxActiveClusters(&clusters, v.fn, &cfg));
      std::snprintf(label, sizeof label, "%s (%d regs, %d clusters)", v.name,
                    regs, clusters);
      auto launch = [&](int i) {
        CK(cudaLaunchKernelEx(&cfg, v.fn, (const uint8_t *)pb.w[i % kCopies],
                              (const __nv_bfloat16 *)pb.x,
                              (const float *)pb.gamma, (const float2 *)pb.rope,
                              pb.q, pb.cache, qHeads));
      };
      timeIt(label, heads, launch);
      if (v.fn == variants[0].fn || v.fn == variants[11].fn) {
        // The sums against the host's (copy 0 of the weights).
        pb.check(launch, st, heads * kHead);
      }
    }
  }
  return 0;
}
