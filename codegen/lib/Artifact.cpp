//===- Artifact.cpp - Writing the msac artifact ---------------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Codegen/Artifact.h"

#include "msac/Checkpoint/Checksum.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <vector>

using namespace msac;
namespace json = llvm::json;

static json::Value shapeJson(const std::vector<Extent> &shape) {
  json::Array a;
  for (const Extent &e : shape)
    if (e.symbol.empty())
      a.push_back(e.value);
    else
      a.push_back(e.symbol);
  return a;
}

static const char *kindName(BufferDesc::Kind kind) {
  switch (kind) {
  case BufferDesc::Kind::Input:
    return "input";
  case BufferDesc::Kind::Cache:
    return "cache";
  case BufferDesc::Kind::Weight:
    return "weight";
  case BufferDesc::Kind::Activation:
    return "activation";
  }
  return "?";
}

/// Replaces `{}` in a stacked weight name with the expert index.
static std::string expand(const std::string &pattern, int64_t index) {
  std::string s = pattern;
  size_t at = s.find("{}");
  return s.replace(at, 2, std::to_string(index));
}

void msac::permuteChunkMajor(const uint8_t *src, uint8_t *dst, int64_t rows,
                             int64_t cols, int64_t ranks, bool headMajor) {
  constexpr int64_t kTile = kWeightOrderTile;
  const int64_t heads = rows / kTile, chunks = cols / kTile / ranks;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < cols / kTile; ++j) {
      const int64_t tile =
          headMajor ? h * chunks * ranks + (j % chunks) * ranks + j / chunks
                    : (j % chunks) * heads * ranks + h * ranks + j / chunks;
      uint8_t *to = dst + tile * kTile * kTile;
      for (int64_t r = 0; r < kTile; ++r)
        std::memcpy(to + r * kTile, src + (h * kTile + r) * cols + j * kTile,
                    kTile);
    }
}

std::string msac::writeArtifact(const std::string &dir,
                                const HostProgram &program,
                                const std::vector<ArtifactTarget> &targets,
                                const ckpt::ModelConfig &config,
                                const ckpt::Checkpoint &checkpoint,
                                const std::string &modelDir,
                                bool stripWeights) {
  constexpr uint64_t kAlign = 4096;
  // weights.bin: every weight buffer, aligned.
  std::string weightsPath = (llvm::Twine(dir) + "/weights.bin").str();
  std::error_code ec;
  llvm::raw_fd_ostream weights(stripWeights ? "/dev/null" : weightsPath, ec,
                               llvm::sys::fs::OF_None);
  if (ec)
    return "cannot write " + weightsPath + ": " + ec.message();
  uint64_t offset = 0;
  json::Array buffers;
  for (auto [id, b] : llvm::enumerate(program.buffers)) {
    json::Object o{{"id", static_cast<int64_t>(id)},
                   {"kind", kindName(b.kind)},
                   {"name", b.name},
                   {"dtype", b.dtype},
                   {"shape", shapeJson(b.shape)}};
    if (b.kind == BufferDesc::Kind::Input)
      o["argument"] = b.argument;
    if (b.kind == BufferDesc::Kind::Cache) {
      o["argument"] = b.argument;
      o["heads"] = b.heads;
      o["page_size"] = b.pageSize;
      o["head_dim"] = b.headDim;
      o["bytes_per_token"] = b.bytesPerToken;
    }
    if (b.kind == BufferDesc::Kind::Weight) {
      uint64_t padding = (kAlign - offset % kAlign) % kAlign;
      weights.write_zeros(padding);
      offset += padding;
      o["offset"] = static_cast<int64_t>(offset);
      int64_t count = b.stacked ? b.stacked : 1;
      uint64_t bytes = 0;
      std::vector<uint8_t> ordered;
      for (int64_t i = 0; i < count; ++i) {
        std::string name = b.stacked ? expand(b.name, i) : b.name;
        const ckpt::Checkpoint::Entry *entry = checkpoint.find(name);
        if (!entry)
          return "weight '" + name + "' is not in the checkpoint";
        const auto *data =
            reinterpret_cast<const uint8_t *>(entry->file->data(*entry->info));
        const uint64_t size = entry->info->numBytes();
        if (b.orderRanks) {
          // The chunk-major order (BufferDesc::orderRanks) of an 8-bit
          // [rows, cols] payload.
          const int64_t n = b.orderRanks;
          const bool fits = b.shape.size() == 2 && b.shape[0].symbol.empty() &&
                            b.shape[1].symbol.empty() &&
                            b.shape[0].value % kWeightOrderTile == 0 &&
                            b.shape[1].value % (kWeightOrderTile * n) == 0 &&
                            size == static_cast<uint64_t>(b.shape[0].value *
                                                          b.shape[1].value);
          if (!fits)
            return "weight '" + name +
                   "' cannot be stored in the chunk-major order of " +
                   std::to_string(n) +
                   " ranks (an 8-bit matrix of 128-row and 128 N-column "
                   "tiles); compile with "
                   "--gpu-prologue-weight-order=row-major";
          if (!stripWeights) {
            ordered.resize(size);
            permuteChunkMajor(data, ordered.data(), b.shape[0].value,
                              b.shape[1].value, n, b.orderHeadMajor);
            data = ordered.data();
          }
        }
        if (!stripWeights)
          weights.write(reinterpret_cast<const char *>(data), size);
        bytes += size;
      }
      if (b.orderRanks)
        o["order"] = json::Object{
            {"name", b.orderHeadMajor ? "head-major" : "chunk-major"},
            {"tile", json::Array{kWeightOrderTile, kWeightOrderTile}},
            {"ranks", b.orderRanks}};
      o["bytes"] = static_cast<int64_t>(bytes);
      offset += bytes;
    }
    buffers.push_back(std::move(o));
  }
  weights.close();
  if (weights.has_error())
    return "cannot write " + weightsPath;

  // Each kernel's parameters: the kind, dtype and shape of the buffers its
  // first launch passes (other launches pass buffers of the same dtypes
  // and sizes, at times another view of the shape), so that the runtime
  // refuses a step whose buffers are not the kernel's.
  json::Array kernels;
  for (const std::string &name : program.kernelNames) {
    json::Array params;
    for (const std::vector<Launch> *list : {&program.init, &program.schedule}) {
      auto it = llvm::find_if(
          *list, [&](const Launch &l) { return l.kernel == name; });
      if (it == list->end())
        continue;
      for (int64_t id : it->buffers) {
        const BufferDesc &b = program.buffers[id];
        params.push_back(json::Object{{"kind", kindName(b.kind)},
                                      {"dtype", b.dtype},
                                      {"shape", shapeJson(b.shape)}});
      }
      break;
    }
    kernels.push_back(
        json::Object{{"name", name}, {"params", std::move(params)}});
  }
  auto launches = [](const std::vector<Launch> &list) {
    json::Array steps;
    for (const Launch &l : list) {
      json::Array ids;
      for (int64_t id : l.buffers)
        ids.push_back(id);
      steps.push_back(json::Object{
          {"kernel", l.kernel}, {"op", l.op}, {"buffers", std::move(ids)}});
    }
    return steps;
  };
  json::Array steps = launches(program.schedule);
  json::Array outputs;
  for (int64_t id : program.outputs)
    outputs.push_back(id);
  json::Array layers;
  // One attention op per layer (an imported model): its precision contract
  // next to the layer's kind, for checkers that recompute the attention.
  const bool precisions =
      program.attentionPrecision.size() == config.layers.size();
  for (size_t l = 0; l < config.layers.size(); ++l) {
    const ckpt::LayerSpec &layer = config.layers[l];
    json::Object entry{
        {"attention",
         layer.attention == ckpt::AttentionKind::Sparse ? "sparse" : "dense"},
        {"mlp", layer.mlp == ckpt::MlpKind::MoE ? "moe" : "dense"}};
    if (precisions)
      entry["attention_precision"] =
          msa::stringifyAttentionPrecision(program.attentionPrecision[l]);
    layers.push_back(std::move(entry));
  }
  json::Array eos;
  for (int64_t id : config.eosTokenIds)
    eos.push_back(id);
  json::Object model{{"model_type", config.modelType},
                     {"hidden_size", config.hiddenSize},
                     {"num_layers", config.numLayers},
                     {"num_attention_heads", config.numHeads},
                     {"num_key_value_heads", config.numKVHeads},
                     {"head_dim", config.headDim},
                     {"vocab_size", config.vocabSize},
                     {"max_position_embeddings", config.maxPositionEmbeddings},
                     {"page_size", config.sparse.blockSize > 0
                                       ? config.sparse.blockSize
                                       : 128},
                     {"index_dim", config.sparse.indexDim},
                     {"topk_blocks", config.sparse.topkBlocks},
                     {"layers", std::move(layers)},
                     {"eos_token_ids", std::move(eos)}};
  if (config.bosTokenId)
    model["bos_token_id"] = *config.bosTokenId;

  json::Object manifest{
      {"format", "msac-artifact"},
      {"format_version", kArtifactFormatVersion},
      {"producer", "msac " MSAC_VERSION},
      {"model", std::move(model)},
      {"targets",
       [&] {
         json::Array list;
         for (const ArtifactTarget &t : targets) {
           json::Object o{{"name", t.name},
                          {"kernels_file", t.kernelsFile},
                          {"kernels_fnv1a64",
                           ckpt::fileFnv1a64Hex(dir + "/" + t.kernelsFile)},
                          {"abi", "void(void **buffers, const int64_t "
                                  "*scalars /* T, N, MB */)"}};
           if (t.grid) {
             json::Array kernels;
             for (const KernelGeometry &g : t.kernels) {
               json::Object kernel{
                   {"name", g.name},
                   {"grid", g.grid},
                   {"block", g.block},
                   {"dynamic_shared_bytes", g.dynamicSharedBytes}};
               // Only where set: the runtime reads a missing one as false,
               // 1 (cluster, min_tokens) or 0 (max_tokens: no bound).
               if (g.programmatic)
                 kernel["programmatic"] = true;
               if (g.cluster > 1)
                 kernel["cluster"] = g.cluster;
               if (g.minTokens != 1)
                 kernel["min_tokens"] = g.minTokens;
               if (g.maxTokens != 0)
                 kernel["max_tokens"] = g.maxTokens;
               kernels.push_back(std::move(kernel));
             }
             o["launch"] = json::Object{{"grid", t.grid},
                                        {"block", t.block},
                                        {"kernels", std::move(kernels)}};
           }
           list.push_back(std::move(o));
         }
         return list;
       }()},
      {"kernels", std::move(kernels)},
      {"buffers", std::move(buffers)},
      // One forward function serves prefill, chunked prefill and decode: the
      // schedule is the same, only T (tokens in the step) differs.
      // `init` runs once at load (dequantizing packed weights).
      {"schedules", json::Object{{"init", launches(program.init)},
                                 {"prefill", json::Array(steps)},
                                 {"decode", std::move(steps)}}},
      {"outputs", std::move(outputs)},
      {"weights", json::Object{{"file", "weights.bin"},
                               {"bytes", static_cast<int64_t>(offset)},
                               {"alignment", static_cast<int64_t>(kAlign)},
                               {"stripped", stripWeights}}}};
  std::string manifestPath = (llvm::Twine(dir) + "/manifest.json").str();
  llvm::raw_fd_ostream out(manifestPath, ec, llvm::sys::fs::OF_None);
  if (ec)
    return "cannot write " + manifestPath + ": " + ec.message();
  out << llvm::formatv("{0:2}", json::Value(std::move(manifest))) << "\n";

  std::string tokenizer = (llvm::Twine(modelDir) + "/tokenizer.json").str();
  if (llvm::sys::fs::exists(tokenizer))
    if (std::error_code copy = llvm::sys::fs::copy_file(
            tokenizer, (llvm::Twine(dir) + "/tokenizer.json").str()))
      return "cannot copy tokenizer.json: " + copy.message();
  return "";
}
