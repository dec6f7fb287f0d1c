// Can the one-token attention prologue read its weights at the stream's
// speed? msac's one-token cluster kernel (prologueClusterKernel: a cluster
// of 8 CTAs of 4 warps per head, CTA r over 1/8 of the 6,144 channels,
// each warp 4 rows' 8-byte loads per lane in registers at a time) streams
// M3's FP8 weights at about 75 % of the copy bandwidth on the H200
// (docs/perf.md, twenty-ninth to fortieth sessions): between its rounds a
// warp has no load in flight. This probe keeps the same clusters, products
// and epilogue but moves the weights through a ring of shared-memory
// stages filled by bulk asynchronous copies (`cp.async.bulk`, one per
// weight row's 768-byte slice, completing on an mbarrier), issued by a
// producer warp, so that a CTA keeps Stages x Rows x 768 bytes in flight
// without registers. Timed as msac-run's --graph-range times a range (20
// copies in one CUDA graph, median time per copy over 40 replays), next to
// read_floor.cu's stream of the same bytes and to the register kernel.
// With `Early`, the producer fills the ring before the kernel waits for
// the previous kernel (griddepcontrol.wait): in a step the weights do not
// depend on the RMSNorm before the prologue. A measurement probe for
// docs/perf.md (forty-first session), not part of msac, whose kernels the
// compiler generates.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o bulk_prologue bench/bulk_prologue.cu
//   ./bulk_prologue
#include "prologue_probe.cuh"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

constexpr int kK = 6144;          // M3's hidden size: bytes per E4M3 weight row
constexpr int kHead = kProbeHead; // rows (features) per head
constexpr int kS = 8;             // CTAs per cluster (head)
constexpr int kSlice = kK / kS, kSteps = kSlice / 256;

// The lane's 8 bf16 x values per 256-channel step of CTA rank's slice (4
// words of pairs each), as its 8-byte weight pieces take them.
__device__ __forceinline__ void laneX(const __nv_bfloat16 *x, int rank,
                                      int lane, unsigned (&xw)[kSteps][4]) {
  const unsigned *xs =
      reinterpret_cast<const unsigned *>(x + rank * kSlice + lane * 8);
#pragma unroll
  for (int j = 0; j < kSteps; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      xw[j][e] = xs[j * 128 + e];
}

// The leader's threads 0..127 after the cluster barrier: the head's sums
// in rank order, then the epilogue (else the sums stored as they are).
template <bool Epi>
__device__ __forceinline__ void
finishHead(float (&partial)[kS][kHead], float *red, const float *gamma,
           const float2 *rope, __nv_bfloat16 *q, uint8_t *cache, int head,
           int qHeads) {
  float v = 0;
#pragma unroll
  for (int i = 0; i < kS; ++i)
    v += partial[i][threadIdx.x];
  if (!Epi)
    q[size_t(head) * kHead + threadIdx.x] = __float2bfloat16(v);
  else
    headEpilogue(v, &partial[0][0], red, gamma, rope, q, cache, head, qHeads);
}

// msac's committed shape: 4 warps, a warp per row, 8-byte pieces, Rows rows'
// loads issued together (the register kernel).
template <int Rows, bool Epi>
__global__ void __launch_bounds__(128, 6)
    regKernel(const uint8_t *w, const __nv_bfloat16 *x, const float *gamma,
              const float2 *rope, __nv_bfloat16 *q, uint8_t *cache,
              int qHeads) {
  constexpr int W = 4;
  __shared__ float partial[kS][kHead];
  __shared__ float red[4];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int head = blockIdx.x / kS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned xw[kSteps][4];
  laneX(x, rank, lane, xw);
  float *leader = cluster.map_shared_rank(&partial[0][0], 0);
  const uint8_t *base =
      w + (size_t(head) * kHead) * kK + rank * kSlice + lane * 8;
  for (int r0 = warp; r0 < kHead; r0 += W * Rows) {
    float sum[Rows];
    uint2 a[Rows][kSteps];
#pragma unroll
    for (int i = 0; i < Rows; ++i)
#pragma unroll
      for (int j = 0; j < kSteps; ++j)
        a[i][j] = __ldcs(reinterpret_cast<const uint2 *>(
            base + size_t(r0 + i * W) * kK + j * 256));
    warpRowSums(a, xw, sum);
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < Rows; ++i)
        leader[rank * kHead + r0 + i * W] = sum[i];
  }
  cluster.sync();
  if (rank == 0 && threadIdx.x < kHead)
    finishHead<Epi>(partial, red, gamma, rope, q, cache, head, qHeads);
}

// The ring kernel: 4 consumer warps and one producer warp. The CTA's 128
// rows (768 bytes each) come in 128 / Rows stages of Rows rows through a
// ring of Stages slots; slot s is full when its bulk copies complete
// (full[s], transaction bytes) and empty when the 4 consumer warps have
// read it (empty[s], 4 arrivals). Consumer warp w takes rows w, w + 4, ...
// of a stage, each lane its 8 bytes per 256 channels as the register
// kernel (ld.shared.v2, conflict-free).
// Without `Producer` the kernel has the 4 consumer warps only: after every
// warp has read stage i into registers (a named barrier of the 128
// threads), warp 0 refills its slot with stage i + Stages.
template <int Rows, int Stages, bool Early, bool Epi, bool Producer = true>
__global__ void __launch_bounds__(Producer ? 160 : 128, 1)
    ringKernel(const uint8_t *w, const __nv_bfloat16 *x, const float *gamma,
               const float2 *rope, __nv_bfloat16 *q, uint8_t *cache,
               int qHeads) {
  constexpr int W = 4, kStageBytes = Rows * kSlice, kNum = kHead / Rows;
  static_assert(Rows % W == 0 && kHead % Rows == 0, "rows");
  extern __shared__ __align__(128) uint8_t ring[]; // Stages x kStageBytes
  __shared__ float partial[kS][kHead];
  __shared__ float red[4];
  __shared__ __align__(8) uint64_t full[Stages], empty[Stages];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int head = blockIdx.x / kS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const uint8_t *base = w + (size_t(head) * kHead) * kK + rank * kSlice;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Stages; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], W);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int stage) {
    uint64_t *bar = &full[stage % Stages];
    uint8_t *dst = ring + (stage % Stages) * kStageBytes;
    if (lane == 0)
      mbarExpectTx(bar, kStageBytes);
    __syncwarp();
    for (int r = lane; r < Rows; r += 32)
      bulkCopy(dst + r * kSlice, base + size_t(stage * Rows + r) * kK, kSlice,
               bar);
  };
  if (!Producer && warp == 0) {
    if (!Early)
      asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = 0; i < Stages && i < kNum; ++i)
      issue(i);
  }
  if (Producer && warp == W) {
    // Producer: the first Stages stages before the wait for the previous
    // kernel with Early, after it without.
    if (!Early)
      asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = 0; i < Stages && i < kNum; ++i)
      issue(i);
    for (int i = Stages; i < kNum; ++i) {
      mbarWait(&empty[i % Stages], ((i / Stages) - 1) & 1);
      issue(i);
    }
    if (Early)
      asm volatile("griddepcontrol.wait;" ::: "memory");
    cluster.sync();
    return;
  }
  // Consumers.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned xw[kSteps][4];
  laneX(x, rank, lane, xw);
  float *leader = cluster.map_shared_rank(&partial[0][0], 0);
  for (int i = 0; i < kNum; ++i) {
    const int slot = i % Stages;
    mbarWait(&full[slot], (i / Stages) & 1);
    const uint8_t *st = ring + slot * kStageBytes + lane * 8;
    constexpr int R = Rows / W;
    float sum[R];
    uint2 a[R][kSteps];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < kSteps; ++j)
        a[r][j] = *reinterpret_cast<const uint2 *>(
            st + (r * W + warp) * kSlice + j * 256);
    if (Producer) {
      __syncwarp();
      if (lane == 0)
        mbarArrive(&empty[slot]);
    } else if (i + Stages < kNum) {
      asm volatile("bar.sync 2, 128;" ::: "memory");
      if (warp == 0)
        issue(i + Stages);
    }
    warpRowSums(a, xw, sum);
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
        leader[rank * kHead + i * Rows + r * W + warp] = sum[r];
  }
  cluster.sync();
  if (rank == 0 && threadIdx.x < kHead)
    finishHead<Epi>(partial, red, gamma, rope, q, cache, head, qHeads);
}

// A short kernel standing in for the RMSNorm before the prologue: it
// triggers its dependents at once and then spins for `ns` nanoseconds.
__global__ void normStandIn(unsigned ns) {
  asm volatile("griddepcontrol.launch_dependents;");
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
}

int main() {
  const int sms = openDevice();
  constexpr int kCopies = 4, kGraphCopies = 20, kMaxHeads = 77;
  const ProbeBuffers pb = probeBuffers(kMaxHeads, kHead, kK, kCopies);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  using Fn = void (*)(const uint8_t *, const __nv_bfloat16 *, const float *,
                      const float2 *, __nv_bfloat16 *, uint8_t *, int);
  struct Variant {
    const char *name;
    Fn fn;
    int threads, dynSmem;
    bool sumsOnly;
  };
  auto ring = [](int rows, int stages) { return rows * kSlice * stages; };
  const Variant variants[] = {
      {"register R4 (msac)", regKernel<4, true>, 128, 0, false},
      {"register R4, sums only", regKernel<4, false>, 128, 0, true},
      {"ring 8 rows x 4 stages", ringKernel<8, 4, false, true>, 160, ring(8, 4),
       false},
      {"ring 8 rows x 4, sums only", ringKernel<8, 4, false, false>, 160,
       ring(8, 4), true},
      {"ring 8 rows x 6 stages", ringKernel<8, 6, false, true>, 160, ring(8, 6),
       false},
      {"ring 16 rows x 3 stages", ringKernel<16, 3, false, true>, 160,
       ring(16, 3), false},
      {"ring 16 rows x 4 stages", ringKernel<16, 4, false, true>, 160,
       ring(16, 4), false},
      {"ring 4 rows x 8 stages", ringKernel<4, 8, false, true>, 160, ring(4, 8),
       false},
      {"ring 8 x 4, early", ringKernel<8, 4, true, true>, 160, ring(8, 4),
       false},
      {"ring 16 x 4, early", ringKernel<16, 4, true, true>, 160, ring(16, 4),
       false},
      {"ring 8 x 4, no producer warp", ringKernel<8, 4, false, true, false>,
       128, ring(8, 4), false},
      {"ring 8 x 4, no producer, sums only",
       ringKernel<8, 4, false, false, false>, 128, ring(8, 4), true},
      {"ring 8 x 6, no producer, early", ringKernel<8, 6, true, true, false>,
       128, ring(8, 6), false},
      {"ring 16 x 3, no producer, early", ringKernel<16, 3, true, true, false>,
       128, ring(16, 3), false},
  };
  for (int heads : {72, 77}) {
    const int qHeads = 64;
    const double mb = double(heads) * kHead * kK / 1e6;
    auto report = [&](const char *name, const GraphTime &t) {
      std::printf(
          "%-58s heads %2d  %6.2f us (%.2f TB/s)  [min %.2f max %.2f]\n", name,
          heads, t.median, mb / t.median, t.min, t.max);
    };
    report("stream, 16-byte pieces, 2 CTAs x 512",
           timeInGraph(st, kGraphCopies, 40, [&](int i) {
             streamKernel<<<2 * sms, 512, 0, st>>>(
                 reinterpret_cast<const uint4 *>(pb.w[i % kCopies]),
                 size_t(heads) * kHead * kK / 16, pb.out);
           }));
    for (const Variant &v : variants) {
      cudaFuncAttributes attr;
      CK(cudaFuncGetAttributes(&attr, v.fn));
      if (v.dynSmem)
        CK(cudaFuncSetAttribute(
            v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, v.dynSmem));
      cudaLaunchAttribute attrs[2];
      attrs[0].id = cudaLaunchAttributeClusterDimension;
      attrs[0].val.clusterDim.x = kS;
      attrs[0].val.clusterDim.y = 1;
      attrs[0].val.clusterDim.z = 1;
      attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[1].val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(heads * kS);
      cfg.blockDim = dim3(v.threads);
      cfg.dynamicSmemBytes = v.dynSmem;
      cfg.stream = st;
      cfg.attrs = attrs;
      cfg.numAttrs = 2;
      int clusters = 0;
      CK(cudaOccupancyMaxActiveClusters(&clusters, v.fn, &cfg));
      char label[128];
      std::snprintf(label, sizeof label, "%s (%d regs, %d KB, %d clusters)",
                    v.name, attr.numRegs,
                    int((attr.sharedSizeBytes + v.dynSmem) / 1024), clusters);
      auto launch = [&](int i) {
        CK(cudaLaunchKernelEx(&cfg, v.fn, (const uint8_t *)pb.w[i % kCopies],
                              (const __nv_bfloat16 *)pb.x,
                              (const float *)pb.gamma, (const float2 *)pb.rope,
                              pb.q, pb.cache, qHeads));
      };
      report(label, timeInGraph(st, kGraphCopies, 40, launch));
      // After a 3 us stand-in for the RMSNorm (a programmatic dependent):
      // the pair's time per copy.
      std::snprintf(label, sizeof label, "  + 3 us norm stand-in before");
      report(label, timeInGraph(st, kGraphCopies, 40, [&](int i) {
               normStandIn<<<1, 32, 0, st>>>(3000);
               launch(i);
             }));
      if (v.sumsOnly) {
        // The sums against the host's (copy 0 of the weights).
        pb.check(launch, st, heads * kHead);
      }
    }
  }
  return 0;
}
