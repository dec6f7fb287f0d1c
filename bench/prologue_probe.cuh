// Shared pieces of the prologue probes (cluster_prologue.cu,
// bulk_prologue.cu): the E4M3 x bf16 products as msac's rowsDot computes
// them (FP32 FMAs), a warp's row sums, and the host check of the sums.
// Probes for docs/perf.md, not part of msac, whose kernels the compiler
// generates.
#ifndef MSAC_BENCH_PROLOGUE_PROBE_CUH
#define MSAC_BENCH_PROLOGUE_PROBE_CUH

#include "probe_common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>

/// Two E4M3 values (one 16-bit word) as FP32, exactly.
__device__ __forceinline__ float2 e4m3x2(unsigned short v) {
  unsigned h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(v));
  return __half22float2(*reinterpret_cast<__half2 *>(&h));
}

/// acc plus 4 E4M3 weights (one word) times 4 bf16 x values (two words of
/// pairs), in FP32 FMAs.
__device__ __forceinline__ float dotWord(unsigned w, const unsigned *x,
                                         float acc) {
  const float2 a = e4m3x2(w & 0xFFFF), b = e4m3x2(w >> 16);
  acc = fmaf(a.x, __uint_as_float(x[0] << 16), acc);
  acc = fmaf(a.y, __uint_as_float(x[0] & 0xFFFF0000u), acc);
  acc = fmaf(b.x, __uint_as_float(x[1] << 16), acc);
  return fmaf(b.y, __uint_as_float(x[1] & 0xFFFF0000u), acc);
}

/// acc plus one 16-byte (uint4) or 8-byte (uint2) piece of E4M3 weights
/// times as many bf16 x values (xw: words of pairs).
__device__ __forceinline__ float dotPiece(uint4 wv, const unsigned *xw,
                                          float acc) {
  acc = dotWord(wv.x, xw, acc);
  acc = dotWord(wv.y, xw + 2, acc);
  acc = dotWord(wv.z, xw + 4, acc);
  return dotWord(wv.w, xw + 6, acc);
}
__device__ __forceinline__ float dotPiece(uint2 wv, const unsigned *xw,
                                          float acc) {
  return dotWord(wv.y, xw + 2, dotWord(wv.x, xw, acc));
}

/// The warp's sums of Rows rows, Steps pieces each (a[i][j]: the lane's
/// piece j of row i; xw[j]: its x words), over the warp's lanes: every
/// lane gets them.
template <int Rows, int Steps, typename Piece, int Words>
__device__ __forceinline__ void warpRowSums(const Piece (&a)[Rows][Steps],
                                            const unsigned (&xw)[Steps][Words],
                                            float (&sum)[Rows]) {
#pragma unroll
  for (int i = 0; i < Rows; ++i) {
    sum[i] = 0;
#pragma unroll
    for (int j = 0; j < Steps; ++j)
      sum[i] = dotPiece(a[i][j], xw[j], sum[i]);
  }
#pragma unroll
  for (int o = 16; o; o >>= 1)
#pragma unroll
    for (int i = 0; i < Rows; ++i)
      sum[i] += __shfl_xor_sync(~0u, sum[i], o);
}

/// Rows (features) per head in the prologue probes.
constexpr int kProbeHead = 128;

// The epilogue of a head's 128 sums (v: thread f's, threads 0..127 of
// the leader CTA; scratch: 128 floats of shared memory, red: 4): RMSNorm over
// the head (Gemma weight 1 + g), NeoX RoPE on channels 0..63, a bf16 store
// (query heads) or an E4M3 store (cache).
__device__ __forceinline__ void headEpilogue(float v, float *scratch,
                                             float *red, const float *gamma,
                                             const float2 *rope,
                                             __nv_bfloat16 *q, uint8_t *cache,
                                             int head, int qHeads) {
  const int f = threadIdx.x, lane = f & 31, warp = f / 32;
  float ss = v * v;
#pragma unroll
  for (int o = 16; o; o >>= 1)
    ss += __shfl_xor_sync(~0u, ss, o);
  if (lane == 0)
    red[warp] = ss;
  asm volatile("bar.sync 1, 128;");
  ss = red[0] + red[1] + red[2] + red[3];
  v *= rsqrtf(ss / kProbeHead + 1e-6f) * (1.0f + gamma[f]);
  scratch[f] = v;
  asm volatile("bar.sync 1, 128;");
  if (f < 64) {
    const float2 cs = rope[f & 31];
    const float o = scratch[f ^ 32];
    v = f < 32 ? v * cs.x - o * cs.y : v * cs.x + o * cs.y;
  }
  if (head < qHeads) {
    q[size_t(head) * kProbeHead + f] = __float2bfloat16(v);
  } else {
    __nv_fp8_e4m3 e(v);
    cache[size_t(head - qHeads) * kProbeHead + f] =
        *reinterpret_cast<uint8_t *>(&e);
  }
}

/// An E4M3 byte's value on the host.
inline double e4m3Host(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double mag =
      e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (b & 0x80) ? -mag : mag;
}

/// The largest |q[r] - sum_c w[r, c] x[c]| / sum_c |w[r, c] x[c]| over the
/// rows of q (bf16 sums as the probes store them; w: E4M3 rows of k bytes).
inline double worstRowError(const std::vector<uint8_t> &w,
                            const std::vector<__nv_bfloat16> &x,
                            const std::vector<__nv_bfloat16> &q, int k) {
  double worst = 0;
  for (size_t r = 0; r < q.size(); ++r) {
    double ref = 0, mag = 0;
    for (int c = 0; c < k; ++c) {
      const double p = e4m3Host(w[r * k + c]) * double(__bfloat162float(x[c]));
      ref += p, mag += std::fabs(p);
    }
    worst = std::max(worst, std::fabs(double(__bfloat162float(q[r])) - ref) /
                                (mag + 1e-30));
  }
  return worst;
}

/// The prologue probes' buffers: `maxHeads` heads of `rows` E4M3 weight
/// rows of k bytes (finite values, |v| < 2; the host's bytes and `copies`
/// device copies), the bf16 input row x (host and device), q for the bf16
/// results (maxHeads x rows), the epilogue's norm weights and RoPE pairs
/// (zeros), the cache bytes and an output word.
struct ProbeBuffers {
  std::vector<uint8_t> host;
  std::vector<uint8_t *> w;
  std::vector<__nv_bfloat16> hx;
  __nv_bfloat16 *x, *q;
  float *gamma;
  float2 *rope;
  uint8_t *cache;
  unsigned *out;

  /// worstRowError of the first `rows` bf16 results in q against copy 0
  /// of the weights (call after the kernel has finished).
  double worstError(int rows) const {
    std::vector<__nv_bfloat16> hq(rows);
    CK(cudaMemcpy(hq.data(), q, hq.size() * 2, cudaMemcpyDeviceToHost));
    return worstRowError(host, hx, hq, int(hx.size()));
  }
  /// Runs `launch(0)` on `stream`, waits for it and prints worstError of
  /// the first `rows` results (the probes' check line).
  template <typename Launch>
  void check(Launch launch, cudaStream_t stream, int rows) const {
    launch(0);
    CK(cudaStreamSynchronize(stream));
    std::printf("  check: worst |sum - host| / sum |products| = %.2e\n",
                worstError(rows));
  }
};
inline ProbeBuffers probeBuffers(int maxHeads, int rows, int k, int copies) {
  ProbeBuffers b;
  b.host = lcgBytes(size_t(maxHeads) * rows * k, 7, 0x77);
  b.w = deviceCopies(b.host, copies);
  b.hx.resize(k);
  for (int i = 0; i < k; ++i)
    b.hx[i] = __float2bfloat16(float((i * 37) % 101) / 101.0f - 0.5f);
  CK(cudaMalloc(&b.x, k * 2));
  CK(cudaMemcpy(b.x, b.hx.data(), k * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.q, size_t(maxHeads) * rows * 2));
  CK(cudaMalloc(&b.gamma, rows * 4));
  CK(cudaMemset(b.gamma, 0, rows * 4));
  CK(cudaMalloc(&b.rope, 32 * 8));
  CK(cudaMemset(b.rope, 0, 32 * 8));
  CK(cudaMalloc(&b.cache, size_t(maxHeads) * rows));
  CK(cudaMalloc(&b.out, 64));
  return b;
}

#endif // MSAC_BENCH_PROLOGUE_PROBE_CUH
