//===- Artifact.h - Loading an msac artifact --------------------*- C++ -*-===//
//
// Part of the msac runtime (no LLVM or MLIR dependency).
//
// Reads `manifest.json` (format `msac-artifact`, version
// kArtifactFormatVersion), memory-maps `weights.bin`, and opens the host
// kernels with dlopen. Every problem is reported as a message naming the
// file and entry, never by crashing.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_RUNTIME_ARTIFACT_H
#define MSAC_RUNTIME_ARTIFACT_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace msac::runtime {

/// The artifact layout version this runtime reads (2: per-kernel launch
/// shapes of GPU targets; 3: per-kernel parameter lists, which every step
/// must match; 4: a kernel's cluster size and the step sizes that launch
/// it).
inline constexpr int kArtifactFormatVersion = 4;

/// Dynamic shared memory a kernel may ask for (bytes): 227 KiB, the most
/// one CTA can have on sm_90a and sm_100a.
inline constexpr int64_t kMaxDynamicSharedBytes = 227 * 1024;

/// `void kernel(void **buffers, const int64_t *scalars /* T, N, MB */)`.
using HostKernel = void (*)(void **, const int64_t *);

struct Extent {
  int64_t value = 0;
  std::string symbol; // T, N, MB, S; empty for a constant
};

struct Buffer {
  enum class Kind { Input, Cache, Weight, Activation } kind;
  std::string name;
  std::string dtype; // bf16, f32, i32; caches also f8E4M3FN, nvfp4
  std::vector<Extent> shape;
  int64_t argument = -1;
  int64_t heads = 0, pageSize = 0, headDim = 0;
  /// Caches: bytes one token occupies (all heads; NVFP4: head_dim / 2 code
  /// bytes and head_dim / 16 E4M3 scales per head), the manifest's
  /// `bytes_per_token`.
  int64_t bytesPerToken = 0;
  uint64_t offset = 0, bytes = 0; // weights
  /// Weights: the order weights.bin stores the bytes in (the manifest's
  /// `order.name`, e.g. "chunk-major" for the fused prologue's FP8
  /// projections on sm_90a; the artifact's kernels read that order), or
  /// "" for the checkpoint's row-major order.
  std::string order;
  /// Bytes of one element (not meaningful for an nvfp4 cache).
  int64_t elementBytes() const;
};

struct Step {
  std::string kernel;
  std::string op;
  std::vector<int64_t> buffers;
  HostKernel function = nullptr;
};

/// How one kernel of a GPU target is launched.
struct KernelLaunchShape {
  int64_t grid = 0;               ///< CTAs
  int64_t block = 0;              ///< threads per CTA
  int64_t dynamicSharedBytes = 0; ///< bytes of dynamic shared memory
  /// Launched with programmatic stream serialization (sm_90+): it may
  /// start before the previous kernel finishes, and waits for it itself.
  bool programmatic = false;
  /// CTAs per thread-block cluster along x (sm_90+; 1: no cluster). The
  /// grid is a multiple of it.
  int64_t cluster = 1;
  /// The steps that launch the kernel: those of minTokens to maxTokens
  /// tokens (maxTokens 0: no upper bound; minTokens > maxTokens > 0 never).
  /// A GPU target may run an op by one of several kernels chosen by the
  /// step's size; the host runs every schedule entry.
  int64_t minTokens = 1, maxTokens = 0;
  /// True when a step of `tokens` tokens launches the kernel.
  bool launchedAt(int64_t tokens) const {
    return tokens >= minTokens && (maxTokens == 0 || tokens <= maxTokens);
  }
};

/// A compiled target of the artifact.
struct Target {
  std::string name;        ///< host-x86_64, sm_90a, sm_100a, ...
  std::string kernelsPath; ///< absolute path of the kernels file
  /// The manifest's FNV-1a checksum of the kernels file (16 hex digits;
  /// empty in artifacts written before it was recorded).
  std::string kernelsChecksum;
  /// "" when the kernels file's bytes match kernelsChecksum (or there is
  /// none), else the error naming the file and the fix.
  std::string checkKernels(const std::string &bytes) const;
  int64_t grid = 0, block = 0;
  /// GPU targets: the manifest's `launch.kernels`, one per kernel of the
  /// manifest's kernel list, in that order.
  std::vector<std::string> kernelNames;
  std::vector<KernelLaunchShape> kernelShapes;
  /// The launch shape of kernel `name`: its own, or the target's grid and
  /// block and no dynamic shared memory when the manifest does not list it.
  KernelLaunchShape shapeOf(const std::string &name) const;
};

struct ModelInfo {
  std::string modelType;
  int64_t hiddenSize = 0, numLayers = 0, numHeads = 0, numKVHeads = 0,
          headDim = 0, vocabSize = 0, maxPositions = 0, pageSize = 0;
  int64_t bosTokenId = -1;
  std::vector<int64_t> eosTokenIds;
  std::vector<std::string> layerAttention; // dense | sparse
  /// Each layer's attention precision contract: exact | q8 (a manifest
  /// without the field: exact).
  std::vector<std::string> layerPrecision;
};

class Artifact {
public:
  /// Loads `dir`; on failure returns null and sets `error`.
  static std::unique_ptr<Artifact> load(const std::string &dir,
                                        std::string &error);
  ~Artifact();
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  const std::string &directory() const { return dir; }
  const ModelInfo &model() const { return info; }
  const std::vector<Buffer> &buffers() const { return bufferList; }
  /// Launches run once when a model instance is created.
  const std::vector<Step> &initSchedule() const { return init; }
  const std::vector<Step> &prefillSchedule() const { return prefill; }
  const std::vector<Step> &decodeSchedule() const { return decode; }
  const std::vector<int64_t> &outputs() const { return outputList; }
  const std::vector<std::string> &kernelNames() const { return kernels; }
  std::string producer, target; ///< `target`: the first target's name
  const std::vector<Target> &targets() const { return targetList; }
  /// The target called `name`, or null.
  const Target *findTarget(const std::string &name) const;
  bool hasHostKernels() const { return library != nullptr; }
  int formatVersion = 0;
  /// Address of a weight buffer's bytes in the mapping.
  const uint8_t *weightData(const Buffer &b) const {
    return weights ? weights + b.offset : nullptr;
  }
  uint64_t weightBytes() const { return weightsSize; }
  /// Compiled with `msac compile --strip-weights`: buffers and offsets are
  /// described but there is no weights.bin (weightData() is null); only
  /// runs with synthetic weights (HostModelOptions::dummyWeights) can use it.
  bool weightsStripped() const { return stripped; }

private:
  Artifact() = default;
  std::string dir;
  ModelInfo info;
  std::vector<Buffer> bufferList;
  std::vector<Step> init, prefill, decode;
  std::vector<int64_t> outputList;
  std::vector<Target> targetList;
  std::vector<std::string> kernels;
  const uint8_t *weights = nullptr;
  uint64_t weightsSize = 0;
  bool stripped = false;
  void *library = nullptr;
};

} // namespace msac::runtime

#endif // MSAC_RUNTIME_ARTIFACT_H
