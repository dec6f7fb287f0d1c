//===- CudaModel.cpp - Running an artifact's NVIDIA kernels ---------------===//
//
// Part of the msac runtime.
//
//===----------------------------------------------------------------------===//

#include "msac/Runtime/CudaModel.h"

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
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, void *, void **,
                             void **);
  CUresult (*cuCtxSynchronize)();
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
            std::string(::dlerror());
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
      !sym(driver->cuMemAlloc, "cuMemAlloc_v2") ||
      !sym(driver->cuMemFree, "cuMemFree_v2") ||
      !sym(driver->cuMemcpyHtoD, "cuMemcpyHtoD_v2") ||
      !sym(driver->cuMemcpyDtoH, "cuMemcpyDtoH_v2") ||
      !sym(driver->cuMemsetD8, "cuMemsetD8_v2") ||
      !sym(driver->cuLaunchKernel, "cuLaunchKernel") ||
      !sym(driver->cuCtxSynchronize, "cuCtxSynchronize") ||
      !sym(driver->cuGetErrorString, "cuGetErrorString"))
    return nullptr;

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
  m->grid = t->grid;
  m->block = t->block;
  CUcontext ctx;
  MSAC_CUDA(driver->cuDevicePrimaryCtxRetain(&ctx, dev),
            "cuDevicePrimaryCtxRetain");
  MSAC_CUDA(driver->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

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

  // Buffers: weights copied once, everything else zeroed.
  const std::vector<Buffer> &list = artifact.buffers();
  m->buffers.resize(list.size(), 0);
  for (size_t i = 0; i < list.size(); ++i) {
    const Buffer &b = list[i];
    uint64_t bytes = b.kind == Buffer::Kind::Weight
                         ? b.bytes
                         : elements(b, options) * b.elementBytes();
    bytes = std::max<uint64_t>(bytes, 16);
    CUdeviceptr p;
    MSAC_CUDA(driver->cuMemAlloc(&p, bytes),
              ("cuMemAlloc for buffer '" + b.name + "'").c_str());
    m->buffers[i] = p;
    m->allocated += bytes;
    if (b.kind == Buffer::Kind::Weight && b.bytes)
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
  if (module)
    driver->cuModuleUnload(module);
}

bool CudaModel::launch(const std::vector<Step> &schedule,
                       const std::vector<Launch> &launches,
                       std::string &error) {
  for (size_t i = 0; i < schedule.size(); ++i) {
    const Step &s = schedule[i];
    CUdeviceptr table = launches[i].table, scal = scalars;
    void *params[] = {&table, &scal};
    CUresult rc = driver->cuLaunchKernel(
        launches[i].function, static_cast<unsigned>(grid), 1, 1,
        static_cast<unsigned>(block), 1, 1, 0, nullptr, params, nullptr);
    if (rc != 0) {
      error = "cuLaunchKernel(" + s.kernel + "): " + driver->describe(rc);
      return false;
    }
  }
  CUresult rc = driver->cuCtxSynchronize();
  if (rc != 0) {
    error = "a kernel failed";
    if (!schedule.empty())
      error += " (last launched: " + schedule.back().kernel + ")";
    error += ": " + driver->describe(rc);
    return false;
  }
  return true;
}

const float *CudaModel::step(const StepInput &in, std::string &error) {
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
  if (!launch(art.prefillSchedule(), stepLaunches, error))
    return nullptr;
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
  scratch.resize(elements(b, opts) * b.elementBytes());
  if (driver->cuMemcpyDtoH(scratch.data(), buffers[id], scratch.size()) != 0)
    return nullptr;
  return scratch.data();
}
