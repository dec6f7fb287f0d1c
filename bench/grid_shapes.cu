// What the fused prologue's grid shape costs its weight stream. read_floor
// streams M3's dense-layer weights (56.6 MB of E4M3) with 2 CTAs of 512
// threads per SM; bench/input_reads.cu's T = 0 case, the same stream in the
// 2-16-token prologue's grid (576 CTAs of 128 threads, no clusters), took
// 1.0 us longer on an H100 (20.75 against 19.77 us). The prologue's kernels
// also launch in clusters of 8 (one per head), which the hardware places
// on 124 of an H100's 132 SMs (thirty-seventh and fortieth sessions), and
// each CTA reads its own rows rather than a grid-wide stride. This probe
// times the stream in each of those shapes, one change at a time: grid
// size (264 x 512, 528 / 576 / 1,152 x 128, 576 x 256 threads), clusters
// of 2, 4, 8 and 16 (non-portable), and each CTA over one contiguous share
// (as the prologue's CTAs) instead of the grid-wide stride, timed as
// msac-run's --graph-range times a range (20 copies in one CUDA graph,
// median over replays). A measurement probe for docs/perf.md, not part of
// msac.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o grid_shapes bench/grid_shapes.cu && ./grid_shapes
#include "probe_common.cuh"

constexpr int kK = 6144;

/// The grid-wide stride of streamBody.
__global__ void __launch_bounds__(512)
    strideKernel(const uint4 *w, size_t n16, unsigned *out) {
  streamBody(w, n16, out);
}

/// CTA b streams pieces [b * n16 / grid, (b + 1) * n16 / grid), 8 loads of
/// 16 bytes in flight per thread, the CTA's threads side by side.
__global__ void __launch_bounds__(512)
    contiguousKernel(const uint4 *w, size_t n16, unsigned *out) {
  const size_t begin = n16 * blockIdx.x / gridDim.x;
  const size_t end = n16 * (blockIdx.x + 1) / gridDim.x;
  sinkWord(streamRange(w, begin + threadIdx.x, end, blockDim.x), out);
}

int main() {
  const int sms = openDevice();
  const size_t bytes = size_t(9216) * kK, n16 = bytes / 16;
  const WeightStreams ws = weightStreams(bytes, 4);
  CK(cudaFuncSetAttribute(strideKernel,
                          cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(contiguousKernel,
                          cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  std::printf("%.1f MB of weights; us per launch, median of replays "
              "(min-max)\n",
              bytes / 1e6);
  struct Shape {
    const char *name;
    bool contiguous;
    int ctas, threads, cluster;
  };
  const Shape shapes[] = {
      {"stride     2/SM x 512", false, 2 * sms, 512, 1},
      {"stride      528 x 128", false, 528, 128, 1},
      {"stride      576 x 128", false, 576, 128, 1},
      {"stride      576 x 256", false, 576, 256, 1},
      {"stride     1152 x 128", false, 1152, 128, 1},
      {"stride  576 x 128 c2 ", false, 576, 128, 2},
      {"stride  576 x 128 c4 ", false, 576, 128, 4},
      {"stride  576 x 128 c8 ", false, 576, 128, 8},
      {"stride  576 x 128 c16", false, 576, 128, 16},
      {"contig     2/SM x 512", true, 2 * sms, 512, 1},
      {"contig      528 x 128", true, 528, 128, 1},
      {"contig      576 x 128", true, 576, 128, 1},
      {"contig  576 x 128 c4 ", true, 576, 128, 4},
      {"contig  576 x 128 c8 ", true, 576, 128, 8},
      {"contig  576 x 128 c16", true, 576, 128, 16},
      {"contig     1152 x 128", true, 1152, 128, 1},
      {"contig 1152 x 128 c8 ", true, 1152, 128, 8},
  };
  for (int pass = 0; pass < 2; ++pass)
    for (const Shape &s : shapes) {
      auto launch = [&](int i) {
        launchInClusters(
            s.contiguous ? contiguousKernel : strideKernel, s.ctas, s.threads,
            s.cluster, ws.stream,
            reinterpret_cast<const uint4 *>(ws.copies[i % ws.copies.size()]),
            n16, ws.out);
      };
      const GraphTime g = timeInGraph(ws.stream, 20, 30, launch);
      std::printf("pass %d %s: %.2f us (%.2f-%.2f), %.2f TB/s\n", pass, s.name,
                  g.median, g.min, g.max, bytes / g.median / 1e6);
    }
  return 0;
}
