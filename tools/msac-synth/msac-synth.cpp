//===- msac-synth.cpp - Deterministic synthetic MiniMax-M3 checkpoints ----===//
//
// Part of msac.
//
// Writes a Hugging Face checkpoint folder with random (or zero) weights in
// the real MiniMax-M3 naming scheme (msa-m3-spec.md §1.5, multimodal
// `language_model.` prefix): config.json, safetensors shards (+ index when
// sharded), ModelOpt's hf_quant_config.json for quantized formats, and a
// small byte-level BPE tokenizer.json. The same seed always gives the same
// bytes, whatever the thread count.
//
// Weights are drawn so activations stay well scaled: projections have
// standard deviation 1/sqrt(fan_in), Gemma norm weights are near 0 (scale
// 1 + w), the embedding has unit variance. Draws are bounded (a sum of four
// uniforms, |x| <= 2*sqrt(3)*std), which fixes NVFP4 global scales
// without a second pass over the data.
//
// This tool does not depend on LLVM, so it also runs on the GPU machine to
// write real-shape checkpoints too large to carry there.
//
//===----------------------------------------------------------------------===//

#include "SynthTokenizer.h"

#include "../CliErrors.h"

#include "msac/Checkpoint/Checkpoint.h"
#include "msac/Checkpoint/JsonError.h"
#include "msac/Checkpoint/MemoryPlan.h"
#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Checkpoint/ModelWeights.h"
#include "msac/Checkpoint/SafetensorsWriter.h"
#include "msac/Numerics/BlockQuantize.h"
#include "msac/Numerics/LowPrecision.h"
#include "msac/Runtime/Artifact.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

using namespace msac;
using namespace msac::ckpt;
using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

/// The built-in `tiny` preset: every M3 feature at a size the CPU reference
/// runs quickly. One dense layer (dense attention, dense MLP) and two MSA
/// layers with MoE; 128-token blocks and top-16 as in M3.
json tinyConfig() {
  json text;
  text["model_type"] = "minimax_m3";
  text["hidden_size"] = 128;
  text["num_hidden_layers"] = 3;
  text["num_attention_heads"] = 4;
  text["num_key_value_heads"] = 2;
  text["head_dim"] = 32;
  text["vocab_size"] = 512;
  text["max_position_embeddings"] = 16384;
  text["rms_norm_eps"] = 1e-6;
  text["use_gemma_norm"] = true;
  text["rope_theta"] = 10000.0;
  text["rotary_dim"] = 16;
  text["partial_rotary_factor"] = 0.5;
  text["use_qk_norm"] = true;
  text["qk_norm_type"] = "per_head";
  text["hidden_act"] = "swigluoai";
  text["swiglu_alpha"] = 1.702;
  text["swiglu_limit"] = 7.0;
  text["num_local_experts"] = 8;
  text["num_experts_per_tok"] = 2;
  text["n_shared_experts"] = 1;
  text["intermediate_size"] = 64;
  text["shared_intermediate_size"] = 64;
  text["dense_intermediate_size"] = 256;
  text["scoring_func"] = "sigmoid";
  text["use_routing_bias"] = true;
  text["routed_scaling_factor"] = 2.0;
  text["moe_layer_freq"] = {0, 1, 1};
  text["tie_word_embeddings"] = false;
  text["bos_token_id"] = 510;
  text["eos_token_id"] = 511;
  text["sparse_attention_config"] = {{"use_sparse_attention", true},
                                     {"sparse_index_dim", 32},
                                     {"sparse_num_index_heads", 2},
                                     {"sparse_topk_blocks", 16},
                                     {"sparse_block_size", 128},
                                     {"sparse_score_type", "max"},
                                     {"sparse_init_block", 0},
                                     {"sparse_local_block", 1},
                                     {"sparse_attention_freq", {0, 1, 1}},
                                     {"sparse_disable_index_value", {0, 1, 1}}};
  json root;
  root["architectures"] = {"MiniMaxM3SparseForConditionalGeneration"};
  root["model_type"] = "minimax_m3_vl";
  root["text_config"] = text;
  root["torch_dtype"] = "bfloat16";
  return root;
}

/// Shortens a config to `layers` layers: the leading dense layers are kept
/// (at most layers - 1 of them, so one layer of the last kind remains) and
/// the remaining layers copy the original last layer's kind.
void truncateLayers(json &text, int64_t layers) {
  int64_t original = text.value("num_hidden_layers", int64_t(0));
  auto reshape = [&](json &array) {
    if (!array.is_array() || array.empty())
      return;
    int64_t leading = 0;
    while (leading < static_cast<int64_t>(array.size()) &&
           array[leading] == array[0])
      ++leading;
    if (leading == static_cast<int64_t>(array.size()))
      leading = 0; // uniform schedule
    json last = array.back();
    int64_t keep = std::min(leading, layers - 1);
    json out = json::array();
    for (int64_t i = 0; i < layers; ++i)
      out.push_back(i < keep ? array[i] : last);
    array = out;
  };
  (void)original;
  text["num_hidden_layers"] = layers;
  if (text.contains("moe_layer_freq"))
    reshape(text["moe_layer_freq"]);
  if (text.contains("sparse_attention_config")) {
    json &s = text["sparse_attention_config"];
    for (const char *key :
         {"sparse_attention_freq", "sparse_disable_index_value"})
      if (s.contains(key))
        reshape(s[key]);
  }
  if (text.contains("layer_types"))
    reshape(text["layer_types"]);
}

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hashString(const std::string &s, uint64_t seed) {
  uint64_t h = seed ^ 0xCBF29CE484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001B3ull;
  return h;
}

constexpr float kBound = 3.4641016f; // 2 * sqrt(3): |draw| <= kBound * std

/// Fills `out[0 .. cols)` with row `row` of a tensor: approximately normal,
/// mean `mean`, standard deviation `std`, bounded by kBound * std.
void drawRow(uint64_t tensorSeed, int64_t row, int64_t cols, float mean,
             float std, float *out) {
  uint64_t state =
      tensorSeed ^ (static_cast<uint64_t>(row) * 0xD1B54A32D192ED03ull);
  splitmix64(state);
  const float scale = std * 1.7320508f / 65536.0f;
  for (int64_t c = 0; c < cols; ++c) {
    uint64_t r = splitmix64(state);
    float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) +
                                   ((r >> 32) & 0xFFFF) + (r >> 48)) -
                2.0f * 65536.0f;
    out[c] = mean + sum * scale;
  }
}

enum class Encoding { BF16, F32, NVFP4, MXFP8 };

/// How one logical weight is drawn and stored.
struct WeightPlan {
  WeightSpec spec;
  float mean = 0, std = 1;
  Encoding encoding = Encoding::BF16;
};

struct Options {
  std::string outDir;
  std::string preset = "tiny";
  std::string configPath;
  int64_t layers = 0;
  std::string format = "bf16";
  uint64_t seed = 0;
  std::string weights = "random";
  std::string maxShardSize = "2GiB";
  unsigned threads = 0;
  bool force = false;
};

class Synthesizer {
public:
  Synthesizer(const Options &options) : opts(options) {}
  int run();

private:
  bool buildConfig();
  void planWeights(const ModelConfig &config);
  void writeRows(const WeightPlan &plan, std::FILE *out, int part);

  const Options &opts;
  json config;
  std::vector<WeightPlan> plans;
  /// Scale bytes of the last quantized payload, written next.
  std::vector<uint8_t> pendingScales;
  unsigned threads = 1;
};

bool Synthesizer::buildConfig() {
  if (!opts.configPath.empty()) {
    std::ifstream in(opts.configPath);
    if (!in) {
      std::cerr << "msac-synth: error: cannot read --config " << opts.configPath
                << "\n";
      return false;
    }
    try {
      config = json::parse(in);
    } catch (const json::exception &e) {
      std::cerr << "msac-synth: error: --config " << opts.configPath
                << " is not valid JSON: " << ckpt::jsonErrorText(e.what())
                << "\n";
      return false;
    }
  } else if (opts.preset == "tiny") {
    config = tinyConfig();
  } else {
    std::cerr << "msac-synth: error: unknown --preset '" << opts.preset
              << "' (use tiny, or --config FILE for another model)\n";
    return false;
  }
  if (!config.is_object() ||
      (config.contains("text_config") && !config["text_config"].is_object())) {
    std::cerr << "msac-synth: error: the config must be a JSON object (with "
                 "an object text_config, if any)\n";
    return false;
  }
  json &text = config.contains("text_config") ? config["text_config"] : config;
  if (opts.layers > 0) {
    const int64_t original = text.value("num_hidden_layers", int64_t(0));
    if (original > 0 && opts.layers > original) {
      std::cerr << "msac-synth: error: --layers " << opts.layers
                << " exceeds the config's num_hidden_layers (" << original
                << "); --layers keeps the first layers, use at most "
                << original << "\n";
      return false;
    }
    try {
      truncateLayers(text, opts.layers);
    } catch (const json::exception &e) {
      std::cerr << "msac-synth: error: cannot change the layer count of "
                << "this config: " << ckpt::jsonErrorText(e.what()) << "\n";
      return false;
    }
  }
  if (opts.format == "nvfp4") {
    config["quantization_config"] = {{"quant_method", "modelopt"},
                                     {"quant_algo", "MIXED_PRECISION"}};
  } else if (opts.format == "mxfp8") {
    config["quantization_config"] = {{"quant_method", "modelopt"},
                                     {"quant_algo", "MXFP8"}};
  } else if (opts.format == "bf16") {
    config.erase("quantization_config");
    text.erase("quantization_config");
  } else {
    std::cerr << "msac-synth: error: unknown --format '" << opts.format
              << "' (bf16, nvfp4 or mxfp8)\n";
    return false;
  }
  return true;
}

void Synthesizer::planWeights(const ModelConfig &c) {
  for (const WeightSpec &spec : modelWeightSpecs(c)) {
    WeightPlan p;
    p.spec = spec;
    const std::string &n = spec.name;
    auto has = [&](const char *s) { return n.find(s) != std::string::npos; };
    if (n == "model.embed_tokens.weight") {
      p.std = 1.0f;
    } else if (has("norm.weight")) {
      p.mean = c.gemmaNorm ? 0.0f : 1.0f;
      p.std = 0.05f;
    } else if (has(".gate.weight")) {
      p.std = 1.0f / std::sqrt(static_cast<float>(c.hiddenSize));
      p.encoding = Encoding::F32;
    } else if (has("e_score_correction_bias")) {
      p.std = 0.05f;
      p.encoding = Encoding::F32;
    } else if (spec.linear) {
      p.std = 1.0f / std::sqrt(static_cast<float>(spec.shape[1]));
      if (n == "lm_head.weight") {
        p.std *= 2.0f; // sharper next-token distributions
      } else if (opts.format == "mxfp8") {
        p.encoding = Encoding::MXFP8;
      } else if (opts.format == "nvfp4") {
        // MiniMax-M3.1-Flash layout: NVFP4 routed experts, MXFP8 elsewhere.
        p.encoding = has(".experts.") ? Encoding::NVFP4 : Encoding::MXFP8;
      }
    }
    plans.push_back(p);
  }
}

/// Writes part `part` of a weight: 0 = payload (float or quantized), 1 =
/// block scales (from the preceding payload), 2 = NVFP4 global scale.
void Synthesizer::writeRows(const WeightPlan &plan, std::FILE *out, int part) {
  const int64_t rows = plan.spec.shape.size() == 1 ? 1 : plan.spec.shape[0];
  const int64_t cols = plan.spec.shape.back();
  const uint64_t tensorSeed = hashString(plan.spec.name, opts.seed);
  // NVFP4 global scale from the known bound (ModelOpt: amax / (6 * 448)).
  const float global = kBound * plan.std / (6.0f * 448.0f);
  if (part == 1) {
    std::fwrite(pendingScales.data(), 1, pendingScales.size(), out);
    pendingScales.clear();
    return;
  }
  if (part == 2) {
    std::fwrite(&global, 4, 1, out);
    return;
  }
  const int64_t block = plan.encoding == Encoding::NVFP4 ? 16 : 32;
  size_t bytesPerRow;
  switch (plan.encoding) {
  case Encoding::BF16:
    bytesPerRow = cols * 2;
    break;
  case Encoding::F32:
    bytesPerRow = cols * 4;
    break;
  case Encoding::NVFP4:
    bytesPerRow = cols / 2;
    break;
  case Encoding::MXFP8:
    bytesPerRow = cols;
    break;
  }
  const bool quantized =
      plan.encoding == Encoding::NVFP4 || plan.encoding == Encoding::MXFP8;
  const size_t scalesPerRow = quantized ? cols / block : 0;
  if (quantized)
    pendingScales.assign(static_cast<size_t>(rows) * scalesPerRow, 0);

  const int64_t batchRows =
      std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(cols, 1));
  std::vector<uint8_t> buffer;
  for (int64_t start = 0; start < rows; start += batchRows) {
    const int64_t count = std::min(batchRows, rows - start);
    buffer.assign(static_cast<size_t>(count) * bytesPerRow, 0);
    auto work = [&](int64_t first, int64_t last) {
      std::vector<float> values(cols);
      for (int64_t r = first; r < last; ++r) {
        const int64_t row = start + r;
        drawRow(tensorSeed, row, cols, plan.mean, plan.std, values.data());
        uint8_t *dst = buffer.data() + r * bytesPerRow;
        uint8_t *scales =
            quantized ? pendingScales.data() + row * scalesPerRow : nullptr;
        switch (plan.encoding) {
        case Encoding::BF16:
          for (int64_t c = 0; c < cols; ++c) {
            uint16_t h = numerics::floatToBF16(values[c]);
            std::memcpy(dst + 2 * c, &h, 2);
          }
          break;
        case Encoding::F32:
          std::memcpy(dst, values.data(), cols * 4);
          break;
        case Encoding::NVFP4:
          for (int64_t b = 0; b < cols / 16; ++b) {
            float amax = 0;
            for (int64_t i = 0; i < 16; ++i)
              amax = std::max(amax, std::fabs(values[b * 16 + i]));
            uint8_t s = numerics::floatToE4M3(amax / 6.0f / global);
            scales[b] = s;
            float step = numerics::e4m3ToFloat(s) * global;
            for (int64_t i = 0; i < 16; i += 2) {
              auto code = [&](float x) {
                return step > 0 ? numerics::floatToE2M1(x / step) : 0;
              };
              dst[(b * 16 + i) / 2] =
                  static_cast<uint8_t>(code(values[b * 16 + i]) |
                                       (code(values[b * 16 + i + 1]) << 4));
            }
          }
          break;
        case Encoding::MXFP8:
          // The OCP MX rule `msac compile --quantize-weights` uses.
          for (int64_t b = 0; b < cols / 32; ++b)
            scales[b] = numerics::quantizeMXFP8Block(values.data() + b * 32,
                                                     dst + b * 32);
          break;
        }
      }
    };
    std::vector<std::thread> pool;
    const int64_t per = (count + threads - 1) / threads;
    for (unsigned t = 0; t < threads && t * per < count; ++t)
      pool.emplace_back(work, t * per, std::min<int64_t>(count, (t + 1) * per));
    for (std::thread &th : pool)
      th.join();
    std::fwrite(buffer.data(), 1, buffer.size(), out);
  }
}

int Synthesizer::run() {
  threads = opts.threads ? opts.threads
                         : std::max(1u, std::thread::hardware_concurrency());
  if (opts.weights != "random" && opts.weights != "zero") {
    std::cerr << "msac-synth: error: --weights must be random or zero, got '"
              << opts.weights << "'\n";
    return 2;
  }
  std::optional<uint64_t> shardLimit = parseByteSize(opts.maxShardSize);
  if (!shardLimit || *shardLimit == 0) {
    std::cerr << "msac-synth: error: --max-shard-size '" << opts.maxShardSize
              << "' is not a byte size (e.g. 2GiB, 500MB)\n";
    return 2;
  }
  std::error_code ec;
  if (fs::exists(opts.outDir, ec) && !fs::is_empty(opts.outDir, ec) &&
      !opts.force) {
    std::cerr << "msac-synth: error: " << opts.outDir
              << " exists and is not empty; pass --force to overwrite\n";
    return 2;
  }
  if (!buildConfig())
    return 2;

  Diagnostics diags;
  std::optional<ModelConfig> model = parseModelConfig(
      config.dump(), opts.configPath.empty() ? "config.json" : opts.configPath,
      diags);
  if (!model) {
    diags.print(std::cerr);
    return 1;
  }
  planWeights(*model);
  fs::create_directories(opts.outDir, ec);
  if (ec) {
    std::cerr << "msac-synth: error: cannot create " << opts.outDir << ": "
              << ec.message() << "\n";
    return 1;
  }

  // Checkpoint tensors in graph order; each refers to (plan, part).
  struct Item {
    size_t plan;
    int part;
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::string prefix = "language_model.";
  std::vector<Item> items;
  for (size_t i = 0; i < plans.size(); ++i) {
    const WeightPlan &p = plans[i];
    const std::string &name = p.spec.name;
    const std::string module = prefix + name.substr(0, name.size() - 7);
    const int64_t n = p.spec.shape[0];
    const int64_t k = p.spec.shape.back();
    switch (p.encoding) {
    case Encoding::BF16:
      items.push_back({i, 0, prefix + name, DType::BF16, p.spec.shape});
      break;
    case Encoding::F32:
      items.push_back({i, 0, prefix + name, DType::F32, p.spec.shape});
      break;
    case Encoding::NVFP4:
      items.push_back({i, 0, module + ".weight", DType::U8, {n, k / 2}});
      items.push_back(
          {i, 1, module + ".weight_scale", DType::F8_E4M3, {n, k / 16}});
      items.push_back({i, 2, module + ".weight_scale_2", DType::F32, {}});
      break;
    case Encoding::MXFP8:
      items.push_back({i, 0, module + ".weight", DType::F8_E4M3, {n, k}});
      items.push_back({i, 1, module + ".weight_scale", DType::U8, {n, k / 32}});
      break;
    }
  }

  // Split into shards of at most the limit (a tensor never straddles).
  std::vector<std::vector<size_t>> shards(1);
  uint64_t shardBytes = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    uint64_t bytes = dtypeBits(items[i].dtype) / 8;
    for (int64_t d : items[i].shape)
      bytes *= d;
    if (shardBytes > 0 && shardBytes + bytes > *shardLimit) {
      shards.emplace_back();
      shardBytes = 0;
    }
    shards.back().push_back(i);
    shardBytes += bytes;
  }
  auto shardName = [&](size_t s) {
    if (shards.size() == 1)
      return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", s + 1,
                  shards.size());
    return std::string(buf);
  };

  json index;
  uint64_t totalBytes = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    SafetensorsWriter writer;
    for (size_t i : shards[s])
      writer.add(items[i].name, items[i].dtype, items[i].shape);
    totalBytes += writer.dataBytes();
    SafetensorsWriter::Fill fill;
    if (opts.weights == "random")
      fill = [&](size_t local, const SafetensorsWriter::Tensor &,
                 std::FILE *out) {
        const Item &item = items[shards[s][local]];
        writeRows(plans[item.plan], out, item.part);
      };
    const std::string path = (fs::path(opts.outDir) / shardName(s)).string();
    std::string error = writer.write(path, fill, {{"format", "pt"}});
    if (!error.empty()) {
      std::cerr << "msac-synth: error: " << error << "\n";
      return 1;
    }
    for (size_t i : shards[s])
      index["weight_map"][items[i].name] = shardName(s);
    std::error_code sizeError;
    const uintmax_t fileBytes = fs::file_size(path, sizeError);
    std::cerr << "msac-synth: wrote " << path << " ("
              << (sizeError ? writer.dataBytes() : fileBytes) << " bytes, "
              << writer.dataBytes() << " of tensor data)\n";
  }
  const fs::path out(opts.outDir);
  // --force over an earlier checkpoint: its shards that this one did not
  // rewrite (another shard count) would be read with the new index or
  // beside the single file, so they go.
  for (const fs::directory_entry &e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    bool written = false;
    for (size_t s = 0; s < shards.size(); ++s)
      written |= name == shardName(s);
    if (!written && name.rfind("model", 0) == 0 &&
        e.path().extension() == ".safetensors")
      fs::remove(e.path(), ec);
  }
  fs::remove(out / "model.safetensors.index.json", ec);
  if (shards.size() > 1) {
    index["metadata"]["total_size"] = totalBytes;
    std::ofstream(out / "model.safetensors.index.json")
        << index.dump(2) << "\n";
  }
  std::ofstream(out / "config.json") << config.dump(2) << "\n";
  fs::remove(out / "hf_quant_config.json", ec);
  if (opts.format != "bf16") {
    json hf;
    hf["producer"] = {{"name", "modelopt"}, {"version", "msac-synth"}};
    hf["quantization"] = {
        {"quant_algo", opts.format == "nvfp4" ? "MIXED_PRECISION" : "MXFP8"},
        {"kv_cache_quant_algo", nullptr},
        {"exclude_modules", {"lm_head"}}};
    std::ofstream(out / "hf_quant_config.json") << hf.dump(2) << "\n";
  }

  // Tokenizer: BPE ids below the special tokens (tiny: 0..509).
  std::vector<synth::SpecialToken> specials;
  int64_t bos = model->bosTokenId.value_or(model->vocabSize - 2);
  int64_t eos = model->eosTokenIds.empty() ? model->vocabSize - 1
                                           : model->eosTokenIds.front();
  specials.push_back({"<s>", bos});
  specials.push_back({"</s>", eos});
  int64_t bpeSize = std::min<int64_t>(
      std::min(bos, eos), std::min<int64_t>(model->vocabSize, 1024));
  if (bpeSize < 256) {
    std::cerr << "msac-synth: error: a byte-level tokenizer needs the 256 "
                 "byte tokens below the special tokens; vocab_size "
              << model->vocabSize << " with bos/eos " << bos << "/" << eos
              << " leaves " << bpeSize << "\n";
    return 1;
  }
  std::ofstream(out / "tokenizer.json")
      << synth::buildTokenizerJson(bpeSize, specials);

  // Self-check: the folder must load cleanly through msac's own readers.
  Diagnostics check;
  std::optional<ModelConfig> reread = readModelConfig(opts.outDir, check);
  std::unique_ptr<Checkpoint> ckpt =
      reread ? Checkpoint::open(opts.outDir, check) : nullptr;
  if (!ckpt || !resolveWeights(*reread, *ckpt, check) || check.hasErrors()) {
    check.print(std::cerr);
    std::cerr << "msac-synth: error: the written checkpoint does not load\n";
    return 1;
  }
  std::cout << "msac-synth: " << opts.outDir << ": " << model->numLayers
            << " layers (" << model->numSparseLayers() << " MSA, "
            << model->numMoELayers() << " MoE), " << items.size()
            << " tensors, " << totalBytes << " bytes in " << shards.size()
            << " shard(s), format " << opts.format << ", weights "
            << opts.weights << ", seed " << opts.seed << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options opts;
  CLI::App app{"msac-synth: write a deterministic synthetic MiniMax-M3-family "
               "checkpoint (config.json, safetensors, tokenizer.json)"};
  app.set_version_flag("--version",
                       std::string("msac-synth (msac ") + MSAC_VERSION +
                           ")\n  artifact format version: " +
                           std::to_string(runtime::kArtifactFormatVersion));
  app.add_option("output", opts.outDir, "Checkpoint folder to write")
      ->required();
  app.add_option("--preset", opts.preset,
                 "Built-in config: tiny (1 dense + 2 MSA/MoE layers)")
      ->capture_default_str();
  app.add_option("--config", opts.configPath,
                 "Use this config.json instead of a preset (e.g. "
                 "models/minimax-m3/config.json for real M3 shapes)")
      ->check(CLI::ExistingFile);
  app.add_option("--layers", opts.layers,
                 "Keep this many layers (leading dense layers first, at "
                 "least one layer of the last kind)")
      ->check(CLI::Range(int64_t(1), int64_t(512))
                  .description("an integer in [1, 512]"));
  app.add_option("--format", opts.format,
                 "bf16; nvfp4 (NVFP4 routed experts, MXFP8 attention and "
                 "shared expert, ModelOpt form); mxfp8 (all projections)")
      ->capture_default_str();
  app.add_option("--seed", opts.seed, "Random seed")->capture_default_str();
  app.add_option("--weights", opts.weights,
                 "random, or zero (sparse files: shapes only, instant)")
      ->capture_default_str();
  app.add_option("--max-shard-size", opts.maxShardSize,
                 "Largest shard (e.g. 2GiB, 500MB); more shards get an index")
      ->capture_default_str();
  app.add_option("--threads", opts.threads, "Worker threads (0 = all cores)");
  app.add_flag("--force", opts.force, "Overwrite a non-empty output folder");
  // Parse errors read like the tool's other errors.
  app.failure_message([](const CLI::App *app, const CLI::Error &e) {
    return "msac-synth: error: " + tools::cliErrorText(app, e) +
           "\nRun with --help for more information.\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // Help and version exit 0; usage errors exit 2, as in msac.
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return Synthesizer(opts).run();
}
