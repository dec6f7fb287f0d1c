//===- Engine.cpp - Batched generation over a paged KV cache --------------===//
//
// Part of the msac runtime.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/Engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

using namespace msac::runtime;
using Clock = std::chrono::steady_clock;

int32_t msac::runtime::sampleToken(const float *logits, int64_t vocab,
                                   const SamplingParams &p,
                                   std::mt19937_64 &rng) {
  if (p.temperature <= 0.0f)
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) -
                                logits);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  int64_t keep = p.topK > 0 ? std::min<int64_t>(p.topK, vocab) : vocab;
  std::vector<double> probs(keep);
  double maxLogit = logits[order[0]], sum = 0;
  for (int64_t i = 0; i < keep; ++i)
    sum += probs[i] = std::exp((logits[order[i]] - maxLogit) / p.temperature);
  // Nucleus: the smallest prefix whose probability reaches top_p.
  double cumulative = 0;
  int64_t nucleus = keep;
  for (int64_t i = 0; i < keep; ++i) {
    cumulative += probs[i] / sum;
    if (cumulative >= p.topP) {
      nucleus = i + 1;
      break;
    }
  }
  std::discrete_distribution<int64_t> pick(probs.begin(),
                                           probs.begin() + nucleus);
  return order[pick(rng)];
}

Engine::Engine(const Artifact &artifact, Executor &executor, int64_t chunkSize)
    : art(artifact), host(executor),
      chunk(std::max<int64_t>(
          1, std::min(chunkSize, executor.options().maxTokens))) {}

bool Engine::run(const std::vector<Request> &requests,
                 std::vector<RequestResult> &results,
                 const std::function<void(size_t, int32_t)> &onToken,
                 std::string &error) {
  const HostModelOptions &o = host.options();
  const int64_t pageSize = art.model().pageSize;
  const int64_t vocab = art.model().vocabSize;
  if (static_cast<int64_t>(requests.size()) > o.maxSequences) {
    error = std::to_string(requests.size()) +
            " requests exceed the batch size " + std::to_string(o.maxSequences);
    return false;
  }
  struct State {
    std::vector<int32_t> tokens; // prompt then generated
    int64_t done = 0;            // tokens already in the cache
    int64_t generated = 0;
    bool finished = false;
    std::mt19937_64 rng;
  };
  std::vector<State> state(requests.size());
  results.assign(requests.size(), RequestResult());
  std::vector<int32_t> table(o.maxSequences * o.maxBlocksPerSequence, -1);
  std::vector<int32_t> freePages(o.numPages);
  std::iota(freePages.rbegin(), freePages.rend(), 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    const Request &req = requests[r];
    if (req.prompt.empty()) {
      error = "request " + std::to_string(r) + " has an empty prompt";
      return false;
    }
    int64_t total = static_cast<int64_t>(req.prompt.size()) + req.maxNewTokens;
    if ((total + pageSize - 1) / pageSize > o.maxBlocksPerSequence) {
      error = "request " + std::to_string(r) + " needs " +
              std::to_string(total) + " tokens of context, more than the " +
              std::to_string(o.maxBlocksPerSequence * pageSize) +
              " this instance holds (raise --max-context)";
      return false;
    }
    state[r].tokens = req.prompt;
    state[r].rng.seed(req.sampling.seed + r);
  }
  auto reserve = [&](size_t r, int64_t length) -> bool {
    for (int64_t b = 0; b * pageSize < length; ++b) {
      int32_t &slot = table[r * o.maxBlocksPerSequence + b];
      if (slot >= 0)
        continue;
      if (freePages.empty())
        return false;
      slot = freePages.back();
      freePages.pop_back();
    }
    return true;
  };

  const auto start = Clock::now();
  engineStats = EngineStats();
  while (true) {
    StepInput in;
    std::vector<std::pair<size_t, int64_t>> sampleRows; // request, row
    int64_t budget = chunk;
    bool hasPrefill = false;
    for (size_t r = 0; r < requests.size(); ++r) {
      State &s = state[r];
      if (s.finished)
        continue;
      int64_t pending = static_cast<int64_t>(s.tokens.size()) - s.done;
      int64_t take = std::min(pending, budget);
      if (take <= 0)
        continue;
      if (!reserve(r, s.done + take)) {
        error = "the KV cache is out of pages";
        return false;
      }
      for (int64_t i = 0; i < take; ++i) {
        in.tokenIds.push_back(s.tokens[s.done + i]);
        in.seqIds.push_back(static_cast<int32_t>(r));
        in.positions.push_back(static_cast<int32_t>(s.done + i));
      }
      // Prompt tokens make a prefill step, however few a step takes.
      hasPrefill |= s.done < static_cast<int64_t>(requests[r].prompt.size());
      budget -= take;
      s.done += take;
      if (s.done == static_cast<int64_t>(s.tokens.size())) {
        sampleRows.push_back({r, static_cast<int64_t>(in.tokenIds.size()) - 1});
        in.logitsIndices.push_back(
            static_cast<int32_t>(in.tokenIds.size() - 1));
      }
    }
    if (in.tokenIds.empty())
      break;
    in.blockTable = table;
    const auto stepStart = Clock::now();
    const float *logits = host.step(in, error);
    if (!logits)
      return false;
    const double stepMs =
        std::chrono::duration<double, std::milli>(Clock::now() - stepStart)
            .count();
    ++engineStats.steps;
    if (hasPrefill) {
      engineStats.prefillMs += stepMs;
      engineStats.prefillTokens += static_cast<int64_t>(in.tokenIds.size());
    } else {
      engineStats.decodeMs += stepMs;
      engineStats.decodeTokens += static_cast<int64_t>(in.tokenIds.size());
    }
    const double now =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    for (size_t i = 0; i < sampleRows.size(); ++i) {
      size_t r = sampleRows[i].first;
      State &s = state[r];
      int32_t token =
          sampleToken(logits + i * vocab, vocab, requests[r].sampling, s.rng);
      if (s.generated == 0)
        results[r].ttftMs = now;
      ++s.generated;
      results[r].tokens.push_back(token);
      if (onToken)
        onToken(r, token);
      bool eos = std::find(art.model().eosTokenIds.begin(),
                           art.model().eosTokenIds.end(),
                           token) != art.model().eosTokenIds.end();
      if ((eos && requests[r].stopAtEos) ||
          s.generated >= requests[r].maxNewTokens) {
        s.finished = true;
        results[r].finishMs = now;
        results[r].stopReason = eos && requests[r].stopAtEos ? "eos" : "length";
      } else {
        s.tokens.push_back(token);
      }
    }
  }
  engineStats.totalMs =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return true;
}
