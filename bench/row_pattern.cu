// How fast the one-token projection's access pattern alone reads M3's
// dense-layer weights on the GPU: a warp per weight row (or per part of
// one), rows taken round-robin by the warps as msac's rowsDot takes them,
// each lane loading consecutive 8- or 16-byte pieces, the words only
// XOR-ed (no products), against read_floor.cu's grid-stride stream. Timed
// as msac-run's --graph-range times a range of launches (20 copies in one
// CUDA graph, median over 40 replays of the time per copy). A measurement
// probe for docs/perf.md (twenty-seventh session), not part of msac, whose
// kernels the compiler generates.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o row_pattern bench/row_pattern.cu && ./row_pattern
//
// The loads are inline-assembly `ld.global` so that the compiler keeps
// them; ptxas still schedules them as it likes (about 31 registers per
// thread for every variant), so the pieces a lane keeps in flight are
// ptxas's choice, not set here.
#include "probe_common.cuh"

constexpr int kK = 6144; // M3's hidden size: bytes per E4M3 weight row

template <int Bytes>
__device__ __forceinline__ unsigned loadXor(const uint8_t *p) {
  unsigned a, b, c = 0, d = 0;
  if (Bytes == 8)
    asm volatile("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(a), "=r"(b) : "l"(p));
  else
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                 : "l"(p));
  return a ^ b ^ c ^ d;
}

// A warp per unit (a row, or 1/Split of one), units round-robin over the
// warps; each lane loads `Bytes` bytes at 32 * Bytes strides through the
// unit; the warp's XOR goes to out[unit], as rowsDot stores its sum.
template <int Bytes, int Split>
__global__ void __launch_bounds__(512)
    rowKernel(const uint8_t *w, int rows, unsigned *out) {
  constexpr int kUnit = kK / Split, kSteps = kUnit / (32 * Bytes);
  static_assert(kSteps * 32 * Bytes == kUnit, "unit not a whole warp step");
  const int lane = threadIdx.x & 31, warpsPerCta = blockDim.x / 32;
  const int warps = gridDim.x * warpsPerCta, units = rows * Split;
  for (int u = blockIdx.x * warpsPerCta + threadIdx.x / 32; u < units;
       u += warps) {
    const uint8_t *base = w + size_t(u) * kUnit + lane * Bytes;
    unsigned acc = 0;
#pragma unroll
    for (int i = 0; i < kSteps; ++i)
      acc ^= loadXor<Bytes>(base + i * 32 * Bytes);
#pragma unroll
    for (int o = 16; o; o >>= 1)
      acc += __shfl_xor_sync(~0u, acc, o);
    if (lane == 0)
      out[u] = acc;
  }
}

int main() {
  const int sms = openDevice();
  constexpr int kCopies = 4, kGraphCopies = 20, kMaxRows = 9216;
  const size_t bytes = size_t(kMaxRows) * kK;
  const std::vector<uint8_t> host = lcgBytes(bytes, 7);
  // 4 copies (226 MB) rotated so that L2 (50 MB) does not hold them.
  const std::vector<uint8_t *> w = deviceCopies(host, kCopies);
  unsigned *out;
  CK(cudaMalloc(&out, size_t(kMaxRows) * 8 * sizeof(unsigned)));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  auto timeIt = [&](const char *name, int rows, auto launch) {
    const GraphTime t = timeInGraph(st, kGraphCopies, 40, launch);
    const double mb = double(rows) * kK / 1e6;
    std::printf("%-40s rows %5d  %6.2f us (%.2f TB/s)  [min %.2f max %.2f]\n",
                name, rows, t.median, mb / t.median, t.min, t.max);
  };
  using RowFn = void (*)(const uint8_t *, int, unsigned *);
  struct Variant {
    const char *name;
    RowFn fn;
    int threads, ctasPerSM;
  } variants[] = {
      {"row, 8-byte pieces, 1 CTA x 512", rowKernel<8, 1>, 512, 1},
      {"row, 8-byte pieces, 2 CTAs x 512", rowKernel<8, 1>, 512, 2},
      {"row, 8-byte pieces, 4 CTAs x 128", rowKernel<8, 1>, 128, 4},
      {"row, 8-byte pieces, 8 CTAs x 128", rowKernel<8, 1>, 128, 8},
      {"row, 16-byte pieces, 1 CTA x 512", rowKernel<16, 1>, 512, 1},
      {"row thirds, 8-byte pieces, 1 CTA x 512", rowKernel<8, 3>, 512, 1},
      {"row sixths, 8-byte pieces, 1 CTA x 512", rowKernel<8, 6>, 512, 1},
      {"row thirds, 16-byte pieces, 2 CTAs x 512", rowKernel<16, 3>, 512, 2},
  };
  // 9,216 rows: the dense layer's projection (4.36 rows per warp at 16
  // warps per SM on 132 SMs); 8,448: 4 per warp exactly.
  for (int rows : {9216, 8448}) {
    timeIt("stream, 16-byte pieces, 2 CTAs x 512", rows, [&](int i) {
      streamKernel<<<2 * sms, 512, 0, st>>>(
          reinterpret_cast<const uint4 *>(w[i % kCopies]),
          size_t(rows) * kK / 16, out);
    });
    for (const Variant &v : variants)
      timeIt(v.name, rows, [&](int i) {
        v.fn<<<v.ctasPerSM * sms, v.threads, 0, st>>>(w[i % kCopies], rows,
                                                      out);
      });
  }
  return 0;
}
