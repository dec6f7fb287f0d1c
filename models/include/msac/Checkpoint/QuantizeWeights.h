//===- QuantizeWeights.h - Compile-time weight quantization -----*- C++ -*-===//
//
// Part of msac.
//
// `msac compile|import --quantize-weights=RECIPE` quantizes the projection
// weights of a bf16/f16/f32 checkpoint with a standard recipe and lays the
// results over the checkpoint as the tensors an NVIDIA ModelOpt checkpoint
// of that format holds (`weight`, `weight_scale`, `weight_scale_2`), with
// the config's quantization method set to match (ModelOpt; block FP8 for
// `fp8`). From there on the
// ordinary block-scaled path (weight resolution, import, artifact) cannot
// tell the result from a checkpoint stored in that format.
//
// Recipes (which weights get which format):
// - nvfp4-experts: MiniMax-M3.1-Flash's layout (msa-m3-spec.md §1.6,
//   "NVFP4 routed experts, MXFP8 attention paths, retained BF16/F32
//   tensors"): routed experts NVFP4, every other projection (attention,
//   index branch, shared expert, dense-layer MLP) MXFP8.
// - mxfp8: every projection MXFP8.
// - fp8: every projection block FP8: E4M3 with one FP32 scale per 128 x 128
//   tile (`weight_scale_inv`, `quant_method: fp8`, weight_block_size
//   [128, 128]; the DeepSeek-V3 / MiniMax form the import path reads as
//   `fp8-block`).
// - fp8-tensor: every projection per-tensor FP8 (ModelOpt `FP8`: one F32
//   `weight_scale` = amax / 448 per projection, `quant_algo: FP8`); the
//   routed experts' scales stack to one per expert.
// In every recipe the embedding, the norms, the router gate and its bias,
// and the LM head keep their stored dtype: ModelOpt's default
// configurations quantize only linear layers and exclude `lm_head` and the
// MoE router, and the M3.1-Flash checkpoint retains them in BF16/F32.
// The arithmetic is numerics/BlockQuantize.h's.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CHECKPOINT_QUANTIZEWEIGHTS_H
#define MSAC_CHECKPOINT_QUANTIZEWEIGHTS_H

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Checkpoint/ModelWeights.h"

#include <optional>
#include <string_view>

namespace msac::ckpt {

enum class WeightRecipe { NVFP4Experts, MXFP8, FP8, FP8Tensor };

/// The recipe called `name` (`nvfp4-experts`, `mxfp8`, `fp8`), or nullopt.
std::optional<WeightRecipe> parseWeightRecipe(std::string_view name);
const char *weightRecipeName(WeightRecipe recipe);
/// "nvfp4-experts, mxfp8, fp8", for messages.
const char *weightRecipeList();

/// The format `recipe` gives the weight `spec`; Float keeps it as stored.
WeightFormat recipeFormat(WeightRecipe recipe, const WeightSpec &spec);

/// One [n, k] weight quantized as a ModelOpt checkpoint stores it.
struct QuantizedWeight {
  DType dtype = DType::U8;    ///< payload: U8 (E2M1 pairs) or F8_E4M3
  std::vector<int64_t> shape; ///< [n, k / 2] for NVFP4, else [n, k]
  std::vector<uint8_t> data;
  DType scaleDType = DType::F32; ///< F8_E4M3 (NVFP4), U8 (E8M0), F32 (FP8)
  std::vector<int64_t> scaleShape;
  std::vector<uint8_t> scale;
  /// NVFP4 only: the FP32 global scale (`weight_scale_2`).
  std::optional<float> globalScale;
};

/// Quantizes the finite row-major [n, k] `values` to `format` (NVFP4:
/// k % 16 == 0, MXFP8: k % 32 == 0, FP8Block: 128 x 128 tiles, partial at
/// the edges, FP8Tensor). Payload bytes hold element 2i in the low nibble
/// of byte i for NVFP4.
QuantizedWeight quantizeWeight(WeightFormat format, const float *values,
                               int64_t n, int64_t k);

/// Bytes of the payload and scales `quantizeWeight` gives an [n, k] weight
/// in `format` (as quantizeCheckpointWeights stores them).
uint64_t quantizedWeightBytes(WeightFormat format, int64_t n, int64_t k);

/// Quantizes the weights `recipe` selects in `checkpoint` (read from
/// `config`'s folder), lays the quantized tensors over it (a temporary
/// safetensors file, mapped) and declares ModelOpt quantization in
/// `config`. Reports, naming the flag and the tensor: a checkpoint that is
/// already quantized, a weight of a non-float dtype, a K that is not a
/// multiple of the format's block size, a non-finite value. Returns false
/// (and changes nothing) when any error was reported.
bool quantizeCheckpointWeights(ModelConfig &config, Checkpoint &checkpoint,
                               WeightRecipe recipe, Diagnostics &diags);

} // namespace msac::ckpt

#endif // MSAC_CHECKPOINT_QUANTIZEWEIGHTS_H
