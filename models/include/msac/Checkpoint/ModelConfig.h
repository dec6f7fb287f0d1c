//===- ModelConfig.h - MiniMax-M3 family config.json ------------*- C++ -*-===//
//
// Part of msac.
//
// Reads the Hugging Face `config.json` of a MiniMax-M3-family checkpoint:
// the multimodal wrapper (`text_config`, `vision_config`) or a text-only
// config; `sparse_attention_config` with its per-layer arrays; the MoE
// schedule (`moe_layer_freq`); Gemma norms; partial rotary; SwiGLU-OAI; the
// sigmoid router; and the quantization method (config `quantization_config`
// or ModelOpt's `hf_quant_config.json`). The layer schedule always comes
// from the file. Unknown fields are warnings; fields whose values msac does
// not implement (another activation, an output gate, RoPE scaling, grouped
// routing, ...) and contradictions are errors. Field meanings follow
// msa-m3-spec.md §1.2-§1.3.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_MODELCONFIG_H
#define MSAC_CHECKPOINT_MODELCONFIG_H

#include "msac/Checkpoint/Diagnostics.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace msac::ckpt {

enum class AttentionKind { Dense, Sparse };
enum class MlpKind { Dense, MoE };

struct LayerSpec {
  AttentionKind attention = AttentionKind::Dense;
  MlpKind mlp = MlpKind::Dense;
};

/// MSA index-branch and selection parameters (§1.3).
struct SparseAttentionConfig {
  int64_t indexHeads = 0;  ///< sparse_num_index_heads (= KV heads)
  int64_t indexDim = 0;    ///< sparse_index_dim
  int64_t topkBlocks = 0;  ///< sparse_topk_blocks, local block included
  int64_t blockSize = 0;   ///< sparse_block_size (= KV page size)
  int64_t initBlocks = 0;  ///< sparse_init_block
  int64_t localBlocks = 0; ///< sparse_local_block
};

enum class QuantMethod {
  None,              ///< every weight is bf16/f16/f32
  ModelOpt,          ///< NVIDIA ModelOpt: NVFP4 / MXFP8 / FP8, global scale multiplies
  CompressedTensors, ///< llm-compressor: NVFP4 `weight_packed`, global scale divides
  BlockFP8,          ///< `quant_method: fp8` with `weight_block_size`
};

struct QuantizationConfig {
  QuantMethod method = QuantMethod::None;
  /// ModelOpt `quant_algo` or compressed-tensors `format`.
  std::string algorithm;
  /// BlockFP8 tile shape (`weight_block_size`), normally [128, 128].
  std::vector<int64_t> weightBlockSize;
  /// Where the method was read from (config.json or hf_quant_config.json).
  std::string source;
  /// ModelOpt `kv_cache_quant_algo` (e.g. FP8, NVFP4: the KV-cache format
  /// the checkpoint was calibrated for); empty when absent or null.
  std::string kvCacheAlgorithm;
};

const char *quantMethodName(QuantMethod method);

struct ModelConfig {
  std::string modelType;     ///< text model_type
  std::string architecture;  ///< first of `architectures`, if any
  bool multimodalWrapper = false;

  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  int64_t vocabSize = 0;
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 0;
  bool gemmaNorm = false;
  double ropeTheta = 0;
  int64_t rotaryDim = 0;

  double swigluAlpha = 0;
  double swigluLimit = 0;

  int64_t numExperts = 0;
  int64_t expertsPerToken = 0;
  int64_t numSharedExperts = 0;
  int64_t moeIntermediateSize = 0;
  int64_t sharedIntermediateSize = 0;
  int64_t denseIntermediateSize = 0;
  bool routingBias = false;
  bool renormalize = true;
  double routedScalingFactor = 1.0;

  bool tieWordEmbeddings = false;
  std::optional<int64_t> bosTokenId;
  std::vector<int64_t> eosTokenIds;

  SparseAttentionConfig sparse;
  std::vector<LayerSpec> layers;
  QuantizationConfig quantization;

  int64_t numSparseLayers() const;
  int64_t numMoELayers() const;
};

/// Parses `configText` (the contents of config.json; `fileName` labels
/// diagnostics) and, when given, ModelOpt's hf_quant_config.json. Returns
/// nullopt when any error was reported.
std::optional<ModelConfig>
parseModelConfig(const std::string &configText, const std::string &fileName,
                 Diagnostics &diags,
                 const std::string *hfQuantConfigText = nullptr);

/// Reads `modelDir/config.json` (and `hf_quant_config.json` when present).
std::optional<ModelConfig> readModelConfig(const std::string &modelDir,
                                           Diagnostics &diags);

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_MODELCONFIG_H
