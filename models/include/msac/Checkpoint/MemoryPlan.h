//===- MemoryPlan.h - Weight and KV-cache memory of a model -----*- C++ -*-===//
//
// Part of msac. What `msac plan` reports: parameters and weight bytes by
// component and storage format, KV-cache and index-cache bytes per token
// (per layer and over all layers, msa-m3-spec.md §4.4), and how many
// sequences of a given length fit in a given cache budget.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_MEMORYPLAN_H
#define MSAC_CHECKPOINT_MEMORYPLAN_H

#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Checkpoint/ModelWeights.h"
#include "msac/Checkpoint/QuantizeWeights.h"

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace msac::ckpt {

/// Element format of a KV or index cache (`--kv-cache-dtype`,
/// `--index-cache-dtype`).
enum class CacheDType { BF16, FP8, NVFP4 };
std::optional<CacheDType> parseCacheDType(std::string_view name);
const char *cacheDTypeName(CacheDType dtype);

/// Bytes of one cached vector of `dim` channels: 2*dim (BF16), dim (FP8
/// E4M3), dim/2 + dim/16 (NVFP4: E2M1 pairs plus one E4M3 scale per 16).
int64_t cacheBytesPerVector(CacheDType dtype, int64_t dim);

/// Checks that the caches of `config` can be stored in `kvDType` and
/// `indexDType`: NVFP4 keeps one E4M3 scale per 16 values (msa-m3-spec.md
/// §4.2), so the cached vectors (head_dim; sparse_index_dim when the model
/// has MSA layers) must be multiples of 16. Returns "" or the problem,
/// naming the flag and the config field.
std::string checkCacheDTypes(const ModelConfig &config, CacheDType kvDType,
                             CacheDType indexDType);

/// Parses a byte count: a plain number or one with a unit (`80GiB`,
/// `141GB`, `512MiB`, `1.5TB`; decimal k/M/G/T and binary Ki/Mi/Gi/Ti).
std::optional<uint64_t> parseByteSize(std::string_view text);

struct ParameterGroup {
  std::string name;
  int64_t parameters = 0;
  uint64_t bytes = 0;
};

struct MemoryPlan {
  std::vector<ParameterGroup> groups;
  int64_t totalParameters = 0;
  /// Parameters one token runs through: everything but the embedding table
  /// and the routed experts it is not sent to (top-k of E).
  int64_t activeParameters = 0;
  uint64_t totalWeightBytes = 0;
  /// Stored bytes per format (`bf16`, `f32`, `nvfp4`, `mxfp8`, ...).
  std::map<std::string, uint64_t> bytesByFormat;
  /// True when bytes come from the checkpoint's tensors, false when they
  /// are estimated from the config (BF16 weights, FP32 router).
  bool fromCheckpoint = false;
  /// The --quantize-weights recipe the bytes are counted for, "" for none.
  std::string weightRecipe;

  CacheDType kvDType = CacheDType::BF16;
  CacheDType indexDType = CacheDType::BF16;
  int64_t kvLayers = 0;    ///< layers with main K/V (all of them)
  int64_t indexLayers = 0; ///< MSA layers with an index-key cache
  int64_t kvBytesPerTokenPerLayer = 0;    ///< K + V, all KV heads
  int64_t indexBytesPerTokenPerLayer = 0; ///< one index key
  int64_t kvBytesPerToken = 0;            ///< over all layers
  int64_t indexBytesPerToken = 0;         ///< over all MSA layers
  int64_t cacheBytesPerToken = 0;

  int64_t pageSize = 0;
  int64_t maxSeqLen = 0;
  /// Cache bytes of one sequence of maxSeqLen tokens, whole pages.
  uint64_t bytesPerSequence = 0;
  uint64_t cacheMemory = 0;
  int64_t sequencesThatFit = 0;
};

/// Plans memory for `config`; `weights` (optional) gives exact stored bytes.
/// With `recipe`, the weights it quantizes count the bytes
/// quantizeCheckpointWeights would store for them (quantizedWeightBytes).
MemoryPlan planMemory(const ModelConfig &config, const ModelWeights *weights,
                      CacheDType kvDType, CacheDType indexDType,
                      int64_t maxSeqLen, uint64_t cacheMemory,
                      std::optional<WeightRecipe> recipe = std::nullopt);

/// "" when `plan` has no cache budget (cacheMemory 0) or the budget holds
/// the caches of at least one sequence of maxSeqLen tokens; else the
/// problem, naming `budgetText` (the --memory value as given), the bytes
/// missing and the longest sequence that the budget holds.
std::string checkCacheBudget(const MemoryPlan &plan,
                             const std::string &budgetText);

/// Human-readable report.
void printMemoryPlan(const MemoryPlan &plan, std::ostream &os);
/// The same as one JSON object.
std::string memoryPlanJson(const MemoryPlan &plan);

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_MEMORYPLAN_H
