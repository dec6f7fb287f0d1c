//===- TargetTable.h - Facts about the chips msac compiles for --*- C++ -*-===//
//
// Part of msac. The one place that knows chip facts (SM/CU count, shared
// memory, PTX ISA version, whether this project can run it). Code
// generation reads them from here; nothing else hard-codes a chip.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CODEGEN_TARGETTABLE_H
#define MSAC_CODEGEN_TARGETTABLE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace msac {

struct GpuTarget {
  llvm::StringRef name;     ///< msac's target name (`--target`)
  llvm::StringRef vendor;   ///< nvidia | amd
  llvm::StringRef chip;     ///< the LLVM/ptxas chip name
  llvm::StringRef features; ///< LLVM target features (PTX ISA version)
  int multiprocessors;      ///< SMs (NVIDIA) or CUs (AMD) of the reference part
  int sharedMemoryKiB;      ///< shared memory / LDS per block
  int threadsPerBlock;      ///< block size the first-cut kernels launch with
  bool runnable;            ///< a machine of this chip is available to run on
  /// Warpgroup MMA (wgmma.mma_async, sm_90a only: sm_100a has tcgen05
  /// instead): kernels with a wgmma body (HostProgram::wgmmaKernels) use it.
  bool wgmma;
  /// Hardware FP4 conversions (`cvt.rn.f16x2.e2m1x2`, sm_100a; not on
  /// sm_90a): kernels that decode NVFP4 caches (HostProgram::e2m1Kernels)
  /// convert the E2M1 codes instead of looking them up in a table.
  bool e2m1Convert;
};

/// Every GPU target, in a fixed order.
llvm::ArrayRef<GpuTarget> gpuTargets();
/// The target called `name`, or null.
const GpuTarget *lookupGpuTarget(llvm::StringRef name);

} // namespace msac

#endif // MSAC_CODEGEN_TARGETTABLE_H
