//===- ModelConfig.cpp - MiniMax-M3 family config.json --------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Checkpoint/JsonError.h"

#include "JsonKeys.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace msac::ckpt;
using json = nlohmann::json;
namespace fs = std::filesystem;

const char *msac::ckpt::quantMethodName(QuantMethod method) {
  switch (method) {
  case QuantMethod::None:
    return "none";
  case QuantMethod::ModelOpt:
    return "modelopt";
  case QuantMethod::CompressedTensors:
    return "compressed-tensors";
  case QuantMethod::BlockFP8:
    return "fp8";
  }
  return "?";
}

int64_t ModelConfig::numSparseLayers() const {
  int64_t n = 0;
  for (const LayerSpec &layer : layers)
    n += layer.attention == AttentionKind::Sparse;
  return n;
}

int64_t ModelConfig::numMoELayers() const {
  int64_t n = 0;
  for (const LayerSpec &layer : layers)
    n += layer.mlp == MlpKind::MoE;
  return n;
}

namespace {

/// Typed access to the fields of one JSON object. Remembers which keys were
/// read or declared known, so that the rest can be reported as unknown.
class Fields {
public:
  Fields(const json &object, std::string path, const std::string &file,
         Diagnostics &diags)
      : object(object), path(std::move(path)), file(file), diags(diags) {}

  std::string name(const char *key) const {
    return path.empty() ? key : path + "." + key;
  }

  const json *get(const char *key) {
    used.insert(key);
    auto it = object.find(key);
    if (it == object.end() || it->is_null())
      return nullptr;
    return &*it;
  }

  void error(const char *key, const std::string &message) {
    diags.error(file, name(key), message);
  }

  std::optional<int64_t> integer(const char *key, bool required,
                                 int64_t minimum = 0,
                                 int64_t maximum = int64_t(1) << 24) {
    const json *v = get(key);
    if (!v) {
      if (required)
        error(key, "is required");
      return std::nullopt;
    }
    if (!v->is_number_integer()) {
      error(key, "must be an integer, got " + v->dump());
      return std::nullopt;
    }
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      error(key, "is out of range: " + v->dump());
      return std::nullopt;
    }
    int64_t value = v->get<int64_t>();
    if (value < minimum) {
      error(key, "must be >= " + std::to_string(minimum) + ", got " +
                     std::to_string(value));
      return std::nullopt;
    }
    // Sizes beyond these bounds describe no real model and would make the
    // weight list or shapes overflow; refuse them before allocating.
    if (value > maximum) {
      error(key, "must be <= " + std::to_string(maximum) + ", got " +
                     std::to_string(value));
      return std::nullopt;
    }
    return value;
  }

  std::optional<double> number(const char *key, bool required,
                               bool positive = true) {
    const json *v = get(key);
    if (!v) {
      if (required)
        error(key, "is required");
      return std::nullopt;
    }
    if (!v->is_number()) {
      error(key, "must be a number, got " + v->dump());
      return std::nullopt;
    }
    double value = v->get<double>();
    if (!std::isfinite(value) || (positive && value <= 0)) {
      error(key, "must be a positive number, got " + v->dump());
      return std::nullopt;
    }
    // Kernels compute in FP32: the value must survive the conversion.
    if (positive && !std::isnormal(static_cast<float>(value))) {
      error(key, v->dump() + " is outside the FP32 range the kernels use");
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> boolean(const char *key) {
    const json *v = get(key);
    if (!v)
      return std::nullopt;
    if (v->is_boolean())
      return v->get<bool>();
    if (v->is_number_integer() && (v->get<int64_t>() == 0 ||
                                   v->get<int64_t>() == 1))
      return v->get<int64_t>() == 1;
    error(key, "must be true or false, got " + v->dump());
    return std::nullopt;
  }

  std::optional<std::string> string(const char *key) {
    const json *v = get(key);
    if (!v)
      return std::nullopt;
    if (!v->is_string()) {
      error(key, "must be a string, got " + v->dump());
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  /// Reads a per-layer 0/1 array of exactly `count` entries.
  std::optional<std::vector<bool>> layerFlags(const char *key,
                                              int64_t count) {
    const json *v = get(key);
    if (!v)
      return std::nullopt;
    if (!v->is_array()) {
      error(key, "must be a per-layer array of 0/1, got " + v->dump());
      return std::nullopt;
    }
    if (static_cast<int64_t>(v->size()) != count) {
      error(key, "has " + std::to_string(v->size()) +
                     " entries but num_hidden_layers is " +
                     std::to_string(count));
      return std::nullopt;
    }
    std::vector<bool> flags;
    for (size_t i = 0; i < v->size(); ++i) {
      const json &e = (*v)[i];
      if (e.is_boolean()) {
        flags.push_back(e.get<bool>());
      } else if (e.is_number_integer() &&
                 (e.get<int64_t>() == 0 || e.get<int64_t>() == 1)) {
        flags.push_back(e.get<int64_t>() == 1);
      } else {
        error(key, "entry " + std::to_string(i) + " must be 0 or 1, got " +
                       e.dump());
        return std::nullopt;
      }
    }
    return flags;
  }

  /// Declares keys that are understood and deliberately not used.
  void known(std::initializer_list<const char *> keys) {
    for (const char *key : keys)
      used.insert(key);
  }

  void warnUnknown() {
    for (auto it = object.begin(); it != object.end(); ++it)
      if (!used.count(it.key()))
        diags.warning(file, name(it.key().c_str()),
                      "unknown field ignored; msac does not model it");
  }

private:
  const json &object;
  std::string path;
  const std::string &file;
  Diagnostics &diags;
  std::set<std::string> used;
};

json parseJson(const std::string &text, const std::string &file,
               Diagnostics &diags, bool &ok) {
  ok = false;
  if (long long nul = detail::findNulByte(text.data(), text.data() + text.size());
      nul >= 0) {
    diags.error(file, "", detail::nulByteMessage(nul));
    return json();
  }
  try {
    json value = json::parse(text);
    ok = true;
    return value;
  } catch (const json::exception &e) {
    diags.error(file, "", "is not valid JSON: " + jsonErrorText(e.what()));
  }
  return json();
}

/// Reads `quantization_config` (HF style) into `q`.
void readQuantizationConfig(const json &object, const std::string &path,
                            const std::string &file, Diagnostics &diags,
                            QuantizationConfig &q) {
  if (!object.is_object()) {
    diags.error(file, path, "must be an object");
    return;
  }
  Fields f(object, path, file, diags);
  std::optional<std::string> method = f.string("quant_method");
  q.source = file;
  if (!method) {
    diags.error(file, path + ".quant_method", "is required");
    return;
  }
  if (*method == "modelopt") {
    q.method = QuantMethod::ModelOpt;
    q.algorithm = f.string("quant_algo").value_or("");
    if (const json *kv = f.get("kv_cache_quant_algo"); kv && kv->is_string())
      q.kvCacheAlgorithm = kv->get<std::string>();
  } else if (*method == "compressed-tensors") {
    q.method = QuantMethod::CompressedTensors;
    q.algorithm = f.string("format").value_or("");
    if (q.algorithm != "nvfp4-pack-quantized")
      diags.error(file, path + ".format",
                  "compressed-tensors format '" + q.algorithm +
                      "' is not supported; msac reads nvfp4-pack-quantized");
  } else if (*method == "fp8") {
    q.method = QuantMethod::BlockFP8;
    q.algorithm = "fp8";
    const json *block = f.get("weight_block_size");
    if (!block || !block->is_array() || block->size() != 2 ||
        !(*block)[0].is_number_integer() || !(*block)[1].is_number_integer() ||
        (*block)[0].get<int64_t>() <= 0 || (*block)[1].get<int64_t>() <= 0 ||
        (*block)[0].get<int64_t>() > 65536 ||
        (*block)[1].get<int64_t>() > 65536) {
      diags.error(file, path + ".weight_block_size",
                  "block FP8 needs weight_block_size = [rows, cols] of "
                  "integers in [1, 65536]");
    } else {
      q.weightBlockSize = {(*block)[0].get<int64_t>(),
                           (*block)[1].get<int64_t>()};
    }
  } else {
    diags.error(file, path + ".quant_method",
                "quantization method '" + *method +
                    "' is not supported; msac reads modelopt, "
                    "compressed-tensors (NVFP4) and fp8 (block)");
  }
}

} // namespace

std::optional<ModelConfig>
msac::ckpt::parseModelConfig(const std::string &configText,
                             const std::string &file, Diagnostics &diags,
                             const std::string *hfQuantConfigText) {
  const size_t errorsBefore = diags.errorCount();
  bool ok;
  json root = parseJson(configText, file, diags, ok);
  if (!ok)
    return std::nullopt;
  if (!root.is_object()) {
    diags.error(file, "", "must hold a JSON object");
    return std::nullopt;
  }
  for (const std::string &key :
       detail::findDuplicateKeys(configText.begin(), configText.end(), 1))
    diags.error(file, key, "appears more than once; which value is meant is "
                           "ambiguous");
  for (const std::string &key : detail::findDuplicateKeys(
           configText.begin(), configText.end(), 2, "text_config"))
    diags.error(file, "text_config." + key,
                "appears more than once; which value is meant is ambiguous");

  ModelConfig config;
  const json *text = &root;
  std::string textPath;
  Fields top(root, "", file, diags);
  if (const json *tc = top.get("text_config")) {
    if (!tc->is_object()) {
      diags.error(file, "text_config", "must be an object");
      return std::nullopt;
    }
    config.multimodalWrapper = true;
    text = tc;
    textPath = "text_config";
    top.known({"vision_config", "image_token_index", "video_token_index",
               "torch_dtype", "dtype", "transformers_version", "auto_map",
               "model_type", "processor_class", "pad_token_id",
               "bos_token_id", "eos_token_id", "initializer_range"});
    if (const json *arch = top.get("architectures"))
      if (arch->is_array() && !arch->empty() && (*arch)[0].is_string())
        config.architecture = (*arch)[0].get<std::string>();
  }
  Fields f(*text, textPath, file, diags);

  if (std::optional<std::string> type = f.string("model_type")) {
    config.modelType = *type;
    // The MiniMax-M3 family's model types (msa-m3-spec.md §1.2):
    // minimax_m3 (text), minimax_m3_vl (the wrapper).
    if (type->rfind("minimax_m3", 0) != 0)
      diags.warning(file,
                    (textPath.empty() ? "" : textPath + ".") + "model_type",
                    "is '" + *type +
                        "', not a MiniMax-M3-family type (minimax_m3...); "
                        "msac reads this config as MiniMax-M3, so another "
                        "architecture would compile into a wrong model");
  }
  if (config.multimodalWrapper)
    if (std::optional<std::string> type = top.string("model_type");
        type && type->rfind("minimax_m3", 0) != 0)
      diags.warning(file, "model_type",
                    "is '" + *type +
                        "', not a MiniMax-M3-family type (minimax_m3_vl); "
                        "msac reads this config as MiniMax-M3");
  if (!config.multimodalWrapper)
    if (const json *arch = f.get("architectures"))
      if (arch->is_array() && !arch->empty() && (*arch)[0].is_string())
        config.architecture = (*arch)[0].get<std::string>();
  f.known({"architectures", "torch_dtype", "dtype", "transformers_version",
           "auto_map", "initializer_range", "attention_dropout", "use_cache",
           "output_router_logits", "router_aux_loss_coef",
           "router_jitter_noise", "pad_token_id", "num_mtp_modules",
           "mtp_transformer_layers", "use_mtp", "image_token_index",
           "video_token_index", "swiglu_beta"});

  auto bounded = [&](const char *key, int64_t maximum) {
    return f.integer(key, /*required=*/true, 1, maximum).value_or(0);
  };
  config.hiddenSize = bounded("hidden_size", 1 << 17);
  config.numLayers = bounded("num_hidden_layers", 512);
  config.numHeads = bounded("num_attention_heads", 4096);
  config.numKVHeads = bounded("num_key_value_heads", 4096);
  config.vocabSize = bounded("vocab_size", 1 << 23);
  config.maxPositionEmbeddings =
      f.integer("max_position_embeddings", false, 1).value_or(0);
  if (auto headDim = f.integer("head_dim", false, 1, 4096)) {
    config.headDim = *headDim;
  } else if (f.get("head_dim")) {
    // Present but invalid: already reported.
  } else if (config.numHeads > 0 && config.hiddenSize % config.numHeads == 0) {
    config.headDim = config.hiddenSize / config.numHeads;
    diags.note(file, f.name("head_dim"),
               "absent; using hidden_size / num_attention_heads = " +
                   std::to_string(config.headDim));
  } else {
    diags.error(file, f.name("head_dim"), "is required");
  }
  if (config.numHeads > 0 && config.numKVHeads > 0 &&
      config.numHeads % config.numKVHeads != 0)
    diags.error(file, f.name("num_attention_heads"),
                std::to_string(config.numHeads) +
                    " is not a multiple of num_key_value_heads " +
                    std::to_string(config.numKVHeads));

  config.rmsNormEps = f.number("rms_norm_eps", true).value_or(0);
  config.gemmaNorm = f.boolean("use_gemma_norm").value_or(false);
  config.ropeTheta = f.number("rope_theta", true).value_or(0);

  // Partial rotary: rotary_dim and/or partial_rotary_factor must agree.
  std::optional<int64_t> rotaryDim = f.integer("rotary_dim", false, 1, 4096);
  std::optional<double> factor = f.number("partial_rotary_factor", false);
  if (factor && (*factor > 1.0))
    diags.error(file, f.name("partial_rotary_factor"),
                "must be in (0, 1], got " + std::to_string(*factor));
  if (factor && config.headDim > 0) {
    double fromFactor = *factor * static_cast<double>(config.headDim);
    if (rotaryDim && std::abs(fromFactor - static_cast<double>(*rotaryDim)) > 1e-9)
      diags.error(file, f.name("rotary_dim"),
                  std::to_string(*rotaryDim) +
                      " contradicts partial_rotary_factor x head_dim = " +
                      std::to_string(fromFactor));
    if (!rotaryDim)
      rotaryDim = static_cast<int64_t>(std::llround(fromFactor));
  }
  config.rotaryDim = rotaryDim.value_or(config.headDim);
  if (config.rotaryDim % 2 != 0 || config.rotaryDim > config.headDim)
    diags.error(file, f.name("rotary_dim"),
                std::to_string(config.rotaryDim) +
                    " must be even and at most head_dim " +
                    std::to_string(config.headDim));

  // Features msac implements exactly as M3 uses them; anything else is an
  // error rather than a silently different model.
  if (auto act = f.string("hidden_act"); act && *act != "swigluoai")
    diags.error(file, f.name("hidden_act"),
                "'" + *act + "' is not supported; MiniMax-M3 uses swigluoai");
  if (f.boolean("use_qk_norm").value_or(true) == false)
    diags.error(file, f.name("use_qk_norm"),
                "false is not supported; MiniMax-M3 normalizes q and k per "
                "head");
  if (auto type = f.string("qk_norm_type"); type && *type != "per_head")
    diags.error(file, f.name("qk_norm_type"),
                "'" + *type +
                    "' is not supported; msac implements per_head Q/K norm");
  if (f.boolean("attention_output_gate").value_or(false))
    diags.error(file, f.name("attention_output_gate"),
                "true is not supported (MiniMax-M3 has no output gate)");
  if (f.boolean("attention_bias").value_or(false))
    diags.error(file, f.name("attention_bias"),
                "true is not supported (MiniMax-M3 projections have no bias)");
  if (const json *scaling = f.get("rope_scaling"))
    diags.error(file, f.name("rope_scaling"),
                "RoPE scaling " + scaling->dump() + " is not supported");
  if (f.get("sliding_window"))
    diags.error(file, f.name("sliding_window"),
                "sliding-window attention is not supported");
  for (const char *key : {"n_group", "topk_group"})
    if (auto groups = f.integer(key, false, 0); groups && *groups > 1)
      diags.error(file, f.name(key),
                  "grouped expert routing is not supported; MiniMax-M3 "
                  "routes over a single group");
  if (auto scoring = f.string("scoring_func"); scoring && *scoring != "sigmoid")
    diags.error(file, f.name("scoring_func"),
                "'" + *scoring + "' is not supported; MiniMax-M3 uses sigmoid");

  config.swigluAlpha = f.number("swiglu_alpha", true).value_or(0);
  config.swigluLimit = f.number("swiglu_limit", true).value_or(0);
  config.routingBias = f.boolean("use_routing_bias").value_or(false);
  config.renormalize = f.boolean("norm_topk_prob").value_or(true);
  config.routedScalingFactor =
      f.number("routed_scaling_factor", false).value_or(1.0);
  config.tieWordEmbeddings = f.boolean("tie_word_embeddings")
                                 .value_or(top.boolean("tie_word_embeddings")
                                               .value_or(false));
  config.bosTokenId = f.integer("bos_token_id", false, 0, int64_t(1) << 23);
  if (const json *eos = f.get("eos_token_id")) {
    if (eos->is_number_integer())
      config.eosTokenIds.push_back(eos->get<int64_t>());
    else if (eos->is_array())
      for (const json &id : *eos)
        if (id.is_number_integer())
          config.eosTokenIds.push_back(id.get<int64_t>());
        else
          f.error("eos_token_id", "entries must be integers, got " + id.dump());
    else
      f.error("eos_token_id", "must be an integer or a list of integers");
  }

  auto checkTokenId = [&](const char *key, int64_t id) {
    if (config.vocabSize > 0 && (id < 0 || id >= config.vocabSize))
      diags.error(file, f.name(key),
                  "token id " + std::to_string(id) +
                      " is outside the vocabulary [0, " +
                      std::to_string(config.vocabSize) + ")");
  };
  if (config.bosTokenId)
    checkTokenId("bos_token_id", *config.bosTokenId);
  for (int64_t id : config.eosTokenIds)
    checkTokenId("eos_token_id", id);

  // Layer schedule: MoE layers.
  const int64_t n = config.numLayers;
  config.layers.assign(n > 0 ? n : 0, LayerSpec());
  if (n <= 0)
    f.known({"moe_layer_freq", "layer_types"}); // cannot be checked
  if (n > 0) {
    if (const json *freq = f.get("moe_layer_freq"); freq && !freq->is_array())
      f.error("moe_layer_freq",
              "must be a per-layer array of 0/1 (an integer period is "
              "ambiguous), got " +
                  freq->dump());
    else if (auto moe = f.layerFlags("moe_layer_freq", n))
      for (int64_t i = 0; i < n; ++i)
        config.layers[i].mlp = (*moe)[i] ? MlpKind::MoE : MlpKind::Dense;
    else if (!f.get("moe_layer_freq"))
      diags.error(file, f.name("moe_layer_freq"),
                  "is required: the per-layer MoE schedule is never guessed");
  }
  bool anyMoE = config.numMoELayers() > 0;
  bool anyDenseMlp = config.numMoELayers() < n;
  config.numExperts =
      f.integer("num_local_experts", anyMoE, 1, 1024).value_or(0);
  config.expertsPerToken =
      f.integer("num_experts_per_tok", anyMoE, 1).value_or(0);
  config.moeIntermediateSize =
      f.integer("intermediate_size", anyMoE, 1, 1 << 20).value_or(0);
  config.numSharedExperts = f.integer("n_shared_experts", false, 0).value_or(0);
  config.sharedIntermediateSize =
      f.integer("shared_intermediate_size", config.numSharedExperts > 0, 0,
                1 << 20)
          .value_or(0);
  config.denseIntermediateSize =
      f.integer("dense_intermediate_size", anyDenseMlp, 1, 1 << 20).value_or(0);
  if (anyMoE && config.numExperts > 0 &&
      config.expertsPerToken > config.numExperts)
    diags.error(file, f.name("num_experts_per_tok"),
                std::to_string(config.expertsPerToken) +
                    " exceeds num_local_experts " +
                    std::to_string(config.numExperts));
  if (config.numSharedExperts > 1)
    diags.error(file, f.name("n_shared_experts"),
                "only one shared expert is supported, got " +
                    std::to_string(config.numSharedExperts));
  if (config.numSharedExperts == 1 && config.sharedIntermediateSize == 0)
    diags.error(file, f.name("shared_intermediate_size"),
                "must be positive when n_shared_experts is 1");

  // Sparse attention (§1.3): in text_config, or at the top level.
  const json *sparseObject = f.get("sparse_attention_config");
  std::string sparsePath = f.name("sparse_attention_config");
  if (!sparseObject && config.multimodalWrapper) {
    sparseObject = top.get("sparse_attention_config");
    sparsePath = "sparse_attention_config";
  }
  std::optional<std::vector<bool>> sparseFlags;
  if (sparseObject) {
    if (!sparseObject->is_object()) {
      diags.error(file, sparsePath, "must be an object");
    } else {
      Fields s(*sparseObject, sparsePath, file, diags);
      bool enabled = s.boolean("use_sparse_attention").value_or(true);
      if (enabled) {
        SparseAttentionConfig &sp = config.sparse;
        sp.indexDim = s.integer("sparse_index_dim", true, 1, 4096).value_or(0);
        sp.indexHeads =
            s.integer("sparse_num_index_heads", true, 1, 4096).value_or(0);
        sp.topkBlocks =
            s.integer("sparse_topk_blocks", true, 1, 65536).value_or(0);
        sp.blockSize = s.integer("sparse_block_size", true, 1, 65536).value_or(0);
        sp.initBlocks = s.integer("sparse_init_block", false, 0).value_or(0);
        sp.localBlocks = s.integer("sparse_local_block", false, 0).value_or(1);
        if (auto score = s.string("sparse_score_type"); score && *score != "max")
          s.error("sparse_score_type",
                  "'" + *score + "' is not supported; MSA pools block "
                                 "scores with max");
        if (sp.indexHeads > 0 && config.numKVHeads > 0 &&
            sp.indexHeads != config.numKVHeads)
          s.error("sparse_num_index_heads",
                  std::to_string(sp.indexHeads) +
                      " must equal num_key_value_heads " +
                      std::to_string(config.numKVHeads) +
                      ": MSA selects blocks per GQA group, one index head "
                      "each");
        if (sp.indexDim > 0 && config.rotaryDim > sp.indexDim)
          s.error("sparse_index_dim",
                  std::to_string(sp.indexDim) +
                      " is smaller than rotary_dim " +
                      std::to_string(config.rotaryDim) +
                      "; the index branch uses the same partial RoPE");
        if (sp.topkBlocks > 0 && sp.initBlocks + sp.localBlocks > sp.topkBlocks)
          s.error("sparse_topk_blocks",
                  std::to_string(sp.topkBlocks) +
                      " is smaller than sparse_init_block + "
                      "sparse_local_block = " +
                      std::to_string(sp.initBlocks + sp.localBlocks));
        if (n <= 0)
          s.known({"sparse_attention_freq", "sparse_disable_index_value"});
        if (n > 0) {
          sparseFlags = s.layerFlags("sparse_attention_freq", n);
          if (!sparseFlags && !s.get("sparse_attention_freq"))
            s.error("sparse_attention_freq",
                    "is required: the per-layer attention schedule is never "
                    "guessed");
          if (auto noValue = s.layerFlags("sparse_disable_index_value", n);
              noValue && sparseFlags)
            for (int64_t i = 0; i < n; ++i)
              if ((*sparseFlags)[i] && !(*noValue)[i])
                s.error("sparse_disable_index_value",
                        "layer " + std::to_string(i) +
                            " is sparse with index value/output projections; "
                            "msac implements selection-only index branches");
        }
      } else {
        s.known({"sparse_index_dim", "sparse_num_index_heads",
                 "sparse_topk_blocks", "sparse_block_size", "sparse_init_block",
                 "sparse_local_block", "sparse_score_type",
                 "sparse_attention_freq", "sparse_disable_index_value"});
      }
      s.warnUnknown();
    }
  }
  // `layer_types` (the native transformers spelling) must agree.
  if (const json *types = f.get("layer_types"); types && n > 0) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != n) {
      f.error("layer_types", "must list one type per layer");
    } else {
      std::vector<bool> fromTypes;
      for (const json &t : *types) {
        std::string name = t.is_string() ? t.get<std::string>() : "";
        if (name != "full_attention" && name != "minimax_m3_sparse") {
          f.error("layer_types", "unknown layer type " + t.dump() +
                                     " (expected full_attention or "
                                     "minimax_m3_sparse)");
          fromTypes.clear();
          break;
        }
        fromTypes.push_back(name == "minimax_m3_sparse");
      }
      if (!fromTypes.empty()) {
        if (sparseFlags && *sparseFlags != fromTypes)
          f.error("layer_types", "contradicts "
                                 "sparse_attention_config.sparse_attention_"
                                 "freq");
        else if (!sparseFlags && config.sparse.blockSize > 0)
          sparseFlags = fromTypes;
        else if (!sparseFlags &&
                 std::find(fromTypes.begin(), fromTypes.end(), true) !=
                     fromTypes.end())
          f.error("layer_types",
                  "names sparse layers but there is no "
                  "sparse_attention_config");
      }
    }
  }
  if (sparseFlags)
    for (int64_t i = 0; i < n; ++i)
      config.layers[i].attention =
          (*sparseFlags)[i] ? AttentionKind::Sparse : AttentionKind::Dense;

  // Quantization: config.json, then ModelOpt's hf_quant_config.json.
  const json *quant = f.get("quantization_config");
  std::string quantPath = f.name("quantization_config");
  if (!quant && config.multimodalWrapper) {
    quant = top.get("quantization_config");
    quantPath = "quantization_config";
  }
  if (quant)
    readQuantizationConfig(*quant, quantPath, file, diags,
                           config.quantization);
  if (hfQuantConfigText) {
    // Name it next to config.json so that messages carry the folder.
    const std::string hfFile =
        (fs::path(file).parent_path() / "hf_quant_config.json").string();
    bool hfOk;
    json hf = parseJson(*hfQuantConfigText, hfFile, diags, hfOk);
    if (hfOk) {
      const json *q = hf.is_object() && hf.contains("quantization")
                          ? &hf["quantization"]
                          : nullptr;
      if (!q || !q->is_object() || !q->contains("quant_algo") ||
          !(*q)["quant_algo"].is_string()) {
        diags.error(hfFile, "quantization.quant_algo", "is required");
      } else if (config.quantization.method != QuantMethod::None &&
                 config.quantization.method != QuantMethod::ModelOpt) {
        diags.error(hfFile, "",
                    "contradicts config.json, whose quantization method is " +
                        std::string(quantMethodName(config.quantization.method)));
      } else {
        config.quantization.method = QuantMethod::ModelOpt;
        config.quantization.algorithm = (*q)["quant_algo"].get<std::string>();
        config.quantization.source = hfFile;
        if (q->contains("kv_cache_quant_algo") &&
            (*q)["kv_cache_quant_algo"].is_string())
          config.quantization.kvCacheAlgorithm =
              (*q)["kv_cache_quant_algo"].get<std::string>();
      }
    }
  }
  if (config.quantization.method == QuantMethod::ModelOpt) {
    const std::string &algo = config.quantization.algorithm;
    if (algo != "NVFP4" && algo != "FP8" && algo != "MXFP8" &&
        algo != "MIXED_PRECISION")
      diags.error(config.quantization.source, "quant_algo",
                  "ModelOpt algorithm '" + algo +
                      "' is not supported; msac reads NVFP4, MXFP8, FP8 and "
                      "MIXED_PRECISION");
  }

  f.warnUnknown();
  top.known({"architectures", "text_config", "tie_word_embeddings",
             "quantization_config", "sparse_attention_config"});
  if (config.multimodalWrapper)
    top.warnUnknown();
  if (diags.errorCount() != errorsBefore)
    return std::nullopt;
  return config;
}

std::optional<ModelConfig> msac::ckpt::readModelConfig(const std::string &dir,
                                                       Diagnostics &diags) {
  const fs::path configPath = fs::path(dir) / "config.json";
  std::error_code ec;
  if (fs::exists(configPath, ec) && !fs::is_regular_file(configPath, ec)) {
    diags.error(configPath.string(), "", "is not a regular file");
    return std::nullopt;
  }
  std::ifstream in(configPath, std::ios::binary);
  if (!in) {
    diags.error(configPath.string(), "",
                "cannot be read; a checkpoint folder needs a config.json");
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string hfText;
  bool hasHf = false;
  const fs::path hfPath = fs::path(dir) / "hf_quant_config.json";
  if (fs::exists(hfPath, ec) && !fs::is_regular_file(hfPath, ec)) {
    diags.error(hfPath.string(), "", "is not a regular file");
    return std::nullopt;
  }
  if (std::ifstream hf(hfPath, std::ios::binary); hf) {
    std::stringstream hfStream;
    hfStream << hf.rdbuf();
    hfText = hfStream.str();
    hasHf = true;
  }
  return parseModelConfig(text.str(), configPath.string(), diags,
                          hasHf ? &hfText : nullptr);
}
