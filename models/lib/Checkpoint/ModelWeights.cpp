//===- ModelWeights.cpp - The weights a MiniMax-M3 graph reads ------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/ModelWeights.h"

#include <cmath>
#include <cstring>
#include <set>

using namespace msac::ckpt;

const char *msac::ckpt::weightFormatName(WeightFormat format) {
  switch (format) {
  case WeightFormat::Float:
    return "float";
  case WeightFormat::NVFP4:
    return "nvfp4";
  case WeightFormat::MXFP8:
    return "mxfp8";
  case WeightFormat::MXFP4:
    return "mxfp4";
  case WeightFormat::FP8Block:
    return "fp8-block";
  case WeightFormat::FP8Tensor:
    return "fp8";
  }
  return "?";
}

std::vector<WeightSpec> msac::ckpt::modelWeightSpecs(const ModelConfig &c) {
  std::vector<WeightSpec> specs;
  const int64_t h = c.hiddenSize;
  auto plain = [&](std::string name, std::vector<int64_t> shape) {
    specs.push_back({std::move(name), std::move(shape), false});
  };
  auto linear = [&](std::string name, int64_t out, int64_t in) {
    specs.push_back({std::move(name), {out, in}, true});
  };
  plain("model.embed_tokens.weight", {c.vocabSize, h});
  for (int64_t l = 0; l < c.numLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const LayerSpec &layer = c.layers[l];
    plain(p + "input_layernorm.weight", {h});
    linear(p + "self_attn.q_proj.weight", c.numHeads * c.headDim, h);
    linear(p + "self_attn.k_proj.weight", c.numKVHeads * c.headDim, h);
    linear(p + "self_attn.v_proj.weight", c.numKVHeads * c.headDim, h);
    plain(p + "self_attn.q_norm.weight", {c.headDim});
    plain(p + "self_attn.k_norm.weight", {c.headDim});
    if (layer.attention == AttentionKind::Sparse) {
      const SparseAttentionConfig &s = c.sparse;
      linear(p + "self_attn.index_q_proj.weight", s.indexHeads * s.indexDim,
             h);
      linear(p + "self_attn.index_k_proj.weight", s.indexDim, h);
      plain(p + "self_attn.index_q_norm.weight", {s.indexDim});
      plain(p + "self_attn.index_k_norm.weight", {s.indexDim});
    }
    linear(p + "self_attn.o_proj.weight", h, c.numHeads * c.headDim);
    plain(p + "post_attention_layernorm.weight", {h});
    if (layer.mlp == MlpKind::Dense) {
      linear(p + "mlp.gate_proj.weight", c.denseIntermediateSize, h);
      linear(p + "mlp.up_proj.weight", c.denseIntermediateSize, h);
      linear(p + "mlp.down_proj.weight", h, c.denseIntermediateSize);
      continue;
    }
    const std::string m = p + "block_sparse_moe.";
    plain(m + "gate.weight", {c.numExperts, h});
    if (c.routingBias)
      plain(m + "e_score_correction_bias", {c.numExperts});
    for (int64_t e = 0; e < c.numExperts; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      linear(x + "w1.weight", c.moeIntermediateSize, h);
      linear(x + "w3.weight", c.moeIntermediateSize, h);
      linear(x + "w2.weight", h, c.moeIntermediateSize);
    }
    if (c.numSharedExperts > 0) {
      linear(m + "shared_experts.gate_proj.weight", c.sharedIntermediateSize,
             h);
      linear(m + "shared_experts.up_proj.weight", c.sharedIntermediateSize, h);
      linear(m + "shared_experts.down_proj.weight", h,
             c.sharedIntermediateSize);
    }
  }
  plain("model.norm.weight", {h});
  linear("lm_head.weight", c.vocabSize, h);
  return specs;
}

const ResolvedWeight *ModelWeights::get(const std::string &name) const {
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : &it->second;
}

namespace {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string quoted(const std::string &name) { return "tensor '" + name + "'"; }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool isScalarShape(const std::vector<int64_t> &shape) {
  return shape.empty() || (shape.size() == 1 && shape[0] == 1);
}

/// Resolves tensors of one checkpoint against the specs of one config.
class Resolver {
public:
  Resolver(const ModelConfig &config, const Checkpoint &checkpoint,
           Diagnostics &diags)
      : config(config), ckpt(checkpoint), diags(diags) {}

  std::optional<ModelWeights> run();

private:
  const Checkpoint::Entry *lookup(const std::string &logical) {
    const Checkpoint::Entry *entry = ckpt.find(weights.prefix + logical);
    if (entry)
      used.insert(weights.prefix + logical);
    return entry;
  }
  std::string fileOf(const Checkpoint::Entry *entry) const {
    return entry ? entry->file->path() : ckpt.directory();
  }
  /// Reports the missing tensor `name` of logical `shape`. A shard whose
  /// unclaimed bytes (a hole, a tail) have exactly its size in a float or
  /// FP8 dtype most likely lost its header entry: the error names that
  /// shard and range instead of the folder.
  void reportMissing(const std::string &name, const std::vector<int64_t> &shape,
                     const std::string &what) {
    uint64_t elements = 1;
    for (int64_t d : shape)
      elements *= static_cast<uint64_t>(d);
    for (const auto &file : ckpt.shards())
      for (const auto &[begin, end] : file->unclaimed())
        for (DType dtype : {DType::BF16, DType::F32, DType::F8_E4M3}) {
          if (end - begin != elements * dtypeBits(dtype) / 8)
            continue;
          diags.error(file->path(), quoted(name),
                      "is missing; the config implies " + what +
                          ", and data bytes [" + std::to_string(begin) + ", " +
                          std::to_string(end) +
                          ") of this file belong to no tensor but have its "
                          "size in " +
                          std::string(dtypeName(dtype)) +
                          ": its header entry was probably removed");
          return;
        }
    diags.error(ckpt.directory(), quoted(name),
                "is missing; the config implies " + what);
  }
  /// Checks the shape of `entry`. Mismatches are collected and reported
  /// together by reportShapeMismatches, which can then name their common
  /// cause.
  bool expectShape(const Checkpoint::Entry *entry, const std::string &name,
                   const std::vector<int64_t> &expected, const char *what) {
    if (entry->info->shape == expected)
      return true;
    mismatches.push_back(
        {fileOf(entry), name, what, entry->info->shape, expected});
    return false;
  }
  std::string shapeMismatchCause(std::string &field) const;
  void reportShapeMismatches();
  void requireMethod(QuantMethod method, const std::string &name,
                     const char *format) {
    if (config.quantization.method == method)
      return;
    diags.error(ckpt.directory(), quoted(name),
                std::string("is stored as ") + format +
                    ", which needs quantization method " +
                    quantMethodName(method) + " but the config declares " +
                    quantMethodName(config.quantization.method) +
                    " (quantization_config / hf_quant_config.json)");
  }
  void checkE8M0Bytes(const Checkpoint::Entry *entry, const std::string &name);
  bool resolvePlain(const WeightSpec &spec, ResolvedWeight &out);
  bool resolveLinear(const WeightSpec &spec, ResolvedWeight &out);
  void reportUnused();

  const ModelConfig &config;
  const Checkpoint &ckpt;
  Diagnostics &diags;
  ModelWeights weights;
  std::set<std::string> used;

  struct ShapeMismatch {
    std::string file;
    std::string name;
    const char *what;
    std::vector<int64_t> actual;
    std::vector<int64_t> expected;
  };
  std::vector<ShapeMismatch> mismatches;
};

/// The size of a tensor dimension that config.json defines: `name` is how
/// messages call it, `field` the config field it is read from and `fields`
/// every field it depends on.
struct ConfigDimension {
  std::string name;
  int64_t value;
  std::string field;
  std::string fields;
};

/// When every shape mismatch is explained by one config dimension (say,
/// hidden_size edited in config.json: each mismatched tensor has the
/// checkpoint's size where the config implies the edited one, or, in a
/// packed FP4 payload or a block scale, that size over the packing or block
/// factor), returns the message naming it and sets `field` to its config
/// field; else "".
std::string Resolver::shapeMismatchCause(std::string &field) const {
  if (mismatches.size() < 2)
    return "";
  // Every differing dimension, as (config size, checkpoint size).
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (const ShapeMismatch &m : mismatches) {
    if (m.actual.size() != m.expected.size())
      return "";
    for (size_t i = 0; i < m.actual.size(); ++i)
      if (m.actual[i] != m.expected[i])
        pairs.insert({m.expected[i], m.actual[i]});
  }
  const ModelConfig &c = config;
  const std::string text = c.multimodalWrapper ? "text_config." : "";
  const std::string sparse = text + "sparse_attention_config.";
  auto one = [](std::string name, int64_t value, std::string field) {
    return ConfigDimension{name, value, field, field};
  };
  auto product = [](std::string name, int64_t value, std::string first,
                    std::string second) {
    return ConfigDimension{name, value, first, first + " and " + second};
  };
  std::vector<ConfigDimension> dims = {
      one("hidden_size", c.hiddenSize, text + "hidden_size"),
      one("vocab_size", c.vocabSize, text + "vocab_size"),
      one("head_dim", c.headDim, text + "head_dim"),
      product("num_attention_heads x head_dim", c.numHeads * c.headDim,
              text + "num_attention_heads", text + "head_dim"),
      product("num_key_value_heads x head_dim", c.numKVHeads * c.headDim,
              text + "num_key_value_heads", text + "head_dim"),
      one("intermediate_size", c.moeIntermediateSize,
          text + "intermediate_size"),
      one("dense_intermediate_size", c.denseIntermediateSize,
          text + "dense_intermediate_size"),
      one("shared_intermediate_size", c.sharedIntermediateSize,
          text + "shared_intermediate_size"),
      one("num_local_experts", c.numExperts, text + "num_local_experts"),
      one("sparse_index_dim", c.sparse.indexDim, sparse + "sparse_index_dim"),
      product("sparse_num_index_heads x sparse_index_dim",
              c.sparse.indexHeads * c.sparse.indexDim,
              sparse + "sparse_num_index_heads", sparse + "sparse_index_dim")};
  // Whether (configSize, ckptSize) explains every differing dimension.
  auto explainsAll = [&](int64_t configSize, int64_t ckptSize) {
    for (const ShapeMismatch &m : mismatches) {
      const std::string what = m.what;
      const bool packed = what.find("payload") != std::string::npos ||
                          what.find("scale") != std::string::npos;
      for (size_t i = 0; i < m.actual.size(); ++i) {
        const int64_t e = m.expected[i], a = m.actual[i];
        if (e == a || (e == configSize && a == ckptSize))
          continue;
        // E2M1 pairs per byte; NVFP4 and MX scale blocks.
        bool fraction = false;
        for (int64_t factor : {2, 16, 32})
          fraction |=
              packed && e * factor == configSize && a * factor == ckptSize;
        if (!fraction)
          return false;
      }
    }
    return true;
  };
  for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
    const auto [configSize, ckptSize] = *it;
    if (!explainsAll(configSize, ckptSize))
      continue;
    std::vector<const ConfigDimension *> matching;
    for (const ConfigDimension &d : dims)
      if (d.value > 0 && d.value == configSize)
        matching.push_back(&d);
    if (matching.empty())
      return "";
    std::string names, fields;
    for (size_t i = 0; i < matching.size(); ++i) {
      names += (i ? " or " : "") + matching[i]->name;
      fields += (i ? " or " : "") + matching[i]->fields;
    }
    field = matching.front()->field;
    return "every one of the " + std::to_string(mismatches.size()) +
           " tensors whose shape contradicts the config disagrees in the "
           "dimension " +
           names + " = " + std::to_string(configSize) +
           " from config.json, where the checkpoint's tensors say " +
           std::to_string(ckptSize) + "; check " + fields +
           " in config.json (or that config.json belongs to this "
           "checkpoint)";
  }
  return "";
}

void Resolver::reportShapeMismatches() {
  if (mismatches.empty())
    return;
  auto describe = [](const ShapeMismatch &m) {
    return std::string(m.what) + " has shape " + shapeString(m.actual) +
           " but the config implies " + shapeString(m.expected);
  };
  std::string field;
  const std::string cause = shapeMismatchCause(field);
  // One likely cause: one error, a few examples; otherwise each mismatch
  // is its own problem, the list capped.
  const size_t listed = cause.empty() ? 10 : 3;
  if (!cause.empty())
    diags.error(ckpt.directory() + "/config.json", field, cause);
  for (size_t i = 0; i < mismatches.size() && i < listed; ++i) {
    const ShapeMismatch &m = mismatches[i];
    if (cause.empty())
      diags.error(m.file, quoted(m.name), describe(m));
    else
      diags.note(m.file, quoted(m.name), describe(m));
  }
  if (mismatches.size() > listed)
    diags.note(ckpt.directory(), "",
               "and " + std::to_string(mismatches.size() - listed) +
                   " more tensors whose shape contradicts the config");
}

void Resolver::checkE8M0Bytes(const Checkpoint::Entry *entry,
                              const std::string &name) {
  // E8M0 byte 0xFF encodes NaN: a corrupt scale, never a real one.
  const uint8_t *bytes = entry->file->data(*entry->info);
  for (uint64_t i = 0; i < entry->info->numBytes(); ++i)
    if (bytes[i] == 0xFF) {
      diags.error(fileOf(entry), quoted(name),
                  "E8M0 scale byte 0xFF (NaN) at element " + std::to_string(i) +
                      "; the checkpoint's MX scales are corrupt");
      return;
    }
}

bool Resolver::resolvePlain(const WeightSpec &spec, ResolvedWeight &out) {
  const Checkpoint::Entry *entry = lookup(spec.name);
  if (!entry) {
    reportMissing(weights.prefix + spec.name, spec.shape,
                  "shape " + shapeString(spec.shape));
    return false;
  }
  const std::string full = weights.prefix + spec.name;
  if (!isDenseFloat(entry->info->dtype)) {
    diags.error(fileOf(entry), quoted(full),
                "has dtype " + std::string(dtypeName(entry->info->dtype)) +
                    "; expected BF16, F16 or F32");
    return false;
  }
  if (!expectShape(entry, full, spec.shape, "tensor"))
    return false;
  if (spec.name.find("e_score_correction_bias") != std::string::npos &&
      entry->info->dtype != DType::F32) {
    diags.error(fileOf(entry), quoted(full),
                "has dtype " + std::string(dtypeName(entry->info->dtype)) +
                    "; the router correction bias must be F32");
    return false;
  }
  out.format = WeightFormat::Float;
  out.dtype = entry->info->dtype;
  out.data = full;
  out.dataShape = entry->info->shape;
  out.storedBytes = entry->info->numBytes();
  return true;
}

bool Resolver::resolveLinear(const WeightSpec &spec, ResolvedWeight &out) {
  // spec.name ends in ".weight"; the module is the part before it.
  const std::string module =
      weights.prefix + spec.name.substr(0, spec.name.size() - 7);
  const std::string logicalModule = spec.name.substr(0, spec.name.size() - 7);
  const int64_t n = spec.shape[0], k = spec.shape[1];
  auto find = [&](const char *suffix) {
    return lookup(logicalModule + suffix);
  };

  if (const Checkpoint::Entry *packed = find(".weight_packed")) {
    // compressed-tensors NVFP4: global scale stored as a divisor.
    requireMethod(QuantMethod::CompressedTensors, module + ".weight_packed",
                  "compressed-tensors NVFP4");
    bool ok = expectShape(packed, module + ".weight_packed", {n, k / 2},
                          "packed NVFP4 payload");
    if (packed->info->dtype != DType::U8 && packed->info->dtype != DType::I8) {
      diags.error(fileOf(packed), quoted(module + ".weight_packed"),
                  "must be U8 (two E2M1 values per byte)");
      ok = false;
    }
    const Checkpoint::Entry *scale = find(".weight_scale");
    const Checkpoint::Entry *global = find(".weight_global_scale");
    if (!scale || !global) {
      diags.error(fileOf(packed), quoted(module),
                  std::string("compressed-tensors NVFP4 needs ") +
                      (!scale ? "weight_scale" : "weight_global_scale"));
      return false;
    }
    if (k % 16 != 0) {
      diags.error(fileOf(packed), quoted(module + ".weight_packed"),
                  "in_features " + std::to_string(k) +
                      " is not a multiple of the NVFP4 block size 16");
      return false;
    }
    ok &= expectShape(scale, module + ".weight_scale", {n, k / 16},
                      "NVFP4 block scale");
    if (scale->info->dtype != DType::F8_E4M3 && scale->info->dtype != DType::U8) {
      diags.error(fileOf(scale), quoted(module + ".weight_scale"),
                  "NVFP4 block scales must be F8_E4M3, got " +
                      std::string(dtypeName(scale->info->dtype)));
      ok = false;
    }
    if (!isScalarShape(global->info->shape) ||
        global->info->dtype != DType::F32) {
      diags.error(fileOf(global), quoted(module + ".weight_global_scale"),
                  "must be one F32 value");
      ok = false;
    }
    out.format = WeightFormat::NVFP4;
    out.dtype = packed->info->dtype;
    out.data = module + ".weight_packed";
    out.dataShape = packed->info->shape;
    out.scale = module + ".weight_scale";
    out.scaleDType = scale->info->dtype;
    out.scaleShape = scale->info->shape;
    out.globalScale = module + ".weight_global_scale";
    out.globalScaleShape = global->info->shape;
    out.globalScaleIsDivisor = true;
    out.storedBytes = packed->info->numBytes() + scale->info->numBytes() +
                      global->info->numBytes();
    return ok;
  }

  const Checkpoint::Entry *weight = find(".weight");
  if (!weight) {
    reportMissing(module + ".weight", {n, k},
                  "a [" + std::to_string(n) + ", " + std::to_string(k) +
                      "] projection");
    return false;
  }
  const std::string weightName = module + ".weight";
  const DType dtype = weight->info->dtype;
  out.data = weightName;
  out.dtype = dtype;
  out.dataShape = weight->info->shape;
  out.storedBytes = weight->info->numBytes();

  if (isDenseFloat(dtype)) {
    out.format = WeightFormat::Float;
    return expectShape(weight, weightName, {n, k}, "weight");
  }

  const Checkpoint::Entry *scale = find(".weight_scale");
  const Checkpoint::Entry *scaleInv = find(".weight_scale_inv");
  if (find(".input_scale"))
    out.inputScale = module + ".input_scale";

  if ((dtype == DType::F8_E4M3 || dtype == DType::F8_E5M2) && scaleInv) {
    // Block FP8 (DeepSeek / MiniMax style): FP32 scale per tile.
    requireMethod(QuantMethod::BlockFP8, weightName, "block FP8");
    const std::vector<int64_t> &tile = config.quantization.weightBlockSize;
    int64_t bm = tile.size() == 2 ? tile[0] : 128;
    int64_t bn = tile.size() == 2 ? tile[1] : 128;
    bool ok = expectShape(weight, weightName, {n, k}, "FP8 weight");
    ok &= expectShape(scaleInv, module + ".weight_scale_inv",
                      {ceilDiv(n, bm), ceilDiv(k, bn)}, "block FP8 scale");
    if (scaleInv->info->dtype != DType::F32) {
      diags.error(fileOf(scaleInv), quoted(module + ".weight_scale_inv"),
                  "must be F32");
      ok = false;
    }
    out.format = WeightFormat::FP8Block;
    out.scale = module + ".weight_scale_inv";
    out.scaleDType = scaleInv->info->dtype;
    out.scaleShape = scaleInv->info->shape;
    out.storedBytes += scaleInv->info->numBytes();
    return ok;
  }
  if (!scale) {
    diags.error(fileOf(weight), quoted(weightName),
                "has dtype " + std::string(dtypeName(dtype)) +
                    " but no weight_scale or weight_scale_inv beside it; a "
                    "quantized weight needs its scales");
    return false;
  }
  out.scale = module + ".weight_scale";
  out.scaleDType = scale->info->dtype;
  out.scaleShape = scale->info->shape;
  out.storedBytes += scale->info->numBytes();
  const std::vector<int64_t> &scaleShape = scale->info->shape;
  const bool byteScale =
      scale->info->dtype == DType::U8 || scale->info->dtype == DType::F8_E8M0;
  bool fourBit = dtype == DType::U8 || dtype == DType::I8 || dtype == DType::F4;

  if ((dtype == DType::F8_E4M3 || dtype == DType::F8_E5M2) &&
      isScalarShape(scaleShape) && scale->info->dtype == DType::F32) {
    requireMethod(QuantMethod::ModelOpt, weightName, "per-tensor FP8");
    out.format = WeightFormat::FP8Tensor;
    return expectShape(weight, weightName, {n, k}, "FP8 weight");
  }
  // An FP8 payload with byte scales is MXFP8 whatever its shape (a shape
  // that contradicts the config is reported as such); a 4-bit one is MX
  // when its scales have one byte per 32 values.
  const bool fp8Payload = dtype == DType::F8_E4M3 || dtype == DType::F8_E5M2;
  if (scaleShape.size() == 2 && byteScale &&
      (fp8Payload || (k % 32 == 0 && scaleShape[1] == k / 32))) {
    // MX: E8M0 scale per 32 values, copied as bytes.
    if (!fourBit && dtype != DType::F8_E4M3 && dtype != DType::F8_E5M2) {
      diags.error(fileOf(weight), quoted(weightName),
                  "has dtype " + std::string(dtypeName(dtype)) +
                      "; an MX payload must be F8_E4M3 or F8_E5M2 (MXFP8) "
                      "or U8 pairs of E2M1 (MXFP4)");
      return false;
    }
    requireMethod(QuantMethod::ModelOpt, weightName,
                  fourBit ? "MXFP4" : "MXFP8");
    out.format = fourBit ? WeightFormat::MXFP4 : WeightFormat::MXFP8;
    bool ok = expectShape(weight, weightName,
                          {n, fourBit && dtype != DType::F4 ? k / 2 : k},
                          fourBit ? "MXFP4 payload" : "MXFP8 payload");
    ok &= expectShape(scale, out.scale, {n, k / 32}, "MX block scale");
    if (ok)
      checkE8M0Bytes(scale, out.scale);
    return ok;
  }
  if (fourBit) {
    // ModelOpt NVFP4: E4M3 scale per 16 values, FP32 weight_scale_2
    // multiplies.
    requireMethod(QuantMethod::ModelOpt, weightName, "ModelOpt NVFP4");
    if (k % 16 != 0) {
      diags.error(fileOf(weight), quoted(weightName),
                  "in_features " + std::to_string(k) +
                      " is not a multiple of the NVFP4 block size 16");
      return false;
    }
    out.format = WeightFormat::NVFP4;
    bool ok = expectShape(weight, weightName,
                          {n, dtype == DType::F4 ? k : k / 2},
                          "NVFP4 payload");
    ok &= expectShape(scale, out.scale, {n, k / 16}, "NVFP4 block scale");
    if (scale->info->dtype != DType::F8_E4M3 && scale->info->dtype != DType::U8) {
      diags.error(fileOf(scale), quoted(out.scale),
                  "NVFP4 block scales must be F8_E4M3, got " +
                      std::string(dtypeName(scale->info->dtype)));
      ok = false;
    }
    if (const Checkpoint::Entry *global = find(".weight_scale_2")) {
      if (!isScalarShape(global->info->shape) ||
          global->info->dtype != DType::F32) {
        diags.error(fileOf(global), quoted(module + ".weight_scale_2"),
                    "must be one F32 value");
        ok = false;
      } else {
        // ModelOpt's global scale is amax / (6 * 448): finite and not
        // negative (0 only for an all-zero weight). Inf, NaN or a negative
        // value is a corrupt checkpoint, which would compute NaN or flip
        // the weight's sign without a word.
        float g;
        std::memcpy(&g, global->file->data(*global->info), sizeof g);
        if (!std::isfinite(g) || g < 0) {
          diags.error(fileOf(global), quoted(module + ".weight_scale_2"),
                      "is " + std::to_string(g) +
                          "; an NVFP4 global scale is a finite, non-negative "
                          "FP32 value (the checkpoint is corrupt)");
          ok = false;
        }
      }
      out.globalScale = module + ".weight_scale_2";
      out.globalScaleShape = global->info->shape;
      out.storedBytes += global->info->numBytes();
    }
    return ok;
  }
  diags.error(fileOf(weight), quoted(weightName),
              "has dtype " + std::string(dtypeName(dtype)) +
                  " with a weight_scale of dtype " +
                  std::string(dtypeName(scale->info->dtype)) + " and shape " +
                  shapeString(scaleShape) +
                  "; this is no weight format msac knows (NVFP4, MXFP8, "
                  "MXFP4, FP8)");
  return false;
}

void Resolver::reportUnused() {
  size_t vision = 0, mtp = 0, unused = 0;
  std::vector<std::string> examples;
  for (const std::string &name : ckpt.tensorNames()) {
    if (used.count(name))
      continue;
    if (name.rfind("vision_tower.", 0) == 0 ||
        name.rfind("multi_modal_projector.", 0) == 0 ||
        name.rfind("patch_merge_mlp.", 0) == 0) {
      ++vision;
      continue;
    }
    if (name.find("model.mtp.") != std::string::npos) {
      ++mtp;
      continue;
    }
    ++unused;
    if (examples.size() < 10)
      examples.push_back(name);
  }
  if (vision)
    diags.note(ckpt.directory(), "",
               "ignored " + std::to_string(vision) +
                   " vision-tower tensors (msac compiles the text model)");
  if (mtp)
    diags.note(ckpt.directory(), "",
               "ignored " + std::to_string(mtp) + " MTP draft-head tensors");
  if (unused) {
    std::string list;
    for (const std::string &name : examples)
      list += (list.empty() ? "" : ", ") + name;
    diags.warning(ckpt.directory(), "",
                  std::to_string(unused) +
                      " tensors are not used by the model graph: " + list +
                      (unused > examples.size() ? ", ..." : ""));
  }
}

std::optional<ModelWeights> Resolver::run() {
  const size_t errorsBefore = diags.errorCount();
  // The multimodal wrapper's text weights sit under "language_model.".
  // Decided by the embedding, or without it by the other tensors' names,
  // so that a missing embedding is reported alone rather than as every
  // tensor missing under the other prefix.
  auto anyStartsWith = [&](const std::string &p) {
    for (const std::string &name : ckpt.tensorNames())
      if (name.rfind(p, 0) == 0)
        return true;
    return false;
  };
  if (ckpt.find("language_model.model.embed_tokens.weight"))
    weights.prefix = "language_model.";
  else if (!ckpt.find("model.embed_tokens.weight")) {
    if (anyStartsWith("language_model.model."))
      weights.prefix = "language_model.";
    else if (!anyStartsWith("model."))
      diags.error(ckpt.directory(), "tensor 'model.embed_tokens.weight'",
                  "is missing (also looked for "
                  "'language_model.model.embed_tokens.weight'); is this a "
                  "MiniMax-M3 text checkpoint?");
  }

  std::vector<WeightSpec> specs = modelWeightSpecs(config);
  for (const WeightSpec &spec : specs) {
    ResolvedWeight resolved;
    resolved.name = spec.name;
    resolved.shape = spec.shape;
    if (spec.name == "lm_head.weight") {
      bool present = ckpt.find(weights.prefix + spec.name) ||
                     ckpt.find(weights.prefix + "lm_head.weight_packed");
      if (!present && config.tieWordEmbeddings) {
        // Tied: logits = h . E^T, sharing the embedding's storage.
        weights.lmHeadTied = true;
        if (const ResolvedWeight *embedding =
                weights.get("model.embed_tokens.weight")) {
          resolved = *embedding;
          resolved.name = spec.name;
          resolved.storedBytes = 0;
          weights.byName[spec.name] = resolved;
        }
        continue;
      }
      if (!present) {
        diags.error(ckpt.directory(), quoted(weights.prefix + spec.name),
                    "is missing and tie_word_embeddings is false; the "
                    "checkpoint is incomplete (set tie_word_embeddings only "
                    "if the model really shares the embedding)");
        continue;
      }
      if (config.tieWordEmbeddings)
        diags.warning(ckpt.directory(), quoted(weights.prefix + spec.name),
                      "config ties the embeddings but the checkpoint has its "
                      "own lm_head; using the checkpoint's lm_head");
    }
    bool ok = spec.linear ? resolveLinear(spec, resolved)
                          : resolvePlain(spec, resolved);
    if (ok)
      weights.byName[spec.name] = resolved;
  }

  reportShapeMismatches();

  // The experts of one layer become one stacked operand: they must agree.
  for (int64_t l = 0; l < config.numLayers; ++l) {
    if (config.layers[l].mlp != MlpKind::MoE)
      continue;
    for (const char *w : {"w1", "w2", "w3"}) {
      const ResolvedWeight *first = nullptr;
      for (int64_t e = 0; e < config.numExperts; ++e) {
        const ResolvedWeight *r = weights.get(
            "model.layers." + std::to_string(l) + ".block_sparse_moe.experts." +
            std::to_string(e) + "." + w + ".weight");
        if (!r)
          continue;
        if (!first) {
          first = r;
          continue;
        }
        // Format, element and scale dtypes, and the global scale: every
        // part that may differ is named.
        auto describe = [](const ResolvedWeight &x) {
          return std::string(weightFormatName(x.format)) + " " +
                 std::string(dtypeName(x.dtype)) + " with " +
                 std::string(dtypeName(x.scaleDType)) + " scales" +
                 (x.globalScale.empty() ? "" : " and a global scale");
        };
        if (r->format != first->format || r->dtype != first->dtype ||
            r->scaleDType != first->scaleDType ||
            r->globalScale.empty() != first->globalScale.empty())
          diags.error(ckpt.directory(), quoted(weights.prefix + r->name),
                      "is stored as " + describe(*r) + " but " + first->name +
                          " is " + describe(*first) +
                          "; the experts of a layer must share one format");
      }
    }
  }

  // Activation and KV calibration scales that the graph does not consume.
  for (const std::string &name : ckpt.tensorNames()) {
    size_t dot = name.rfind('.');
    std::string leaf = dot == std::string::npos ? name : name.substr(dot + 1);
    if (!used.count(name) &&
        (leaf == "input_scale" || leaf == "input_global_scale" ||
         leaf == "k_scale" || leaf == "v_scale"))
      used.insert(name);
  }
  reportUnused();
  if (diags.errorCount() != errorsBefore)
    return std::nullopt;
  return std::move(weights);
}

} // namespace

std::optional<ModelWeights>
msac::ckpt::resolveWeights(const ModelConfig &config,
                           const Checkpoint &checkpoint, Diagnostics &diags) {
  return Resolver(config, checkpoint, diags).run();
}
