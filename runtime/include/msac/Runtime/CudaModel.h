//===- CudaModel.h - Running an artifact's NVIDIA kernels -------*- C++ -*-===//
//
// Part of the msac runtime.
//
// The CUDA driver API, loaded with dlopen (libcuda.so.1), so msac-run builds
// and runs on machines without a GPU. Picks the artifact target matching the
// device (sm_90 -> sm_90a, sm_100 -> sm_100a), loads its cubin, allocates
// every buffer in device memory, copies the weights once, and runs the init
// and step schedules. Every driver call is checked; an error names the call
// and the kernel.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_RUNTIME_CUDAMODEL_H
#define MSAC_RUNTIME_CUDAMODEL_H

#include "msac/Runtime/HostModel.h"

#include <map>
#include <memory>

namespace msac::runtime {

class CudaModel : public Executor {
public:
  /// Creates the model on device 0; null (with `error`) when there is no
  /// driver, no device, no matching target, or a driver call fails.
  static std::unique_ptr<CudaModel> create(const Artifact &artifact,
                                           const HostModelOptions &options,
                                           std::string &error);
  ~CudaModel() override;

  const float *step(const StepInput &input, std::string &error) override;
  const HostModelOptions &options() const override { return opts; }
  uint64_t allocatedBytes() const override { return allocated; }
  const void *bufferData(int64_t id) override;
  bool fillCaches(uint64_t seed, std::string &error) override;
  const float *profileStep(const StepInput &input,
                           std::vector<double> &launchMs,
                           std::string &error) override;
  bool timeRangeInGraph(size_t first, size_t last, int reps, double &us,
                        std::string &error) override;
  /// The artifact target running (e.g. sm_90a) and the device name.
  const std::string &targetName() const { return target; }
  const std::string &deviceName() const { return device; }

  struct Driver;

private:
  CudaModel(const Artifact &artifact, const HostModelOptions &options);
  /// One launch of a schedule, resolved once at load: the kernel's
  /// CUfunction, the device array of its buffer pointers, and the kernel's
  /// grid (CTAs), block (threads) and dynamic shared memory (bytes).
  struct Launch {
    void *function = nullptr;
    uint64_t table = 0;
    int64_t grid = 0, block = 0, dynamicSharedBytes = 0;
    bool programmatic = false; ///< KernelLaunchShape::programmatic
    int64_t cluster = 1;       ///< KernelLaunchShape::cluster
    /// KernelLaunchShape::minTokens / maxTokens: the steps that launch it.
    int64_t minTokens = 1, maxTokens = 0;
    bool launchedAt(int64_t tokens) const {
      return tokens >= minTokens && (maxTokens == 0 || tokens <= maxTokens);
    }
  };
  /// The entries of `schedule` that a step of `tokens` tokens launches
  /// (Launch::launchedAt), and their launches.
  void launchedAt(const std::vector<Step> &schedule,
                  const std::vector<Launch> &launches, int64_t tokens,
                  std::vector<Step> &stepsOut, std::vector<Launch> &launchesOut,
                  std::vector<size_t> *indices = nullptr) const;
  /// Launches `schedule` and waits; with `launchMs`, times each launch
  /// with CUDA events. With `tokens` > 0, only the entries a step of that
  /// many tokens launches (Launch::launchedAt; the others time as 0).
  bool launch(const std::vector<Step> &schedule,
              const std::vector<Launch> &launches, std::string &error,
              std::vector<double> *launchMs = nullptr, int64_t tokens = 0);
  /// Enqueues one launch on the model's stream.
  bool launchOne(const Step &step, const Launch &launch, std::string &error);
  /// Enqueues `schedule` on the model's stream.
  bool enqueue(const std::vector<Step> &schedule,
               const std::vector<Launch> &launches, std::string &error);
  /// Captures `schedule` enqueued on the model's stream into a new graph
  /// (`graphOut`, destroyed by the caller); `what` names it in errors.
  bool captureGraph(const std::vector<Step> &schedule,
                    const std::vector<Launch> &launches,
                    const std::string &what, void *&graphOut,
                    std::string &error);
  /// Runs the launches of a step of `tokens` tokens as a CUDA graph
  /// (captured on first use, one per set of launches) and waits.
  bool launchGraph(int64_t tokens, std::string &error);
  const float *run(const StepInput &input, std::vector<double> *launchMs,
                   std::string &error);
  /// Copies `bytes` to device address `dst` from `pool`
  /// (Executor::copyFromPool).
  bool copyFromPool(uint64_t dst, uint64_t bytes,
                    const std::vector<uint8_t> &pool, uint64_t start,
                    std::string &error);

  const Artifact &art;
  HostModelOptions opts;
  std::unique_ptr<Driver> driver;
  std::string target, device;
  void *module = nullptr;
  std::vector<uint64_t> buffers;                  // device pointers, per buffer
  std::vector<Launch> initLaunches, stepLaunches; // per schedule entry
  uint64_t scalars = 0;                           // device int64[3]
  void *stream = nullptr;
  /// Captured step graphs and their executables, per set of launches
  /// (Launch::launchedAt of the step's tokens; one per set).
  struct StepGraph {
    void *graph = nullptr, *exec = nullptr;
  };
  std::map<std::vector<bool>, StepGraph> stepGraphs;
  /// Tokens of the last step run (timeRangeInGraph times its launches).
  int64_t lastTokens = 1;
  uint64_t allocated = 0;
  std::vector<float> logits;
  std::vector<uint8_t> scratch;
};

} // namespace msac::runtime

#endif // MSAC_RUNTIME_CUDAMODEL_H
