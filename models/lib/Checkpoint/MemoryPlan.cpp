//===- MemoryPlan.cpp - Weight and KV-cache memory of a model -------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/MemoryPlan.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

using namespace msac::ckpt;

std::optional<CacheDType> msac::ckpt::parseCacheDType(std::string_view name) {
  if (name == "bf16" || name == "auto")
    return CacheDType::BF16;
  if (name == "fp8" || name == "fp8_e4m3")
    return CacheDType::FP8;
  if (name == "nvfp4")
    return CacheDType::NVFP4;
  return std::nullopt;
}

const char *msac::ckpt::cacheDTypeName(CacheDType dtype) {
  switch (dtype) {
  case CacheDType::BF16:
    return "bf16";
  case CacheDType::FP8:
    return "fp8";
  case CacheDType::NVFP4:
    return "nvfp4";
  }
  return "?";
}

int64_t msac::ckpt::cacheBytesPerVector(CacheDType dtype, int64_t dim) {
  switch (dtype) {
  case CacheDType::BF16:
    return 2 * dim;
  case CacheDType::FP8:
    return dim;
  case CacheDType::NVFP4:
    return dim / 2 + dim / 16;
  }
  return 0;
}

std::string msac::ckpt::checkCacheDTypes(const ModelConfig &config,
                                         CacheDType kvDType,
                                         CacheDType indexDType) {
  auto check = [](const char *flag, CacheDType dtype, const char *field,
                  int64_t dim) -> std::string {
    if (dtype != CacheDType::NVFP4 || dim % 16 == 0)
      return "";
    return std::string(flag) + " nvfp4 needs " + field +
           " to be a multiple of 16 (one E4M3 scale per 16 values), but it "
           "is " +
           std::to_string(dim);
  };
  std::string problem =
      check("--kv-cache-dtype", kvDType, "head_dim", config.headDim);
  if (problem.empty() && config.numSparseLayers())
    problem = check("--index-cache-dtype", indexDType, "sparse_index_dim",
                    config.sparse.indexDim);
  return problem;
}

std::optional<uint64_t> msac::ckpt::parseByteSize(std::string_view text) {
  size_t i = 0, dots = 0;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    dots += text[i] == '.';
    ++i;
  }
  if (i == 0 || dots > 1 || text[0] == '.' || text[i - 1] == '.')
    return std::nullopt;
  double value;
  try {
    value = std::stod(std::string(text.substr(0, i)));
  } catch (...) {
    return std::nullopt;
  }
  std::string unit(text.substr(i));
  for (char &c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'b')
    unit.pop_back();
  double scale;
  if (unit.empty())
    scale = 1;
  else if (unit == "k")
    scale = 1e3;
  else if (unit == "m")
    scale = 1e6;
  else if (unit == "g")
    scale = 1e9;
  else if (unit == "t")
    scale = 1e12;
  else if (unit == "ki")
    scale = 1024.0;
  else if (unit == "mi")
    scale = 1024.0 * 1024;
  else if (unit == "gi")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "ti")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return std::nullopt;
  double bytes = value * scale;
  // Below 2^62 (4 EiB), so later arithmetic cannot overflow.
  if (!std::isfinite(bytes) || bytes < 1 || bytes > 4.6e18)
    return std::nullopt;
  return static_cast<uint64_t>(std::llround(bytes));
}

namespace {

/// Component a weight belongs to, from its logical name.
std::string groupOf(const std::string &name) {
  auto has = [&](const char *s) { return name.find(s) != std::string::npos; };
  if (name == "model.embed_tokens.weight")
    return "embedding";
  if (name == "lm_head.weight")
    return "lm_head";
  if (has(".index_"))
    return "index branch";
  if (has("self_attn."))
    return "attention";
  if (has(".mlp."))
    return "dense MLP";
  if (has(".experts."))
    return "routed experts";
  if (has(".shared_experts."))
    return "shared expert";
  if (has(".gate.weight") || has("e_score_correction_bias"))
    return "router";
  return "norms";
}

std::string formatKey(const ResolvedWeight &w) {
  if (w.format == WeightFormat::Float) {
    std::string s(dtypeName(w.dtype));
    for (char &c : s)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  return weightFormatName(w.format);
}

std::string humanBytes(uint64_t bytes) {
  std::ostringstream os;
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  os << std::fixed << std::setprecision(unit ? 2 : 0) << value << " "
     << units[unit];
  return os.str();
}

} // namespace

MemoryPlan msac::ckpt::planMemory(const ModelConfig &config,
                                  const ModelWeights *weights,
                                  CacheDType kvDType, CacheDType indexDType,
                                  int64_t maxSeqLen, uint64_t cacheMemory,
                                  std::optional<WeightRecipe> recipe) {
  MemoryPlan plan;
  plan.fromCheckpoint = weights != nullptr;
  if (recipe)
    plan.weightRecipe = weightRecipeName(*recipe);
  std::map<std::string, ParameterGroup> groups;
  const char *order[] = {"embedding",      "attention",     "index branch",
                         "dense MLP",      "routed experts", "shared expert",
                         "router",         "norms",          "lm_head"};
  int64_t expertParameters = 0;
  for (const WeightSpec &spec : modelWeightSpecs(config)) {
    int64_t parameters = 1;
    for (int64_t d : spec.shape)
      parameters *= d;
    std::string group = groupOf(spec.name);
    if (group == "lm_head" && config.tieWordEmbeddings &&
        (!weights || weights->lmHeadTied))
      parameters = 0; // shares the embedding
    uint64_t bytes;
    std::string format;
    const WeightFormat quantized =
        recipe ? recipeFormat(*recipe, spec) : WeightFormat::Float;
    if (quantized != WeightFormat::Float && spec.shape.size() == 2) {
      bytes = quantizedWeightBytes(quantized, spec.shape[0], spec.shape[1]);
      format = weightFormatName(quantized);
    } else if (weights) {
      const ResolvedWeight *w = weights->get(spec.name);
      bytes = w ? w->storedBytes : 0;
      format = w ? formatKey(*w) : "missing";
    } else {
      bool fp32 = group == "router";
      bytes = static_cast<uint64_t>(parameters) * (fp32 ? 4 : 2);
      format = fp32 ? "f32" : "bf16";
    }
    ParameterGroup &g = groups[group];
    g.name = group;
    g.parameters += parameters;
    g.bytes += bytes;
    plan.totalParameters += parameters;
    plan.totalWeightBytes += bytes;
    if (bytes)
      plan.bytesByFormat[format] += bytes;
    if (group == "routed experts")
      expertParameters += parameters;
  }
  for (const char *name : order)
    if (groups.count(name))
      plan.groups.push_back(groups[name]);
  int64_t embedding = groups.count("embedding") ? groups["embedding"].parameters
                                                : 0;
  int64_t activeExperts =
      config.numExperts ? expertParameters / config.numExperts *
                              config.expertsPerToken
                        : 0;
  plan.activeParameters = plan.totalParameters - embedding - expertParameters +
                          activeExperts;
  if (config.tieWordEmbeddings)
    plan.activeParameters += embedding; // the tied table is the LM head

  plan.kvDType = kvDType;
  plan.indexDType = indexDType;
  plan.kvLayers = config.numLayers;
  plan.indexLayers = config.numSparseLayers();
  plan.kvBytesPerTokenPerLayer =
      2 * config.numKVHeads * cacheBytesPerVector(kvDType, config.headDim);
  plan.indexBytesPerTokenPerLayer =
      plan.indexLayers ? cacheBytesPerVector(indexDType, config.sparse.indexDim)
                       : 0;
  plan.kvBytesPerToken = plan.kvLayers * plan.kvBytesPerTokenPerLayer;
  plan.indexBytesPerToken = plan.indexLayers * plan.indexBytesPerTokenPerLayer;
  plan.cacheBytesPerToken = plan.kvBytesPerToken + plan.indexBytesPerToken;

  plan.pageSize = config.sparse.blockSize > 0 ? config.sparse.blockSize : 128;
  plan.maxSeqLen = maxSeqLen;
  int64_t pages = (maxSeqLen + plan.pageSize - 1) / plan.pageSize;
  plan.bytesPerSequence = static_cast<uint64_t>(pages) * plan.pageSize *
                          static_cast<uint64_t>(plan.cacheBytesPerToken);
  plan.cacheMemory = cacheMemory;
  plan.sequencesThatFit =
      plan.bytesPerSequence
          ? static_cast<int64_t>(cacheMemory / plan.bytesPerSequence)
          : 0;
  return plan;
}

std::string msac::ckpt::checkCacheBudget(const MemoryPlan &plan,
                                         const std::string &budgetText) {
  if (!plan.cacheMemory || !plan.bytesPerSequence || plan.sequencesThatFit > 0)
    return "";
  auto bytes = [](uint64_t n) {
    return std::to_string(n) + " B (" + humanBytes(n) + ")";
  };
  const uint64_t bytesPerPage =
      static_cast<uint64_t>(plan.pageSize) * plan.cacheBytesPerToken;
  const int64_t pagesThatFit =
      static_cast<int64_t>(plan.cacheMemory / bytesPerPage);
  std::string message =
      "--memory " + budgetText + " = " + bytes(plan.cacheMemory) +
      " does not hold the KV cache of one sequence of " +
      std::to_string(plan.maxSeqLen) + " tokens, which needs " +
      bytes(plan.bytesPerSequence) + ": it is " +
      bytes(plan.bytesPerSequence - plan.cacheMemory) +
      " short, so no sequence fits; raise --memory to at least " +
      humanBytes(plan.bytesPerSequence);
  if (pagesThatFit > 0)
    return message + " or lower --max-seq-len to at most " +
           std::to_string(pagesThatFit * plan.pageSize) + " tokens";
  return message + " (it does not hold even one " +
         std::to_string(plan.pageSize) + "-token page of " +
         bytes(bytesPerPage) + ")";
}

void msac::ckpt::printMemoryPlan(const MemoryPlan &plan, std::ostream &os) {
  os << "Weights ("
     << (plan.fromCheckpoint ? "stored in the checkpoint"
                             : "estimated from config.json: "
                               "bf16, fp32 router");
  if (!plan.weightRecipe.empty())
    os << "; projections quantized with --quantize-weights="
       << plan.weightRecipe;
  os << ")\n";
  os << "  " << std::left << std::setw(16) << "component" << std::right
     << std::setw(18) << "parameters" << std::setw(20) << "bytes" << "\n";
  for (const ParameterGroup &g : plan.groups)
    os << "  " << std::left << std::setw(16) << g.name << std::right
       << std::setw(18) << g.parameters << std::setw(20) << g.bytes << "  ("
       << humanBytes(g.bytes) << ")\n";
  os << "  " << std::left << std::setw(16) << "total" << std::right
     << std::setw(18) << plan.totalParameters << std::setw(20)
     << plan.totalWeightBytes << "  (" << humanBytes(plan.totalWeightBytes)
     << ")\n";
  os << "  active parameters per token: " << plan.activeParameters << "\n";
  os << "  bytes by format:";
  for (const auto &[format, bytes] : plan.bytesByFormat)
    os << " " << format << "=" << bytes;
  os << "\n\n";
  os << "KV cache (kv " << cacheDTypeName(plan.kvDType) << ", index "
     << cacheDTypeName(plan.indexDType) << ", " << plan.pageSize
     << "-token pages)\n";
  os << "  main K+V per token per layer: " << plan.kvBytesPerTokenPerLayer
     << " B x " << plan.kvLayers << " layers = " << plan.kvBytesPerToken
     << " B\n";
  os << "  index key per token per layer: " << plan.indexBytesPerTokenPerLayer
     << " B x " << plan.indexLayers << " layers = " << plan.indexBytesPerToken
     << " B\n";
  os << "  total per token: " << plan.cacheBytesPerToken << " B\n";
  os << "  one sequence of " << plan.maxSeqLen
     << " tokens: " << plan.bytesPerSequence << " B ("
     << humanBytes(plan.bytesPerSequence) << ")\n";
  if (plan.cacheMemory)
    os << "  sequences of " << plan.maxSeqLen << " tokens in "
       << plan.cacheMemory << " B (" << humanBytes(plan.cacheMemory)
       << "): " << plan.sequencesThatFit << "\n";
}

std::string msac::ckpt::memoryPlanJson(const MemoryPlan &plan) {
  nlohmann::ordered_json j;
  for (const ParameterGroup &g : plan.groups)
    j["weights"]["groups"][g.name] = {{"parameters", g.parameters},
                                      {"bytes", g.bytes}};
  j["weights"]["total_parameters"] = plan.totalParameters;
  j["weights"]["active_parameters"] = plan.activeParameters;
  j["weights"]["total_bytes"] = plan.totalWeightBytes;
  j["weights"]["bytes_by_format"] = plan.bytesByFormat;
  j["weights"]["from_checkpoint"] = plan.fromCheckpoint;
  j["weights"]["quantize_weights"] =
      plan.weightRecipe.empty() ? nlohmann::ordered_json()
                                : nlohmann::ordered_json(plan.weightRecipe);
  j["kv_cache"] = {
      {"kv_dtype", cacheDTypeName(plan.kvDType)},
      {"index_dtype", cacheDTypeName(plan.indexDType)},
      {"page_size", plan.pageSize},
      {"kv_layers", plan.kvLayers},
      {"index_layers", plan.indexLayers},
      {"kv_bytes_per_token_per_layer", plan.kvBytesPerTokenPerLayer},
      {"index_bytes_per_token_per_layer", plan.indexBytesPerTokenPerLayer},
      {"kv_bytes_per_token", plan.kvBytesPerToken},
      {"index_bytes_per_token", plan.indexBytesPerToken},
      {"bytes_per_token", plan.cacheBytesPerToken},
      {"max_seq_len", plan.maxSeqLen},
      {"bytes_per_sequence", plan.bytesPerSequence},
      {"memory", plan.cacheMemory},
      {"sequences", plan.sequencesThatFit}};
  return j.dump(2);
}
