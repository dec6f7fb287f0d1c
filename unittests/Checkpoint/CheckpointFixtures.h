//===- CheckpointFixtures.h - Small model folders for tests -----*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_UNITTESTS_CHECKPOINT_CHECKPOINTFIXTURES_H
#define MSAC_UNITTESTS_CHECKPOINT_CHECKPOINTFIXTURES_H

#include "TestFiles.h"

#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Checkpoint/ModelWeights.h"
#include "msac/Checkpoint/SafetensorsWriter.h"

#include "gtest/gtest.h"

#include <functional>
#include <map>
#include <string>

namespace msac::test {

/// `text` with the first `from` replaced by `to` (the test fails when
/// `from` is absent).
inline std::string replaceOnce(std::string text, const std::string &from,
                               const std::string &to) {
  size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no '" << from << "' in the text";
    return text;
  }
  return text.replace(at, from.size(), to);
}

/// Every diagnostic, one per line, for failure messages.
inline std::string describe(const ckpt::Diagnostics &diags) {
  std::string s;
  for (const ckpt::Diagnostic &d : diags.all())
    s += d.file + " | " + d.subject + " | " + d.message + "\n";
  return s;
}

/// A two-layer M3-shaped text config: layer 0 dense attention + dense MLP,
/// layer 1 MSA + MoE (2 experts, top 1, shared expert). `extraText` is
/// spliced into text_config (e.g. `"tie_word_embeddings": true,`).
inline std::string smallConfig(const std::string &extraText = "",
                               const std::string &extraTop = "") {
  return R"({"architectures":["MiniMaxM3SparseForConditionalGeneration"],
    "model_type":"minimax_m3_vl",)" +
         extraTop + R"(
    "text_config":{)" +
         extraText + R"(
      "model_type":"minimax_m3","hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
      "vocab_size":64,"rms_norm_eps":1e-6,"use_gemma_norm":true,
      "rope_theta":10000,"rotary_dim":8,"partial_rotary_factor":0.5,
      "use_qk_norm":true,"qk_norm_type":"per_head","hidden_act":"swigluoai",
      "swiglu_alpha":1.702,"swiglu_limit":7.0,"num_local_experts":2,
      "num_experts_per_tok":1,"n_shared_experts":1,"intermediate_size":32,
      "shared_intermediate_size":32,"dense_intermediate_size":64,
      "scoring_func":"sigmoid","use_routing_bias":true,
      "routed_scaling_factor":2.0,"moe_layer_freq":[0,1],
      "sparse_attention_config":{"use_sparse_attention":true,
        "sparse_index_dim":16,"sparse_num_index_heads":2,
        "sparse_topk_blocks":16,"sparse_block_size":128,
        "sparse_score_type":"max","sparse_init_block":0,"sparse_local_block":1,
        "sparse_attention_freq":[0,1],"sparse_disable_index_value":[0,1]}}})";
}

/// Writes `config.json` and one safetensors file holding every tensor of
/// the config (BF16, F32 router; zeros) under `language_model.`.
/// `edit(name, dtype, shape)` may change a tensor or return false to omit
/// it; `extra` adds tensors after the model's.
struct ExtraTensor {
  std::string name;
  ckpt::DType dtype;
  std::vector<int64_t> shape;
  std::string bytes; // empty: zeros
};

inline bool writeSmallCheckpoint(
    const std::string &dir, const std::string &configText,
    const std::function<bool(std::string &, ckpt::DType &,
                             std::vector<int64_t> &)> &edit = nullptr,
    const std::vector<ExtraTensor> &extra = {},
    const std::string &fileName = "model.safetensors") {
  using namespace ckpt;
  writeFile(dir + "/config.json", configText);
  Diagnostics diags;
  std::optional<ModelConfig> config =
      parseModelConfig(configText, "config.json", diags);
  if (!config)
    return false;
  SafetensorsWriter writer;
  std::map<size_t, std::string> contents;
  for (const WeightSpec &spec : modelWeightSpecs(*config)) {
    std::string name = "language_model." + spec.name;
    DType dtype = spec.name.find(".gate.weight") != std::string::npos ||
                          spec.name.find("correction_bias") != std::string::npos
                      ? DType::F32
                      : DType::BF16;
    std::vector<int64_t> shape = spec.shape;
    if (edit && !edit(name, dtype, shape))
      continue;
    writer.add(name, dtype, shape);
  }
  for (const ExtraTensor &t : extra)
    contents[writer.add(t.name, t.dtype, t.shape)] = t.bytes;
  return writer
      .write(dir + "/" + fileName,
             [&](size_t index, const SafetensorsWriter::Tensor &t,
                 std::FILE *out) {
               std::string bytes =
                   contents.count(index) && !contents[index].empty()
                       ? contents[index]
                       : std::string(t.bytes, '\0');
               std::fwrite(bytes.data(), 1, bytes.size(), out);
             })
      .empty();
}

/// An edit for writeSmallCheckpoint that omits every tensor whose name
/// contains `part`.
inline auto withoutTensors(std::string part) {
  return [part = std::move(part)](std::string &name, ckpt::DType &,
                                  std::vector<int64_t> &) {
    return name.find(part) == std::string::npos;
  };
}

} // namespace msac::test

#endif // MSAC_UNITTESTS_CHECKPOINT_CHECKPOINTFIXTURES_H
