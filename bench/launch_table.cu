// What the launch table costs a weight stream at its start: the read of
// bench/read_floor.cu (9,216 or 9,856 rows of 6,144 E4M3 bytes, 2 CTAs of
// 512 threads per SM) with the weights' address as a kernel parameter, as
// read_floor launches it, against the same kernel taking it from a device
// array of pointers, as msac's kernels take every buffer (`(ptr table, ptr
// scalars)`: a load of table[slot] before the first weight load), and from
// a table whose slot is also indexed by a scalar loaded first (msac's
// token count). Timed as msac-run's --graph-range times a range (20 copies
// in one CUDA graph, median over replays). A measurement probe for
// docs/perf.md, not part of msac.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o launch_table bench/launch_table.cu && ./launch_table
#include "probe_common.cuh"

constexpr int kK = 6144, kThreads = 512;

/// streamKernel with its weights at table[slot].
__global__ void __launch_bounds__(512)
    tableKernel(const uint4 *const *table, int slot, size_t n16,
                unsigned *out) {
  streamBody(table[slot], n16, out);
}

/// streamKernel with its weights at table[slot + scalars[0]] (scalars[0]
/// is 0: the second load depends on the first, as msac's kernels' loads
/// depend on the token count).
__global__ void __launch_bounds__(512)
    chainKernel(const uint4 *const *table, const long long *scalars, int slot,
                size_t n16, unsigned *out) {
  streamBody(table[slot + scalars[0]], n16, out);
}

int main() {
  const int sms = openDevice();
  constexpr int kCopies = 4, kGraphCopies = 20;
  const int maxRows = 9856;
  const WeightStreams ws = weightStreams(size_t(maxRows) * kK, kCopies);
  // One table per copy, each its own allocation, as msac's per-launch
  // tables are.
  std::vector<const uint4 *const *> tables(kCopies);
  for (int c = 0; c < kCopies; ++c) {
    const uint4 **t;
    CK(cudaMalloc(&t, 16 * sizeof(void *)));
    std::vector<const uint4 *> slots(
        16, reinterpret_cast<const uint4 *>(ws.copies[c]));
    CK(cudaMemcpy(t, slots.data(), 16 * sizeof(void *),
                  cudaMemcpyHostToDevice));
    tables[c] = t;
  }
  long long *scalars;
  CK(cudaMalloc(&scalars, 3 * sizeof(long long)));
  CK(cudaMemset(scalars, 0, 3 * sizeof(long long)));
  for (int rows : {9216, 9856}) {
    const size_t n16 = size_t(rows) * kK / 16;
    const char *names[3] = {"parameter", "table", "scalar + table"};
    for (int rep = 0; rep < 3; ++rep)
      for (int v = 0; v < 3; ++v) {
        const GraphTime g =
            timeInGraph(ws.stream, kGraphCopies, 50, [&](int i) {
              const int c = i % kCopies;
              if (v == 0)
                streamKernel<<<2 * sms, kThreads, 0, ws.stream>>>(
                    reinterpret_cast<const uint4 *>(ws.copies[c]), n16, ws.out);
              else if (v == 1)
                tableKernel<<<2 * sms, kThreads, 0, ws.stream>>>(tables[c], 5,
                                                                 n16, ws.out);
              else
                chainKernel<<<2 * sms, kThreads, 0, ws.stream>>>(
                    tables[c], scalars, 5, n16, ws.out);
            });
        std::printf("%d rows, weights' address from a %s: %.2f us per launch "
                    "in a graph (%.2f-%.2f)\n",
                    rows, names[v], g.median, g.min, g.max);
      }
  }
  return 0;
}
