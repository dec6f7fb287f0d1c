// The practical read floor of the fused prologue's one-to-16-token
// projection on the GPU: how long a kernel that only streams the weights
// (M3: 9,216 x 6,144 E4M3 = 56.6 MB in a dense layer, 9,856 rows = 60.6 MB
// in an MSA layer) takes, timed as msac-run's --graph-range times a range
// of launches (20 copies in one CUDA graph, median over replays of the
// time per copy) and as single launches between CUDA events. A measurement
// probe for docs/perf.md, next to issue 6's floor (the weight read at the
// copy bandwidth); not part of msac, whose kernels the compiler generates.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o read_floor bench/read_floor.cu && ./read_floor
//
// The kernel: 2 CTAs of 512 threads per SM, grid-stride 16-byte loads with
// 8 in flight per thread, streaming (.cs) loads, the words XOR-ed so that
// the loads stay. Launches rotate over 4 copies of the weights (242 MB) so
// that L2 (50 MB) does not hold them.
#include "probe_common.cuh"

constexpr int kK = 6144, kThreads = 512;

int main() {
  const int sms = openDevice();
  constexpr int kCopies = 4, kGraphCopies = 20;
  const int maxRows = 9856;
  const WeightStreams ws = weightStreams(size_t(maxRows) * kK, kCopies);
  const std::vector<uint8_t *> &w = ws.copies;
  unsigned *out = ws.out;
  cudaStream_t st = ws.stream;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto launch = [&](int copy, int rows) {
    streamKernel<<<2 * sms, kThreads, 0, st>>>(
        reinterpret_cast<const uint4 *>(w[copy % kCopies]),
        size_t(rows) * kK / 16, out);
  };
  auto elapsedUs = [&] {
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return double(ms) * 1e3;
  };
  for (int rows : {9216, 9856}) {
    const double mb = double(rows) * kK / 1e6;
    for (int i = 0; i < 10; ++i)
      launch(i, rows);
    std::vector<double> single;
    for (int i = 0; i < 200; ++i) {
      CK(cudaEventRecord(e0, st));
      launch(i, rows);
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      single.push_back(elapsedUs());
    }
    CK(cudaGetLastError());
    const double g = timeInGraph(st, kGraphCopies, 50, [&](int i) {
                       launch(i, rows);
                     }).median;
    std::sort(single.begin(), single.end());
    const double s = single[single.size() / 2];
    std::printf("%d rows (%.1f MB): in a graph %.2f us per launch (%.2f TB/s); "
                "single launch %.2f us (%.2f TB/s)\n",
                rows, mb, g, mb / g, s, mb / s);
  }
  return 0;
}
