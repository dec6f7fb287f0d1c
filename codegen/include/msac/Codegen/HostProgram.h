//===- HostProgram.h - Kernels and launch schedule for the host -*- C++ -*-===//
//
// Part of msac.
//
// Turns the imported `@forward` function (msa/bsq IR on tensors) into
//   * a kernel module: one function per distinct op instance (same op, same
//     attributes, same types share a kernel), whose body the compiler emits
//     as loops in the scf/arith/math/llvm dialects, ready for LLVM;
//   * a launch schedule: the ordered kernel launches of one forward step,
//     each naming the buffers it reads and writes;
//   * a buffer plan: every input, cache, weight and intermediate buffer with
//     its element type and shape, dynamic extents named by symbols
//     (`T` tokens in the step, `N` logits rows, `MB` block-table columns).
//
// Kernel ABI (C): `void kernel(void **buffers, const int64_t *scalars)`,
// where `scalars` is always {T, N, MB}.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CODEGEN_HOSTPROGRAM_H
#define MSAC_CODEGEN_HOSTPROGRAM_H

#include "msac/Dialect/MSA/IR/MSAAttributes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <string>
#include <vector>

namespace msac {

/// An extent of a buffer shape: a constant, or a symbol (`T`, `N`, `MB`).
struct Extent {
  int64_t value = 0;
  std::string symbol; // empty for a constant
};

/// Rows, and bytes per row, of a tile of the chunk-major weight order
/// (BufferDesc::orderRanks): the writer (permuteChunkMajor), the manifest's
/// `order.tile` and the kernels (kernels::kOrderTile) use this one value.
constexpr int64_t kWeightOrderTile = 128;

struct BufferDesc {
  enum class Kind { Input, Cache, Weight, Activation };
  Kind kind;
  std::string name;  ///< argument name, weight name, or `t<id>`
  std::string dtype; ///< bf16, f32, i32, ...
  std::vector<Extent> shape;
  /// Cache buffers: heads, page size and head dim (the page count is the
  /// runtime's); inputs: the function argument index.
  int64_t argument = -1;
  int64_t heads = 0, pageSize = 0, headDim = 0;
  /// Cache buffers: bytes per token (all heads, block scales included;
  /// PagedCacheType::getBytesPerToken).
  int64_t bytesPerToken = 0;
  /// Weights stacked over experts: the name pattern with `{}` and count.
  int64_t stacked = 0;
  /// Weights: 0 when stored as the checkpoint holds them (row-major); else
  /// the ranks N of the chunk-major tile order (PackedWeight::orderRanks in
  /// codegen/lib/KernelBuilder.h) in which writeArtifact stores the 8-bit
  /// [rows, cols] payload (permuteChunkMajor).
  int64_t orderRanks = 0;
  /// Its head-major variant (PackedWeight::orderHeadMajor).
  bool orderHeadMajor = false;
};

struct Launch {
  std::string kernel;
  std::string op; ///< the msa/arith op it implements
  std::vector<int64_t> buffers;
};

/// Threads per CTA the GPU-specific kernels are built for.
constexpr int64_t kGpuThreads = 128;
/// CTAs per multiprocessor of an NVIDIA launch's fixed grid.
constexpr int64_t kGpuCtasPerSM = 4;

/// Function attributes by which a GPU kernel body declares a launch shape
/// of its own (KB function, i64 values): threads per CTA, bytes of dynamic
/// shared memory (the `kGpuDynamicSharedSymbol` array), and the CTAs per
/// multiprocessor its registers are capped for (`.minnctapersm`). Kernels
/// without them launch with the target's block and no dynamic shared
/// memory.
inline constexpr llvm::StringLiteral kGpuBlockAttr = "msac.gpu_block";
inline constexpr llvm::StringLiteral kGpuDynamicSharedAttr =
    "msac.gpu_dynamic_shared_bytes";
inline constexpr llvm::StringLiteral kGpuCtasPerSMAttr = "msac.gpu_ctas_per_sm";
/// Optional launch-shape attributes of a GPU kernel body (KB function, i64
/// values): a grid of its own (CTAs; otherwise the multiprocessors times
/// its CTAs per multiprocessor), the CTAs of a thread-block cluster (sm_90+;
/// the grid a multiple of it), and the tokens of the steps that launch it
/// (min and max; max 0: no bound; min > max > 0: never). Without the token
/// bounds every step launches it.
inline constexpr llvm::StringLiteral kGpuGridAttr = "msac.gpu_grid";
inline constexpr llvm::StringLiteral kGpuClusterAttr = "msac.gpu_cluster";
inline constexpr llvm::StringLiteral kGpuMinTokensAttr = "msac.gpu_min_tokens";
inline constexpr llvm::StringLiteral kGpuMaxTokensAttr = "msac.gpu_max_tokens";
/// Unit attribute of a GPU kernel body launched with programmatic stream
/// serialization (programmatic dependent launch, sm_90+): its CTAs may
/// start before the previous kernel of the stream has finished, and wait
/// for it (`griddepcontrol.wait`) before they read what it wrote.
inline constexpr llvm::StringLiteral kGpuProgrammaticAttr =
    "msac.gpu_programmatic";
/// The extern shared-memory array (address space 3, `[0 x i8]`) through
/// which kernels reach their dynamic shared memory.
inline constexpr llvm::StringLiteral kGpuDynamicSharedSymbol =
    "msac_dynamic_smem";

/// Launch shape of one kernel of an NVIDIA target: CTAs (the target's
/// multiprocessors times the CTAs per multiprocessor the kernel is built
/// for), threads per CTA and bytes of dynamic shared memory.
struct KernelGeometry {
  std::string name;
  int64_t grid = 0;
  int64_t block = 0;
  int64_t dynamicSharedBytes = 0;
  /// Launched as a programmatic dependent (kGpuProgrammaticAttr).
  bool programmatic = false;
  /// CTAs per cluster (kGpuClusterAttr; 1: none).
  int64_t cluster = 1;
  /// The tokens of the steps that launch it (kGpuMinTokensAttr,
  /// kGpuMaxTokensAttr; max 0: no bound).
  int64_t minTokens = 1, maxTokens = 0;
};

struct HostProgram {
  mlir::OwningOpRef<mlir::ModuleOp> kernels;
  /// GPU-specific bodies (same names and ABI) of the kernels that have one,
  /// for CTAs of kGpuThreads threads, with their shared-memory globals; the
  /// other kernels run on a GPU as grid-stride loops of their host bodies.
  mlir::OwningOpRef<mlir::ModuleOp> gpuKernels;
  /// The bodies that differ on targets with warpgroup MMA (GpuTarget::wgmma,
  /// sm_90a): same names and ABI, they replace gpuKernels' there.
  mlir::OwningOpRef<mlir::ModuleOp> wgmmaKernels;
  /// The bodies that differ on targets with hardware E2M1 conversions
  /// (GpuTarget::e2m1Convert, sm_100a): the kernels that decode NVFP4 cache
  /// values, which convert them instead of looking them up in a table.
  /// Same names and ABI; they replace gpuKernels' there.
  mlir::OwningOpRef<mlir::ModuleOp> e2m1Kernels;
  std::vector<BufferDesc> buffers;
  /// Run once when the model is loaded: dequantizes block-scaled weights
  /// (kept packed in the artifact) into FP32 buffers.
  std::vector<Launch> init;
  std::vector<Launch> schedule;
  /// Buffers returned by `@forward`: logits first, then updated caches.
  std::vector<int64_t> outputs;
  std::vector<std::string> kernelNames;
  /// The precision contract of each attention op of `@forward`, in program
  /// order (one per decoder layer for an imported model); the artifact's
  /// manifest records them per layer.
  std::vector<msa::AttentionPrecision> attentionPrecision;
};

/// True when `op` has a GPU-specific kernel for CTAs of kGpuThreads threads
/// (its shapes and element types meet that kernel's preconditions); ops
/// without one run on a GPU as grid-stride loops of their host bodies.
bool hasSpecificGpuKernel(mlir::Operation *op);

/// Builds kernels and schedule from `module` (which must hold `@forward`).
/// Emits an error on the op and fails for ops or types the host backend
/// does not implement yet. Ops named in `genericGpuOps` (e.g.
/// "msa.moe_experts") get no GPU-specific kernel: on a GPU they run as
/// grid-stride loops of their host bodies (for bisecting GPU kernels).
/// With `wideTiles` the wgmma bodies of msa.linear, msa.logits and the
/// fused attention prologue use two warpgroups per CTA (GpuKernels.cpp,
/// WgmmaLayout.h: the wide tile; msac compile turns it on by default).
/// With `packedWeights` a `bsq.dequantize` of a packed weight whose every
/// user is the weight of an msa.linear, one of msa.moe_experts' expert
/// stacks or a projection of msa.attention_prologue is not run at load: those
/// kernels read the packed payload and scales in place and dequantize in
/// registers (KernelBuilder.h, PackedWeight: the host kernels to the load-time
/// copy's FP32 values; GPU tensor-core paths to exact bf16 products with the
/// block scale, docs/architecture.md); other dequantized weights still get an
/// FP32 copy at load. `sm90a`: the program's GPU targets include sm_90a, so the
/// fused prologue's per-tensor FP8 weights are stored in the order its sm_90a
/// cluster kernels read best (--gpu-prologue-weight-order's default, auto:
/// head-major; row-major without, so a caller that leaves it false gets
/// row-major artifacts whatever its targets).
mlir::FailureOr<HostProgram> buildHostProgram(
    mlir::ModuleOp module, const std::vector<std::string> &genericGpuOps = {},
    bool wideTiles = false, bool packedWeights = false, bool sm90a = false);

/// Lowers a kernel module to the LLVM dialect (scf -> cf, arith, math,
/// func -> llvm).
mlir::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels);

/// Translates an LLVM-dialect module to an optimized x86-64 object file
/// and links it into a shared object at `soPath` with ld.lld. Returns an
/// error message, or "" on success.
std::string emitHostSharedObject(mlir::ModuleOp llvmModule,
                                 const std::string &soPath,
                                 const std::string &lldPath);

/// Compiles the (not yet LLVM-lowered) kernels for an NVIDIA target of the
/// target table: a cubin (or PTX text with `assembly`) in `binary`, built
/// with ptxas from `cudaToolkit`. Kernels keep the host ABI and names; the
/// outermost loop of each is spread over the grid (grid-stride). Returns
/// an error message or "".
/// `fmad` false passes --fmad=false to ptxas (no contraction of a multiply
/// and an add into an FMA), which keeps GPU rounding closer to the host's.
/// `gpuKernels` (may be null) supplies GPU-specific bodies by name;
/// `wgmmaKernels` (may be null) replaces some of them on targets with
/// warpgroup MMA, `e2m1Kernels` (may be null) some on targets with hardware
/// E2M1 conversions. `geometry` (may be null) receives every kernel's launch
/// shape, in hostKernels' order: kGpuCtasPerSM CTAs per multiprocessor of
/// the target's block and no dynamic shared memory unless the chosen body
/// declares its own (kGpuBlockAttr, kGpuDynamicSharedAttr,
/// kGpuCtasPerSMAttr).
std::string
emitNvidiaBinary(mlir::ModuleOp hostKernels, mlir::ModuleOp gpuKernels,
                 mlir::ModuleOp wgmmaKernels, mlir::ModuleOp e2m1Kernels,
                 const std::string &targetName, const std::string &cudaToolkit,
                 bool assembly, std::string &binary, bool fmad = true,
                 std::vector<KernelGeometry> *geometry = nullptr);

/// The category of the GPU code generator's hidden tuning options
/// (`--gpu-...`, accepted by every subcommand of the tools that link the
/// generator), for the tools' `--help-hidden`.
llvm::cl::OptionCategory &gpuTuningOptionCategory();

} // namespace msac

#endif // MSAC_CODEGEN_HOSTPROGRAM_H
