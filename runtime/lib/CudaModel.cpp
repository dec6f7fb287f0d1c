//===- CudaModel.cpp - Running an artifact's NVIDIA kernels ---------------===//
//
// Part of the msac runtime.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/CudaModel.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <dlfcn.h>

using namespace msac::runtime;

namespace {
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUdeviceptr = unsigned long long;
constexpr int kAttrMajor = 75, kAttrMinor = 76; // compute capability
/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: a kernel may launch with
/// more than 48 KiB of shared memory (static and dynamic) only after raising
/// it; by default it is 48 KiB less the kernel's static shared memory.
constexpr int kFuncAttrMaxDynamicShared = 8;
} // namespace

/// Driver entry points, resolved with dlsym.
struct CudaModel::Driver {
  void *handle = nullptr;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, void *, void **,
                             void **);
  /// Optional (CUDA 12.0+ drivers): programmatic launches fall back to
  /// cuLaunchKernel without it (their griddepcontrol.wait then returns at
  /// once, as the previous kernel has finished).
  CUresult (*cuLaunchKernelEx)(const void *config, CUfunction, void **,
                               void **) = nullptr;
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuEventCreate)(void **, unsigned);
  CUresult (*cuEventRecord)(void *, void *);
  CUresult (*cuEventSynchronize)(void *);
  CUresult (*cuEventElapsedTime)(float *, void *, void *);
  CUresult (*cuEventDestroy)(void *);
  CUresult (*cuStreamCreate)(void **, unsigned);
  CUresult (*cuStreamDestroy)(void *);
  CUresult (*cuStreamSynchronize)(void *);
  CUresult (*cuStreamBeginCapture)(void *, int);
  CUresult (*cuStreamEndCapture)(void *, void **);
  CUresult (*cuGraphInstantiateWithFlags)(void **, void *, unsigned long long);
  CUresult (*cuGraphLaunch)(void *, void *);
  CUresult (*cuGraphExecDestroy)(void *);
  CUresult (*cuGraphDestroy)(void *);
  CUresult (*cuGetErrorString)(CUresult, const char **);

  ~Driver() {
    if (handle)
      ::dlclose(handle);
  }
  std::string describe(CUresult rc) {
    const char *s = nullptr;
    if (cuGetErrorString)
      cuGetErrorString(rc, &s);
    return (s ? s : "unknown error") + std::string(" (") + std::to_string(rc) +
           ")";
  }
};

CudaModel::CudaModel(const Artifact &artifact, const HostModelOptions &options)
    : art(artifact), opts(options) {}

#define MSAC_CUDA(call, what)                                                  \
  do {                                                                         \
    CUresult rc_ = (call);                                                     \
    if (rc_ != 0) {                                                            \
      error = std::string(what) + ": " + driver->describe(rc_);                \
      return {};                                                               \
    }                                                                          \
  } while (0)

std::unique_ptr<CudaModel> CudaModel::create(const Artifact &artifact,
                                             const HostModelOptions &options,
                                             std::string &error) {
  std::unique_ptr<CudaModel> m(new CudaModel(artifact, options));
  m->driver = std::make_unique<Driver>();
  Driver *driver = m->driver.get();
  driver->handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver->handle) {
    error = "cannot load the CUDA driver (libcuda.so.1): " +
            std::string(::dlerror()) +
            "; run on a machine with an NVIDIA GPU, or use --device host "
            "with an artifact compiled for the host";
    return nullptr;
  }
  auto sym = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        ::dlsym(driver->handle, name));
    if (!fn)
      error = std::string("the CUDA driver lacks ") + name;
    return fn != nullptr;
  };
  if (!sym(driver->cuInit, "cuInit") ||
      !sym(driver->cuDeviceGet, "cuDeviceGet") ||
      !sym(driver->cuDeviceGetAttribute, "cuDeviceGetAttribute") ||
      !sym(driver->cuDeviceGetName, "cuDeviceGetName") ||
      !sym(driver->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") ||
      !sym(driver->cuCtxSetCurrent, "cuCtxSetCurrent") ||
      !sym(driver->cuModuleLoadData, "cuModuleLoadData") ||
      !sym(driver->cuModuleUnload, "cuModuleUnload") ||
      !sym(driver->cuModuleGetFunction, "cuModuleGetFunction") ||
      !sym(driver->cuFuncSetAttribute, "cuFuncSetAttribute") ||
      !sym(driver->cuMemAlloc, "cuMemAlloc_v2") ||
      !sym(driver->cuMemFree, "cuMemFree_v2") ||
      !sym(driver->cuMemcpyHtoD, "cuMemcpyHtoD_v2") ||
      !sym(driver->cuMemcpyDtoH, "cuMemcpyDtoH_v2") ||
      !sym(driver->cuMemsetD8, "cuMemsetD8_v2") ||
      !sym(driver->cuLaunchKernel, "cuLaunchKernel") ||
      !sym(driver->cuCtxSynchronize, "cuCtxSynchronize") ||
      !sym(driver->cuEventCreate, "cuEventCreate") ||
      !sym(driver->cuEventRecord, "cuEventRecord") ||
      !sym(driver->cuEventSynchronize, "cuEventSynchronize") ||
      !sym(driver->cuEventElapsedTime, "cuEventElapsedTime_v2") ||
      !sym(driver->cuEventDestroy, "cuEventDestroy_v2") ||
      !sym(driver->cuStreamCreate, "cuStreamCreate") ||
      !sym(driver->cuStreamDestroy, "cuStreamDestroy_v2") ||
      !sym(driver->cuStreamSynchronize, "cuStreamSynchronize") ||
      !sym(driver->cuStreamBeginCapture, "cuStreamBeginCapture_v2") ||
      !sym(driver->cuStreamEndCapture, "cuStreamEndCapture") ||
      !sym(driver->cuGraphInstantiateWithFlags,
           "cuGraphInstantiateWithFlags") ||
      !sym(driver->cuGraphLaunch, "cuGraphLaunch") ||
      !sym(driver->cuGraphExecDestroy, "cuGraphExecDestroy") ||
      !sym(driver->cuGraphDestroy, "cuGraphDestroy") ||
      !sym(driver->cuGetErrorString, "cuGetErrorString"))
    return nullptr;
  driver->cuLaunchKernelEx =
      reinterpret_cast<decltype(driver->cuLaunchKernelEx)>(
          ::dlsym(driver->handle, "cuLaunchKernelEx"));

  MSAC_CUDA(driver->cuInit(0), "cuInit");
  CUdevice dev;
  MSAC_CUDA(driver->cuDeviceGet(&dev, 0), "cuDeviceGet(0)");
  int major = 0, minor = 0;
  MSAC_CUDA(driver->cuDeviceGetAttribute(&major, kAttrMajor, dev),
            "cuDeviceGetAttribute");
  MSAC_CUDA(driver->cuDeviceGetAttribute(&minor, kAttrMinor, dev),
            "cuDeviceGetAttribute");
  char name[256] = {0};
  driver->cuDeviceGetName(name, sizeof(name), dev);
  m->device = name;
  m->target = "sm_" + std::to_string(major) + std::to_string(minor) + "a";
  const Target *t = artifact.findTarget(m->target);
  if (!t) {
    error = "the artifact has no kernels for this GPU (" + m->device + ", " +
            m->target + "); recompile with --target " + m->target;
    return nullptr;
  }
  CUcontext ctx;
  MSAC_CUDA(driver->cuDevicePrimaryCtxRetain(&ctx, dev),
            "cuDevicePrimaryCtxRetain");
  MSAC_CUDA(driver->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  // Steps run on their own stream (blocking: ordered with the synchronous
  // copies of the inputs), so that they can be captured as a graph.
  MSAC_CUDA(driver->cuStreamCreate(&m->stream, 0), "cuStreamCreate");

  std::ifstream in(t->kernelsPath, std::ios::binary);
  if (!in) {
    error = t->kernelsPath + ": cannot be read";
    return nullptr;
  }
  std::stringstream cubin;
  cubin << in.rdbuf();
  std::string image = cubin.str();
  MSAC_CUDA(driver->cuModuleLoadData(&m->module, image.data()),
            ("cuModuleLoadData(" + t->kernelsPath + ")").c_str());

  if (options.dummyWeights && !checkDummyWeights(artifact, error))
    return nullptr;
  if (artifact.weightsStripped() && !options.dummyWeights) {
    error = strippedWeightsError(artifact);
    return nullptr;
  }
  // Synthetic weights: slices of a random pool per dtype and role
  // (dummyWeightPool).
  std::map<std::string, std::vector<uint8_t>> pools;

  // Buffers: weights copied once, everything else zeroed.
  const std::vector<Buffer> &list = artifact.buffers();
  m->buffers.resize(list.size(), 0);
  for (size_t i = 0; i < list.size(); ++i) {
    const Buffer &b = list[i];
    uint64_t bytes =
        b.kind == Buffer::Kind::Weight ? b.bytes : Executor::bytes(b, options);
    bytes = std::max<uint64_t>(bytes, 16);
    CUdeviceptr p;
    MSAC_CUDA(driver->cuMemAlloc(&p, bytes),
              ("cuMemAlloc for buffer '" + b.name + "'").c_str());
    m->buffers[i] = p;
    m->allocated += bytes;
    if (b.kind == Buffer::Kind::Weight && b.bytes && options.dummyWeights) {
      if (!m->copyFromPool(p, b.bytes, *dummyWeightPool(b, pools),
                           i * kDummyStride, error))
        return nullptr;
    } else if (b.kind == Buffer::Kind::Weight && b.bytes)
      MSAC_CUDA(driver->cuMemcpyHtoD(p, artifact.weightData(b), b.bytes),
                ("copying weight '" + b.name + "'").c_str());
    else
      MSAC_CUDA(driver->cuMemsetD8(p, 0, bytes), "cuMemsetD8");
  }
  // Per launch: the kernel's function and a device array of its buffer
  // pointers, both resolved here once rather than on every step.
  auto resolve = [&](const std::vector<Step> &schedule,
                     std::vector<Launch> &out) -> bool {
    for (const Step &s : schedule) {
      Launch l;
      CUresult rc =
          driver->cuModuleGetFunction(&l.function, m->module, s.kernel.c_str());
      if (rc != 0) {
        error = t->kernelsPath + ": kernel '" + s.kernel +
                "' named by the manifest is missing (cuModuleGetFunction: " +
                driver->describe(rc) + ")";
        return false;
      }
      std::vector<uint64_t> ptrs;
      for (int64_t id : s.buffers)
        ptrs.push_back(m->buffers[id]);
      CUdeviceptr p;
      if (driver->cuMemAlloc(&p, ptrs.size() * 8) != 0 ||
          driver->cuMemcpyHtoD(p, ptrs.data(), ptrs.size() * 8) != 0) {
        error = "cannot build the launch table of kernel " + s.kernel;
        return false;
      }
      l.table = p;
      const KernelLaunchShape shape = t->shapeOf(s.kernel);
      l.grid = shape.grid;
      l.block = shape.block;
      l.dynamicSharedBytes = shape.dynamicSharedBytes;
      l.programmatic = shape.programmatic;
      l.cluster = shape.cluster;
      l.minTokens = shape.minTokens;
      l.maxTokens = shape.maxTokens;
      // Static and dynamic shared memory together may exceed the default
      // 48 KiB only with the kernel's opt-in, so every kernel that declares
      // dynamic shared memory opts in to its size.
      if (l.dynamicSharedBytes > 0) {
        rc = driver->cuFuncSetAttribute(l.function, kFuncAttrMaxDynamicShared,
                                        static_cast<int>(l.dynamicSharedBytes));
        if (rc != 0) {
          error = "kernel " + s.kernel + " needs " +
                  std::to_string(l.dynamicSharedBytes) +
                  " bytes of dynamic shared memory, which " + m->device +
                  " refuses (cuFuncSetAttribute: " + driver->describe(rc) + ")";
          return false;
        }
      }
      out.push_back(l);
    }
    return true;
  };
  if (!resolve(artifact.initSchedule(), m->initLaunches) ||
      !resolve(artifact.prefillSchedule(), m->stepLaunches))
    return nullptr;
  CUdeviceptr scalars;
  MSAC_CUDA(driver->cuMemAlloc(&scalars, 3 * 8), "cuMemAlloc(scalars)");
  m->scalars = scalars;
  const int64_t initScalars[3] = {0, 0, options.maxBlocksPerSequence};
  MSAC_CUDA(driver->cuMemcpyHtoD(scalars, initScalars, sizeof(initScalars)),
            "cuMemcpyHtoD(scalars)");
  if (!m->launch(artifact.initSchedule(), m->initLaunches, error))
    return nullptr;
  return m;
}

CudaModel::~CudaModel() {
  if (!driver || !driver->handle)
    return;
  for (uint64_t p : buffers)
    if (p)
      driver->cuMemFree(p);
  for (const std::vector<Launch> *list : {&initLaunches, &stepLaunches})
    for (const Launch &l : *list)
      driver->cuMemFree(l.table);
  if (scalars)
    driver->cuMemFree(scalars);
  for (auto &[set, g] : stepGraphs) {
    if (g.exec)
      driver->cuGraphExecDestroy(g.exec);
    if (g.graph)
      driver->cuGraphDestroy(g.graph);
  }
  if (stream)
    driver->cuStreamDestroy(stream);
  if (module)
    driver->cuModuleUnload(module);
}

bool CudaModel::copyFromPool(uint64_t dst, uint64_t bytes,
                             const std::vector<uint8_t> &pool, uint64_t start,
                             std::string &error) {
  return Executor::copyFromPool(
      bytes, pool, start, [&](uint64_t at, const uint8_t *src, uint64_t n) {
        CUresult rc = driver->cuMemcpyHtoD(dst + at, src, n);
        if (rc != 0)
          error = "cuMemcpyHtoD (synthetic data): " + driver->describe(rc);
        return rc == 0;
      });
}

bool CudaModel::fillCaches(uint64_t seed, std::string &error) {
  const std::vector<Buffer> &list = art.buffers();
  if (!checkSynthesizableCaches(art, error, /*nvfp4=*/true))
    return false;
  std::map<std::string, std::vector<uint8_t>> pools;
  for (size_t i = 0; i < list.size(); ++i) {
    const Buffer &b = list[i];
    if (b.kind != Buffer::Kind::Cache)
      continue;
    if (b.dtype == "nvfp4") {
      // Whole pages (fillNvfp4Pages) of up to 64 MiB, repeated over the
      // buffer.
      const uint64_t bytes = Executor::bytes(b, opts);
      const uint64_t pageBytes =
          static_cast<uint64_t>(b.pageSize) * b.bytesPerToken;
      const uint64_t pages = std::max<uint64_t>(
          1, std::min(bytes, uint64_t(64) << 20) / pageBytes);
      std::vector<uint8_t> pool(pages * pageBytes);
      fillNvfp4Pages(pool.data(), pool.size(), b, seed + i);
      for (uint64_t done = 0; done < bytes;) {
        const uint64_t n = std::min<uint64_t>(bytes - done, pool.size());
        CUresult rc = driver->cuMemcpyHtoD(buffers[i] + done, pool.data(), n);
        if (rc != 0) {
          error = "cuMemcpyHtoD (synthetic data): " + driver->describe(rc);
          return false;
        }
        done += n;
      }
      continue;
    }
    std::vector<uint8_t> &pool = pools[b.dtype];
    if (pool.empty())
      pool = randomPool(b.dtype, -2.0f, 2.0f, seed + (b.dtype == "bf16"));
    if (!copyFromPool(buffers[i], Executor::bytes(b, opts), pool,
                      i * 104729 * 256, error))
      return false;
  }
  return true;
}

bool CudaModel::launchOne(const Step &step, const Launch &launch,
                          std::string &error) {
  CUdeviceptr table = launch.table, scal = scalars;
  void *params[] = {&table, &scal};
  if ((launch.programmatic || launch.cluster > 1) && driver->cuLaunchKernelEx) {
    // The driver API's CUlaunchConfig / CUlaunchAttribute layouts (cuda.h,
    // CUDA 12+) with the attributes ids 4,
    // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION ({x, y, z}), 5,
    // CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE (a
    // CUclusterSchedulingPolicy), and 6,
    // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (1).
    struct LaunchAttribute {
      int id;
      alignas(8) unsigned char value[64];
    };
    struct LaunchConfig {
      unsigned grid[3], block[3], sharedMemBytes;
      void *stream;
      LaunchAttribute *attrs;
      unsigned numAttrs;
    };
    static_assert(sizeof(LaunchAttribute) == 72 && sizeof(LaunchConfig) == 56,
                  "CUDA driver launch structures");
    LaunchAttribute attrs[3] = {};
    unsigned count = 0;
    if (launch.programmatic) {
      attrs[count].id = 6;
      const int allowed = 1;
      std::memcpy(attrs[count++].value, &allowed, sizeof(allowed));
    }
    if (launch.cluster > 1) {
      attrs[count].id = 4;
      const unsigned dims[3] = {static_cast<unsigned>(launch.cluster), 1, 1};
      std::memcpy(attrs[count++].value, dims, sizeof(dims));
      if (opts.clusterScheduling != 0) {
        attrs[count].id = 5;
        const int policy = opts.clusterScheduling;
        std::memcpy(attrs[count++].value, &policy, sizeof(policy));
      }
    }
    LaunchConfig config{{static_cast<unsigned>(launch.grid), 1, 1},
                        {static_cast<unsigned>(launch.block), 1, 1},
                        static_cast<unsigned>(launch.dynamicSharedBytes),
                        stream,
                        attrs,
                        count};
    CUresult rc =
        driver->cuLaunchKernelEx(&config, launch.function, params, nullptr);
    if (rc != 0)
      error = "cuLaunchKernelEx(" + step.kernel +
              (launch.cluster > 1
                   ? ", clusters of " + std::to_string(launch.cluster)
                   : std::string()) +
              (launch.programmatic ? ", programmatic" : "") +
              "): " + driver->describe(rc);
    return rc == 0;
  }
  if (launch.cluster > 1) {
    error = "kernel " + step.kernel + " launches in clusters of " +
            std::to_string(launch.cluster) +
            " CTAs, which needs cuLaunchKernelEx (a CUDA 12+ driver); this "
            "driver lacks it: update the NVIDIA driver";
    return false;
  }
  CUresult rc = driver->cuLaunchKernel(
      launch.function, static_cast<unsigned>(launch.grid), 1, 1,
      static_cast<unsigned>(launch.block), 1, 1,
      static_cast<unsigned>(launch.dynamicSharedBytes), stream, params,
      nullptr);
  if (rc != 0)
    error = "cuLaunchKernel(" + step.kernel + "): " + driver->describe(rc);
  return rc == 0;
}

bool CudaModel::enqueue(const std::vector<Step> &schedule,
                        const std::vector<Launch> &launches,
                        std::string &error) {
  for (size_t i = 0; i < schedule.size(); ++i)
    if (!launchOne(schedule[i], launches[i], error))
      return false;
  return true;
}

bool CudaModel::captureGraph(const std::vector<Step> &schedule,
                             const std::vector<Launch> &launches,
                             const std::string &what, void *&graphOut,
                             std::string &error) {
  constexpr int kCaptureRelaxed = 2;
  CUresult rc = driver->cuStreamBeginCapture(stream, kCaptureRelaxed);
  if (rc != 0) {
    error = "cuStreamBeginCapture: " + driver->describe(rc);
    return false;
  }
  std::string launchError;
  bool ok = enqueue(schedule, launches, launchError);
  graphOut = nullptr;
  rc = driver->cuStreamEndCapture(stream, &graphOut);
  if (ok && rc == 0)
    return true;
  error = !ok ? "capturing " + what + " as a CUDA graph: " + launchError
              : "cuStreamEndCapture: " + driver->describe(rc);
  if (graphOut)
    driver->cuGraphDestroy(graphOut);
  graphOut = nullptr;
  return false;
}

bool CudaModel::timeRangeInGraph(size_t first, size_t last, int reps,
                                 double &us, std::string &error) {
  const std::vector<Step> &all = art.prefillSchedule();
  if (first >= last || last > all.size() || reps < 1) {
    error = "launch range " + std::to_string(first) + ":" +
            std::to_string(last) + " is not within the " +
            std::to_string(all.size()) + " launches of a step";
    return false;
  }
  // Enough copies of the range that a replay's own launch cost is small
  // against the kernels.
  constexpr int kCopies = 20;
  std::vector<Step> steps;
  std::vector<Launch> launches;
  // The range's launches that the last step (of lastTokens tokens) ran.
  for (int c = 0; c < kCopies; ++c)
    for (size_t i = first; i < last; ++i)
      if (stepLaunches[i].launchedAt(lastTokens)) {
        steps.push_back(all[i]);
        launches.push_back(stepLaunches[i]);
      }
  if (steps.empty()) {
    error = "no launch of range " + std::to_string(first) + ":" +
            std::to_string(last) + " runs in a step of " +
            std::to_string(lastTokens) + " tokens";
    return false;
  }
  void *rangeGraph = nullptr, *exec = nullptr;
  if (!captureGraph(steps, launches,
                    "launches " + std::to_string(first) + ":" +
                        std::to_string(last),
                    rangeGraph, error))
    return false;
  CUresult rc = driver->cuGraphInstantiateWithFlags(&exec, rangeGraph, 0);
  void *start = nullptr, *stop = nullptr;
  if (rc == 0)
    rc = driver->cuEventCreate(&start, 0);
  if (rc == 0)
    rc = driver->cuEventCreate(&stop, 0);
  std::vector<double> perCopy;
  // One replay to warm up, then the timed ones.
  for (int r = 0; r <= reps && rc == 0; ++r) {
    rc = driver->cuEventRecord(start, stream);
    if (rc == 0)
      rc = driver->cuGraphLaunch(exec, stream);
    if (rc == 0)
      rc = driver->cuEventRecord(stop, stream);
    if (rc == 0)
      rc = driver->cuEventSynchronize(stop);
    float ms = 0;
    if (rc == 0)
      rc = driver->cuEventElapsedTime(&ms, start, stop);
    if (rc == 0 && r > 0)
      perCopy.push_back(ms * 1000.0 / kCopies);
  }
  if (start)
    driver->cuEventDestroy(start);
  if (stop)
    driver->cuEventDestroy(stop);
  if (exec)
    driver->cuGraphExecDestroy(exec);
  driver->cuGraphDestroy(rangeGraph);
  if (rc != 0) {
    error = "timing launches " + std::to_string(first) + ":" +
            std::to_string(last) + " in a CUDA graph: " + driver->describe(rc);
    return false;
  }
  std::sort(perCopy.begin(), perCopy.end());
  us = perCopy[perCopy.size() / 2];
  return true;
}

void CudaModel::launchedAt(const std::vector<Step> &schedule,
                           const std::vector<Launch> &launches, int64_t tokens,
                           std::vector<Step> &stepsOut,
                           std::vector<Launch> &launchesOut,
                           std::vector<size_t> *indices) const {
  for (size_t i = 0; i < schedule.size(); ++i)
    if (launches[i].launchedAt(tokens)) {
      stepsOut.push_back(schedule[i]);
      launchesOut.push_back(launches[i]);
      if (indices)
        indices->push_back(i);
    }
}

bool CudaModel::launchGraph(int64_t tokens, std::string &error) {
  // Every kernel reads the step's sizes from device memory and launches
  // with the same grid and block whatever the step, so one captured graph
  // serves every step that launches the same kernels.
  std::vector<bool> set;
  for (const Launch &l : stepLaunches)
    set.push_back(l.launchedAt(tokens));
  StepGraph &g = stepGraphs[set];
  if (!g.exec) {
    std::vector<Step> steps;
    std::vector<Launch> launches;
    launchedAt(art.prefillSchedule(), stepLaunches, tokens, steps, launches);
    if (!g.graph && !captureGraph(steps, launches, "the step", g.graph, error))
      return false;
    CUresult rc = driver->cuGraphInstantiateWithFlags(&g.exec, g.graph, 0);
    if (rc != 0) {
      g.exec = nullptr;
      error = "cuGraphInstantiateWithFlags: " + driver->describe(rc);
      return false;
    }
  }
  CUresult rc = driver->cuGraphLaunch(g.exec, stream);
  if (rc == 0)
    rc = driver->cuStreamSynchronize(stream);
  if (rc != 0) {
    error = "the step's CUDA graph failed: " + driver->describe(rc);
    return false;
  }
  return true;
}

bool CudaModel::launch(const std::vector<Step> &schedule,
                       const std::vector<Launch> &launches, std::string &error,
                       std::vector<double> *launchMs, int64_t tokens) {
  std::vector<void *> events;
  if (launchMs) {
    events.resize(schedule.size() + 1, nullptr);
    for (void *&e : events)
      if (driver->cuEventCreate(&e, 0) != 0) {
        error = "cuEventCreate failed";
        return false;
      }
    driver->cuEventRecord(events[0], stream);
  }
  // Entries the step does not launch (Launch::launchedAt) time as 0.
  std::vector<bool> launched(schedule.size(), false);
  const std::string *last = nullptr;
  for (size_t i = 0; i < schedule.size(); ++i) {
    launched[i] = tokens == 0 || launches[i].launchedAt(tokens);
    if (launched[i]) {
      if (!launchOne(schedule[i], launches[i], error))
        return false;
      last = &schedule[i].kernel;
    }
    if (launchMs)
      driver->cuEventRecord(events[i + 1], stream);
  }
  CUresult rc = driver->cuCtxSynchronize();
  if (rc != 0) {
    error = "a kernel failed";
    if (last)
      error += " (last launched: " + *last + ")";
    error += ": " + driver->describe(rc);
    return false;
  }
  if (launchMs) {
    launchMs->assign(schedule.size(), 0.0);
    driver->cuEventSynchronize(events.back());
    for (size_t i = 0; i < schedule.size(); ++i) {
      float ms = 0;
      if (launched[i])
        driver->cuEventElapsedTime(&ms, events[i], events[i + 1]);
      (*launchMs)[i] = ms;
    }
    for (void *e : events)
      driver->cuEventDestroy(e);
  }
  return true;
}

const float *CudaModel::step(const StepInput &in, std::string &error) {
  return run(in, nullptr, error);
}

const float *CudaModel::profileStep(const StepInput &in,
                                    std::vector<double> &launchMs,
                                    std::string &error) {
  return run(in, &launchMs, error);
}

const float *CudaModel::run(const StepInput &in, std::vector<double> *launchMs,
                            std::string &error) {
  if (!validate(art, opts, in, error))
    return nullptr;
  const int64_t t = static_cast<int64_t>(in.tokenIds.size());
  const int64_t n = static_cast<int64_t>(in.logitsIndices.size());
  const std::vector<Buffer> &list = art.buffers();
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].kind != Buffer::Kind::Input)
      continue;
    const std::vector<int32_t> *src = in.argument(list[i].argument);
    if (src && !src->empty() &&
        driver->cuMemcpyHtoD(buffers[i], src->data(), src->size() * 4) != 0) {
      error = "copying input '" + list[i].name + "' to the GPU failed";
      return nullptr;
    }
  }
  const int64_t sc[3] = {t, n, opts.maxBlocksPerSequence};
  if (driver->cuMemcpyHtoD(scalars, sc, sizeof(sc)) != 0) {
    error = "copying the step sizes to the GPU failed";
    return nullptr;
  }
  lastTokens = t;
  if (opts.cudaGraphs && !launchMs) {
    if (!launchGraph(t, error))
      return nullptr;
  } else if (!launch(art.prefillSchedule(), stepLaunches, error, launchMs, t)) {
    return nullptr;
  }
  logits.resize(n * art.model().vocabSize);
  if (driver->cuMemcpyDtoH(logits.data(), buffers[art.outputs().front()],
                           logits.size() * 4) != 0) {
    error = "copying the logits from the GPU failed";
    return nullptr;
  }
  return logits.data();
}

const void *CudaModel::bufferData(int64_t id) {
  const Buffer &b = art.buffers()[id];
  if (b.kind == Buffer::Kind::Weight)
    return nullptr;
  scratch.resize(Executor::bytes(b, opts));
  if (driver->cuMemcpyDtoH(scratch.data(), buffers[id], scratch.size()) != 0)
    return nullptr;
  return scratch.data();
}
