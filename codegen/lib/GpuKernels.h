//===- GpuKernels.h - Parallel GPU kernel bodies ----------------*- C++ -*-===//
//
// Part of msac.
//
// Private to the codegen library. The GPU kernels of the ops whose host
// loops would leave a GPU idle: the decode path of sparse attention (the
// indexer, block top-k, split-KV attention) and the matrix-vector products
// of decode. Each is emitted as MLIR from the op's semantics, like the host
// kernels, but organised for a CTA of `threads` threads: every CTA loops
// over work items (CTA-stride, so any grid size is correct and launch
// parameters never depend on the step), warps cooperate through shuffles
// and shared memory.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CODEGEN_LIB_GPUKERNELS_H
#define MSAC_CODEGEN_LIB_GPUKERNELS_H

#include "KernelBuilder.h"

#include "mlir/IR/BuiltinOps.h"

namespace msac::kernels {

/// Scratch an op's GPU kernel needs per token of the step, beyond its
/// operands: FP32 workspace elements and i32 counters (zero at load; the
/// kernel leaves them zero).
struct GpuWorkspace {
  int64_t floatsPerToken = 0;
  int64_t countersPerToken = 0;
  /// Floats of a second workspace of fixed size (not per token), passed
  /// after the counters: room for the extra split-KV partials of decode
  /// steps of few tokens.
  int64_t fixedFloats = 0;
};

/// True when `op` has a GPU-specific kernel for CTAs of `threads` threads
/// (its shapes and element types meet the kernel's preconditions).
bool hasGpuKernel(Operation *op, int64_t threads);

/// The workspace of `op`'s GPU kernel (zero for most ops). When non-zero
/// the launch passes the workspace, the counters and the fixed workspace
/// after the op's own buffers. `packed`: the weights the launch reads in
/// place (by operand slot), as KernelBuilder::packed.
GpuWorkspace gpuWorkspace(Operation *op,
                          const PackedOperands *packed = nullptr);

/// Launches `op`'s GPU kernel takes (parts that run one after the other over
/// the same buffers, e.g. the bucketing, projections and slot sum of the MoE
/// experts; a target may launch only some of them in a step, by their token
/// bounds, e.g. the fused attention prologue's cluster kernels of 1 and 2-16
/// tokens).
/// `packed`: the weights the launch reads in place, as gpuWorkspace's.
int64_t gpuKernelParts(Operation *op, const PackedOperands *packed = nullptr);

/// True when `op`'s GPU kernel has a different body on targets with
/// warpgroup MMA (wgmma.mma_async, sm_90a): the tile GEMM of msa.linear,
/// msa.logits, the MoE experts and msa.attention_prologue (bf16 weights,
/// or per-tensor FP8 ones read in place, which `packed`, the kernel's
/// packed operands, tells), and the indexer with NVFP4 index keys
/// (msa.index_score).
bool hasWgmmaKernel(Operation *op, int64_t threads,
                    const PackedOperands *packed = nullptr);

/// True when part `part` of `op`'s GPU kernel decodes NVFP4 cache values
/// and has a different body on targets with hardware E2M1 conversions
/// (GpuTarget::e2m1Convert, sm_100a): part 0 of the tensor-core attention
/// (dense and sparse) with an NVFP4 K or V cache, and the tensor-core
/// indexer with an NVFP4 index cache. The other bodies are the same on
/// every NVIDIA target.
bool hasE2M1Kernel(Operation *op, int64_t threads, int64_t part);

/// The chunk-major order (PackedWeight::orderRanks) in which the payloads
/// of `op`'s weights read in place (`packed`) are best stored for its
/// sm_90a kernels, or 0 for row-major: for msa.attention_prologue whose
/// per-tensor FP8 projections take the cluster kernels of 1 and 2-16
/// tokens (N CTAs per head, each over H / N channels in 128-channel
/// chunks), N with --gpu-prologue-weight-order=chunk-major or head-major
/// (or auto, the default, where setPrologueWeightOrderTargets named an
/// sm_90a target); else 0. Every GPU and host body of the op reads the
/// order its PackedWeights name.
int64_t prologueWeightOrder(Operation *op, const PackedOperands *packed);
/// Whether that order is its head-major variant
/// (PackedWeight::orderHeadMajor; --gpu-prologue-weight-order=head-major,
/// or auto with an sm_90a target).
bool prologueWeightOrderHeadMajor();
/// What --gpu-prologue-weight-order=auto means for the compile that
/// follows: head-major when its targets include sm_90a (`sm90a`; on the
/// H200 and the H100 the order is as fast as row-major or faster at every
/// token count, docs/perf.md, fifty-third session), else row-major. Until
/// called, auto means row-major.
void setPrologueWeightOrderTargets(bool sm90a);

/// Emits part `part` of the GPU kernel body of `op` through `k` (a function
/// `(ptr buffers, ptr scalars)`); shared-memory arrays become
/// `llvm.mlir.global`s in address space 3 named after `kernelName` at the
/// end of `globals`. With `wgmma` the body may use warpgroup MMA (only for
/// targets that have it). With `wideTiles` (and `wgmma`) msa.linear,
/// msa.logits and part 0 of msa.attention_prologue take the wide tile
/// where they take the tile GEMM: CTAs of two warpgroups in dynamic shared
/// memory (the body declares its launch shape, GK::declareLaunch). With
/// `e2m1` (only for targets with hardware E2M1 conversions) NVFP4 cache
/// values are decoded by them instead of the table of CacheDecode.h.
/// Requires hasGpuKernel(op, threads).
void emitGpuKernel(KB &k, Operation *op, ModuleOp globals,
                   llvm::StringRef kernelName, int64_t threads,
                   int64_t part = 0, bool wgmma = false, bool wideTiles = false,
                   bool e2m1 = false);

} // namespace msac::kernels

#endif // MSAC_CODEGEN_LIB_GPUKERNELS_H
