//===- HostModel.cpp - Running an artifact's host kernels -----------------===//
//
// Part of the msac runtime.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/HostModel.h"

#include "msac/Numerics/LowPrecision.h"

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace msac::runtime;

HostModel::HostModel(const Artifact &artifact, const HostModelOptions &options)
    : art(artifact), opts(options) {
  const std::vector<Buffer> &buffers = art.buffers();
  std::map<std::string, std::vector<uint8_t>> pools; // dummy weights
  storage.resize(buffers.size());
  pointers.resize(buffers.size(), nullptr);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    if (b.kind == Buffer::Kind::Weight && !opts.dummyWeights) {
      pointers[i] = const_cast<uint8_t *>(art.weightData(b));
      continue;
    }
    if (b.kind == Buffer::Kind::Weight) {
      // Synthetic weights, as the GPU executor makes them.
      const std::vector<uint8_t> *pool = dummyWeightPool(b, pools);
      storage[i].resize(b.bytes);
      uint8_t *dst = storage[i].data();
      pointers[i] = dst;
      if (!pool)
        continue; // zeros; step() reports the weight
      copyFromPool(b.bytes, *pool, i * kDummyStride,
                   [&](uint64_t at, const uint8_t *src, uint64_t n) {
                     std::memcpy(dst + at, src, n);
                     return true;
                   });
      continue;
    }
    storage[i].assign(Executor::bytes(b, opts), 0);
    pointers[i] = storage[i].data();
    allocated += storage[i].size();
  }
  // Load-time launches (dequantizing packed weights); none without weights
  // (step() then reports the stripped artifact).
  if (!art.hasHostKernels() || (art.weightsStripped() && !opts.dummyWeights))
    return;
  const int64_t scalars[3] = {0, 0, opts.maxBlocksPerSequence};
  std::vector<void *> args;
  for (const Step &s : art.initSchedule()) {
    args.clear();
    for (int64_t id : s.buffers)
      args.push_back(pointers[id]);
    s.function(args.data(), scalars);
  }
}

uint64_t Executor::elements(const Buffer &b, const HostModelOptions &o) {
  if (b.kind == Buffer::Kind::Cache)
    return static_cast<uint64_t>(o.numPages) * b.heads * b.pageSize * b.headDim;
  uint64_t n = 1;
  for (const Extent &e : b.shape) {
    int64_t v = e.value;
    if (e.symbol == "T" || e.symbol == "N")
      v = o.maxTokens;
    else if (e.symbol == "MB")
      v = o.maxBlocksPerSequence;
    else if (e.symbol == "S")
      v = o.maxSequences;
    n *= static_cast<uint64_t>(v);
  }
  return n;
}

uint64_t Executor::bytes(const Buffer &b, const HostModelOptions &o) {
  if (b.kind == Buffer::Kind::Cache)
    return static_cast<uint64_t>(o.numPages) * b.pageSize * b.bytesPerToken;
  return elements(b, o) * b.elementBytes();
}

std::string Executor::strippedWeightsError(const Artifact &artifact) {
  return artifact.directory() +
         " was compiled with --strip-weights and holds no weights; "
         "benchmark it with synthetic weights (msac-run bench-decode "
         "--dummy-weights) or recompile without --strip-weights";
}

bool Executor::validate(const Artifact &art, const HostModelOptions &opts,
                        const StepInput &in, std::string &error) {
  if (art.weightsStripped() && !opts.dummyWeights) {
    error = strippedWeightsError(art);
    return false;
  }
  if (opts.dummyWeights && !checkDummyWeights(art, error))
    return false;
  const int64_t t = static_cast<int64_t>(in.tokenIds.size());
  const int64_t n = static_cast<int64_t>(in.logitsIndices.size());
  if (t == 0 || t > opts.maxTokens) {
    error = "a step takes 1 to " + std::to_string(opts.maxTokens) +
            " tokens, got " + std::to_string(t);
    return false;
  }
  if (static_cast<int64_t>(in.seqIds.size()) != t ||
      static_cast<int64_t>(in.positions.size()) != t) {
    error = "token_ids, seq_ids and positions must have the same length";
    return false;
  }
  if (static_cast<int64_t>(in.blockTable.size()) !=
      opts.maxSequences * opts.maxBlocksPerSequence) {
    error = "the block table must have maxSequences x maxBlocksPerSequence "
            "entries";
    return false;
  }
  const ModelInfo &m = art.model();
  for (int64_t i = 0; i < t; ++i) {
    if (in.tokenIds[i] < 0 || in.tokenIds[i] >= m.vocabSize) {
      error = "token id " + std::to_string(in.tokenIds[i]) +
              " is outside the vocabulary [0, " + std::to_string(m.vocabSize) +
              ")";
      return false;
    }
    int64_t seq = in.seqIds[i], pos = in.positions[i];
    if (seq < 0 || seq >= opts.maxSequences || pos < 0 ||
        pos / m.pageSize >= opts.maxBlocksPerSequence) {
      error = "token " + std::to_string(i) + " (sequence " +
              std::to_string(seq) + ", position " + std::to_string(pos) +
              ") is outside the block table";
      return false;
    }
    int32_t page =
        in.blockTable[seq * opts.maxBlocksPerSequence + pos / m.pageSize];
    if (page < 0 || page >= opts.numPages) {
      error = "position " + std::to_string(pos) + " of sequence " +
              std::to_string(seq) + " has no cache page";
      return false;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    if (in.logitsIndices[i] < 0 || in.logitsIndices[i] >= t) {
      error = "logits index " + std::to_string(in.logitsIndices[i]) +
              " is outside the step's " + std::to_string(t) + " tokens";
      return false;
    }
  return true;
}

const float *HostModel::step(const StepInput &in, std::string &error) {
  return run(in, nullptr, error);
}

const float *HostModel::profileStep(const StepInput &in,
                                    std::vector<double> &launchMs,
                                    std::string &error) {
  return run(in, &launchMs, error);
}

bool Executor::checkSynthesizableCaches(const Artifact &artifact,
                                        std::string &error, bool nvfp4) {
  for (const Buffer &b : artifact.buffers())
    if (b.kind == Buffer::Kind::Cache && !canSynthesize(b.dtype) &&
        !(nvfp4 && b.dtype == "nvfp4")) {
      error = "cannot synthesize a " + b.dtype + " cache ('" + b.name + "')";
      return false;
    }
  return true;
}

bool HostModel::fillCaches(uint64_t seed, std::string &error) {
  if (!checkSynthesizableCaches(art, error, /*nvfp4=*/true))
    return false;
  const std::vector<Buffer> &buffers = art.buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    if (b.kind != Buffer::Kind::Cache)
      continue;
    if (b.dtype == "nvfp4") {
      fillNvfp4Pages(storage[i].data(), storage[i].size(), b, seed + i);
      continue;
    }
    fillUniform(storage[i].data(), storage[i].size() / b.elementBytes(),
                b.dtype, -2.0f, 2.0f, seed + i);
  }
  return true;
}

const float *HostModel::run(const StepInput &in, std::vector<double> *launchMs,
                            std::string &error) {
  if (!art.hasHostKernels()) {
    error = "the artifact has no host kernels (compile with --target host)";
    return nullptr;
  }
  if (!validate(art, opts, in, error))
    return nullptr;
  const int64_t t = static_cast<int64_t>(in.tokenIds.size());
  const int64_t n = static_cast<int64_t>(in.logitsIndices.size());

  const std::vector<Buffer> &buffers = art.buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].kind != Buffer::Kind::Input)
      continue;
    const std::vector<int32_t> *src = in.argument(buffers[i].argument);
    if (src && !src->empty())
      std::memcpy(pointers[i], src->data(), src->size() * sizeof(int32_t));
  }

  const int64_t scalars[3] = {t, n, opts.maxBlocksPerSequence};
  std::vector<void *> args;
  if (launchMs)
    launchMs->clear();
  for (const Step &s : art.prefillSchedule()) {
    args.clear();
    for (int64_t id : s.buffers)
      args.push_back(pointers[id]);
    auto start = std::chrono::steady_clock::now();
    s.function(args.data(), scalars);
    if (launchMs)
      launchMs->push_back(std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return static_cast<const float *>(pointers[art.outputs().front()]);
}

namespace {
bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The dummyWeightPool role of weight `b`, or "" when none fits.
std::string dummyRole(const Buffer &b) {
  const bool scale = endsWith(b.name, "weight_scale");
  if (b.dtype == "bf16")
    return "bf16";
  if (b.dtype == "f32")
    return scale || endsWith(b.name, "weight_scale_2") ||
                   endsWith(b.name, "weight_scale_inv")
               ? "f32-scale"
               : "f32";
  if (b.dtype == "f8E4M3FN")
    return scale ? "e4m3-scale" : "e4m3";
  if (b.dtype == "ui8")
    return scale ? "e8m0-scale" : "bytes";
  return "";
}

/// 64 MiB of SplitMix64 bytes in [lo, lo + span).
std::vector<uint8_t> bytePool(uint32_t lo, uint32_t span, uint64_t seed) {
  std::vector<uint8_t> pool(uint64_t(64) << 20);
  uint64_t state = seed;
  for (uint8_t &byte : pool) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    byte = static_cast<uint8_t>(lo + (z >> 32) % span);
  }
  return pool;
}
} // namespace

const std::vector<uint8_t> *
Executor::dummyWeightPool(const Buffer &b,
                          std::map<std::string, std::vector<uint8_t>> &pools) {
  const std::string role = dummyRole(b);
  if (role.empty())
    return nullptr;
  std::vector<uint8_t> &pool = pools[role];
  if (!pool.empty())
    return &pool;
  if (role == "bf16" || role == "f32")
    pool = randomPool(role, -1.0f / 64, 1.0f / 64, 0x5eed);
  else if (role == "f32-scale")
    pool = randomPool("f32", 1.0f / 128, 1.0f / 64, 0x5eed);
  else if (role == "e4m3")
    pool = randomPool("f8E4M3FN", -1.0f, 1.0f, 0x5eed);
  else if (role == "e4m3-scale")
    pool = randomPool("f8E4M3FN", 0.25f, 0.5f, 0x5eed);
  else if (role == "e8m0-scale")
    pool = bytePool(127 - 6, 2, 0x5eed); // 2^-6, 2^-5
  else
    pool = bytePool(0, 256, 0x5eed);
  return &pool;
}

bool Executor::checkDummyWeights(const Artifact &artifact, std::string &error) {
  for (const Buffer &b : artifact.buffers())
    if (b.kind == Buffer::Kind::Weight && dummyRole(b).empty()) {
      error = "--dummy-weights synthesizes bf16, f32, FP8 (E4M3), NVFP4 and "
              "MX weights; weight '" +
              b.name + "' is " + b.dtype + " (run with the real weights)";
      return false;
    }
  return true;
}

void Executor::fillUniform(uint8_t *dst, uint64_t count,
                           const std::string &dtype, float lo, float hi,
                           uint64_t seed) {
  uint64_t state = seed;
  const bool bf16 = dtype == "bf16", fp8 = dtype == "f8E4M3FN";
  for (uint64_t i = 0; i < count; ++i) {
    // SplitMix64.
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    float v = lo + (hi - lo) * u;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (bf16) {
      uint16_t h =
          static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
      std::memcpy(dst + 2 * i, &h, 2);
    } else if (fp8) {
      dst[i] = msac::numerics::floatToE4M3(v); // nearest even, saturating
    } else {
      std::memcpy(dst + 4 * i, &bits, 4);
    }
  }
}

void Executor::fillNvfp4Pages(uint8_t *dst, uint64_t size, const Buffer &b,
                              uint64_t seed) {
  // Per page: E2M1 codes [heads, page, D/2] bytes (SplitMix64 random
  // bytes), then E4M3 scales [heads, page, D/16] (codegen's
  // KernelBuilder.h, CacheRow).
  const uint64_t codeBytes =
      static_cast<uint64_t>(b.heads) * b.pageSize * (b.headDim / 2);
  const uint64_t pageBytes =
      static_cast<uint64_t>(b.pageSize) * b.bytesPerToken;
  uint64_t state = seed;
  for (uint64_t page = 0; page + pageBytes <= size; page += pageBytes) {
    for (uint64_t j = 0; j < codeBytes; ++j) {
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      dst[page + j] = static_cast<uint8_t>((z ^ (z >> 31)) >> 56);
    }
    fillUniform(dst + page + codeBytes, pageBytes - codeBytes, "f8E4M3FN",
                0.125f, 0.625f, state);
  }
}

std::vector<uint8_t> Executor::randomPool(const std::string &dtype, float lo,
                                          float hi, uint64_t seed) {
  const uint64_t bytes = uint64_t(64) << 20;
  std::vector<uint8_t> pool(bytes);
  const uint64_t size = dtype == "bf16" ? 2 : dtype == "f8E4M3FN" ? 1 : 4;
  fillUniform(pool.data(), bytes / size, dtype, lo, hi, seed);
  return pool;
}

bool Executor::copyFromPool(
    uint64_t bytes, const std::vector<uint8_t> &pool, uint64_t start,
    const std::function<bool(uint64_t, const uint8_t *, uint64_t)> &copy) {
  // 256-byte aligned pieces keep elements whole.
  uint64_t at = (start % pool.size()) & ~uint64_t(255);
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = std::min<uint64_t>(bytes - done, pool.size() - at);
    if (!copy(done, pool.data() + at, n))
      return false;
    done += n;
    at = ((at + n + 4096) % pool.size()) & ~uint64_t(255);
  }
  return true;
}
