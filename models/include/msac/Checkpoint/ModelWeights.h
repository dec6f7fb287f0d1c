//===- ModelWeights.h - The weights a MiniMax-M3 graph reads ----*- C++ -*-===//
//
// Part of msac.
//
// `modelWeightSpecs` lists every tensor the text model reads, with the shape
// the config implies (msa-m3-spec.md §1.5 naming). `resolveWeights` finds
// each one in a checkpoint and works out its storage format from the tensors
// present: a float `weight`; NVFP4 (`weight` U8 [N, K/2] + E4M3
// `weight_scale` [N, K/16] + FP32 `weight_scale_2`, ModelOpt; or
// `weight_packed` + `weight_scale` + `weight_global_scale` stored as a
// divisor, compressed-tensors); MXFP8/MXFP4 (E8M0 `weight_scale` [N, K/32]);
// block FP8 (`weight_scale_inv`); per-tensor FP8. The format must agree with
// the config's quantization method, which alone decides whether a global
// scale multiplies or divides. Every missing tensor, wrong shape or dtype,
// and inconsistency is reported, naming the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_MODELWEIGHTS_H
#define MSAC_CHECKPOINT_MODELWEIGHTS_H

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/ModelConfig.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace msac::ckpt {

/// A tensor the model graph reads, by its logical name (no
/// `language_model.` prefix).
struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  /// A projection weight `[out, in]`, which a checkpoint may quantize.
  bool linear = false;
};

/// Every tensor the text model of `config` reads, in graph order.
std::vector<WeightSpec> modelWeightSpecs(const ModelConfig &config);

enum class WeightFormat { Float, NVFP4, MXFP8, MXFP4, FP8Block, FP8Tensor };
const char *weightFormatName(WeightFormat format);

struct ResolvedWeight {
  std::string name;           ///< logical name, e.g. `lm_head.weight`
  std::vector<int64_t> shape; ///< logical shape
  WeightFormat format = WeightFormat::Float;
  DType dtype = DType::BF16;  ///< float dtype, or the payload dtype
  std::string data;           ///< checkpoint tensor holding the payload
  std::vector<int64_t> dataShape;
  std::string scale;          ///< block or tensor scales ("" for Float)
  DType scaleDType = DType::F32;
  std::vector<int64_t> scaleShape;
  std::string globalScale;    ///< FP32 second-level scale, "" if none
  std::vector<int64_t> globalScaleShape; ///< [] or [1] as stored
  bool globalScaleIsDivisor = false; ///< compressed-tensors convention
  std::string inputScale;     ///< ModelOpt activation scale, "" if none
  uint64_t storedBytes = 0;   ///< payload + scales + global scale
};

struct ModelWeights {
  /// Prefix of the text tensors in the checkpoint (`language_model.` in the
  /// multimodal MiniMax-M3 checkpoints, otherwise empty).
  std::string prefix;
  std::map<std::string, ResolvedWeight> byName;
  /// The config ties the embedding and the checkpoint has no lm_head, so
  /// `lm_head.weight` resolves to the embedding's storage.
  bool lmHeadTied = false;

  const ResolvedWeight *get(const std::string &name) const;
};

/// Resolves every tensor of `modelWeightSpecs(config)` in `checkpoint`.
/// Returns nullopt when any error was reported.
std::optional<ModelWeights> resolveWeights(const ModelConfig &config,
                                           const Checkpoint &checkpoint,
                                           Diagnostics &diags);

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_MODELWEIGHTS_H
