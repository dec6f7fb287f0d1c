//===- msac-run.cpp - Run an msac artifact
//---------------------------------===//
//
// Part of msac. No LLVM or MLIR dependency.
//
//   msac-run inspect  ARTIFACT [--json]
//   msac-run generate ARTIFACT -p PROMPT [-n N] [--temp T] [--top-k K]
//                     [--top-p P] [-s SEED] [--chunk-size C] [--ignore-eos]
//   msac-run bench    ARTIFACT [--batch B] [--input-len L] [--output-len O]
//                     [--json]
//
// Exit status: 0 success, 1 runtime or artifact error, 2 bad usage.
//
//===----------------------------------------------------------------------===//

#include "../CliErrors.h"
#include "msac/Runtime/Artifact.h"
#include "msac/Runtime/CudaModel.h"
#include "msac/Runtime/Engine.h"
#include "msac/Runtime/Tokenizer.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <set>
#include <type_traits>

#include <iostream>
#include <sstream>
#include <unistd.h>

using namespace msac::runtime;

namespace {

/// Peak resident memory of this process, bytes (VmHWM).
uint64_t peakRss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024;
  return 0;
}

/// A CLI11 check that an option's value is a number of type T in [Lo, Hi]
/// (an integer when T is integral). CLI::Range reports a value that is not a
/// number as "not in range"; this says what the value is and what the flag
/// takes: `--max-tokens: 'abc' is not an integer; expected an integer in
/// [1, 16777216]`. \p expected replaces the text after "expected".
template <typename T>
CLI::Validator numberIn(T lo, T hi, std::string expected = "") {
  constexpr bool isInteger = std::is_integral_v<T>;
  if (expected.empty()) {
    std::ostringstream os;
    os << (isInteger ? "an integer" : "a number") << " in [" << lo << ", " << hi
       << "]";
    expected = os.str();
  }
  return CLI::Validator(
      [=](std::string &input) -> std::string {
        T value{};
        if (!CLI::detail::lexical_cast(input, value))
          return "'" + input + "' is not " +
                 (isInteger ? "an integer" : "a number") + "; expected " +
                 expected;
        // A negative value wraps around in an unsigned conversion; NaN is
        // in no range.
        const bool negative =
            std::is_unsigned_v<T> && input.find('-') != std::string::npos;
        if (negative || !(value >= lo && value <= hi))
          return input + " is out of range; expected " + expected;
        return std::string();
      },
      expected);
}

int fail(const std::string &message) {
  std::cerr << "msac-run: error: " << message << "\n";
  return 1;
}

std::unique_ptr<Artifact> loadArtifact(const std::string &path, int &rc) {
  std::string error;
  std::unique_ptr<Artifact> a = Artifact::load(path, error);
  if (!a)
    rc = fail(error);
  return a;
}

/// Checks a request's context against the model's maximum and this
/// runtime's limits; returns "" or an error.
std::string
checkContext(const Artifact &a, int64_t batch, int64_t context, int64_t chunk,
             const std::string &what = "prompt + generated tokens") {
  const int64_t maxContext =
      a.model().maxPositions > 0 ? a.model().maxPositions : int64_t(1) << 20;
  if (context > maxContext)
    return what + (what.rfind("--", 0) == 0 ? " " : " = ") +
           std::to_string(context) +
           (what.rfind("--", 0) == 0 ? " exceeds" : " exceed") +
           " the model's maximum context of " + std::to_string(maxContext) +
           " tokens (max_position_embeddings)";
  if (batch > 256)
    return "--batch " + std::to_string(batch) + " exceeds 256 sequences";
  if (chunk > 65536)
    return "--chunk-size " + std::to_string(chunk) + " exceeds 65536 tokens";
  return "";
}

HostModelOptions instanceOptions(const Artifact &a, int64_t batch,
                                 int64_t context, int64_t chunk) {
  HostModelOptions o;
  o.maxSequences = batch;
  o.maxBlocksPerSequence =
      (context + a.model().pageSize - 1) / a.model().pageSize;
  o.numPages = o.maxSequences * o.maxBlocksPerSequence;
  o.maxTokens = std::max<int64_t>(chunk, batch);
  return o;
}

/// The executor for `device` (host or cuda), or null with a message.
std::unique_ptr<Executor> makeExecutor(const Artifact &a,
                                       const HostModelOptions &o,
                                       const std::string &device) {
  if (a.weightsStripped() && !o.dummyWeights) {
    fail(Executor::strippedWeightsError(a));
    return nullptr;
  }
  if (device == "host") {
    if (!a.hasHostKernels()) {
      fail("the artifact has no host kernels; recompile with --target host "
           "or run with --device cuda");
      return nullptr;
    }
    return std::make_unique<HostModel>(a, o);
  }
  std::string error;
  std::unique_ptr<CudaModel> m = CudaModel::create(a, o, error);
  if (!m)
    fail(error);
  else
    std::fprintf(stderr, "msac-run: running %s kernels on %s\n",
                 m->targetName().c_str(), m->deviceName().c_str());
  return m;
}

/// How many checkpoint weight tensors the artifact stores in each format,
/// recognized by the names and dtypes of ModelOpt-style tensors: a payload
/// `X.weight` beside `X.weight_scale` and `X.weight_scale_2` is NVFP4; beside a
/// byte (E8M0) `X.weight_scale` MXFP8 (FP8 payload) or MXFP4 (byte payload);
/// beside an f32 `X.weight_scale` per-tensor FP8; beside `X.weight_scale_inv`
/// block FP8 (compressed-tensors NVFP4 stores `X.weight_packed`); any other
/// weight counts under its dtype. Scale tensors are not counted; stacked
/// experts count one per expert, as the checkpoint stores them. The artifact's
/// weight buffers are fewer or more: one per stacked expert tensor, and one
/// per scale.
std::map<std::string, int64_t> weightFormats(const Artifact &a) {
  std::map<std::string, const Buffer *> byName;
  for (const Buffer &b : a.buffers())
    if (b.kind == Buffer::Kind::Weight)
      byName[b.name] = &b;
  auto find = [&](const std::string &name) -> const Buffer * {
    auto it = byName.find(name);
    return it == byName.end() ? nullptr : it->second;
  };
  auto endsWith = [](const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::map<std::string, int64_t> counts;
  for (const auto &[name, b] : byName) {
    if (endsWith(name, ".weight_scale") || endsWith(name, ".weight_scale_2") ||
        endsWith(name, ".weight_scale_inv") ||
        endsWith(name, ".weight_global_scale"))
      continue;
    // Stacked experts: `...experts.{}.w1.weight`, experts first.
    const int64_t count =
        name.find("{}") != std::string::npos && !b->shape.empty()
            ? b->shape.front().value
            : 1;
    std::string format = b->dtype;
    if (endsWith(name, ".weight_packed")) {
      format = "nvfp4";
    } else if (endsWith(name, ".weight")) {
      const Buffer *scale = find(name + "_scale");
      if (find(name + "_scale_2"))
        format = "nvfp4";
      else if (find(name + "_scale_inv"))
        format = "fp8-block";
      else if (scale && scale->dtype == "f32")
        format = "fp8";
      else if (scale)
        format = b->dtype == "ui8" ? "mxfp4" : "mxfp8";
    }
    counts[format] += count;
  }
  return counts;
}

int inspect(const std::string &path, bool asJson) {
  int rc = 0;
  auto a = loadArtifact(path, rc);
  if (!a)
    return rc;
  const ModelInfo &m = a->model();
  // Activations sized by the step (a T or N extent) count per token; the
  // others are a fixed size: the block-scaled weights dequantized at load
  // (the load-time steps write them) and fixed workspaces (such as the
  // split-KV attention partials of decode steps with many chunks).
  uint64_t activationBytesPerToken = 0, dequantizedBytes = 0,
           workspaceBytes = 0;
  size_t weightBuffers = 0, caches = 0;
  uint64_t cacheBytesPerToken = 0; // all layers, block scales included
  std::map<std::string, int64_t> cacheDTypes; // caches per element format
  // Weights stored in another order than the checkpoint's, per order.
  std::map<std::string, int64_t> weightOrders;
  std::set<int64_t> loadTimeBuffers;
  for (const Step &s : a->initSchedule())
    loadTimeBuffers.insert(s.buffers.begin(), s.buffers.end());
  for (size_t id = 0; id < a->buffers().size(); ++id) {
    const Buffer &b = a->buffers()[id];
    weightBuffers += b.kind == Buffer::Kind::Weight;
    if (b.kind == Buffer::Kind::Weight && !b.order.empty())
      ++weightOrders[b.order];
    caches += b.kind == Buffer::Kind::Cache;
    if (b.kind == Buffer::Kind::Cache) {
      cacheBytesPerToken += b.bytesPerToken;
      ++cacheDTypes[b.dtype == "f8E4M3FN" ? "fp8" : b.dtype];
    }
    if (b.kind == Buffer::Kind::Activation) {
      uint64_t n = b.elementBytes();
      bool perToken = false;
      for (const Extent &e : b.shape) {
        n *= e.symbol.empty() ? e.value : 1;
        perToken |= e.symbol == "T" || e.symbol == "N";
      }
      if (perToken)
        activationBytesPerToken += n;
      else if (loadTimeBuffers.count(static_cast<int64_t>(id)))
        dequantizedBytes += n;
      else
        workspaceBytes += n;
    }
  }
  std::string targets;
  nlohmann::ordered_json targetList = nlohmann::ordered_json::array();
  // GPU targets: the common grid and block, and the kernels launched with
  // a grid, block or dynamic shared memory of their own.
  std::string launchText;
  nlohmann::ordered_json launchList = nlohmann::ordered_json::object();
  for (const Target &t : a->targets()) {
    targets += (targets.empty() ? "" : ", ") + t.name;
    targetList.push_back(t.name);
    if (!t.grid)
      continue;
    nlohmann::ordered_json own = nlohmann::ordered_json::object();
    launchText += "launch " + t.name + ":" +
                  std::string(t.name.size() < 9 ? 9 - t.name.size() : 1, ' ') +
                  "grid " + std::to_string(t.grid) + ", block " +
                  std::to_string(t.block) + "\n";
    for (size_t i = 0; i < t.kernelNames.size(); ++i) {
      const KernelLaunchShape &shape = t.kernelShapes[i];
      const bool everyStep = shape.minTokens == 1 && shape.maxTokens == 0;
      if (shape.grid == t.grid && shape.block == t.block &&
          shape.dynamicSharedBytes == 0 && !shape.programmatic &&
          shape.cluster == 1 && everyStep)
        continue;
      own[t.kernelNames[i]] = {
          {"grid", shape.grid},
          {"block", shape.block},
          {"dynamic_shared_bytes", shape.dynamicSharedBytes}};
      if (shape.programmatic)
        own[t.kernelNames[i]]["programmatic"] = true;
      if (shape.cluster > 1)
        own[t.kernelNames[i]]["cluster"] = shape.cluster;
      // The steps that launch it (KernelLaunchShape::launchedAt).
      std::string steps;
      if (!everyStep) {
        own[t.kernelNames[i]]["min_tokens"] = shape.minTokens;
        own[t.kernelNames[i]]["max_tokens"] = shape.maxTokens;
        if (shape.maxTokens > 0 && shape.minTokens > shape.maxTokens)
          steps = ", never launched";
        else if (shape.maxTokens == 0)
          steps = ", steps of " + std::to_string(shape.minTokens) +
                  " or more tokens";
        else if (shape.minTokens == shape.maxTokens)
          steps = ", steps of " + std::to_string(shape.minTokens) +
                  (shape.minTokens == 1 ? " token" : " tokens");
        else
          steps = ", steps of " + std::to_string(shape.minTokens) + " to " +
                  std::to_string(shape.maxTokens) + " tokens";
      }
      launchText +=
          "  " + t.kernelNames[i] + ": grid " + std::to_string(shape.grid) +
          (shape.cluster > 1
               ? " (clusters of " + std::to_string(shape.cluster) + ")"
               : std::string()) +
          ", block " + std::to_string(shape.block) + ", " +
          std::to_string(shape.dynamicSharedBytes) +
          " bytes of dynamic shared memory" +
          (shape.programmatic ? ", programmatic" : "") + steps + "\n";
    }
    launchList[t.name] = {{"grid", t.grid},
                          {"block", t.block},
                          {"kernels_with_own_shape", std::move(own)}};
  }
  int64_t sparse =
      std::count(m.layerAttention.begin(), m.layerAttention.end(), "sparse");
  // Layers per attention precision contract (exact | q8).
  std::map<std::string, int64_t> precisions;
  for (const std::string &p : m.layerPrecision)
    ++precisions[p];
  std::string precisionText;
  for (const auto &[p, count] : precisions)
    precisionText += (precisionText.empty() ? "" : ", ") + p + " " +
                     std::to_string(count) +
                     (count == 1 ? " layer" : " layers");
  const std::map<std::string, int64_t> formats = weightFormats(*a);
  int64_t checkpointTensors = 0;
  std::string formatText;
  // Checkpoint tensors in a block-scaled format (not bf16 / f16 / f32).
  int64_t blockScaled = 0;
  for (const auto &[format, count] : formats) {
    checkpointTensors += count;
    formatText +=
        (formatText.empty() ? "" : ", ") + format + " " + std::to_string(count);
    if (format != "bf16" && format != "f16" && format != "f32")
      blockScaled += count;
  }
  if (asJson) {
    nlohmann::ordered_json j = {
        {"artifact", path},
        {"format_version", a->formatVersion},
        {"producer", a->producer},
        {"target", a->target},
        {"targets", targetList},
        {"launch", launchList},
        {"model",
         {{"model_type", m.modelType},
          {"hidden_size", m.hiddenSize},
          {"num_layers", m.numLayers},
          {"msa_layers", sparse},
          {"num_attention_heads", m.numHeads},
          {"num_key_value_heads", m.numKVHeads},
          {"head_dim", m.headDim},
          {"vocab_size", m.vocabSize},
          {"page_size", m.pageSize}}},
        {"kernels", a->kernelNames().size()},
        {"launches_per_step", a->prefillSchedule().size()},
        {"weights",
         {{"buffers", weightBuffers},
          {"checkpoint_tensors", checkpointTensors},
          {"bytes", a->weightBytes()},
          {"stripped", a->weightsStripped()},
          {"formats", formats},
          {"orders", weightOrders}}},
        {"caches", caches},
        {"cache_dtypes", cacheDTypes},
        {"attention_precision", precisions},
        {"cache_bytes_per_token", cacheBytesPerToken},
        {"activation_bytes_per_token", activationBytesPerToken},
        {"load_time_buffer_bytes", dequantizedBytes},
        {"fixed_workspace_bytes", workspaceBytes},
        {"block_scaled_read_in_place", blockScaled > 0 && !dequantizedBytes}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::string cacheDTypeText;
  for (const auto &[dtype, count] : cacheDTypes)
    cacheDTypeText += (cacheDTypeText.empty() ? "" : ", ") + dtype + " " +
                      std::to_string(count);
  std::cout << "artifact:        " << path << "\n"
            << "format version:  " << a->formatVersion << " (" << a->producer
            << ")\n"
            << "targets:         " << targets << "\n"
            << launchText << "model:           " << m.modelType << ", "
            << m.numLayers << " layers (" << sparse << " MSA), hidden "
            << m.hiddenSize << ", heads " << m.numHeads << "/" << m.numKVHeads
            << " x " << m.headDim << ", vocab " << m.vocabSize << "\n"
            << "kernels:         " << a->kernelNames().size() << ", "
            << a->prefillSchedule().size() << " launches per step\n"
            << "weights:         " << weightBuffers
            << " buffers (scales included, stacked experts one each), "
            << a->weightBytes()
            << (a->weightsStripped()
                    ? " bytes, stripped (compiled with --strip-weights)\n"
                    : " bytes (weights.bin, mapped)\n")
            << "weight formats:  " << checkpointTensors
            << " checkpoint tensors (scales not counted, one per expert): "
            << formatText << "\n";
  if (!weightOrders.empty()) {
    std::string orderText;
    for (const auto &[order, count] : weightOrders)
      orderText +=
          (orderText.empty() ? "" : ", ") + std::to_string(count) + " " + order;
    std::cout << "weight orders:   " << orderText
              << " (stored so for the kernels; the rest row-major)\n";
  }
  std::cout << "caches:          " << caches << " paged caches ("
            << cacheDTypeText << ") of " << m.pageSize << "-token pages, "
            << cacheBytesPerToken << " bytes per token\n"
            << "attention:       " << precisionText << " (precision contract)\n"
            << "activations:     " << activationBytesPerToken
            << " bytes per token in a step\n";
  if (workspaceBytes)
    std::cout << "workspace:       " << workspaceBytes
              << " bytes of fixed-size step buffers\n";
  if (dequantizedBytes)
    std::cout << "dequantized:     " << dequantizedBytes
              << " bytes of block-scaled weights expanded to FP32 at load\n";
  else if (blockScaled)
    std::cout << "block-scaled:    read in place by the kernels, no FP32 "
                 "copies at load (msac compile --packed-weights)\n";
  return 0;
}

struct GenerateOptions {
  std::string prompt;
  int64_t maxTokens = 32;
  SamplingParams sampling;
  int64_t chunk = 512;
  bool ignoreEos = false;
  std::string device = "host";
};

int generate(const std::string &path, const GenerateOptions &g) {
  int rc = 0;
  auto a = loadArtifact(path, rc);
  if (!a)
    return rc;
  std::string error;
  std::unique_ptr<Tokenizer> tok =
      Tokenizer::load(path + "/tokenizer.json", error);
  if (!tok)
    return fail(error +
                " (the artifact needs the checkpoint's tokenizer.json)");
  // Ids the tokenizer can produce that are no row of the model's
  // embedding: a prompt that uses one is refused by the step's checks, so
  // say where such ids come from before that happens.
  if (tok->maxId() >= a->model().vocabSize)
    std::cerr << "msac-run: warning: " << path << "/tokenizer.json: token id "
              << tok->maxId() << " is outside the model's vocabulary of "
              << a->model().vocabSize
              << " tokens (model.vocab_size); a prompt that produces such a "
                 "token is refused: does this tokenizer belong to the "
                 "model?\n";
  Request req;
  if (a->model().bosTokenId >= 0)
    req.prompt.push_back(static_cast<int32_t>(a->model().bosTokenId));
  std::vector<int32_t> ids = tok->encode(g.prompt);
  req.prompt.insert(req.prompt.end(), ids.begin(), ids.end());
  req.maxNewTokens = g.maxTokens;
  req.sampling = g.sampling;
  req.stopAtEos = !g.ignoreEos;
  int64_t context = static_cast<int64_t>(req.prompt.size()) + g.maxTokens;
  // One request: no step holds more tokens than the prompt, so activations
  // are sized for min(--chunk-size, prompt) tokens.
  const int64_t stepTokens = std::max<int64_t>(
      1, std::min<int64_t>(g.chunk, static_cast<int64_t>(req.prompt.size())));
  if (std::string e = checkContext(*a, 1, context, stepTokens); !e.empty())
    return fail(e);
  std::unique_ptr<Executor> executor =
      makeExecutor(*a, instanceOptions(*a, 1, context, stepTokens), g.device);
  if (!executor)
    return 1;
  Engine engine(*a, *executor, stepTokens);
  std::vector<RequestResult> results;
  std::cout << g.prompt << std::flush;
  // Whole UTF-8 characters only; invalid bytes become U+FFFD.
  Utf8Stream text;
  const bool isTerminal = ::isatty(1);
  auto print = [&](std::string s) {
    if (isTerminal)
      for (char &c : s)
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          c = '?'; // control bytes would garble the terminal
    std::cout << s << std::flush;
  };
  bool ok = engine.run(
      {req}, results,
      [&](size_t, int32_t token) {
        if (!tok->isSpecial(token))
          print(text.push(tok->tokenBytes(token)));
      },
      error);
  // An unfinished character at the end is shown as U+FFFD.
  print(text.finish());
  std::cout << "\n";
  if (!ok)
    return fail(error);
  const EngineStats &s = engine.stats();
  const RequestResult &r = results[0];
  // A rate needs timed steps of that kind (no decode step when one token
  // is generated).
  auto rate = [](int64_t tokens, double ms) {
    char buf[48];
    if (tokens <= 0 || ms <= 0)
      return std::string("n/a");
    std::snprintf(buf, sizeof(buf), "%.1f tokens/s", tokens * 1000.0 / ms);
    return std::string(buf);
  };
  std::fprintf(stderr,
               "\nmsac-run: prompt %zu tokens, generated %zu tokens (%s); "
               "TTFT %.1f ms; prefill %s; decode %s\n",
               req.prompt.size(), r.tokens.size(), r.stopReason.c_str(),
               r.ttftMs, rate(s.prefillTokens, s.prefillMs).c_str(),
               rate(s.decodeTokens, s.decodeMs).c_str());
  return 0;
}

struct BenchOptions {
  int64_t batch = 1, inputLen = 128, outputLen = 32, chunk = 2048;
  bool json = false;
  std::string device = "host";
};

int bench(const std::string &path, const BenchOptions &b) {
  int rc = 0;
  auto a = loadArtifact(path, rc);
  if (!a)
    return rc;
  std::vector<Request> requests(b.batch);
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t i = 0; i < b.inputLen; ++i)
      requests[r].prompt.push_back(
          static_cast<int32_t>((i * 7919 + r * 104729 + 17) %
                               std::max<int64_t>(a->model().vocabSize - 2, 1)));
    requests[r].maxNewTokens = b.outputLen;
    requests[r].stopAtEos = false;
  }
  int64_t chunk = std::max(b.chunk, b.batch * b.inputLen);
  if (std::string e = checkContext(*a, b.batch, b.inputLen + b.outputLen,
                                   std::min<int64_t>(chunk, 65536));
      !e.empty())
    return fail(e);
  chunk = std::min<int64_t>(chunk, 65536);
  std::unique_ptr<Executor> executor = makeExecutor(
      *a, instanceOptions(*a, b.batch, b.inputLen + b.outputLen, chunk),
      b.device);
  if (!executor)
    return 1;
  Engine engine(*a, *executor, chunk);
  std::vector<RequestResult> results;
  std::string error;
  if (!engine.run(requests, results, nullptr, error))
    return fail(error);
  const EngineStats &s = engine.stats();
  double ttft = 0, tpot = 0;
  for (const RequestResult &r : results) {
    ttft += r.ttftMs / b.batch;
    if (r.tokens.size() > 1)
      tpot += (r.finishMs - r.ttftMs) / (r.tokens.size() - 1) / b.batch;
  }
  double prefillTps =
      s.prefillMs > 0 ? s.prefillTokens * 1000.0 / s.prefillMs : 0;
  double decodeTps = s.decodeMs > 0 ? s.decodeTokens * 1000.0 / s.decodeMs : 0;
  if (b.json) {
    nlohmann::ordered_json j = {
        {"artifact", path},
        {"device", b.device},
        {"batch", b.batch},
        {"input_len", b.inputLen},
        {"output_len", b.outputLen},
        {"prefill_tokens_per_s", prefillTps},
        {"decode_tokens_per_s", decodeTps},
        {"ttft_ms", ttft},
        {"tpot_ms", tpot},
        {"total_ms", s.totalMs},
        {"peak_rss_bytes", peakRss()},
        {"cache_and_activation_bytes", engine.model().allocatedBytes()}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("| batch | input | output | prefill tok/s | decode tok/s | "
              "TTFT ms | TPOT ms | peak RSS MiB |\n"
              "|---|---|---|---|---|---|---|---|\n"
              "| %lld | %lld | %lld | %.1f | %.1f | %.1f | %.2f | %.1f |\n",
              static_cast<long long>(b.batch),
              static_cast<long long>(b.inputLen),
              static_cast<long long>(b.outputLen), prefillTps, decodeTps, ttft,
              tpot, peakRss() / 1048576.0);
  return 0;
}

struct DecodeBenchOptions {
  int64_t batch = 1, context = 8192, steps = 20, warmup = 3;
  int64_t prefillChunk = 0; ///< tokens per sequence per step; 0 = decode
  bool dummyWeights = false, json = false, noGraphs = false;
  std::string clusterScheduling = "default";
  std::string device = "cuda", dumpDir;
  /// --graph-range FIRST:LAST (launch indices, LAST exclusive).
  std::vector<std::string> graphRanges;
};

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Writes every non-weight buffer of the last step into `dir` (raw
/// little-endian files) and dump.json: the step's launches in order (op,
/// kernel, buffer ids), the dumped buffers (name, dtype, shape), the
/// weights (name, dtype, shape, bytes), each layer's attention precision
/// contract (exact | q8, the manifest's) and, with synthetic weights, how
/// they were made (Executor::fillUniform pools, see CudaModel), so that an
/// independent implementation can recompute every launch.
std::string dumpStep(const Artifact &a, Executor &e, const std::string &dir,
                     int64_t tokens, int64_t logitsRows, bool dummyWeights) {
  const HostModelOptions &o = e.options();
  nlohmann::ordered_json launches = nlohmann::ordered_json::array();
  nlohmann::ordered_json buffers = nlohmann::ordered_json::object();
  nlohmann::ordered_json weights = nlohmann::ordered_json::object();
  auto shapeOf = [&](const Buffer &b) {
    nlohmann::ordered_json shape = nlohmann::ordered_json::array();
    if (b.kind == Buffer::Kind::Cache)
      return nlohmann::ordered_json{o.numPages, b.heads, b.pageSize, b.headDim};
    for (const Extent &x : b.shape)
      shape.push_back(x.symbol.empty()   ? x.value
                      : x.symbol == "MB" ? o.maxBlocksPerSequence
                      : x.symbol == "S"  ? o.maxSequences
                      : x.symbol == "N"  ? logitsRows
                                         : tokens);
    return shape;
  };
  for (const Step &s : a.decodeSchedule()) {
    launches.push_back(
        {{"op", s.op}, {"kernel", s.kernel}, {"buffers", s.buffers}});
    for (int64_t id : s.buffers) {
      const std::string key = std::to_string(id);
      const Buffer &b = a.buffers()[id];
      if (b.kind == Buffer::Kind::Weight) {
        weights[key] = {{"name", b.name},
                        {"dtype", b.dtype},
                        {"shape", shapeOf(b)},
                        {"bytes", b.bytes}};
        continue;
      }
      if (buffers.contains(key))
        continue;
      const void *data = e.bufferData(id);
      if (!data)
        return "cannot read buffer '" + b.name + "' back from the device";
      const std::string file = "b" + key + ".bin";
      std::ofstream out(dir + "/" + file, std::ios::binary);
      const nlohmann::ordered_json shape = shapeOf(b);
      uint64_t bytes = b.elementBytes();
      for (const auto &extent : shape)
        bytes *= extent.get<uint64_t>();
      if (b.kind == Buffer::Kind::Cache) // block scales included
        bytes =
            static_cast<uint64_t>(o.numPages) * b.pageSize * b.bytesPerToken;
      out.write(static_cast<const char *>(data),
                static_cast<std::streamsize>(bytes));
      if (!out)
        return "cannot write " + dir + "/" + file;
      buffers[key] = {{"name", b.name},
                      {"dtype", b.dtype},
                      {"shape", shape},
                      {"file", file}};
    }
  }
  nlohmann::ordered_json meta = {
      {"batch", o.maxSequences},
      {"tokens", tokens},
      {"logits_rows", logitsRows},
      {"max_blocks_per_sequence", o.maxBlocksPerSequence},
      {"launches", launches},
      {"buffers", buffers},
      {"weights", weights},
      {"attention_precision", a.model().layerPrecision}};
  if (dummyWeights)
    meta["dummy_weights"] = {{"generator", "splitmix64"},
                             {"seed", 0x5eed},
                             {"low", -1.0 / 64},
                             {"high", 1.0 / 64},
                             {"pool_bytes", uint64_t(64) << 20},
                             {"start_per_buffer", 7919 * 64}};
  std::ofstream out(dir + "/dump.json");
  out << meta.dump(1) << "\n";
  return out ? "" : "cannot write " + dir + "/dump.json";
}

/// Steps of `batch` sequences at context `context` over synthetic cache
/// contents: by default a decode step (one new token per sequence, at
/// position context - 1); with a prefill chunk of n tokens, each sequence's
/// last n positions (context - n .. context - 1, their keys written by the
/// step over the synthetic ones). Reports the step latency and every
/// launch's device time.
int benchDecode(const std::string &path, const DecodeBenchOptions &d) {
  int rc = 0;
  auto a = loadArtifact(path, rc);
  if (!a)
    return rc;
  const int64_t perSequence = std::max<int64_t>(d.prefillChunk, 1);
  if (perSequence > d.context)
    return fail("--prefill-chunk " + std::to_string(perSequence) +
                " exceeds --context " + std::to_string(d.context) +
                "; the chunk ends at the last position of the context");
  std::vector<std::pair<size_t, size_t>> graphRanges;
  for (const std::string &r : d.graphRanges) {
    size_t colon = r.find(':');
    char *end = nullptr;
    unsigned long long first = 0, last = 0;
    bool ok = colon != std::string::npos && colon > 0 &&
              std::isdigit(static_cast<unsigned char>(r[0])) &&
              colon + 1 < r.size() &&
              std::isdigit(static_cast<unsigned char>(r[colon + 1]));
    if (ok) {
      first = std::strtoull(r.c_str(), &end, 10);
      ok = end == r.c_str() + colon;
    }
    if (ok) {
      last = std::strtoull(r.c_str() + colon + 1, &end, 10);
      ok = *end == '\0' && first < last;
    }
    if (!ok)
      return fail("--graph-range '" + r +
                  "': expected FIRST:LAST launch indices with FIRST < LAST "
                  "(LAST exclusive; --json lists the launches in order)");
    if (d.device != "cuda")
      return fail("--graph-range times CUDA graphs; use --device cuda");
    graphRanges.emplace_back(first, last);
  }
  if (d.clusterScheduling != "default" && d.device != "cuda")
    return fail("--cluster-scheduling places CUDA cluster launches; use "
                "--device cuda");
  const int64_t tokens = d.batch * perSequence;
  if (tokens > 65536)
    return fail("--batch x --prefill-chunk = " + std::to_string(tokens) +
                " tokens per step exceeds 65536; use a smaller chunk");
  if (std::string e = checkContext(*a, d.batch, d.context, tokens, "--context");
      !e.empty())
    return fail(e);
  HostModelOptions o = instanceOptions(*a, d.batch, d.context, tokens);
  o.dummyWeights = d.dummyWeights;
  o.cudaGraphs = !d.noGraphs;
  o.clusterScheduling = d.clusterScheduling == "spread"           ? 1
                        : d.clusterScheduling == "load-balancing" ? 2
                                                                  : 0;
  std::unique_ptr<Executor> executor = makeExecutor(*a, o, d.device);
  if (!executor)
    return 1;
  std::string error;
  if (!executor->fillCaches(0xCAC4E, error))
    return fail(error);
  const int64_t mb = o.maxBlocksPerSequence;
  StepInput in;
  in.blockTable.resize(o.maxSequences * mb);
  for (int64_t s = 0; s < o.maxSequences; ++s)
    for (int64_t j = 0; j < mb; ++j)
      in.blockTable[s * mb + j] = static_cast<int32_t>(s * mb + j);
  for (int64_t s = 0; s < d.batch; ++s) {
    for (int64_t i = 0; i < perSequence; ++i) {
      in.tokenIds.push_back(
          static_cast<int32_t>((s * 7919 + i * 31 + 17) %
                               std::max<int64_t>(a->model().vocabSize - 2, 1)));
      in.seqIds.push_back(static_cast<int32_t>(s));
      in.positions.push_back(static_cast<int32_t>(d.context - perSequence + i));
    }
    in.logitsIndices.push_back(
        static_cast<int32_t>(s * perSequence + perSequence - 1));
  }
  for (int64_t i = 0; i < d.warmup; ++i)
    if (!executor->step(in, error))
      return fail(error);
  std::vector<double> stepMs;
  for (int64_t i = 0; i < d.steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!executor->step(in, error))
      return fail(error);
    stepMs.push_back(std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - t0)
                         .count());
  }
  const std::vector<Step> &schedule = a->decodeSchedule();
  std::vector<std::vector<double>> perLaunch(schedule.size());
  for (int64_t i = 0; i < d.steps; ++i) {
    std::vector<double> ms;
    if (!executor->profileStep(in, ms, error))
      return fail(error);
    for (size_t l = 0; l < ms.size(); ++l)
      perLaunch[l].push_back(ms[l]);
  }
  if (!d.dumpDir.empty())
    if (std::string e = dumpStep(*a, *executor, d.dumpDir, tokens,
                                 static_cast<int64_t>(in.logitsIndices.size()),
                                 d.dummyWeights);
        !e.empty())
      return fail(e);
  // Per op kind: launches and the sum of their median times. Entries the
  // steps did not launch (a GPU kernel's token bounds) time as 0 and are
  // not counted.
  std::map<std::string, std::pair<int64_t, double>> byOp;
  nlohmann::ordered_json launches = nlohmann::ordered_json::array();
  double kernelsUs = 0;
  for (size_t l = 0; l < schedule.size(); ++l) {
    double us = median(perLaunch[l]) * 1000.0;
    auto &entry = byOp[schedule[l].op];
    entry.first += us > 0 ? 1 : 0;
    entry.second += us;
    kernelsUs += us;
    launches.push_back({{"kernel", schedule[l].kernel},
                        {"op", schedule[l].op},
                        {"median_us", us}});
  }
  // Launch ranges timed inside a CUDA graph (Executor::timeRangeInGraph).
  nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
  for (const auto &[first, last] : graphRanges) {
    double us = 0;
    std::string error;
    if (!executor->timeRangeInGraph(first, last, static_cast<int>(d.steps), us,
                                    error))
      return fail("--graph-range " + std::to_string(first) + ":" +
                  std::to_string(last) + ": " + error);
    ranges.push_back({{"first", first}, {"last", last}, {"median_us", us}});
  }
  const double stepUs = median(stepMs) * 1000.0;
  if (d.json) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::object();
    for (const auto &[op, v] : byOp)
      ops[op] = {{"launches", v.first}, {"median_us_total", v.second}};
    std::cout << nlohmann::ordered_json{{"artifact", path},
                                        {"device", d.device},
                                        {"batch", d.batch},
                                        {"context", d.context},
                                        {"tokens_per_sequence", perSequence},
                                        {"steps", d.steps},
                                        {"cuda_graphs",
                                         d.device == "cuda" && !d.noGraphs},
                                        {"step_median_us", stepUs},
                                        {"kernels_median_us", kernelsUs},
                                        {"ops", ops},
                                        {"launches", launches},
                                        {"graph_ranges", ranges}}
                     .dump(1)
              << "\n";
    return 0;
  }
  const std::string what =
      d.prefillChunk > 0
          ? "prefill chunk of " + std::to_string(perSequence) + " tokens"
          : std::string("decode step");
  std::printf("%s, batch %lld, context %lld: %.1f us (median of "
              "%lld, %s; launches one by one %.1f us of kernel time)\n\n"
              "| op | launches | kernel us |\n|---|---|---|\n",
              what.c_str(), static_cast<long long>(d.batch),
              static_cast<long long>(d.context), stepUs,
              static_cast<long long>(d.steps),
              d.device == "host" ? "host kernels"
              : d.noGraphs       ? "kernel by kernel"
                                 : "one CUDA graph",
              kernelsUs);
  for (const auto &[op, v] : byOp)
    std::printf("| %s | %lld | %.1f |\n", op.c_str(),
                static_cast<long long>(v.first), v.second);
  for (const auto &r : ranges)
    std::printf("\nlaunches %llu:%llu in a CUDA graph: %.1f us\n",
                r["first"].get<unsigned long long>(),
                r["last"].get<unsigned long long>(),
                r["median_us"].get<double>());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "msac-run: run msac artifacts (generate, bench, bench-decode, inspect)"};
  app.set_version_flag("--version", std::string("msac-run (msac ") +
                                        MSAC_VERSION +
                                        ")\n  artifact format version: " +
                                        std::to_string(kArtifactFormatVersion));
  app.require_subcommand(1);
  std::string artifact;
  bool inspectJson = false;
  CLI::App *inspectCmd = app.add_subcommand("inspect", "Describe an artifact");
  inspectCmd->add_option("artifact", artifact, "Artifact folder")->required();
  inspectCmd->add_flag("--json", inspectJson, "Print JSON");

  GenerateOptions g;
  CLI::App *gen = app.add_subcommand("generate", "Generate text from a prompt");
  gen->add_option("artifact", artifact, "Artifact folder")->required();
  gen->add_option("-p,--prompt", g.prompt, "Prompt text")->required();
  gen->add_option("-n,--max-tokens", g.maxTokens, "Tokens to generate")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, int64_t(1) << 24));
  gen->add_option("--temp,--temperature", g.sampling.temperature,
                  "Sampling temperature (0 = greedy)")
      ->capture_default_str()
      ->check(numberIn(0.0f, 100.0f));
  gen->add_option("--top-k", g.sampling.topK,
                  "Keep the k most likely tokens (0 = all)")
      ->capture_default_str()
      ->check(numberIn<int64_t>(0, int64_t(1) << 24));
  gen->add_option("--top-p", g.sampling.topP, "Nucleus probability mass")
      ->capture_default_str()
      ->check(numberIn(0.0f, 1.0f));
  gen->add_option("-s,--seed", g.sampling.seed, "Random seed")
      ->capture_default_str()
      ->check(numberIn(uint64_t(0), std::numeric_limits<uint64_t>::max(),
                       "an integer in [0, 2^64)"));
  gen->add_option("--chunk-size", g.chunk, "Prefill chunk (tokens per step)")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, 65536));
  gen->add_flag("--ignore-eos", g.ignoreEos, "Do not stop at end-of-sequence");
  gen->add_option("--device", g.device,
                  "host, or cuda (the artifact's GPU target)")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "cuda"}));

  BenchOptions b;
  CLI::App *benchCmd =
      app.add_subcommand("bench", "Measure prefill and decode");
  benchCmd->add_option("artifact", artifact, "Artifact folder")->required();
  benchCmd->add_option("--batch", b.batch, "Sequences")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, 256));
  benchCmd->add_option("--input-len", b.inputLen, "Prompt tokens")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, int64_t(1) << 24));
  benchCmd->add_option("--output-len", b.outputLen, "Generated tokens")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, int64_t(1) << 24));
  benchCmd->add_flag("--json", b.json, "Print JSON");
  benchCmd->add_option("--device", b.device, "host, or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "cuda"}));

  DecodeBenchOptions d;
  CLI::App *decodeCmd = app.add_subcommand(
      "bench-decode",
      "Time decode steps (or prefill chunks) at a given context over "
      "synthetic cache contents, per launch");
  decodeCmd->add_option("artifact", artifact, "Artifact folder")->required();
  decodeCmd->add_option("--batch", d.batch, "Sequences (one token each)")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, 256));
  decodeCmd
      ->add_option("--context", d.context,
                   "Tokens in each sequence, the new one included")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, int64_t(1) << 24));
  decodeCmd
      ->add_option("--prefill-chunk", d.prefillChunk,
                   "Time prefill chunks instead of decode steps: this many "
                   "tokens per sequence, ending at --context")
      ->check(numberIn<int64_t>(1, 65536));
  decodeCmd->add_option("--steps", d.steps, "Timed steps")
      ->capture_default_str()
      ->check(numberIn<int64_t>(1, 10000));
  decodeCmd->add_option("--warmup", d.warmup, "Untimed steps first")
      ->capture_default_str()
      ->check(numberIn<int64_t>(0, 10000));
  decodeCmd->add_flag(
      "--dummy-weights", d.dummyWeights,
      "Synthetic weights (needed for --strip-weights artifacts)");
  decodeCmd
      ->add_option("--dump", d.dumpDir,
                   "Write every non-weight buffer of the last step and "
                   "dump.json to this existing folder")
      ->check(CLI::ExistingDirectory);
  decodeCmd->add_flag("--no-cuda-graphs", d.noGraphs,
                      "Launch kernel by kernel instead of one graph per step");
  decodeCmd
      ->add_option("--cluster-scheduling", d.clusterScheduling,
                   "How the driver places the CTAs of thread-block cluster "
                   "launches (--device cuda; CUDA's cluster scheduling "
                   "policy preference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "spread", "load-balancing"}));
  decodeCmd
      ->add_option("--graph-range", d.graphRanges,
                   "Also time launches FIRST:LAST (indices in the step, LAST "
                   "exclusive) captured in a CUDA graph, without the CPU "
                   "cost of launching them one by one (--device cuda); "
                   "repeatable")
      ->delimiter(',');
  decodeCmd->add_flag("--json", d.json, "Print JSON");
  decodeCmd
      ->add_option("--device", d.device,
                   "cuda, or host (kernel times by wall clock)")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "cuda"}));

  // Parse errors read like the tool's other errors.
  app.failure_message([](const CLI::App *app, const CLI::Error &e) {
    return "msac-run: error: " + msac::tools::cliErrorText(app, e) +
           "\nRun with --help for more information.\n";
  });
  // A first word that is no command (CLI11 would only say that a command
  // is required).
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App *sub : app.get_subcommands({})) {
      known |= sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "msac-run: error: unknown command '" << argv[1]
                << "'; the commands are " << names
                << "\nRun with --help for more information.\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // Only the bench commands take --batch: CLI11 would call it an
    // unexpected argument.
    if (dynamic_cast<const CLI::ExtrasError *>(&e) && (*gen || *inspectCmd))
      for (int i = 1; i < argc; ++i)
        if (std::string arg = argv[i];
            arg == "--batch" || arg.rfind("--batch=", 0) == 0) {
          std::cerr << "msac-run: error: --batch is an option of `msac-run "
                       "bench` and `msac-run bench-decode`, not of `msac-run "
                    << (*gen ? "generate`, which runs one prompt" : "inspect`")
                    << "; to measure a batch, run `msac-run bench ARTIFACT "
                       "--batch N`\nRun with --help for more information.\n";
          return 2;
        }
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (*inspectCmd)
      return inspect(artifact, inspectJson);
    if (*gen)
      return generate(artifact, g);
    if (*decodeCmd)
      return benchDecode(artifact, d);
    return bench(artifact, b);
  } catch (const std::bad_alloc &) {
    // The weights (loaded, dequantized or synthetic), the paged caches
    // (batch x context) and the activations (tokens per step) did not fit.
    if (*decodeCmd)
      return fail("out of memory: the weights, the caches of --batch x "
                  "--context tokens and the activations of --batch x "
                  "--prefill-chunk tokens must fit (`msac-run inspect` "
                  "shows the weight bytes); reduce --batch, --context or "
                  "--prefill-chunk, or use a machine with more memory");
    return fail("out of memory: reduce --batch, the context length or "
                "--chunk-size (`msac-run inspect` shows the weight bytes)");
  }
}
