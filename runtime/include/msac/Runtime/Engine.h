//===- Engine.h - Batched generation over a paged KV cache ------*- C++ -*-===//
//
// Part of the msac runtime.
//
// Schedules requests onto HostModel steps: every step carries prefill
// chunks of the requests still reading their prompt (at most `chunkSize`
// tokens in all) together with one decode token of every request already
// generating. Pages of 128 tokens are handed out on demand from one pool
// and recorded in the block table. Sampling: greedy (temperature 0), or
// softmax with temperature, then top-k, then top-p (nucleus), from a
// per-request seeded generator.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_RUNTIME_ENGINE_H
#define MSAC_RUNTIME_ENGINE_H

#include "msac/Runtime/HostModel.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace msac::runtime {

struct SamplingParams {
  float temperature = 0.0f; ///< 0 = greedy
  int64_t topK = 0;         ///< 0 = all tokens
  float topP = 1.0f;
  uint64_t seed = 0;
};

/// Picks a token from one row of logits.
int32_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingParams &params, std::mt19937_64 &rng);

struct Request {
  std::vector<int32_t> prompt;
  int64_t maxNewTokens = 16;
  SamplingParams sampling;
  bool stopAtEos = true;
};

struct RequestResult {
  std::vector<int32_t> tokens; ///< generated tokens
  double ttftMs = 0;           ///< from start to the first generated token
  double finishMs = 0;
  std::string stopReason; ///< length | eos | error
};

struct EngineStats {
  int64_t steps = 0, prefillTokens = 0, decodeTokens = 0;
  double prefillMs = 0, decodeMs = 0; ///< time in steps with/without prefill
  double totalMs = 0;
};

class Engine {
public:
  /// Runs on `executor` (a HostModel or a GPU model of `artifact`).
  Engine(const Artifact &artifact, Executor &executor, int64_t chunkSize);

  /// Runs all requests to completion; `onToken(request, token)` is called
  /// as tokens are generated. Returns false and sets `error` on failure.
  bool run(const std::vector<Request> &requests,
           std::vector<RequestResult> &results,
           const std::function<void(size_t, int32_t)> &onToken,
           std::string &error);

  const EngineStats &stats() const { return engineStats; }
  Executor &model() const { return host; }

private:
  const Artifact &art;
  Executor &host;
  int64_t chunk;
  EngineStats engineStats;
};

} // namespace msac::runtime

#endif // MSAC_RUNTIME_ENGINE_H
