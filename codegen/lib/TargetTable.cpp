//===- TargetTable.cpp - Facts about the chips msac compiles for ----------===//
//
// Part of msac.
//
// NVIDIA: sm_90a is Hopper (H100/H200: 132 SMs, 227 KiB of shared memory
// per block), PTX ISA 8.0 introduced sm_90a; sm_100a is Blackwell (B200:
// 148 SMs), PTX ISA 8.6. AMD: gfx942 is MI300X (304 CUs, 64 KiB LDS),
// gfx950 is MI355X (256 CUs, 160 KiB LDS). Warpgroup MMA (wgmma.mma_async)
// exists only on sm_90a; sm_100a replaced it with tcgen05. The FP4 / FP6
// conversions (`cvt.rn.f16x2.e2m1x2`, PTX ISA 8.6) exist on sm_100a and
// not on sm_90a.
//
//===----------------------------------------------------------------------===//

#include "msac/Codegen/TargetTable.h"

using namespace msac;

static const GpuTarget kTargets[] = {
    {"sm_90a", "nvidia", "sm_90a", "+ptx84", 132, 227, 128, true, true, false},
    {"sm_100a", "nvidia", "sm_100a", "+ptx86", 148, 227, 128, false, false,
     true},
    {"gfx942", "amd", "gfx942", "", 304, 64, 256, false, false, false},
    {"gfx950", "amd", "gfx950", "", 256, 160, 256, false, false, false},
};

llvm::ArrayRef<GpuTarget> msac::gpuTargets() { return kTargets; }

const GpuTarget *msac::lookupGpuTarget(llvm::StringRef name) {
  for (const GpuTarget &t : kTargets)
    if (t.name == name)
      return &t;
  return nullptr;
}
