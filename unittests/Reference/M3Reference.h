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
#include "msac/Checkpoint/QuantizeWeights.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace msac::reference {

/// Rounds to the nearest BF16 value (ties to even).
float roundBF16(float x);

/// Element format of a cache (msa-m3-spec.md §4.1).
enum class CacheFormat { BF16, FP8, NVFP4 };

/// One NVFP4 block of a cache (msa-m3-spec.md §4.2, global scale 1):
/// quantizes the 16 values `x` as TensorRT-LLM's NVFP4 kernel does, with
/// exact FP32 divisions (scale = E4M3(amax / 6), codes = E2M1(x / scale),
/// zero codes when the scale is 0; a NaN makes the scale NaN), giving the
/// E4M3 scale byte and the 16 E2M1 codes (one per byte, low nibble).
void quantizeNVFP4Block(const float *x, uint8_t &scale, uint8_t *codes);
/// A cached NVFP4 value as the Q8KV4 kernels read it (§4.2
/// `inference.dequant`): code x scale in FP32, clamped to +-448, rounded
/// to E4M3; returned as float.
float dequantizeNVFP4ToFP8(uint8_t code, uint8_t scale);
/// Stores `n` values (a multiple of 16) in `format` and reads them back as
/// the attention and indexer read a cache: BF16 values unchanged (they are
/// BF16 already), FP8 rounded to E4M3 (scale 1, saturating), NVFP4
/// quantized per 16 and dequantized to FP8.
void roundTripCache(float *x, int64_t n, CacheFormat format);

/// Bytes of one cached vector of `dim` values in `format`, as a paged cache
/// of an artifact stores one token of one head (docs/architecture.md, "KV
/// and index caches"): BF16 2 x dim (little-endian), FP8 dim E4M3 bytes,
/// NVFP4 dim / 2 code bytes (value 2i in the low nibble of byte i) then
/// dim / 16 E4M3 scales.
int64_t cacheRowBytes(CacheFormat format, int64_t dim);

/// How a vector another implementation stored in a cache compares with the
/// reference's own (compareCacheRow).
struct CacheRowComparison {
  /// Values whose stored value (as the attention reads it) differs from
  /// the reference's.
  int64_t differing = 0;
  /// Whether every stored value is admitted (compareCacheRow).
  bool admissible = true;
};

/// Compares `other` (cacheRowBytes(format, dim) bytes that another
/// implementation stored) with the reference's own vector `own` (dim
/// values before storing; dim a multiple of 16 for NVFP4) and writes
/// `other` as the attention and the indexer read it to `otherValues`.
/// A stored value is admitted when it differs from the reference's stored
/// value by at most one step of the format at the larger of the two
/// (BF16 2^(e-7) in [2^e, 2^(e+1)); E4M3 2^(e-3), 2^-9 among subnormals;
/// NVFP4 the E2M1 step, 0.5 / 1 / 2 below 2 / 4 / 6, times the larger of
/// the two block scales, plus one E4M3 step) plus 1/64 of the largest
/// |value| of the reference's 16 in its block: upstream rounding drift of
/// a few BF16 ulps, which RoPE's rotations carry from a vector's large
/// values onto its small ones. NaN matches only NaN; an NVFP4 block's two
/// scales must be the same or adjacent non-negative E4M3 values. A wrong
/// layout, position or RoPE moves values far further; a wrong rounding
/// rule or scale stays within a step but changes about half the values.
CacheRowComparison compareCacheRow(CacheFormat format, const float *own,
                                   const uint8_t *other, int64_t dim,
                                   float *otherValues);

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

/// The near-tie rule of M3Reference::followChoices for one block decision
/// of a query at `position`: `other` (another implementation's list of as
/// many blocks) replaces `blocks` (selectBlocks' list) when it is a
/// different set and each of its blocks that `blocks` lacks is a block
/// b <= position / blockSize scoring within `bound` of `lastChosen` (the
/// score of the last ranked block), relative to max(1, |lastChosen|).
/// Returns whether it did.
bool followBlocks(const std::vector<float> &scores, int64_t position,
                  int64_t blockSize, float lastChosen, double bound,
                  const std::vector<int32_t> &other,
                  std::vector<int32_t> &blocks);

/// The same rule for one expert decision: `order` holds the expert ids by
/// biased score, best first, and the first `k` are chosen; `other` (k
/// expert ids) replaces them, ranked by biased score, when it is a
/// different set and each of its experts' biased scores is within `bound`
/// (absolute) of the k-th best. Returns whether it did.
bool followExperts(const std::vector<float> &biased, int64_t k, double bound,
                   const std::vector<int32_t> &other,
                   std::vector<int64_t> &order);

/// Exact softmax attention of one query head over the keys j <= position
/// of the listed blocks (-1 entries skipped; order does not matter), or of
/// all keys j <= position when `blocks` is null (§3.1). FP32; writes `dim`
/// outputs, returns the log-sum-exp (natural log; -inf with no key).
float attend(const float *q, const float *keys, const float *values,
             int64_t numKeys, int64_t dim, int64_t position, float scale,
             const std::vector<int32_t> *blocks, int64_t blockSize, float *out);

/// The same attention under MSA's FP8 decode contract (Q8KV8 / Q8KV4,
/// msa-m3-spec §3.2, the decode reference [S14]; #msa.attention_precision
/// q8): the query rounded to E4M3 (nearest even, saturating); the blocks
/// taken in the order listed (0, 1, ... when `blocks` is null), each
/// block's scores first raising the running maximum m, then each of its
/// keys adding E4M3(P) v to the accumulator and P (unrounded) to the
/// denominator, P = 448 exp(z - m); output accumulator / denominator (0
/// with no key). Returns the log-sum-exp of the scores (natural log).
float attendQ8(const float *q, const float *keys, const float *values,
               int64_t numKeys, int64_t dim, int64_t position, float scale,
               const std::vector<int32_t> *blocks, int64_t blockSize,
               float *out);

//===----------------------------------------------------------------------===//
// The whole text model
//===----------------------------------------------------------------------===//

class M3Reference {
public:
  /// Loads the config and every weight (dequantized to float) of a
  /// checkpoint folder. With `recipe`, the weights are first quantized as
  /// `msac compile --quantize-weights` does (the shared, unit-tested
  /// `ckpt::quantizeCheckpointWeights`), so the reference sees the bytes
  /// the artifact stores. Returns null with diagnostics on failure.
  static std::unique_ptr<M3Reference>
  load(const std::string &dir, ckpt::Diagnostics &diags,
       std::optional<ckpt::WeightRecipe> recipe = std::nullopt);

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

  /// Discrete choices another implementation made for the tokens of the
  /// next `forward` call: per MSA layer [token][group][k] block ids, per
  /// MoE layer [token][k] expert ids. Where the reference's own decision
  /// is a near tie (its margin, as lastMargins measures it, below `bound`)
  /// and the other choice is admissible (each of its blocks or experts
  /// scores within `bound` of the reference's last chosen one), `forward`
  /// takes that choice, so that later tokens read the same caches and
  /// hidden states: a near tie at one token then cannot look like an error
  /// at another. The token's margin still records the near tie.
  ///
  /// Cache entries another implementation stored for those tokens: per
  /// layer [token] the bytes of the new key and value of every KV head,
  /// head after head (cacheRowBytes each), and per MSA layer [token] the
  /// new index key. Each entry that compareCacheRow admits against the
  /// reference's own replaces it, whether or not a decision is near a
  /// tie: a rounding-level difference upstream that moves a value by a
  /// whole FP8 or NVFP4 step then cannot grow through later layers'
  /// attention into a different block choice. Entries further off are not
  /// taken (and lastCacheFollowing counts them).
  struct Choices {
    std::map<int64_t, std::vector<std::vector<std::vector<int32_t>>>> blocks;
    std::map<int64_t, std::vector<std::vector<int32_t>>> experts;
    std::map<int64_t, std::vector<std::vector<uint8_t>>> keyRows, valueRows,
        indexKeyRows;
    double bound = 0;
  };
  /// Follows `choices` (not owned; null: the reference's own choices) in
  /// the next `forward` calls.
  void followChoices(const Choices *choices) { follow = choices; }
  /// How many decisions the last `forward` call took from the followed
  /// choices.
  int64_t lastFollowed() const { return followed; }

  /// What the last `forward` call did with followed cache entries, per
  /// cache (keys, values, index keys) and layer.
  enum class CacheRole { Keys, Values, IndexKeys };
  struct CacheFollowing {
    int64_t rows = 0;         ///< entries (token x head) compared
    int64_t followedRows = 0; ///< of those, admissible ones taken
    int64_t values = 0;       ///< values compared
    int64_t differing = 0;    ///< values that differ from the reference's
    CacheFollowing &operator+=(const CacheFollowing &o) {
      rows += o.rows;
      followedRows += o.followedRows;
      values += o.values;
      differing += o.differing;
      return *this;
    }
  };
  const std::map<std::pair<CacheRole, int64_t>, CacheFollowing> &
  lastCacheFollowing() const {
    return cacheFollowing;
  }

  /// Cache element formats (msa-m3-spec.md §4.1): keys and values / index
  /// keys go through roundTripCache (per head) when appended; by default
  /// they stay BF16. With FP8 or NVFP4 index keys the index queries are
  /// rounded to E4M3 before scoring (Q8KV8 / Q8KV4, §3.2, §5.4).
  void setCacheFormats(CacheFormat kv, CacheFormat index) {
    kvFormat = kv;
    indexFormat = index;
  }

  /// The layers whose attention follows the q8 precision contract
  /// (attendQ8; `msac compile --attention-precision q8`); the others keep
  /// the exact one (attend). Default: none.
  void setQ8AttentionLayers(std::vector<bool> layers) {
    q8Layers = std::move(layers);
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
  bool q8Attention(int64_t layer) const {
    return layer < int64_t(q8Layers.size()) && q8Layers[layer];
  }

  CacheFormat kvFormat = CacheFormat::BF16, indexFormat = CacheFormat::BF16;
  std::vector<bool> q8Layers;
  const Choices *follow = nullptr;
  int64_t followed = 0;
  std::map<std::pair<CacheRole, int64_t>, CacheFollowing> cacheFollowing;
};

} // namespace msac::reference

#endif // MSAC_UNITTESTS_REFERENCE_M3REFERENCE_H
