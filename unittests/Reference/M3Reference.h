//===- M3Reference.h - Plain C++ reference of the MiniMax-M3 model -*- C++
//-*-===//
//
// Part of msac's tests. A deliberately plain, readable implementation of
// msa-m3-spec.md §1.4 and §2-§3, used only as the independent reference
// that compiled artifacts are compared against. It shares no code with the
// compiler's lowering: loops over float arrays, one sequence at a time, a
// contiguous per-sequence cache (paging is an implementation detail the
// compiled code must not change the result of).
//
// Rounding follows the ops' stated contracts: activations are BF16 between
// ops (every op computes in FP32 and rounds its result to BF16); index
// scores, softmax, router and logits stay FP32.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_UNITTESTS_REFERENCE_M3REFERENCE_H
#define MSAC_UNITTESTS_REFERENCE_M3REFERENCE_H

#include "msac/Checkpoint/Diagnostics.h"
#include "msac/Checkpoint/ModelConfig.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace msac::reference {

/// Rounds to the nearest BF16 value (ties to even).
float roundBF16(float x);

//===----------------------------------------------------------------------===//
// The MSA pieces, as free functions (unit-tested on hand-made inputs)
//===----------------------------------------------------------------------===//

/// Block scores of one query (§2.3): for every block b with a key j <= p,
/// the max over those keys of <q, key_j>; blocks past p/blockSize are
/// absent. `keys` holds `numKeys` vectors of `dim` floats.
std::vector<float> blockScores(const float *q, const float *keys,
                               int64_t numKeys, int64_t dim, int64_t position,
                               int64_t blockSize);

/// The top-k rule of §2.5 for a query at `position`: returns exactly `k`
/// logical block ids, -1 padded. n = L+1 <= k: 0..L in order. Otherwise the
/// `init` first blocks, then the best of the others by score (descending,
/// lower id wins ties, NaN ranks last), then the `local` last blocks.
std::vector<int32_t> selectBlocks(const std::vector<float> &scores,
                                  int64_t position, int64_t k,
                                  int64_t blockSize, int64_t local,
                                  int64_t init);

/// Exact softmax attention of one query head over the keys j <= position
/// of the listed blocks (-1 entries skipped; order does not matter), or of
/// all keys j <= position when `blocks` is null (§3.1). FP32; writes `dim`
/// outputs, returns the log-sum-exp (natural log; -inf with no key).
float attend(const float *q, const float *keys, const float *values,
             int64_t numKeys, int64_t dim, int64_t position, float scale,
             const std::vector<int32_t> *blocks, int64_t blockSize, float *out);

//===----------------------------------------------------------------------===//
// The whole text model
//===----------------------------------------------------------------------===//

class M3Reference {
public:
  /// Loads the config and every weight (dequantized to float) of a
  /// checkpoint folder. Returns null with diagnostics on failure.
  static std::unique_ptr<M3Reference> load(const std::string &dir,
                                           ckpt::Diagnostics &diags);

  /// The cached keys/values of one sequence.
  struct Sequence {
    int64_t length = 0;
    /// Per layer: [length][Hkv][D] keys and values, and [length][dI]
    /// index keys (MSA layers), BF16 values stored as float.
    std::vector<std::vector<float>> keys, values, indexKeys;
  };
  Sequence newSequence() const;

  /// Appends `tokens` to `seq` (prefill, a chunk of it, or decode steps)
  /// and returns FP32 logits, [tokens.size()][vocab] row-major.
  std::vector<float> forward(Sequence &seq, const std::vector<int32_t> &tokens);

  /// The blocks each MSA layer selected for the last `forward` call:
  /// [layer][token][group][k].
  const std::map<int64_t, std::vector<std::vector<std::vector<int32_t>>>> &
  lastSelections() const {
    return selections;
  }

  /// For each token of the last `forward` call, the smallest margin of a
  /// discrete decision it made (over all layers): the gap between the last
  /// chosen and the first rejected expert's biased router score, and
  /// between the last chosen and first rejected block score (relative to
  /// max(1, |score|)). A tiny margin means another correct implementation
  /// may round to the other choice.
  const std::vector<double> &lastMargins() const { return margins; }

  const ckpt::ModelConfig &config() const { return cfg; }

  /// Cache element formats (msa-m3-spec.md §4.1): with `kvFP8` / `indexFP8`
  /// the keys and values / index keys are stored as FP8 E4M3 (scale 1:
  /// saturating round to nearest even, LowPrecision.h) when appended; by
  /// default they stay BF16.
  void setCacheFormats(bool kvFP8, bool indexFP8) {
    kvE4M3 = kvFP8;
    indexE4M3 = indexFP8;
  }

private:
  M3Reference() = default;
  const std::vector<float> &w(const std::string &name) const;
  /// y[n] = sum_k x[k] * W[n][k] for a [N, K] weight.
  std::vector<float> matvec(const std::vector<float> &x,
                            const std::string &weight, int64_t n) const;
  std::vector<float> rmsNorm(const std::vector<float> &x,
                             const std::string &weight) const;
  void rope(float *head, int64_t position) const;
  std::vector<float> swigluMlp(const std::vector<float> &x,
                               const std::string &gate, const std::string &up,
                               const std::string &down, int64_t inner) const;

  ckpt::ModelConfig cfg;
  std::map<std::string, std::vector<float>> weights;
  std::map<int64_t, std::vector<std::vector<std::vector<int32_t>>>> selections;
  std::vector<double> margins;
  bool kvE4M3 = false, indexE4M3 = false;
};

} // namespace msac::reference

#endif // MSAC_UNITTESTS_REFERENCE_M3REFERENCE_H
