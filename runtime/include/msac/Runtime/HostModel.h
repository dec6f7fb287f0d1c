//===- HostModel.h - Running an artifact's host kernels ---------*- C++ -*-===//
//
// Part of the msac runtime.
//
// Owns the buffers of one model instance: the paged KV and index caches
// (`numPages` pages of `pageSize` tokens per layer), the activation buffers
// sized for `maxTokens` tokens per step, and the per-step inputs. `step`
// runs the launch schedule once for a batch of tokens from any mix of
// sequences (prefill chunks and decode tokens together), as the IR's
// `@forward` defines it.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_RUNTIME_HOSTMODEL_H
#define MSAC_RUNTIME_HOSTMODEL_H

#include "msac/Runtime/Artifact.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace msac::runtime {

struct HostModelOptions {
  int64_t maxTokens = 2048;          ///< tokens per step (T)
  int64_t maxSequences = 8;          ///< rows of the block table (S)
  int64_t maxBlocksPerSequence = 64; ///< columns of the block table (MB)
  int64_t numPages = 256;            ///< pages per cache
  /// Synthetic weights instead of the artifact's (like vLLM's
  /// `--load-format dummy`): uniform in [-1/64, 1/64), deterministic. For
  /// benchmarks, including weight-stripped artifacts; bf16/f32 weights only.
  bool dummyWeights = false;
  /// GPU executors: run each step as one CUDA graph (captured at the first
  /// step) instead of one launch per kernel.
  bool cudaGraphs = true;
  /// GPU executors: how the driver places the CTAs of a thread-block
  /// cluster launch on the multiprocessors (CUDA's
  /// CUclusterSchedulingPolicy: 0 the driver's default, 1 spread the
  /// cluster's CTAs over the SMs, 2 let the hardware load-balance them).
  int clusterScheduling = 0;
};

/// One step's inputs, token-major.
struct StepInput {
  std::vector<int32_t> tokenIds, seqIds, positions;
  std::vector<int32_t> logitsIndices; ///< rows of the hidden state to project
  /// [maxSequences][maxBlocksPerSequence] physical page of each block.
  std::vector<int32_t> blockTable;

  /// The vector bound to argument `index` of the model function, in the
  /// order the importer declares them (models/lib/Import/M3Importer.cpp):
  /// 0 token_ids, 1 seq_ids, 2 positions, 3 logits_indices, 4 block_table.
  /// Null for any other index.
  const std::vector<int32_t> *argument(int64_t index) const {
    switch (index) {
    case 0:
      return &tokenIds;
    case 1:
      return &seqIds;
    case 2:
      return &positions;
    case 3:
      return &logitsIndices;
    case 4:
      return &blockTable;
    default:
      return nullptr;
    }
  }
};

/// Runs an artifact's schedule on one device (the host, or a GPU).
class Executor {
public:
  virtual ~Executor() = default;
  /// Runs one step. Returns null and sets `error` on bad input (a token id
  /// outside the vocabulary, a position without a page, too many tokens) or
  /// a device failure. Otherwise returns [logitsIndices.size()][vocab] FP32
  /// logits in host memory, valid until the next call.
  virtual const float *step(const StepInput &input, std::string &error) = 0;
  virtual const HostModelOptions &options() const = 0;
  /// Bytes of all buffers this instance allocated (caches + activations).
  virtual uint64_t allocatedBytes() const = 0;
  /// The contents of buffer `id` after the last step, in host memory (for
  /// inspection and tests); null for a weight.
  virtual const void *bufferData(int64_t id) = 0;
  /// Element count of non-weight buffer `b` for limits `o`.
  static uint64_t elementsOf(const Buffer &b, const HostModelOptions &o) {
    return elements(b, o);
  }
  /// Fills every paged cache with deterministic pseudo-random values
  /// uniform in [-2, 2) (a synthetic context for decode benchmarks); the
  /// host fills NVFP4 caches with uniform random codes and E4M3 scales
  /// uniform in [0.125, 0.625), as the MSA tests' `make_inputs`
  /// (msa-m3-spec.md §5.4).
  virtual bool fillCaches(uint64_t seed, std::string &error) {
    error = "this executor cannot fill caches";
    return false;
  }
  /// Runs one step like step(), timing every launch of the schedule on the
  /// device; `launchMs[i]` is launch i's time in milliseconds.
  virtual const float *profileStep(const StepInput &input,
                                   std::vector<double> &launchMs,
                                   std::string &error) {
    error = "this executor cannot time launches";
    return nullptr;
  }
  /// Times launches [first, last) of the step schedule as they run inside
  /// a CUDA graph (no per-launch CPU cost between them): the range is
  /// captured `copies` times in one graph, the graph replayed `reps` times
  /// between two events; `us` is the median over replays of the time per
  /// copy in microseconds. Call after a step with the same input (the
  /// range reads that step's device inputs and sizes).
  virtual bool timeRangeInGraph(size_t first, size_t last, int reps, double &us,
                                std::string &error) {
    error = "this executor cannot time launches in a CUDA graph";
    return false;
  }

  /// The error for running `artifact`, compiled with --strip-weights,
  /// without synthetic weights.
  static std::string strippedWeightsError(const Artifact &artifact);

protected:
  /// Checks a step's inputs against the model and the instance's limits.
  static bool validate(const Artifact &artifact, const HostModelOptions &o,
                       const StepInput &in, std::string &error);
  /// Element count of a non-weight buffer for these limits.
  static uint64_t elements(const Buffer &b, const HostModelOptions &o);
  /// Bytes of a non-weight buffer for these limits (a cache: pages x page
  /// size x bytes per token, block scales included).
  static uint64_t bytes(const Buffer &b, const HostModelOptions &o);
  /// Checks that dummyWeightPool can synthesize every weight of
  /// `artifact`; otherwise sets `error` naming the first other weight.
  static bool checkDummyWeights(const Artifact &artifact, std::string &error);
  /// The pool of synthetic values for weight `b` (dummyWeights), by dtype
  /// and role, made on first use in `pools` (keyed by the role):
  ///   bf16, f32: uniform in [-1/64, 1/64);
  ///   f32 scales (names ending in weight_scale, weight_scale_2,
  ///     weight_scale_inv): uniform in [1/128, 1/64);
  ///   f8E4M3FN values: uniform in [-1, 1); f8E4M3FN block scales (NVFP4,
  ///     names ending in weight_scale): uniform in [0.25, 0.5);
  ///   ui8 E8M0 scales (MX, names ending in weight_scale): 2^-6 or 2^-5;
  ///   ui8 payloads (E2M1 code pairs): uniform random bytes.
  /// Returns null for other weights (checkDummyWeights reports them).
  static const std::vector<uint8_t> *
  dummyWeightPool(const Buffer &b,
                  std::map<std::string, std::vector<uint8_t>> &pools);
  /// True for the element types fillUniform writes: bf16, f32 and
  /// f8E4M3FN (FP8 caches).
  static bool canSynthesize(const std::string &dtype) {
    return dtype == "bf16" || dtype == "f32" || dtype == "f8E4M3FN";
  }
  /// Checks that fillUniform (or, with `nvfp4`, the executor's NVFP4
  /// filler) can write every paged cache of `artifact` (fillCaches);
  /// otherwise sets `error` naming the first other cache.
  static bool checkSynthesizableCaches(const Artifact &artifact,
                                       std::string &error, bool nvfp4 = false);
  /// Writes `count` values of `dtype` (canSynthesize) uniform in [lo, hi)
  /// from a SplitMix64 stream seeded with `seed`, each rounded to nearest
  /// even (FP8: saturating, as the cache insert stores).
  static void fillUniform(uint8_t *dst, uint64_t count,
                          const std::string &dtype, float lo, float hi,
                          uint64_t seed);
  /// Fills the whole NVFP4 pages within `size` bytes at `dst` of cache `b`:
  /// each page's E2M1 code bytes from a SplitMix64 stream seeded with
  /// `seed`, then its E4M3 scales uniform in [0.125, 0.625) (fillUniform).
  static void fillNvfp4Pages(uint8_t *dst, uint64_t size, const Buffer &b,
                             uint64_t seed);
  /// 64 MiB of `dtype` values uniform in [lo, hi) (fillUniform).
  static std::vector<uint8_t> randomPool(const std::string &dtype, float lo,
                                         float hi, uint64_t seed);
  /// Calls `copy(offset, data, n)` for consecutive pieces of `bytes` bytes
  /// taken from `pool`: the first at `start` (modulo the pool, rounded down
  /// to 256 bytes), each next one 4 KiB after the previous one ends. Returns
  /// false as soon as `copy` does. Synthetic weights of buffer i use
  /// start = i * 7919 * 64 (kDummyStride), the same on every executor.
  static bool copyFromPool(
      uint64_t bytes, const std::vector<uint8_t> &pool, uint64_t start,
      const std::function<bool(uint64_t, const uint8_t *, uint64_t)> &copy);
  static constexpr uint64_t kDummyStride = 7919 * 64;
};

class HostModel : public Executor {
public:
  HostModel(const Artifact &artifact, const HostModelOptions &options);

  const float *step(const StepInput &input, std::string &error) override;
  const HostModelOptions &options() const override { return opts; }
  uint64_t allocatedBytes() const override { return allocated; }
  const void *bufferData(int64_t id) override { return pointers[id]; }
  bool fillCaches(uint64_t seed, std::string &error) override;
  /// Wall-clock time of each kernel call.
  const float *profileStep(const StepInput &input,
                           std::vector<double> &launchMs,
                           std::string &error) override;

private:
  const float *run(const StepInput &input, std::vector<double> *launchMs,
                   std::string &error);
  const Artifact &art;
  HostModelOptions opts;
  std::vector<std::vector<uint8_t>> storage; // per buffer (non-weights)
  std::vector<void *> pointers;              // per buffer
  uint64_t allocated = 0;
};

} // namespace msac::runtime

#endif // MSAC_RUNTIME_HOSTMODEL_H
