//===- QuantizeWeights.cpp - Compile-time weight quantization -------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Checkpoint/QuantizeWeights.h"

#include "msac/Checkpoint/SafetensorsWriter.h"
#include "msac/Numerics/BlockQuantize.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace msac::ckpt;
namespace numerics = msac::numerics;

std::optional<WeightRecipe>
msac::ckpt::parseWeightRecipe(std::string_view name) {
  if (name == "nvfp4-experts")
    return WeightRecipe::NVFP4Experts;
  if (name == "mxfp8")
    return WeightRecipe::MXFP8;
  if (name == "fp8")
    return WeightRecipe::FP8;
  if (name == "fp8-tensor")
    return WeightRecipe::FP8Tensor;
  return std::nullopt;
}

const char *msac::ckpt::weightRecipeName(WeightRecipe recipe) {
  switch (recipe) {
  case WeightRecipe::NVFP4Experts:
    return "nvfp4-experts";
  case WeightRecipe::MXFP8:
    return "mxfp8";
  case WeightRecipe::FP8:
    return "fp8";
  case WeightRecipe::FP8Tensor:
    return "fp8-tensor";
  }
  return "?";
}

const char *msac::ckpt::weightRecipeList() {
  return "nvfp4-experts, mxfp8, fp8, fp8-tensor";
}

WeightFormat msac::ckpt::recipeFormat(WeightRecipe recipe,
                                      const WeightSpec &spec) {
  // Embedding, norms, router gate and bias are not projections; the LM head
  // is one but stays as stored (ModelOpt's default exclusion).
  if (!spec.linear || spec.name == "lm_head.weight")
    return WeightFormat::Float;
  switch (recipe) {
  case WeightRecipe::NVFP4Experts:
    return spec.name.find(".block_sparse_moe.experts.") != std::string::npos
               ? WeightFormat::NVFP4
               : WeightFormat::MXFP8;
  case WeightRecipe::MXFP8:
    return WeightFormat::MXFP8;
  case WeightRecipe::FP8:
    return WeightFormat::FP8Block;
  case WeightRecipe::FP8Tensor:
    return WeightFormat::FP8Tensor;
  }
  return WeightFormat::Float;
}

QuantizedWeight msac::ckpt::quantizeWeight(WeightFormat format,
                                           const float *values, int64_t n,
                                           int64_t k) {
  QuantizedWeight q;
  const float amax = numerics::absMax(values, n * k);
  switch (format) {
  case WeightFormat::NVFP4: {
    const int64_t blocks = k / numerics::kNVFP4BlockSize;
    const float global = numerics::nvfp4GlobalScale(amax);
    q.dtype = DType::U8;
    q.shape = {n, k / 2};
    q.data.assign(static_cast<size_t>(n * k / 2), 0);
    q.scaleDType = DType::F8_E4M3;
    q.scaleShape = {n, blocks};
    q.scale.resize(static_cast<size_t>(n * blocks));
    q.globalScale = global;
    uint8_t codes[numerics::kNVFP4BlockSize];
    for (int64_t b = 0; b < n * blocks; ++b) {
      const int64_t first = b * numerics::kNVFP4BlockSize;
      q.scale[b] =
          numerics::quantizeNVFP4WeightBlock(values + first, global, codes);
      for (int64_t i = 0; i < numerics::kNVFP4BlockSize; i += 2)
        q.data[(first + i) / 2] =
            static_cast<uint8_t>(codes[i] | (codes[i + 1] << 4));
    }
    return q;
  }
  case WeightFormat::MXFP8: {
    const int64_t blocks = k / numerics::kMXBlockSize;
    q.dtype = DType::F8_E4M3;
    q.shape = {n, k};
    q.data.resize(static_cast<size_t>(n * k));
    q.scaleDType = DType::U8;
    q.scaleShape = {n, blocks};
    q.scale.resize(static_cast<size_t>(n * blocks));
    for (int64_t b = 0; b < n * blocks; ++b)
      q.scale[b] = numerics::quantizeMXFP8Block(
          values + b * numerics::kMXBlockSize,
          q.data.data() + b * numerics::kMXBlockSize);
    return q;
  }
  case WeightFormat::FP8Block: {
    const int64_t tile = numerics::kFP8BlockSize;
    const int64_t rows = (n + tile - 1) / tile, cols = (k + tile - 1) / tile;
    q.dtype = DType::F8_E4M3;
    q.shape = {n, k};
    q.data.resize(static_cast<size_t>(n * k));
    q.scaleDType = DType::F32;
    q.scaleShape = {rows, cols};
    q.scale.resize(static_cast<size_t>(rows * cols * 4));
    for (int64_t tr = 0; tr < rows; ++tr)
      for (int64_t tc = 0; tc < cols; ++tc) {
        const int64_t r0 = tr * tile, r1 = std::min(n, r0 + tile);
        const int64_t c0 = tc * tile, c1 = std::min(k, c0 + tile);
        float tileAmax = 0;
        for (int64_t r = r0; r < r1; ++r)
          tileAmax = std::max(tileAmax,
                              numerics::absMax(values + r * k + c0, c1 - c0));
        const float scale = numerics::fp8Scale(tileAmax);
        std::memcpy(q.scale.data() + 4 * (tr * cols + tc), &scale, 4);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c)
            q.data[r * k + c] =
                numerics::floatToE4M3(values[r * k + c] / scale);
      }
    return q;
  }
  case WeightFormat::FP8Tensor: {
    const float scale = numerics::fp8Scale(amax);
    q.dtype = DType::F8_E4M3;
    q.shape = {n, k};
    q.data.resize(static_cast<size_t>(n * k));
    for (int64_t i = 0; i < n * k; ++i)
      q.data[i] = numerics::floatToE4M3(values[i] / scale);
    q.scaleDType = DType::F32;
    q.scaleShape = {};
    q.scale.resize(4);
    std::memcpy(q.scale.data(), &scale, 4);
    return q;
  }
  default:
    return q;
  }
}

uint64_t msac::ckpt::quantizedWeightBytes(WeightFormat format, int64_t n,
                                          int64_t k) {
  const uint64_t elements = static_cast<uint64_t>(n) * k;
  switch (format) {
  case WeightFormat::NVFP4: // E2M1 pairs, an E4M3 scale per 16, FP32 global
    return elements / 2 + n * (k / numerics::kNVFP4BlockSize) + 4;
  case WeightFormat::MXFP8: // E4M3, an E8M0 scale per 32
    return elements + n * (k / numerics::kMXBlockSize);
  case WeightFormat::FP8Block: { // E4M3, an FP32 scale per 128 x 128 tile
    const int64_t tile = numerics::kFP8BlockSize;
    return elements + 4 * static_cast<uint64_t>((n + tile - 1) / tile) *
                          ((k + tile - 1) / tile);
  }
  case WeightFormat::FP8Tensor: // E4M3, one FP32 scale
    return elements + 4;
  default:
    return 0;
  }
}

namespace {

constexpr const char *kFlag = "--quantize-weights";

/// The values of a BF16/F16/F32 tensor as FP32.
std::vector<float> readFloats(const Checkpoint::Entry &entry) {
  const uint8_t *bytes = entry.file->data(*entry.info);
  const int64_t count = entry.info->numElements();
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    switch (entry.info->dtype) {
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      out[i] = numerics::bf16ToFloat(h);
      break;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      out[i] = numerics::f16ToFloat(h);
      break;
    }
    default:
      std::memcpy(&out[i], bytes + 4 * i, 4);
    }
  }
  return out;
}

std::string recipeFlag(WeightRecipe recipe) {
  return std::string(kFlag) + "=" + weightRecipeName(recipe);
}

/// One weight to quantize.
struct Job {
  std::string module; ///< checkpoint name without `.weight`
  const Checkpoint::Entry *entry;
  WeightFormat format;
  int64_t n, k;
};

} // namespace

bool msac::ckpt::quantizeCheckpointWeights(ModelConfig &config,
                                           Checkpoint &checkpoint,
                                           WeightRecipe recipe,
                                           Diagnostics &diags) {
  const size_t errorsBefore = diags.errorCount();
  const std::string flag = recipeFlag(recipe);
  if (config.quantization.method != QuantMethod::None) {
    diags.error(config.quantization.source, "",
                flag +
                    " needs a bf16/f16/f32 checkpoint, but this one is "
                    "already quantized (method " +
                    quantMethodName(config.quantization.method) +
                    (config.quantization.algorithm.empty()
                         ? std::string()
                         : ", " + config.quantization.algorithm) +
                    "); drop " + kFlag + " to compile it as stored");
    return false;
  }
  const std::string prefix =
      checkpoint.find("language_model.model.embed_tokens.weight")
          ? "language_model."
          : "";

  std::vector<Job> jobs;
  for (const WeightSpec &spec : modelWeightSpecs(config)) {
    const WeightFormat format = recipeFormat(recipe, spec);
    if (format == WeightFormat::Float)
      continue;
    const std::string name = prefix + spec.name;
    const std::string module = name.substr(0, name.size() - 7); // ".weight"
    const Checkpoint::Entry *entry = checkpoint.find(name);
    // A missing or misshapen weight is reported by weight resolution.
    if (!entry || entry->info->shape != spec.shape) {
      if (checkpoint.find(module + ".weight_packed"))
        diags.error(checkpoint.directory(),
                    "tensor '" + module + ".weight_packed'",
                    "is already quantized (compressed-tensors NVFP4); " + flag +
                        " needs a bf16/f16/f32 checkpoint; drop " + kFlag);
      continue;
    }
    const std::string file = entry->file->path();
    if (!isDenseFloat(entry->info->dtype) ||
        checkpoint.find(module + ".weight_scale") ||
        checkpoint.find(module + ".weight_scale_inv")) {
      diags.error(file, "tensor '" + name + "'",
                  "is already quantized (dtype " +
                      std::string(dtypeName(entry->info->dtype)) +
                      (isDenseFloat(entry->info->dtype)
                           ? std::string(" with a weight_scale beside it")
                           : std::string()) +
                      "); " + flag + " needs a bf16/f16/f32 checkpoint; drop " +
                      kFlag + " to compile it as stored");
      continue;
    }
    const int64_t n = spec.shape[0], k = spec.shape[1];
    const int64_t block =
        format == WeightFormat::NVFP4   ? numerics::kNVFP4BlockSize
        : format == WeightFormat::MXFP8 ? numerics::kMXBlockSize
                                        : 1;
    if (k % block != 0) {
      diags.error(file, "tensor '" + name + "'",
                  "has in_features " + std::to_string(k) +
                      ", not a multiple of the " + weightFormatName(format) +
                      " block size " + std::to_string(block) + " that " + flag +
                      " needs; use " + kFlag +
                      "=fp8 (block FP8, any K) or leave the checkpoint "
                      "unquantized");
      continue;
    }
    jobs.push_back({module, entry, format, n, k});
  }
  // Non-finite values have no quantized form.
  for (const Job &job : jobs) {
    const std::vector<float> values = readFloats(*job.entry);
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i])) {
        diags.error(job.entry->file->path(),
                    "tensor '" + job.module + ".weight'",
                    "holds a non-finite value at element " + std::to_string(i) +
                        " (row " + std::to_string(i / job.k) + "); " + flag +
                        " cannot quantize it; fix the checkpoint");
        break;
      }
  }
  if (diags.errorCount() != errorsBefore)
    return false;

  // The quantized tensors, in ModelOpt's names and dtypes.
  SafetensorsWriter writer;
  for (const Job &job : jobs) {
    const int64_t n = job.n, k = job.k;
    switch (job.format) {
    case WeightFormat::NVFP4:
      writer.add(job.module + ".weight", DType::U8, {n, k / 2});
      writer.add(job.module + ".weight_scale", DType::F8_E4M3,
                 {n, k / numerics::kNVFP4BlockSize});
      writer.add(job.module + ".weight_scale_2", DType::F32, {});
      break;
    case WeightFormat::MXFP8:
      writer.add(job.module + ".weight", DType::F8_E4M3, {n, k});
      writer.add(job.module + ".weight_scale", DType::U8,
                 {n, k / numerics::kMXBlockSize});
      break;
    case WeightFormat::FP8Tensor:
      writer.add(job.module + ".weight", DType::F8_E4M3, {n, k});
      writer.add(job.module + ".weight_scale", DType::F32, {});
      break;
    default: {
      const int64_t tile = numerics::kFP8BlockSize;
      writer.add(job.module + ".weight", DType::F8_E4M3, {n, k});
      writer.add(job.module + ".weight_scale_inv", DType::F32,
                 {(n + tile - 1) / tile, (k + tile - 1) / tile});
      break;
    }
    }
  }
  const char *tmp = std::getenv("TMPDIR");
  std::string path =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/msac-quantized-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0) {
    diags.error(path, "",
                "cannot create the temporary file for " + flag +
                    " (set TMPDIR to a writable folder)");
    return false;
  }
  close(fd);
  // Each weight is quantized when its payload is written; its scales follow.
  size_t jobIndex = 0;
  QuantizedWeight current;
  std::string error =
      writer.write(path, [&](size_t, const SafetensorsWriter::Tensor &tensor,
                             std::FILE *out) {
        const std::string leaf = tensor.name.substr(tensor.name.rfind('.') + 1);
        if (leaf == "weight") {
          const Job &job = jobs[jobIndex++];
          current = quantizeWeight(job.format, readFloats(*job.entry).data(),
                                   job.n, job.k);
          std::fwrite(current.data.data(), 1, current.data.size(), out);
        } else if (leaf == "weight_scale" || leaf == "weight_scale_inv") {
          std::fwrite(current.scale.data(), 1, current.scale.size(), out);
        } else {
          float global = *current.globalScale;
          std::fwrite(&global, 4, 1, out);
        }
      });
  std::unique_ptr<SafetensorsFile> file;
  if (error.empty())
    file = SafetensorsFile::open(path, diags);
  unlink(path.c_str()); // the mapping outlives the name
  if (!error.empty() || !file) {
    diags.error(path, "",
                "cannot write the quantized weights of " + flag + ": " +
                    (error.empty() ? "unreadable" : error) +
                    " (set TMPDIR to a folder with room)");
    return false;
  }
  checkpoint.overlay(std::move(file));
  if (recipe == WeightRecipe::FP8) {
    // Block FP8 is read under `quant_method: fp8`; `weight_scale_inv` holds
    // the multiplier despite its name, as DeepSeek-V3 stores it.
    config.quantization.method = QuantMethod::BlockFP8;
    config.quantization.algorithm = "";
    config.quantization.weightBlockSize = {numerics::kFP8BlockSize,
                                           numerics::kFP8BlockSize};
  } else {
    config.quantization.method = QuantMethod::ModelOpt;
    config.quantization.algorithm = recipe == WeightRecipe::NVFP4Experts
                                        ? "MIXED_PRECISION"
                                    : recipe == WeightRecipe::MXFP8 ? "MXFP8"
                                                                    : "FP8";
  }
  config.quantization.source = "msac " + flag;
  return true;
}
