//===- GpuKernels.cpp - Parallel GPU kernel bodies ------------------------===//
//
// Part of msac.
//
// The semantics are the host kernels' (HostProgram.cpp) and the ops'
// descriptions (msa-m3-spec.md §2-§3); only the order of FP32 additions
// differs. Shapes below: T tokens in the step, G index heads (one per KV
// head), MB block-table columns, Hq/Hkv attention heads, D head dim.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "CacheDecode.h"
#include "WgmmaLayout.h"

#include "msac/Codegen/HostProgram.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CommandLine.h"

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>

using namespace mlir;
using namespace msac;
using namespace msac::kernels;

llvm::cl::OptionCategory &msac::gpuTuningOptionCategory() {
  static llvm::cl::OptionCategory category("GPU code generator tuning options "
                                           "(hidden)");
  return category;
}

namespace {

using CmpI = arith::CmpIPredicate;
using CmpF = arith::CmpFPredicate;

/// A hidden tuning option of the GPU code generator (`--NAME=VALUE`),
/// accepted by every subcommand of the tools that link it and listed by
/// their `--help-hidden` (gpuTuningOptionCategory).
template <typename T> struct TuningOpt : llvm::cl::opt<T> {
  TuningOpt(llvm::StringRef name, const T &init, llvm::StringRef desc)
      : llvm::cl::opt<T>(name, llvm::cl::Hidden, llvm::cl::init(init),
                         llvm::cl::sub(llvm::cl::SubCommand::getAll()),
                         llvm::cl::cat(msac::gpuTuningOptionCategory()),
                         llvm::cl::desc(desc)) {}
};

static TuningOpt<bool> gridWaitClobber(
    "gpu-grid-wait-clobber", true,
    "griddepcontrol.wait as inline PTX with a memory clobber (as "
    "CUDA's cudaGridDependencySynchronize), so that no compiler pass "
    "moves a memory access across it (LLVM declares the intrinsic "
    "IntrNoMem; false: the intrinsic, for comparison)");

constexpr int64_t kWarp = 32;
/// Split-KV chunks: steps of many tokens split a sparse row's K blocks into
/// min(K, kSparseChunks) chunks and a dense row's blocks into kDenseChunks;
/// steps of few tokens (decode) into more, up to min(K, kSparseMaxChunks)
/// and kDenseMaxChunks, so that the step has about kDecodeItems work items
/// (attentionStepChunks). The workspace holds kDenseChunks partials per
/// (token, query head) for both ops, and a fixed workspace the partials of
/// the decode steps that take more (attentionWorkspace, gpuWorkspace).
/// Sparse attention keeps min(K, 8) chunks at every step: on the H200
/// (docs/perf.md) M3's 16-chunk split at batch 8 / 128K ran 50 us against
/// 34 us with 8 chunks, and gained 1 us at batch 1.
constexpr int64_t kSparseChunks = 8;
constexpr int64_t kDenseChunks = 16;
constexpr int64_t kSparseMaxChunks = 8;
constexpr int64_t kDenseMaxChunks = 64;
constexpr int64_t kDecodeItems = 512;
/// 32-bit registers per lane that the per-token attention spends on the
/// cache words of the 16-key groups it loads ahead (attentionKernel): heads
/// of up to 64 channels, wider heads (Q in shared memory).
constexpr int64_t kAheadWords = 96;
constexpr int64_t kAheadWordsWide = 64;
/// Rows of at most this many candidate blocks are sorted in shared memory
/// by the top-k kernel (128K tokens at 128-token blocks).
constexpr int64_t kSortBlocks = 1024;
/// Rows of the activation a matrix-vector warp handles at once.
constexpr int64_t kRowTile = 8;

/// GPU context of one kernel body: thread coordinates, shuffles, barriers,
/// shared memory.
int64_t unrollOf(int64_t iters);
class GK;
Value e4m3PairToBF16(GK &g, Value pair);
Value e4m3PairToF16(GK &g, Value pair);

class GK {
public:
  GK(KB &k, ModuleOp globals, StringRef name, int64_t threads)
      : k(k), globals(globals), name(name.str()), threads(threads) {
    auto idx = [&](Value v) { return v; };
    tid = idx(gpu::ThreadIdOp::create(k.b, k.loc, gpu::Dimension::x));
    ctaId = gpu::BlockIdOp::create(k.b, k.loc, gpu::Dimension::x);
    numCtas = gpu::GridDimOp::create(k.b, k.loc, gpu::Dimension::x);
    lane = k.irem(tid, k.c(kWarp));
    warp = k.idiv(tid, k.c(kWarp));
    warps = threads / kWarp;
  }

  Value i1(bool v) {
    return arith::ConstantOp::create(k.b, k.loc, k.b.getBoolAttr(v));
  }
  Value andI(Value a, Value b) {
    return arith::AndIOp::create(k.b, k.loc, a, b);
  }
  Value orI(Value a, Value b) { return arith::OrIOp::create(k.b, k.loc, a, b); }
  Value notI(Value a) { return arith::XOrIOp::create(k.b, k.loc, a, i1(true)); }
  Value eq(Value a, Value b) { return k.icmp(CmpI::eq, a, b); }
  Value isub(Value a, Value b) {
    return arith::SubIOp::create(k.b, k.loc, a, b);
  }
  Value imin(Value a, Value b) {
    return arith::MinSIOp::create(k.b, k.loc, a, b);
  }
  Value imax(Value a, Value b) {
    return arith::MaxSIOp::create(k.b, k.loc, a, b);
  }

  /// Butterfly exchange within the warp (lanes `lane` and `lane ^ offset`).
  Value shflXor(Value v, int64_t offset) {
    if (v.getType().isIndex()) {
      Value x = arith::IndexCastOp::create(k.b, k.loc, k.i32, v);
      x = gpu::ShuffleOp::create(k.b, k.loc, x, static_cast<int32_t>(offset),
                                 kWarp, gpu::ShuffleMode::XOR)
              .getShuffleResult();
      return arith::IndexCastOp::create(k.b, k.loc, k.b.getIndexType(), x);
    }
    return gpu::ShuffleOp::create(k.b, k.loc, v, static_cast<int32_t>(offset),
                                  kWarp, gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
  Value warpSum(Value v, int64_t width = kWarp) {
    for (int64_t off = width / 2; off >= 1; off /= 2)
      v = k.add(v, shflXor(v, off));
    return v;
  }
  /// CTA barrier, or with `barrierId` set, the named barrier of this
  /// thread's group of `threads` threads (warpgroupView).
  void sync() {
    if (!barrierId) {
      gpu::BarrierOp::create(k.b, k.loc);
      return;
    }
    NVVM::BarrierOp::create(k.b, k.loc, Type(), barrierId, ci32(threads),
                            NVVM::BarrierReductionAttr(), Value());
  }
  /// Orders this thread's global writes before its later ones, device-wide.
  void fence() { NVVM::MembarOp::create(k.b, k.loc, NVVM::MemScopeKind::GPU); }

  /// A shared-memory array of `n` elements, as a generic pointer (of a
  /// groupView: this group's own array).
  Value shared(Type elem, int64_t n) {
    Value p = LLVM::AddrSpaceCastOp::create(
        k.b, k.loc, k.ptrT, sharedSpace(elem, n * sharedGroups, 16));
    return sharedGroups > 1 ? k.gep(p, k.imul(sharedGroup, k.c(n)), elem) : p;
  }
  /// A shared-memory array of `n` elements aligned to `alignment` bytes, as
  /// a pointer in the shared address space (3).
  Value sharedSpace(Type elem, int64_t n, int64_t alignment) {
    OpBuilder gb = OpBuilder::atBlockEnd(globals.getBody());
    std::string sym = name + "_smem" + std::to_string(sharedArrays++);
    auto global = LLVM::GlobalOp::create(
        gb, k.loc, LLVM::LLVMArrayType::get(elem, n), /*isConstant=*/false,
        LLVM::Linkage::Internal, sym, Attribute(), alignment,
        /*addrSpace=*/3);
    return LLVM::AddressOfOp::create(k.b, k.loc, global);
  }

  /// The kernel's dynamic shared memory (HostProgram.h:
  /// kGpuDynamicSharedSymbol, aligned to 128 bytes like the static tile
  /// rings), as a pointer in the shared address space (3); its size is the
  /// one declareLaunch gives.
  Value dynamicShared() {
    auto global = globals.lookupSymbol<LLVM::GlobalOp>(kGpuDynamicSharedSymbol);
    if (!global) {
      OpBuilder gb = OpBuilder::atBlockEnd(globals.getBody());
      global = LLVM::GlobalOp::create(
          gb, k.loc, LLVM::LLVMArrayType::get(k.b.getI8Type(), 0),
          /*isConstant=*/false, LLVM::Linkage::External,
          kGpuDynamicSharedSymbol, Attribute(),
          /*alignment=*/1024, /*addrSpace=*/3);
    }
    return LLVM::AddressOfOp::create(k.b, k.loc, global);
  }
  /// Declares `bytes` of dynamic shared memory for the kernel (its launch
  /// otherwise undeclared: the target's CTAs and grid; declareLaunch sets
  /// the whole shape instead).
  void declareDynamicShared(int64_t bytes) {
    k.entry->getParentOp()->setAttr(kGpuDynamicSharedAttr,
                                    k.b.getI64IntegerAttr(bytes));
  }
  /// Declares the kernel's own launch shape: `block` threads per CTA,
  /// `dynamicSharedBytes` bytes of dynamic shared memory, `ctasPerSM` CTAs
  /// per multiprocessor (the grid; registers are capped so that they fit).
  /// The manifest records the shape and the runtime launches with it.
  void declareLaunch(int64_t block, int64_t dynamicSharedBytes,
                     int64_t ctasPerSM) {
    Operation *fn = k.entry->getParentOp();
    fn->setAttr(kGpuBlockAttr, k.b.getI64IntegerAttr(block));
    fn->setAttr(kGpuDynamicSharedAttr,
                k.b.getI64IntegerAttr(dynamicSharedBytes));
    fn->setAttr(kGpuCtasPerSMAttr, k.b.getI64IntegerAttr(ctasPerSM));
  }

  /// Declares a grid of the kernel's own (`grid` CTAs of `block` threads,
  /// in thread-block clusters of `cluster` CTAs along x; registers capped
  /// for `ctasPerSM` CTAs per multiprocessor), which the manifest records
  /// and the runtime launches.
  void declareGrid(int64_t block, int64_t grid, int64_t cluster,
                   int64_t ctasPerSM) {
    declareLaunch(block, 0, ctasPerSM);
    Operation *fn = k.entry->getParentOp();
    fn->setAttr(kGpuGridAttr, k.b.getI64IntegerAttr(grid));
    fn->setAttr(kGpuClusterAttr, k.b.getI64IntegerAttr(cluster));
  }
  /// Declares the steps that launch the kernel: those of `minTokens` to
  /// `maxTokens` tokens (0: no bound; minTokens > maxTokens > 0: none).
  void declareTokens(int64_t minTokens, int64_t maxTokens) {
    Operation *fn = k.entry->getParentOp();
    fn->setAttr(kGpuMinTokensAttr, k.b.getI64IntegerAttr(minTokens));
    fn->setAttr(kGpuMaxTokensAttr, k.b.getI64IntegerAttr(maxTokens));
  }

  /// Marks the kernel for a programmatic dependent launch
  /// (kGpuProgrammaticAttr); it must gridDependencyWait() before it reads
  /// what the previous kernel wrote.
  void declareProgrammatic() {
    k.entry->getParentOp()->setAttr(kGpuProgrammaticAttr, k.b.getUnitAttr());
    programmatic = true;
  }
  /// Set by declareProgrammatic.
  bool programmatic = false;
  /// `griddepcontrol.wait`: until the previous kernel of the stream has
  /// finished and its writes are visible (returns at once when the launch
  /// was not programmatic).
  /// With `clobber` (or --gpu-grid-wait-clobber) as inline PTX with a
  /// memory clobber, so that no pass moves a load across it: a kernel that
  /// issues loads before it (weights, which the previous kernel does not
  /// write) must keep them there.
  void gridDependencyWait(bool clobber = false) {
    if (clobber || gridWaitClobber) {
      LLVM::InlineAsmOp::create(
          k.b, k.loc, TypeRange(), ValueRange(), "griddepcontrol.wait;",
          "~{memory}", /*has_side_effects=*/true, /*is_align_stack=*/false,
          LLVM::tailcallkind::TailCallKind::None,
          LLVM::AsmDialectAttr::get(k.b.getContext(), LLVM::AsmDialect::AD_ATT),
          ArrayAttr());
      return;
    }
    NVVM::GriddepcontrolOp::create(k.b, k.loc, NVVM::GridDepActionKind::wait);
  }
  /// `griddepcontrol.launch_dependents`: the next kernel, where launched
  /// programmatically, may start once every CTA of this one has run this
  /// (or exited).
  void launchDependents() {
    NVVM::GriddepcontrolOp::create(k.b, k.loc,
                                   NVVM::GridDepActionKind::launch_dependents);
  }

  /// A constant FP32 table in global memory, as a generic pointer.
  Value constantTable(ArrayRef<float> values) {
    return constantGlobal(k.f32, values.size(), [&](RankedTensorType type) {
      return DenseElementsAttr::get(type, values);
    });
  }

  /// A constant i32 table in global memory (16-byte aligned), as a generic
  /// pointer.
  Value constantWords(ArrayRef<int32_t> values) {
    return constantGlobal(k.i32, values.size(), [&](RankedTensorType type) {
      return DenseElementsAttr::get(type, values);
    });
  }

  /// A constant global array of `n` `elem` (16-byte aligned) holding
  /// `init(tensor<n x elem>)`, as a generic pointer.
  Value
  constantGlobal(Type elem, size_t n,
                 llvm::function_ref<DenseElementsAttr(RankedTensorType)> init) {
    OpBuilder gb = OpBuilder::atBlockEnd(globals.getBody());
    std::string sym = name + "_table" + std::to_string(sharedArrays++);
    auto type = RankedTensorType::get({static_cast<int64_t>(n)}, elem);
    auto global = LLVM::GlobalOp::create(
        gb, k.loc, LLVM::LLVMArrayType::get(elem, n),
        /*isConstant=*/true, LLVM::Linkage::Internal, sym, init(type),
        /*alignment=*/16, /*addrSpace=*/1);
    Value addr = LLVM::AddressOfOp::create(k.b, k.loc, global);
    return LLVM::AddrSpaceCastOp::create(k.b, k.loc, k.ptrT, addr);
  }
  /// `prmt.b32` (default mode): byte i of the result is byte
  /// (sel >> 4i) & 7 of {hi, lo}.
  Value prmt(Value lo, Value hi, Value sel) {
    return NVVM::PermuteOp::create(
        k.b, k.loc, k.i32, lo, hi, sel,
        NVVM::PermuteModeAttr::get(k.b.getContext(),
                                   NVVM::PermuteMode::DEFAULT));
  }

  /// 2^x (f32) by `ex2.approx.ftz.f32`: one MUFU.EX2, relative error below
  /// 2^-22 (PTX ISA, "ex2"); subnormal inputs and results are flushed to
  /// zero, 2^-inf = +0, NaN stays NaN.
  Value ex2(Value x) {
    return LLVM::CallIntrinsicOp::create(
               k.b, k.loc, k.f32,
               StringAttr::get(k.b.getContext(),
                               "llvm.nvvm.ex2.approx.ftz.f32"),
               ValueRange{x})
        .getResult(0);
  }

  /// True in every lane when `pred` (i1) is true in any lane of the warp
  /// (`vote.sync.any`, all lanes taking part).
  Value anyLane(Value pred) {
    return NVVM::VoteSyncOp::create(k.b, k.loc, k.b.getI1Type(), ci32(-1), pred,
                                    NVVM::VoteSyncKind::any);
  }

  /// `for (w = ctaId; w < count; w += numCtas) body(w)`.
  void ctaLoop(Value count, const std::function<void(Value)> &body) {
    auto loop = scf::ForOp::create(k.b, k.loc, ctaId, count, numCtas);
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  }
  /// `for (i = first; i < count; i += threads) body(i)`.
  void strided(Value first, Value count,
               const std::function<void(Value)> &body) {
    auto loop = scf::ForOp::create(k.b, k.loc, first, count, k.c(threads));
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  }
  /// Like ctaLoop, one item per warp.
  void warpLoop(Value count, const std::function<void(Value)> &body) {
    Value first = k.iadd(k.imul(ctaId, k.c(warps)), warp);
    Value step = k.imul(numCtas, k.c(warps));
    auto loop = scf::ForOp::create(k.b, k.loc, first, count, step);
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  }
  /// `if (cond) then() else otherwise()`, yielding the values they return.
  SmallVector<Value> ifElse(Value cond, TypeRange types,
                            const std::function<SmallVector<Value>()> &then,
                            const std::function<SmallVector<Value>()> &other) {
    auto op = scf::IfOp::create(k.b, k.loc, types, cond, /*withElse=*/true);
    auto fill = [&](Block *block,
                    const std::function<SmallVector<Value>()> &body) {
      OpBuilder::InsertionGuard guard(k.b);
      // Without results the block already ends in an empty yield.
      if (types.empty())
        k.b.setInsertionPoint(block->getTerminator());
      else
        k.b.setInsertionPointToStart(block);
      SmallVector<Value> v = body();
      if (!types.empty())
        scf::YieldOp::create(k.b, k.loc, v);
    };
    fill(op.thenBlock(), then);
    fill(op.elseBlock(), other);
    return SmallVector<Value>(op.getResults());
  }

  /// FP32 values of a bf16 pair stored in one 32-bit word.
  std::pair<Value, Value> unpackBF16(Value word) {
    Value lo = arith::BitcastOp::create(
        k.b, k.loc, k.f32, arith::ShLIOp::create(k.b, k.loc, word, ci32(16)));
    Value hi = arith::BitcastOp::create(
        k.b, k.loc, k.f32,
        arith::AndIOp::create(k.b, k.loc, word, ci32(0xFFFF0000u)));
    return {lo, hi};
  }
  Value ci32(int64_t v) {
    return arith::ConstantOp::create(
        k.b, k.loc, k.b.getI32IntegerAttr(static_cast<int32_t>(v)));
  }
  /// The 8 elements at element `index` (a multiple of 8) of a bf16 or f32
  /// array, as FP32, with 16-byte loads.
  SmallVector<Value> load8(Value base, Value index, Type storage) {
    WeightRef array = plainWeight(base, storage);
    return decodeWeight8(array, loadWeightRaw(array, index));
  }
  /// The loads of 8 weight elements (loadWeightRaw), decoded apart
  /// (decodeWeight8) so that a loop can issue several steps' loads before
  /// the first decode waits for its data.
  struct WeightRaw {
    SmallVector<Value> words; // payload: vectors (plain) or words (packed)
    Value scale, global;      // packed: scale byte (i32) or FP32; g
  };
  /// Issues the loads of the 8 elements at flat index `index` (a multiple
  /// of 8) of a weight. Plain: load8's 16-byte loads. Packed: one 8-byte
  /// (8-bit storage) or 4-byte (E2M1) load and one block scale, as the 8
  /// elements share their scale block (blocks of 16, 32 or 128 along rows
  /// that they divide, or per tensor).
  WeightRaw loadWeightRaw(const WeightRef &w, Value index) {
    WeightRaw raw;
    Type i8 = k.b.getI8Type();
    if (!w.packed) {
      const bool bf16 = w.type.isBF16();
      auto vec = VectorType::get({4}, bf16 ? k.i32 : k.f32);
      for (int64_t l = 0; l < (bf16 ? 1 : 2); ++l)
        raw.words.push_back(LLVM::LoadOp::create(
            k.b, k.loc, vec,
            k.gep(w.base, k.iadd(index, k.c(4 * l)), bf16 ? k.i16 : k.f32),
            /*alignment=*/16));
      return raw;
    }
    const PackedWeight &p = *w.packed;
    if (p.fourBit()) {
      raw.words.push_back(LLVM::LoadOp::create(
          k.b, k.loc, k.i32, k.gep(w.base, k.idiv(index, k.c(2)), i8),
          /*alignment=*/4));
    } else {
      raw.words.push_back(
          LLVM::LoadOp::create(k.b, k.loc, VectorType::get({2}, k.i32),
                               k.gep(w.base, orderedByteIndex(k, w, index), i8),
                               /*alignment=*/8));
    }
    Value si = packedScaleIndex(k, p, index);
    raw.scale = p.scaleType.isF32() ? k.loadF(w.scales, si, k.f32)
                                    : loadByteU32(k, w.scales, si);
    raw.global = packedGlobal(k, w, index);
    return raw;
  }
  /// The FP32 values of loadWeightRaw's 8 elements (loadWeight's values).
  /// E4M3 payload bytes and E4M3 block scales convert by `cvt.rn.f16x2.
  /// e4m3x2` (exact), E8M0 scales by placing the byte in the exponent
  /// (decodeByteFloat's values, 2^-127 and NaN included). E2M1 codes
  /// become f16 bit patterns (magnitude bits 2..0 at bits 11..9, sign at
  /// bit 15: the code's value times 2^-14, subnormal 0.5 included),
  /// widened exactly; the 2^14 is folded into an E4M3 block scale (at most
  /// 448 * 2^14: exact) or applied first for E8M0 ones. Each value's only
  /// rounding is loadWeight's (the product with an FP32 scale, then with
  /// g), so the values are identical.
  SmallVector<Value> decodeWeight8(const WeightRef &w, const WeightRaw &raw) {
    SmallVector<Value> out;
    if (!w.packed) {
      for (Value v : raw.words)
        for (int64_t e = 0; e < 4; ++e) {
          Value x = LLVM::ExtractElementOp::create(k.b, k.loc, v, ci32(e));
          if (w.type.isBF16()) {
            auto [lo, hi] = unpackBF16(x);
            out.push_back(lo);
            out.push_back(hi);
          } else {
            out.push_back(x);
          }
        }
      return out;
    }
    const PackedWeight &p = *w.packed;
    Type i8 = k.b.getI8Type();
    auto f16x2 = VectorType::get({2}, k.b.getF16Type());
    auto f32x2 = VectorType::get({2}, k.f32);
    auto i8x2 = VectorType::get({2}, i8);
    auto e4m3Pair = [&](Value bits16) { // i32 holding 2 bytes -> f32 x 2
      Value h = NVVM::ConvertF8x2ToF16x2Op::create(
          k.b, k.loc, f16x2,
          LLVM::BitcastOp::create(
              k.b, k.loc, i8x2,
              arith::TruncIOp::create(k.b, k.loc, k.i16, bits16)),
          /*relu=*/false, Float8E4M3FNType::get(k.b.getContext()));
      return arith::ExtFOp::create(k.b, k.loc, f32x2, h).getResult();
    };
    auto elem = [&](Value v, int64_t e) -> Value {
      return LLVM::ExtractElementOp::create(k.b, k.loc, v, ci32(e));
    };
    // The block scale as FP32.
    Value scale = raw.scale;
    const bool e4m3Scale =
        isa<bsq::NVFP4Type>(p.format) || isa<Float8E4M3FNType>(p.scaleType);
    if (!p.scaleType.isF32()) {
      if (e4m3Scale) {
        scale = elem(e4m3Pair(raw.scale), 0);
      } else { // E8M0
        Value bits = arith::ShLIOp::create(k.b, k.loc, raw.scale, ci32(23));
        bits = k.select(eqI32(raw.scale, 0), ci32(0x00400000), bits);
        scale = k.select(eqI32(raw.scale, 255), k.cf(NAN),
                         arith::BitcastOp::create(k.b, k.loc, k.f32, bits));
      }
    }
    auto finish = [&](Value v) {
      v = k.mul(v, scale);
      return raw.global ? k.mul(v, raw.global) : v;
    };
    Type storage = p.format.getStorageType();
    if (p.fourBit()) {
      const bool foldScale = e4m3Scale && !p.scaleType.isF32();
      Value twoTo14 = k.cf(16384.0);
      if (foldScale)
        scale = k.mul(scale, twoTo14);
      Value word = raw.words[0];
      auto andC = [&](Value x, uint32_t m) {
        return arith::AndIOp::create(k.b, k.loc, x, ci32(m)).getResult();
      };
      auto shl = [&](Value x, int64_t n) {
        return arith::ShLIOp::create(k.b, k.loc, x, ci32(n)).getResult();
      };
      for (int64_t byte = 0; byte < 4; ++byte) {
        Value t = byte
                      ? arith::ShRUIOp::create(k.b, k.loc, word, ci32(8 * byte))
                            .getResult()
                      : word;
        // Code 2 byte in bits 3..0, code 2 byte + 1 in bits 19..16.
        Value x = arith::OrIOp::create(k.b, k.loc, andC(t, 0xF),
                                       shl(andC(t, 0xF0), 12));
        Value h = arith::OrIOp::create(k.b, k.loc, shl(andC(x, 0x00070007), 9),
                                       shl(andC(x, 0x00080008), 12));
        Value halves = LLVM::BitcastOp::create(k.b, k.loc, f16x2, h);
        Value f = arith::ExtFOp::create(k.b, k.loc, f32x2, halves);
        for (int64_t e = 0; e < 2; ++e) {
          Value v = elem(f, e);
          out.push_back(finish(foldScale ? v : k.mul(v, twoTo14)));
        }
      }
      return out;
    }
    for (int64_t l = 0; l < 2; ++l) {
      Value word = elem(raw.words[0], l);
      for (int64_t pair = 0; pair < 2; ++pair) {
        Value bits =
            pair
                ? arith::ShRUIOp::create(k.b, k.loc, word, ci32(16)).getResult()
                : word;
        if (isa<Float8E4M3FNType>(storage)) {
          Value f = e4m3Pair(bits);
          for (int64_t e = 0; e < 2; ++e)
            out.push_back(finish(elem(f, e)));
          continue;
        }
        // E5M2 (infinities decode as loadWeight does): per byte.
        for (int64_t e = 0; e < 2; ++e) {
          Value byte = arith::AndIOp::create(
              k.b, k.loc,
              e ? arith::ShRUIOp::create(k.b, k.loc, bits, ci32(8)).getResult()
                : bits,
              ci32(0xFF));
          out.push_back(finish(decodeByteFloat(k, byte, storage)));
        }
      }
    }
    return out;
  }
  /// True when a packed weight's values without their tail factor
  /// (packedTail) are bf16 numbers, so that tensor cores can take them
  /// (decodeWeightBF16): E2M1 codes with an E4M3 (NVFP4) or E8M0 (MXFP4)
  /// block scale (at most 5 significant bits), E4M3 with an E8M0 block
  /// scale (MXFP8) or a per-tensor FP32 scale (FP8), the products exact
  /// unless an E8M0 scale leaves bf16's range (below 2^-125 or above
  /// 2^118). Block FP8's FP32 tile scales are not.
  static bool packedMmaFormat(const PackedWeight &p) {
    Type storage = p.format.getStorageType();
    if (p.fourBit())
      return isa<bsq::NVFP4Type, bsq::MXType>(p.format);
    return isa<Float8E4M3FNType>(storage) &&
           (isa<bsq::MXType>(p.format) ||
            (isa<bsq::FP8Type>(p.format) && p.format.getBlockShape().empty()));
  }
  /// The factor a packedMmaFormat weight's dot products take at the end:
  /// NVFP4's global scale, FP8's per-tensor (or per-matrix) scale, else a
  /// null value. `index`: the flat index of any element of the row.
  Value packedTail(const WeightRef &w, Value index) {
    const PackedWeight &p = *w.packed;
    if (isa<bsq::FP8Type>(p.format))
      return k.loadF(w.scales, packedScaleIndex(k, p, index), k.f32);
    return packedGlobal(k, w, index);
  }
  /// loadWeightRaw's 8 elements of a packedMmaFormat weight as 4 words of
  /// bf16 pairs (elements 2i, 2i + 1 in word i, the first in the low
  /// half): storage * block scale, exact. E2M1 magnitudes look up the high
  /// and low bytes of their bf16 values by `prmt` (0, 0.5, 1, 1.5, 2, 3, 4,
  /// 6: 00 3F 3F 3F 40 40 40 40 and 00 00 80 C0 00 40 80 C0), the sign is
  /// ORed in; E4M3 pairs convert by `cvt.rn.f16x2.e4m3x2` and widen
  /// exactly; the block scale multiplies both halves (`mul.rn.bf16x2`).
  /// With `integerE4M3`, per-tensor FP8 (no block scale) decodes by
  /// integer operations instead (e4m3WordToBF16; NaN bytes give +-480).
  SmallVector<Value> decodeWeightBF16(const WeightRef &w, const WeightRaw &raw,
                                      bool integerE4M3 = false) {
    const PackedWeight &p = *w.packed;
    auto bf16x2 = VectorType::get({2}, k.b.getBF16Type());
    auto andC = [&](Value x, uint32_t m) {
      return arith::AndIOp::create(k.b, k.loc, x, ci32(m)).getResult();
    };
    auto shl = [&](Value x, int64_t n) {
      return arith::ShLIOp::create(k.b, k.loc, x, ci32(n)).getResult();
    };
    auto shr = [&](Value x, int64_t n) {
      return arith::ShRUIOp::create(k.b, k.loc, x, ci32(n)).getResult();
    };
    auto orI = [&](Value a, Value b) {
      return arith::OrIOp::create(k.b, k.loc, a, b).getResult();
    };
    // The block scale as bf16 bits in both halves (FP8: none).
    Value scale2;
    if (!isa<bsq::FP8Type>(p.format)) {
      Value bits;
      if (isa<bsq::NVFP4Type>(p.format)) {
        // E4M3 -> f16 -> FP32 -> bf16 bits (exact): only the byte's half
        // is converted back (e4m3PairToBF16 would narrow both halves).
        auto f16x2 = VectorType::get({2}, k.b.getF16Type());
        Value h = NVVM::ConvertF8x2ToF16x2Op::create(
            k.b, k.loc, f16x2,
            LLVM::BitcastOp::create(
                k.b, k.loc, VectorType::get({2}, k.b.getI8Type()),
                arith::TruncIOp::create(k.b, k.loc, k.i16, raw.scale)),
            /*relu=*/false, Float8E4M3FNType::get(k.b.getContext()));
        Value f =
            arith::ExtFOp::create(k.b, k.loc, VectorType::get({2}, k.f32), h);
        Value f0 = LLVM::ExtractElementOp::create(k.b, k.loc, f, ci32(0));
        bits = shr(arith::BitcastOp::create(k.b, k.loc, k.i32, f0), 16);
      } else { // E8M0: 2^(byte - 127); byte 0 is 2^-127, 255 NaN
        bits = shl(raw.scale, 7);
        bits = k.select(eqI32(raw.scale, 0), ci32(0x0040), bits);
        bits = k.select(eqI32(raw.scale, 255), ci32(0x7FC0), bits);
      }
      scale2 = orI(bits, shl(bits, 16));
    }
    auto scaled = [&](Value word) -> Value {
      if (!scale2)
        return word;
      Value a = LLVM::BitcastOp::create(k.b, k.loc, bf16x2, word);
      Value b = LLVM::BitcastOp::create(k.b, k.loc, bf16x2, scale2);
      return LLVM::BitcastOp::create(k.b, k.loc, k.i32,
                                     arith::MulFOp::create(k.b, k.loc, a, b));
    };
    SmallVector<Value> out;
    if (p.fourBit()) {
      Value word = raw.words[0];
      Value hiLo = ci32(0x3F3F3F00), hiHi = ci32(0x40404040);
      Value loLo = ci32(static_cast<int32_t>(0xC0800000u)),
            loHi = ci32(static_cast<int32_t>(0xC0804000u));
      for (int64_t half = 0; half < 2; ++half) {
        Value codes = half ? shr(word, 16) : word; // codes 4 half + 0..3
        Value sel = andC(codes, 0x7777);
        Value hi = prmt(hiLo, hiHi, sel), lo = prmt(loLo, loHi, sel);
        Value w01 = prmt(lo, hi, ci32(0x5140)),
              w23 = prmt(lo, hi, ci32(0x7362));
        // Signs: code bits 3, 7, 11, 15 to bits 15, 31 of the two words.
        Value s01 = orI(andC(shl(codes, 12), 0x8000),
                        andC(shl(codes, 24), 0x80000000u));
        Value s23 =
            orI(andC(shl(codes, 4), 0x8000), andC(shl(codes, 16), 0x80000000u));
        out.push_back(scaled(orI(w01, s01)));
        out.push_back(scaled(orI(w23, s23)));
      }
      return out;
    }
    // E4M3 pairs: cvt.rn.f16x2.e4m3x2 (exact, NaN stays NaN), widened to
    // FP32 and narrowed to bf16 (exact: 4 significant bits;
    // e4m3PairToBF16). On the H200 this ran faster than building the bf16
    // bits with integer operations in the memory-bound matrix-vector paths
    // (docs/perf.md, seventh session); the tile GEMM may take the integer
    // decode (--gpu-e4m3-integer-decode).
    if (integerE4M3 && !scale2) {
      BytePermute permute = [&](Value lo, Value hi, Value sel) {
        return prmt(lo, hi, sel);
      };
      for (int64_t l = 0; l < 2; ++l) {
        Value word =
            LLVM::ExtractElementOp::create(k.b, k.loc, raw.words[0], ci32(l));
        llvm::append_range(out, e4m3WordToBF16(k, permute, word));
      }
      return out;
    }
    for (int64_t l = 0; l < 2; ++l) {
      Value word =
          LLVM::ExtractElementOp::create(k.b, k.loc, raw.words[0], ci32(l));
      for (int64_t pair = 0; pair < 2; ++pair)
        out.push_back(
            scaled(e4m3PairToBF16(*this, pair ? shr(word, 16) : word)));
    }
    return out;
  }
  /// True when a packed weight's values without their tail factor are
  /// f16 numbers as stored, so that f16 tensor-core operands take them in
  /// one conversion per pair (decodeWeightF16): E4M3 with a per-tensor (or
  /// per-matrix) FP32 scale. Every E4M3 value is an f16 one; block scales
  /// would have to be folded into the operand (E8M0 ones can leave f16's
  /// range) and are left to decodeWeightBF16.
  static bool packedF16Format(const PackedWeight &p) {
    return !p.fourBit() && isa<Float8E4M3FNType>(p.format.getStorageType()) &&
           isa<bsq::FP8Type>(p.format) && p.format.getBlockShape().empty();
  }
  /// loadWeightRaw's 8 elements of a packedF16Format weight as 4 words of
  /// f16 pairs (elements 2i, 2i + 1 in word i, the first in the low half):
  /// one `cvt.rn.f16x2.e4m3x2` per pair, exact (NaN stays NaN).
  SmallVector<Value> decodeWeightF16(const WeightRef &w, const WeightRaw &raw) {
    assert(packedF16Format(*w.packed) && "decodeWeightF16: E4M3 per tensor");
    (void)w;
    return e4m3WordsToF16(raw.words[0], 2);
  }
  /// The E4M3 bytes of `bytes` (a vector of `count` i32) as 2 count words
  /// of f16 pairs (bytes 2i, 2i + 1 in word i, the first in the low half):
  /// one `cvt.rn.f16x2.e4m3x2` per pair, exact (NaN stays NaN).
  SmallVector<Value> e4m3WordsToF16(Value bytes, int64_t count) {
    SmallVector<Value> out;
    for (int64_t l = 0; l < count; ++l) {
      Value word = LLVM::ExtractElementOp::create(k.b, k.loc, bytes, ci32(l));
      out.push_back(e4m3PairToF16(*this, word));
      out.push_back(e4m3PairToF16(
          *this, arith::ShRUIOp::create(k.b, k.loc, word, ci32(16))));
    }
    return out;
  }
  SmallVector<Value> loadWeight8(const WeightRef &w, Value index) {
    return decodeWeight8(w, loadWeightRaw(w, index));
  }
  /// Loop steps of 8 weight elements per lane whose loads a warp loop
  /// issues together: unrollOf for plain weights; for packed ones (4 or 8
  /// bytes per step and lane instead of 16) the largest divisor of `iters`
  /// keeping about 64 bytes per lane in flight, as 4 steps of bf16 do.
  static int64_t weightUnroll(const WeightRef &w, int64_t iters) {
    if (!w.packed)
      return unrollOf(iters);
    const int64_t most = w.packed->fourBit() ? 16 : 8;
    for (int64_t u = std::min(most, iters); u > 1; --u)
      if (iters % u == 0)
        return u;
    return 1;
  }
  Value eqI32(Value a, int64_t v) { return k.icmp(CmpI::eq, a, ci32(v)); }
  /// D = A B + C with mma.sync m16n8k16, bf16 A (4 x i32) and B (2 x i32),
  /// FP32 C and D (4 each); with `f16` A and B are f16 pairs instead.
  SmallVector<Value> mma(ArrayRef<Value> a, ArrayRef<Value> b,
                         ArrayRef<Value> c, bool f16 = false) {
    MLIRContext *ctx = k.b.getContext();
    auto st =
        LLVM::LLVMStructType::getLiteral(ctx, {k.f32, k.f32, k.f32, k.f32});
    const NVVM::MMATypes in = f16 ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
    SmallVector<Value> av(a.begin(), a.end()), bv(b.begin(), b.end());
    if (f16) {
      // The f16 form takes vector<2xf16> registers.
      auto h2 = VectorType::get({2}, k.b.getF16Type());
      for (Value &v : av)
        v = LLVM::BitcastOp::create(k.b, k.loc, h2, v);
      for (Value &v : bv)
        v = LLVM::BitcastOp::create(k.b, k.loc, h2, v);
    }
    Value r = NVVM::MmaOp::create(
        k.b, k.loc, st, av, bv, c, {16, 8, 16}, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{in, in},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    SmallVector<Value> out;
    for (int64_t i = 0; i < 4; ++i)
      out.push_back(LLVM::ExtractValueOp::create(k.b, k.loc, r, i));
    return out;
  }
  /// Two FP32 values as a bf16 pair (round to nearest even), `lo` in the
  /// low half.
  Value packBF16(Value lo, Value hi) {
    auto half = [&](Value v) -> Value {
      Value h = arith::TruncFOp::create(k.b, k.loc, k.b.getBF16Type(), v);
      return arith::BitcastOp::create(k.b, k.loc, k.i16, h);
    };
    return packBits(half(lo), half(hi));
  }
  /// Two FP32 values as an f16 pair (round to nearest even), `lo` in the
  /// low half.
  Value packF16(Value lo, Value hi) {
    auto half = [&](Value v) -> Value {
      Value h = arith::TruncFOp::create(k.b, k.loc, k.b.getF16Type(), v);
      return arith::BitcastOp::create(k.b, k.loc, k.i16, h);
    };
    return packBits(half(lo), half(hi));
  }
  /// `v` rounded to `storage` (bf16: nearest even) and widened back.
  Value roundTo(Value v, Type storage) {
    if (storage.isF32())
      return v;
    Value h = arith::TruncFOp::create(k.b, k.loc, storage, v);
    return arith::ExtFOp::create(k.b, k.loc, k.f32, h);
  }
  /// Two i16 as one i32, `lo` in the low half.
  Value packBits(Value lo, Value hi) {
    Value l = arith::ExtUIOp::create(k.b, k.loc, k.i32, lo);
    Value h = arith::ExtUIOp::create(k.b, k.loc, k.i32, hi);
    return arith::OrIOp::create(k.b, k.loc, l,
                                arith::ShLIOp::create(k.b, k.loc, h, ci32(16)));
  }
  /// `count` consecutive 32-bit words from word `index` of `base`, with
  /// 16-byte loads when `aligned16` (index and count multiples of 4).
  SmallVector<Value> loadWords(Value base, Value index, int64_t count,
                               bool aligned16) {
    SmallVector<Value> out;
    if (!aligned16) {
      for (int64_t i = 0; i < count; ++i)
        out.push_back(loadI32(base, k.iadd(index, k.c(i))));
      return out;
    }
    auto vec = VectorType::get({4}, k.i32);
    for (int64_t v = 0; v < count / 4; ++v) {
      Value x = LLVM::LoadOp::create(
          k.b, k.loc, vec, k.gep(base, k.iadd(index, k.c(4 * v)), k.i32), 16);
      for (int64_t e = 0; e < 4; ++e)
        out.push_back(LLVM::ExtractElementOp::create(k.b, k.loc, x, ci32(e)));
    }
    return out;
  }
  Value loadI16(Value base, Value index) {
    return LLVM::LoadOp::create(k.b, k.loc, k.i16, k.gep(base, index, k.i16));
  }
  Value loadI32(Value base, Value index) {
    return LLVM::LoadOp::create(k.b, k.loc, k.i32, k.gep(base, index, k.i32));
  }
  void storeI32(Value base, Value index, Value v) {
    LLVM::StoreOp::create(k.b, k.loc, v, k.gep(base, index, k.i32));
  }
  /// A global FP32 load that bypasses the (incoherent) L1 cache.
  Value loadVolatileF(Value base, Value index) {
    return LLVM::LoadOp::create(k.b, k.loc, k.f32, k.gep(base, index, k.f32),
                                /*alignment=*/4, /*isVolatile=*/true);
  }

  KB &k;
  ModuleOp globals;
  std::string name;
  int64_t threads, warps;
  int sharedArrays = 0;
  Value tid, ctaId, numCtas, lane, warp;
  /// Named barrier of a warpgroupView's warpgroup (i32), null for the CTA.
  Value barrierId;
  /// groupView: the group of this view among sharedGroups in the CTA, each
  /// with shared arrays of its own.
  Value sharedGroup;
  int64_t sharedGroups = 1;
  /// NVFP4 cache values are decoded by the hardware E2M1 conversions
  /// (GpuTarget::e2m1Convert, nvfp4CodesToOperandsE2M1) instead of the table.
  bool e2m1 = false;
  /// Shared memory (`scratchBytes` bytes) that the kernel's path for steps
  /// of few tokens may use: a wide-tile kernel's dynamic shared memory,
  /// idle below the tile path (wideTileSwitch). Null elsewhere.
  Value scratch;
  int64_t scratchBytes = 0;
};

/// `for (i = global thread; i < count; i += all threads) body(i)`.
void threadLoop(GK &g, Value count, const std::function<void(Value)> &body) {
  KB &k = g.k;
  Value first = k.iadd(k.imul(g.ctaId, k.c(g.threads)), g.tid);
  Value step = k.imul(g.numCtas, k.c(g.threads));
  auto loop = scf::ForOp::create(k.b, k.loc, first, count, step);
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

//===----------------------------------------------------------------------===//
// FP8 and NVFP4 caches as bf16 mma operands
//===----------------------------------------------------------------------===//

/// True for the cache formats whose rows the tensor-core kernels decode to
/// f16 or bf16 operands (decodeCacheRowRaw): FP8 E4M3 and NVFP4.
bool isDecodedCache(msa::PagedCacheType type) {
  return isa<Float8E4M3FNType>(type.getElementType()) || isNVFP4Cache(type);
}

static TuningOpt<bool>
    cacheF16Operands("gpu-cache-f16-operands", true,
                     "The tensor-core attention kernels take FP8 and NVFP4 "
                     "cache values (and the queries) as f16 operands, else as "
                     "bf16 ones (tuning; the indexer multiplies E4M3)");

/// True when the tensor-core attention decodes `type`'s rows to f16
/// operands (and converts the queries to f16, queryWordsToF16): FP8 and
/// NVFP4 caches unless --gpu-cache-f16-operands=false. E4M3 values are
/// exact in both f16 and bf16; f16 takes one conversion per pair of E4M3
/// bytes, bf16 four (E4M3 -> f16 -> FP32 -> bf16). On the H200 at 128K
/// (docs/perf.md, tenth session) FP8 dense attention ran 12 % faster at
/// batch 8, NVFP4 (same table lookups either way) 1 %.
bool f16Operands(msa::PagedCacheType type) {
  return isDecodedCache(type) && cacheF16Operands;
}

/// True when a lane's slices of `n` channels of a `type` cache row (at
/// multiples of n, as the tensor-core kernels read them; cacheRowRaw)
/// never straddle an NVFP4 scale block of 16 values: n divides 16 or 16
/// divides n. Always true for other formats. (Heads of 96 channels split
/// over 4 lanes give 24-channel slices: those kernels cannot read such an
/// NVFP4 row, so the op keeps its generic kernel.)
bool cacheSlicesFit(msa::PagedCacheType type, int64_t n) {
  return !isNVFP4Cache(type) || n % 16 == 0 || (n > 0 && 16 % n == 0);
}

/// The 32-bit words of nvfp4Table's tables (256 rows of 4).
constexpr int64_t kNvfp4TableWords = 1024;

/// The NVFP4 decode table of the kernel (nvfp4F16Table with `f16`
/// operands, else nvfp4BF16Table) when `type` is an NVFP4 cache that the
/// kernel decodes by table lookups (not g.e2m1), else a null value.
Value nvfp4Table(GK &g, msa::PagedCacheType type, bool f16) {
  if (!isNVFP4Cache(type) || g.e2m1)
    return Value();
  static const std::array<int32_t, 1024> f16Table = nvfp4F16Table(),
                                         bf16Table = nvfp4BF16Table();
  return g.constantWords(f16 ? f16Table : bf16Table);
}

/// Two E4M3 bytes (a vector<2xi8>, channel 2i first) as a vector<2xf16>,
/// exactly: one `cvt.rn.f16x2.e4m3x2` (every E4M3 value is a normal f16 or
/// zero; NaN stays NaN).
Value e4m3x2ToF16x2(GK &g, Value v) {
  KB &k = g.k;
  return NVVM::ConvertF8x2ToF16x2Op::create(
      k.b, k.loc, VectorType::get({2}, k.b.getF16Type()), v, /*relu=*/false,
      Float8E4M3FNType::get(k.b.getContext()));
}

/// e4m3x2ToF16x2 as one word of f16 pairs.
Value e4m3x2ToF16(GK &g, Value v) {
  return LLVM::BitcastOp::create(g.k.b, g.k.loc, g.k.i32, e4m3x2ToF16x2(g, v));
}

/// Two E4M3 bytes (a vector<2xi8>, channel 2i first) as one word of bf16
/// pairs, exactly: e4m3x2ToF16x2, f16 -> FP32 (exact), FP32 -> bf16
/// (exact: E4M3 values have 4 significant bits and lie within bf16's
/// normal range).
Value e4m3x2ToBF16(GK &g, Value v) {
  KB &k = g.k;
  Value f = arith::ExtFOp::create(k.b, k.loc, VectorType::get({2}, k.f32),
                                  e4m3x2ToF16x2(g, v));
  Value b = arith::TruncFOp::create(k.b, k.loc,
                                    VectorType::get({2}, k.b.getBF16Type()), f);
  return LLVM::BitcastOp::create(k.b, k.loc, k.i32, b);
}

/// Bits 0-15 of the i32 `pair` as the vector<2xi8> of two E4M3 bytes
/// (channel 2i in the low byte).
Value e4m3PairBytes(GK &g, Value pair) {
  KB &k = g.k;
  return LLVM::BitcastOp::create(
      k.b, k.loc, VectorType::get({2}, k.b.getI8Type()),
      arith::TruncIOp::create(k.b, k.loc, k.i16, pair));
}

/// e4m3x2ToBF16 of bits 0-15 of the i32 `pair` (channel 2i in the low
/// byte).
Value e4m3PairToBF16(GK &g, Value pair) {
  return e4m3x2ToBF16(g, e4m3PairBytes(g, pair));
}

/// e4m3x2ToF16 of bits 0-15 of the i32 `pair` (channel 2i in the low byte).
Value e4m3PairToF16(GK &g, Value pair) {
  return e4m3x2ToF16(g, e4m3PairBytes(g, pair));
}

/// Two E4M3 bytes in bits 0-15 of `pair` as an f16 (e4m3PairToF16) or a
/// bf16 (e4m3PairToBF16) operand word.
Value e4m3PairToOperand(GK &g, Value pair, bool f16) {
  return f16 ? e4m3PairToF16(g, pair) : e4m3PairToBF16(g, pair);
}

/// A word of four E4M3 bytes as two operand words (e4m3PairToOperand):
/// bytes 0, 1 and bytes 2, 3.
std::array<Value, 2> e4m3WordToOperands(GK &g, Value w, bool f16) {
  KB &k = g.k;
  return {e4m3PairToOperand(g, w, f16),
          e4m3PairToOperand(
              g, arith::ShRUIOp::create(k.b, k.loc, w, g.ci32(16)), f16)};
}

/// A word of two bf16 values as a word of f16 pairs (round to nearest
/// even), each value first times `factor` (an FP32 power of two; none when
/// null).
Value bf16WordToF16(GK &g, Value w, Value factor) {
  KB &k = g.k;
  auto f32Of = [&](Value bits) -> Value {
    return arith::BitcastOp::create(k.b, k.loc, k.f32, bits);
  };
  Value lo = f32Of(arith::ShLIOp::create(k.b, k.loc, w, g.ci32(16)));
  Value hi =
      f32Of(arith::AndIOp::create(k.b, k.loc, w, g.ci32(int32_t(0xFFFF0000u))));
  if (factor) {
    lo = k.mul(lo, factor);
    hi = k.mul(hi, factor);
  }
  Value v = LLVM::UndefOp::create(k.b, k.loc, VectorType::get({2}, k.f32));
  v = LLVM::InsertElementOp::create(k.b, k.loc, v, lo, g.ci32(0));
  v = LLVM::InsertElementOp::create(k.b, k.loc, v, hi, g.ci32(1));
  Value h = arith::TruncFOp::create(k.b, k.loc,
                                    VectorType::get({2}, k.b.getF16Type()), v);
  return LLVM::BitcastOp::create(k.b, k.loc, k.i32, h);
}

/// The query words of a tensor-core kernel whose cache operands are f16
/// (FP8 and NVFP4 caches): `words` (bf16 pairs, this lane's) become f16
/// pairs in place, and the result is the FP32 power of two f with
/// q = f * q16, to multiply into the score scale. f = 1 unless some query
/// value of the warp reaches 2^16 (bf16 exponent field >= 143, beyond
/// f16's 65504) or is Inf or NaN (a uniform branch): then every word is
/// divided by f = 2^f16QueryShift(e), e the warp's largest finite
/// exponent field, so that the largest finite value lies in [2^14, 2^16);
/// Inf and NaN stay Inf and NaN (the other heads keep their values).
/// Exact for values f16 holds as normal numbers (2^-14 f and up); smaller
/// ones are rounded to f16's subnormal steps of 2^-24 f, below the
/// rounding of an FP32 score of the others.
Value queryWordsToF16(GK &g, MutableArrayRef<Value> words) {
  KB &k = g.k;
  auto andI = [&](Value x, int64_t m) -> Value {
    return arith::AndIOp::create(k.b, k.loc, x, g.ci32(int32_t(m)));
  };
  // bf16OverflowsF16 on both halves: bit 15 of a half of
  // (|w| + kF16OverflowBias) is set iff the half is >= 0x4780.
  const int64_t bias = int64_t(kF16OverflowBias) << 16 | kF16OverflowBias;
  Value big = g.ci32(0);
  for (Value w : words)
    big = arith::OrIOp::create(
        k.b, k.loc, big,
        arith::AddIOp::create(k.b, k.loc, andI(w, 0x7FFF7FFF), g.ci32(bias)));
  Value any =
      g.anyLane(k.icmp(CmpI::ne, andI(big, int64_t(0x80008000)), g.ci32(0)));
  auto f32Of = [&](Value bits) -> Value {
    return arith::BitcastOp::create(k.b, k.loc, k.f32, bits);
  };
  // Word w as f16 pairs, each half times `inv` (an FP32 power of two).
  auto convert = [&](Value w, Value inv) { return bf16WordToF16(g, w, inv); };
  SmallVector<Type> types(words.size() + 1, k.i32);
  SmallVector<Value> out = g.ifElse(
      any, types,
      [&]() -> SmallVector<Value> {
        // The warp's largest finite bf16 exponent field e (Inf and NaN,
        // field 255, stay Inf and NaN in f16 and must not shrink the
        // other heads' values: f16QueryShift).
        Value e = g.ci32(0);
        for (Value w : words)
          for (int64_t half = 0; half < 2; ++half) {
            Value x =
                half ? arith::ShRUIOp::create(k.b, k.loc, w, g.ci32(16)) : w;
            Value ex =
                andI(arith::ShRUIOp::create(k.b, k.loc, x, g.ci32(7)), 0xFF);
            ex = k.select(g.eqI32(ex, 255), g.ci32(0), ex);
            e = arith::MaxUIOp::create(k.b, k.loc, e, ex);
          }
        for (int64_t off : {1, 2, 4, 8, 16})
          e = arith::MaxUIOp::create(k.b, k.loc, e, g.shflXor(e, off));
        // Divide by 2^shift, shift = max(e - kF16QueryShiftBase, 0): inv
        // has exponent field 127 - shift.
        Value shift = arith::MaxSIOp::create(
            k.b, k.loc,
            arith::SubIOp::create(k.b, k.loc, e, g.ci32(kF16QueryShiftBase)),
            g.ci32(0));
        Value inv = f32Of(arith::ShLIOp::create(
            k.b, k.loc, arith::SubIOp::create(k.b, k.loc, g.ci32(127), shift),
            g.ci32(23)));
        SmallVector<Value> r;
        for (Value w : words)
          r.push_back(convert(w, inv));
        r.push_back(shift);
        return r;
      },
      [&]() -> SmallVector<Value> {
        SmallVector<Value> r;
        for (Value w : words)
          r.push_back(convert(w, Value()));
        r.push_back(g.ci32(0));
        return r;
      });
  for (size_t i = 0; i < words.size(); ++i)
    words[i] = out[i];
  // f = 2^shift.
  return f32Of(arith::ShLIOp::create(
      k.b, k.loc, arith::AddIOp::create(k.b, k.loc, out.back(), g.ci32(127)),
      g.ci32(23)));
}

/// The E4M3 values of n NVFP4 codes by the hardware conversions of
/// targets with GpuTarget::e2m1Convert (sm_100a), no table: per block the
/// scale byte as f16 in both halves (`cvt.rn.f16x2.e4m3x2` of the byte
/// twice), per code byte (2 codes, the low nibble first) the E2M1 values
/// as f16x2 (`cvt.rn.f16x2.e2m1x2`), their product with the scale
/// (`mul.rn.f16x2`), rounded to E4M3 (`cvt.rn.satfinite.e4m3x2.f16x2`):
/// n / 2 vector<2xi8>, code 2i first. Every step is exact but the rounding
/// to E4M3, which is the spec's (CacheDecode.h says why;
/// unittests/Codegen/E2M1DecodeTest.cpp checks every code and scale byte).
/// `codes` as nvfp4CodesToOperands's; `then`, if given, maps each pair as
/// it is made (the operands' widening).
SmallVector<Value>
nvfp4CodesToE4M3PairsE2M1(GK &g, ArrayRef<Value> codes, int64_t n,
                          const std::function<Value(int64_t)> &scaleByte,
                          const std::function<Value(Value)> &then = nullptr) {
  KB &k = g.k;
  MLIRContext *ctx = k.b.getContext();
  auto i8 = k.b.getI8Type();
  auto i8x2 = VectorType::get({2}, i8);
  auto f16x2 = VectorType::get({2}, k.b.getF16Type());
  auto e4m3 = Float8E4M3FNType::get(ctx);
  SmallVector<Value> out;
  Value scale; // f16x2, the block's scale in both halves
  for (int64_t byte = 0; byte < n / 2; ++byte) {
    // c0 is a multiple of n: a new scale every 16 channels (8 bytes).
    if (byte % 8 == 0) {
      Value both = arith::MulIOp::create(k.b, k.loc, scaleByte(byte / 8),
                                         g.ci32(0x0101));
      Value bytes = LLVM::BitcastOp::create(
          k.b, k.loc, i8x2, arith::TruncIOp::create(k.b, k.loc, k.i16, both));
      scale = NVVM::ConvertF8x2ToF16x2Op::create(k.b, k.loc, f16x2, bytes,
                                                 /*relu=*/false, e4m3);
    }
    Value word = codes[byte / 4];
    if (byte % 4)
      word = arith::ShRUIOp::create(k.b, k.loc, word, g.ci32(8 * (byte % 4)));
    Value pair = NVVM::ConvertF4x2ToF16x2Op::create(
        k.b, k.loc, f16x2, arith::TruncIOp::create(k.b, k.loc, i8, word),
        /*relu=*/false, Float4E2M1FNType::get(ctx));
    Value product = arith::MulFOp::create(k.b, k.loc, pair, scale);
    Value rounded = NVVM::ConvertF16x2ToF8x2Op::create(
        k.b, k.loc, i8x2, product, /*relu=*/false, e4m3);
    out.push_back(then ? then(rounded) : rounded);
  }
  return out;
}

/// nvfp4CodesToOperands by the hardware conversions of targets with
/// GpuTarget::e2m1Convert (nvfp4CodesToE4M3PairsE2M1), each E4M3 pair
/// widened to f16 as an FP8 cache's bytes are (e4m3x2ToF16, or
/// e4m3x2ToBF16 without `f16`).
SmallVector<Value>
nvfp4CodesToOperandsE2M1(GK &g, ArrayRef<Value> codes, int64_t n, bool f16,
                         const std::function<Value(int64_t)> &scaleByte) {
  return nvfp4CodesToE4M3PairsE2M1(g, codes, n, scaleByte, [&](Value v) {
    return f16 ? e4m3x2ToF16(g, v) : e4m3x2ToBF16(g, v);
  });
}

/// The n / 2 words of f16 (with `f16`) or bf16 pairs of n NVFP4 codes:
/// `codes` holds n / 8 words of 8 codes (nvfp4OctetWords) when n is a
/// multiple of 8, else one quad of 4 codes in bits 0-15 (nvfp4Words;
/// n = 4). Per 16 values the 4-word row of `table` (nvfp4Table's, of the
/// same operand type) for the scale byte scaleByte(j) (i32) of block j of
/// the n values, read when the block starts. With g.e2m1 by the hardware
/// conversions instead (nvfp4CodesToOperandsE2M1; `table` is null).
SmallVector<Value>
nvfp4CodesToOperands(GK &g, ArrayRef<Value> codes, int64_t n, Value table,
                     bool f16, const std::function<Value(int64_t)> &scaleByte) {
  if (g.e2m1)
    return nvfp4CodesToOperandsE2M1(g, codes, n, f16, scaleByte);
  KB &k = g.k;
  SmallVector<Value> out;
  auto vec = VectorType::get({4}, k.i32);
  BytePermute prmt = [&](Value lo, Value hi, Value sel) {
    return g.prmt(lo, hi, sel);
  };
  auto tableRow = [&](int64_t block) {
    Value sb = scaleByte(block);
    Value at = k.gep(table,
                     arith::IndexCastOp::create(
                         k.b, k.loc, k.b.getIndexType(),
                         arith::MulIOp::create(k.b, k.loc, sb, g.ci32(4))),
                     k.i32);
    Value tv = LLVM::LoadOp::create(k.b, k.loc, vec, at, 16);
    SmallVector<Value> row;
    for (int64_t e = 0; e < 4; ++e)
      row.push_back(LLVM::ExtractElementOp::create(k.b, k.loc, tv, g.ci32(e)));
    return row;
  };
  if (n % 8 != 0) {
    std::array<Value, 2> words = nvfp4Words(k, prmt, codes[0], tableRow(0));
    return {words[0], words[1]};
  }
  SmallVector<Value> row;
  for (int64_t i = 0; i < n / 8; ++i) {
    // c0 is a multiple of n: a new scale every 16 channels.
    if ((8 * i) % 16 == 0)
      row = tableRow(8 * i / 16);
    llvm::append_range(out, nvfp4OctetWords(k, prmt, codes[i], row));
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Indexer: block scores
//===----------------------------------------------------------------------===//

SmallVector<Value> cacheRowRaw(GK &g, msa::PagedCacheType type, Value cache,
                               Value phys, Value kvHead, Value key, Value c0,
                               int64_t n);
SmallVector<Value> decodeCacheRowRaw(GK &g, msa::PagedCacheType type,
                                     ArrayRef<Value> raw, int64_t n,
                                     Value table, bool f16,
                                     bool e4m3Table = false);
int64_t nvfp4RawScaleBytes(int64_t n);
/// Scale byte j (the 16-value block j) of the `n` channels that
/// cacheRowRaw loaded, from its scale words `scaleWords` (the words after
/// the codes): the word itself when it holds one scale (n <= 16), else
/// byte j % 4 of word j / 4 (as an i32).
Value nvfp4RawScaleByte(GK &g, ArrayRef<Value> scaleWords, int64_t n,
                        int64_t j);

/// The operands and shapes of msa.index_score as both indexer kernels read
/// them: queries [T, G, dI], the paged index-key cache, block table, seq
/// ids, positions, out [G, T, MB]; T and MB from the scalars, and a shared
/// array for each warp's per-group maxima.
struct IndexScoreArgs {
  IndexScoreArgs(GK &g, msa::IndexScoreOp op)
      : q(g.k.ptr(0)), cache(g.k.ptr(1)), table(g.k.ptr(2)), seqs(g.k.ptr(3)),
        pos(g.k.ptr(4)), out(g.k.ptr(5)), type(op.getIndexCache().getType()),
        groups(shapeOf(op.getIndexQueries())[1]), d(type.getHeadDim()),
        page(type.getPageSize()), scale(op.getScale().convertToFloat()),
        T(g.k.scalar(0)), MB(g.k.scalar(2)),
        partial(g.shared(g.k.f32, g.warps * groups)) {}
  Value q, cache, table, seqs, pos, out;
  msa::PagedCacheType type;
  int64_t groups, d, page;
  float scale;
  Value T, MB, partial;
};

/// out[g, t, blk] = -inf for every index head g (a block past the token's
/// position).
void indexScorePastBlock(GK &g, const IndexScoreArgs &a, Value negInf, Value t,
                         Value blk) {
  KB &k = g.k;
  for (int64_t gg = 0; gg < a.groups; ++gg)
    k.ifThen(g.eq(g.tid, k.c(gg)), [&] {
      k.storeF(a.out,
               k.iadd(k.imul(k.iadd(k.imul(k.c(gg), a.T), t), a.MB), blk),
               negInf, k.f32);
    });
}

/// After each warp has left its per-group maxima in partial[warp * G + g]:
/// out[g, t, blk] = their maximum (a NaN never wins), between two CTA
/// barriers.
void indexScoreStoreMaxima(GK &g, const IndexScoreArgs &a, Value negInf,
                           Value t, Value blk) {
  KB &k = g.k;
  g.sync();
  k.ifThen(k.icmp(CmpI::ult, g.tid, k.c(a.groups)), [&] {
    Value r = negInf;
    for (int64_t wi = 0; wi < g.warps; ++wi) {
      Value v = k.loadF(a.partial, k.iadd(k.c(wi * a.groups), g.tid), k.f32);
      r = k.select(k.fcmp(CmpF::OGT, v, r), v, r);
    }
    k.storeF(a.out, k.iadd(k.imul(k.iadd(k.imul(g.tid, a.T), t), a.MB), blk), r,
             k.f32);
  });
  g.sync();
}

/// The frame both indexer kernels share, for CTA work items w = (t, b): a
/// block past the token's position gets -inf for every group
/// (indexScorePastBlock); otherwise `warpMaxima(t, p, seq, b, phys,
/// carried)` (p = positions[t], seq = seq_ids[t], phys = the block's cache
/// page) leaves each warp's per-group maxima in partial[warp * G + g] and
/// the CTA writes their maximum to out[g, t, b] (indexScoreStoreMaxima).
/// `carried` are values the items pass on, from `init`: warpMaxima returns
/// the next item's (a past block passes them on unchanged). Loading the
/// next item's metadata (position, sequence, page) during the current one
/// made the indexer slower on the H200 (docs/perf.md, fifteenth session).
void indexScoreFrame(
    GK &g, const IndexScoreArgs &a, Value negInf, ValueRange init,
    const std::function<SmallVector<Value>(Value, Value, Value, Value, Value,
                                           ValueRange)> &warpMaxima) {
  KB &k = g.k;
  auto loop = scf::ForOp::create(k.b, k.loc, g.ctaId, k.imul(a.T, a.MB),
                                 g.numCtas, init);
  OpBuilder::InsertionGuard guard(k.b);
  // A loop without carried values comes with its terminator.
  Block *body = loop.getBody();
  const bool terminated = init.empty();
  if (terminated)
    k.b.setInsertionPoint(body->getTerminator());
  else
    k.b.setInsertionPointToEnd(body);
  Value w = loop.getInductionVar();
  SmallVector<Value> carried(loop.getRegionIterArgs());
  Value t = k.idiv(w, a.MB), blk = k.irem(w, a.MB);
  Value p = k.loadIndex(a.pos, t);
  Value seq = k.loadIndex(a.seqs, t);
  Value past = k.icmp(CmpI::sgt, blk, k.idiv(p, k.c(a.page)));
  SmallVector<Type> types(init.getTypes());
  SmallVector<Value> next = g.ifElse(
      past, types,
      [&]() -> SmallVector<Value> {
        indexScorePastBlock(g, a, negInf, t, blk);
        return carried;
      },
      [&]() -> SmallVector<Value> {
        Value phys = pageOf(k, a.table, seq, blk);
        SmallVector<Value> out = warpMaxima(t, p, seq, blk, phys, carried);
        indexScoreStoreMaxima(g, a, negInf, t, blk);
        return out;
      });
  if (!terminated)
    scf::YieldOp::create(k.b, k.loc, next);
}

/// indexScoreFrame with nothing carried.
void indexScoreFrame(
    GK &g, const IndexScoreArgs &a, Value negInf,
    const std::function<void(Value, Value, Value, Value, Value)> &warpMaxima) {
  indexScoreFrame(g, a, negInf, {},
                  [&](Value t, Value p, Value seq, Value blk, Value phys,
                      ValueRange) -> SmallVector<Value> {
                    warpMaxima(t, p, seq, blk, phys);
                    return {};
                  });
}

/// Index-key lanes: dI / 8 lanes share one key, each holding 8 channels.
bool indexScoreFits(msa::IndexScoreOp op, int64_t threads) {
  msa::PagedCacheType type = op.getIndexCache().getType();
  const int64_t d = type.getHeadDim(),
                groups = shapeOf(op.getIndexQueries())[1];
  if (type.getHeads() != 1 || d % 8 || d / 8 > kWarp ||
      !llvm::isPowerOf2_64(d / 8) || groups > 8 || threads % kWarp)
    return false;
  const int64_t keysPerStep = (threads / kWarp) * (kWarp / (d / 8));
  Type ce = type.getElementType();
  return type.getPageSize() % keysPerStep == 0 && (ce.isBF16() || ce.isF32());
}

/// out[g, t, b] = max over keys j <= pos[t] of block b of
/// scale * q[t, g] . key[j]; -inf for blocks past the token's position.
/// One CTA per (t, b); dI / 8 lanes per key.
void indexScoreKernel(GK &g, msa::IndexScoreOp op) {
  KB &k = g.k;
  const IndexScoreArgs a(g, op);
  Value q = a.q, cache = a.cache;
  msa::PagedCacheType type = a.type;
  const int64_t groups = a.groups, d = a.d, page = a.page;
  const int64_t lanesPerKey = d / 8, keysPerWarp = kWarp / lanesPerKey;
  Type qe = elementOf(op.getIndexQueries()), ce = type.getElementType();
  const float scale = a.scale;
  Value sub = k.idiv(g.lane, k.c(lanesPerKey));
  Value part = k.irem(g.lane, k.c(lanesPerKey));
  Value negInf = k.cf(-INFINITY);

  indexScoreFrame(
      g, a, negInf, [&](Value t, Value p, Value, Value blk, Value phys) {
        SmallVector<SmallVector<Value>> qv;
        for (int64_t gg = 0; gg < groups; ++gg) {
          Value off =
              k.iadd(k.imul(k.iadd(k.imul(t, k.c(groups)), k.c(gg)), k.c(d)),
                     k.imul(part, k.c(8)));
          SmallVector<Value> v;
          for (int64_t e = 0; e < 8; ++e)
            v.push_back(k.loadF(q, k.iadd(off, k.c(e)), qe));
          qv.push_back(v);
        }
        Value first = k.iadd(k.imul(g.warp, k.c(keysPerWarp)), sub);
        SmallVector<Value> init(groups, negInf);
        SmallVector<Value> m = k.reduceN(
            k.c(0), k.c(page / (g.warps * keysPerWarp)), init,
            [&](Value it, ValueRange acc) -> SmallVector<Value> {
              Value slot =
                  k.iadd(first, k.imul(it, k.c(g.warps * keysPerWarp)));
              Value j = k.iadd(k.imul(blk, k.c(page)), slot);
              Value koff = k.iadd(cacheOffset(k, phys, k.c(0), slot, type),
                                  k.imul(part, k.c(8)));
              SmallVector<Value> kv = g.load8(cache, koff, ce);
              Value valid = k.icmp(CmpI::sle, j, p);
              SmallVector<Value> next;
              for (int64_t gg = 0; gg < groups; ++gg) {
                Value s = k.mul(kv[0], qv[gg][0]);
                for (int64_t e = 1; e < 8; ++e)
                  s = k.add(s, k.mul(kv[e], qv[gg][e]));
                s = k.mul(g.warpSum(s, lanesPerKey), k.cf(scale));
                // A NaN score never wins the max-pool.
                Value better = g.andI(valid, k.fcmp(CmpF::OGT, s, acc[gg]));
                next.push_back(k.select(better, s, acc[gg]));
              }
              return next;
            });
        for (int64_t gg = 0; gg < groups; ++gg) {
          Value v = m[gg];
          for (int64_t off = kWarp / 2; off >= 1; off /= 2) {
            Value o = g.shflXor(v, off);
            v = k.select(k.fcmp(CmpF::OGT, o, v), o, v);
          }
          k.ifThen(g.eq(g.lane, k.c(0)), [&] {
            k.storeF(a.partial, k.iadd(k.imul(g.warp, k.c(groups)), k.c(gg)), v,
                     k.f32);
          });
        }
      });
}

/// The tensor-core indexer on CTAs of `threads` threads: index queries
/// bf16, index keys bf16, FP8 or NVFP4 (their E4M3 values,
/// indexKeyE4M3Words), dI a multiple of 32, at most 8 index heads.
bool indexScoreMmaFits(msa::IndexScoreOp op, int64_t threads) {
  msa::PagedCacheType type = op.getIndexCache().getType();
  const int64_t d = type.getHeadDim(),
                groups = shapeOf(op.getIndexQueries())[1];
  // Each lane reads a slice of dI / 4 channels of a key.
  return type.getHeads() == 1 && d % 32 == 0 && d <= 256 && groups <= 8 &&
         elementOf(op.getIndexQueries()).isBF16() &&
         (type.getElementType().isBF16() || isDecodedCache(type)) &&
         cacheSlicesFit(type, d / 4) &&
         type.getPageSize() % ((threads / kWarp) * 8) == 0;
}

static TuningOpt<int>
    indexCtasPerSM("gpu-index-ctas-per-sm", 0,
                   "CTAs per multiprocessor that the tensor-core indexer "
                   "launches and keeps resident, registers capped to fit "
                   "(0: indexCtasPerSM's choice; tuning)");

static TuningOpt<llvm::cl::boolOrDefault>
    indexKeysAsA("gpu-index-keys-as-a", llvm::cl::BOU_UNSET,
                 "The tensor-core indexer takes 16 keys as the A operand "
                 "of each mma and the index heads as B (default: with "
                 "FP8 and NVFP4 keys; tuning)");

/// True when the tensor-core indexer multiplies 16 keys as the A operand
/// of each mma against the index heads as B, instead of the heads as A
/// (rows past G zero) against 8 keys as B. On the H200 at 128K (docs/perf.md,
/// sixteenth session; us at batch 8 / 1; measured on 128-thread CTAs, 5 per
/// SM for FP8 and NVFP4 keys and kGpuCtasPerSM for bf16, before
/// indexThreadsFor made the CTAs smaller):
///   - E4M3 products (FP8 and NVFP4 keys) take keys as A: half the mma, and
///     the 128-thread kernel fits 5 CTAs per SM without spills. FP8 41.3-41.4 /
///     10.9-11.0 against 44.7-44.9 / 11.9-12.1 for the bf16-product kernel
///     before; NVFP4 47.8-47.9 / 12.2-12.4 against 52.1-52.6 / 12.7-12.9.
///     With the heads as A the E4M3 kernel was slower than before
///     (fifteenth session: FP8 49.7-50.8 at batch 8, spilling at 4-5);
///   - bf16 keys keep the heads as A: 68.4-68.5 / 14.7 against 68.9-69.0 /
///     14.7-14.8 as A.
bool indexKeysAsAFor(msa::PagedCacheType type) {
  if (indexKeysAsA != llvm::cl::BOU_UNSET)
    return indexKeysAsA == llvm::cl::BOU_TRUE;
  return isDecodedCache(type);
}

static TuningOpt<bool> indexF16Mma(
    "gpu-index-f16-mma", false,
    "The tensor-core indexer with FP8 and NVFP4 keys as the A operand "
    "multiplies f16 pairs (keys widened per pair, queries once per token) "
    "with chained f16 mma.sync instead of mma.sync E4M3 (tuning)");

static TuningOpt<int>
    indexThreads("gpu-index-threads", 0,
                 "Threads per CTA of the tensor-core indexer (a multiple "
                 "of 32; 0: indexThreadsFor's choice; tuning)");

/// The CTA size of the tensor-core indexer for `op` on a target whose
/// kernels take `threads` threads, or 0 when indexScoreMmaKernel does not
/// fit. Each CTA works on one (token, block) item at a time, its warps
/// splitting the block's keys, so a smaller CTA gives each warp more keys
/// (more loads in flight per warp: the items' load-decode-mma chains
/// wait on their key loads) and lets more items be resident per SM. On
/// the H200 at 128K (docs/perf.md, sixteenth session; us at batch 8 / 1):
///   - FP8 keys take one warp (16 tiles of 8 keys) at 10 CTAs per SM:
///     38.4-38.5 / 10.6-10.8 against 41.5-41.9 / 11.1-11.2 on 4 warps (5
///     CTAs per SM) and 37.9-38.3 / 11.4-11.6 on 2 warps (6 CTAs);
///   - NVFP4 keys take two warps (8 tiles each) at 6 CTAs per SM:
///     41.3-41.9 / 11.9-12.2 against 47.9-48.0 / 12.1-12.6 on 4 warps;
///     one warp (12 CTAs) took 41.2-41.4 at batch 8 but 17.3 at batch 1,
///     where 1,024 items leave each warp one item to work through alone;
///   - bf16 keys take `threads` (their operand words, twice the FP8 ones,
///     would not fit fewer warps' registers).
int64_t indexThreadsFor(msa::IndexScoreOp op, int64_t threads) {
  msa::PagedCacheType type = op.getIndexCache().getType();
  int64_t block = threads;
  if (indexThreads > 0 && indexThreads % kWarp == 0)
    block = indexThreads;
  else if (isNVFP4Cache(type))
    block = 2 * kWarp;
  else if (isDecodedCache(type))
    block = kWarp;
  if (indexScoreMmaFits(op, block))
    return block;
  return indexScoreMmaFits(op, threads) ? threads : 0;
}

/// CTAs per multiprocessor of the tensor-core indexer's grid, declared
/// with the kernel (declareLaunch: ptxas then knows the block size and
/// caps the registers so that they stay resident), for CTAs of `block`
/// threads (indexThreadsFor). More resident CTAs keep more blocks' loads
/// in flight. On the H200 at 128K (us at batch 8 / 1):
///   - FP8 keys on one-warp CTAs take 10 (no spills; 8: 38.1-38.7 /
///     10.4-10.5, 12: 38.8-39.1 / 10.7-11.2);
///   - NVFP4 keys on two-warp CTAs take 6 (no spills; 5: 46.0-46.8 /
///     12.1, 7: 45.5-45.8 / 12.9-13.0, 8: 42.6-43.4 / 12.4 with 4 bytes
///     spilled);
///   - on 4-warp CTAs (fourteenth and sixteenth sessions), FP8 and NVFP4
///     keys took 5: FP8 41.3-41.4 / 10.9-11.0 against 43.4-44.1 / 11.0 with
///     4 and 44.1-44.6 / 12.6-12.7 with 6 (16 bytes spilled); NVFP4
///     47.8-47.9 / 12.2-12.4 against 48.5-48.7 / 12.4 with 4 and 49.9-50.2
///     / 12.5 with 6; bf16 keys take kGpuCtasPerSM: 67.5-68.1 / 14.6-14.8,
///     against 84.0-84.2 / 15.9-16.0 undeclared and 72.4-73.2 / 16.9-17.0
///     with 5.
int64_t indexCtasPerSMFor(msa::PagedCacheType type, int64_t block) {
  if (indexCtasPerSM > 0)
    return indexCtasPerSM;
  if (!isDecodedCache(type))
    return kGpuCtasPerSM;
  if (block == kWarp)
    return 10;
  if (block == 2 * kWarp)
    return 6;
  return 5;
}

/// The E4M3 words of `n` channels of an FP8 or NVFP4 index-key row, from
/// cacheRowRaw's `raw` (n / 4 words, channel 4i + e in byte e of word i):
/// FP8 bytes as loaded; NVFP4 codes by nvfp4OctetE4M3 with the rows of
/// `table` (nvfp4E4M3Table in shared memory), or with g.e2m1 by the
/// hardware conversions (nvfp4CodesToE4M3PairsE2M1). Both give
/// nvfp4ToFP8Value's bytes (up to the sign of a NaN).
SmallVector<Value> indexKeyE4M3Words(GK &g, msa::PagedCacheType type,
                                     ArrayRef<Value> raw, int64_t n,
                                     Value table) {
  KB &k = g.k;
  if (!isNVFP4Cache(type))
    return SmallVector<Value>(raw.begin(), raw.end());
  const int64_t codeWords = n / 8;
  auto scaleByte = [&](int64_t j) {
    return nvfp4RawScaleByte(g, raw.drop_front(codeWords), n, j);
  };
  SmallVector<Value> out;
  if (g.e2m1) {
    SmallVector<Value> pairs =
        nvfp4CodesToE4M3PairsE2M1(g, raw.take_front(codeWords), n, scaleByte);
    for (size_t i = 0; i < pairs.size(); i += 2) {
      auto half = [&](Value v) -> Value {
        return arith::ExtUIOp::create(
            k.b, k.loc, k.i32, LLVM::BitcastOp::create(k.b, k.loc, k.i16, v));
      };
      out.push_back(arith::OrIOp::create(
          k.b, k.loc, half(pairs[i]),
          arith::ShLIOp::create(k.b, k.loc, half(pairs[i + 1]), g.ci32(16))));
    }
    return out;
  }
  auto vec = VectorType::get({2}, k.i32);
  BytePermute prmt = [&](Value lo, Value hi, Value sel) {
    return g.prmt(lo, hi, sel);
  };
  SmallVector<Value> row;
  for (int64_t m = 0; m < codeWords; ++m) {
    // c0 is a multiple of n: a new scale every 16 channels.
    if ((8 * m) % 16 == 0) {
      Value at = k.gep(table,
                       arith::IndexCastOp::create(
                           k.b, k.loc, k.b.getIndexType(),
                           arith::MulIOp::create(
                               k.b, k.loc, scaleByte(8 * m / 16), g.ci32(2))),
                       k.i32);
      Value tv = LLVM::LoadOp::create(k.b, k.loc, vec, at, 8);
      row = {LLVM::ExtractElementOp::create(k.b, k.loc, tv, g.ci32(0)),
             LLVM::ExtractElementOp::create(k.b, k.loc, tv, g.ci32(1))};
    }
    llvm::append_range(out, nvfp4OctetE4M3(k, prmt, raw[m], row));
  }
  return out;
}

/// Two FP32 values as E4M3 bytes in bits 0-15 of an i32, `lo` in the low
/// byte: one `cvt.rn.satfinite.e4m3x2.f32` (round to nearest even,
/// saturating at +-448; NaN stays NaN).
Value e4m3Pair(GK &g, Value lo, Value hi) {
  KB &k = g.k;
  // The first operand goes to the high byte.
  return arith::ExtUIOp::create(
      k.b, k.loc, k.i32,
      NVVM::ConvertF32x2ToF8x2Op::create(
          k.b, k.loc, k.i16, hi, lo, NVVM::FPRoundingMode::RN,
          NVVM::SaturationMode::SATFINITE, /*relu=*/false,
          Float8E4M3FNType::get(k.b.getContext())));
}

/// A word of two bf16 values as the operand word (f16 pairs with `f16`,
/// else bf16 pairs) of their E4M3 roundings (e4m3Pair): the queries of the
/// q8 attention contract (msa-m3-spec §3.2), exact in either operand type.
Value bf16WordToE4M3Operand(GK &g, Value w, bool f16) {
  auto [lo, hi] = g.unpackBF16(w);
  return e4m3PairToOperand(g, e4m3Pair(g, lo, hi), f16);
}

/// Index-query words as E4M3 bytes: the 2m bf16 pair words `bf16Words`
/// (channel 2i in the low half of word i) to m words (channel 4i + e in
/// byte e of word i), each value rounded to E4M3 by
/// `cvt.rn.satfinite.e4m3x2.f32` (nearest even, +-448 for larger
/// magnitudes and infinities, NaN kept), as indexQueryE4M3.
SmallVector<Value> queryWordsToE4M3(GK &g, ArrayRef<Value> bf16Words) {
  KB &k = g.k;
  auto pairOf = [&](Value w) -> Value {
    auto [lo, hi] = g.unpackBF16(w);
    return e4m3Pair(g, lo, hi);
  };
  SmallVector<Value> out;
  for (size_t i = 0; i + 1 < bf16Words.size(); i += 2)
    out.push_back(arith::OrIOp::create(
        k.b, k.loc, pairOf(bf16Words[i]),
        arith::ShLIOp::create(k.b, k.loc, pairOf(bf16Words[i + 1]),
                              g.ci32(16))));
  return out;
}

/// `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32`: A 4 words and B
/// 2 words of E4M3 bytes, C / D 4 FP32 values (the m16n8k16 layout). By
/// the LLVM intrinsic: nvvm.mma's verifier (MLIR 22) does not take E4M3
/// operands. sm_90 has no such instruction: ptxas widens both operands to
/// f16 (F2FP) and runs two HMMA m16n8k16 whose sums it adds (FADD). Doing
/// that in the IR instead, with the queries widened once per token, was
/// no faster on the H200 (docs/perf.md, sixteenth session: indexer at 128K
/// FP8 38.1-38.3 against 38.5-38.6 us at batch 8, NVFP4 41.0-41.5 against
/// 41.1-41.2; decode dumps byte-identical).
SmallVector<Value> mmaE4M3(GK &g, ArrayRef<Value> a, ArrayRef<Value> b,
                           ArrayRef<Value> c) {
  KB &k = g.k;
  MLIRContext *ctx = k.b.getContext();
  auto st = LLVM::LLVMStructType::getLiteral(ctx, {k.f32, k.f32, k.f32, k.f32});
  SmallVector<Value> args(a.begin(), a.end());
  llvm::append_range(args, b);
  llvm::append_range(args, c);
  Value r = LLVM::CallIntrinsicOp::create(
                k.b, k.loc, st,
                StringAttr::get(
                    ctx, "llvm.nvvm.mma.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
                args)
                .getResult(0);
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(k.b, k.loc, r, i));
  return out;
}

/// The NVFP4 -> E4M3 decode table (nvfp4E4M3Table) copied into shared
/// memory by cp.async, 16 bytes per thread and instruction, as one
/// committed group: the caller waits for it (cp.async.wait_group and a CTA
/// barrier) before the first lookup. Returns the table's generic pointer.
/// On the H200 at 128K a shared-memory table made the (f16) indexer 12 %
/// faster at batch 8 than one read from global memory (docs/perf.md,
/// fourteenth session).
Value nvfp4E4M3TableInShared(GK &g) {
  KB &k = g.k;
  static const std::array<int32_t, kNvfp4E4M3TableWords> words =
      nvfp4E4M3Table();
  MLIRContext *ctx = k.b.getContext();
  auto globalT = LLVM::LLVMPointerType::get(ctx, 1);
  auto sharedT = LLVM::LLVMPointerType::get(ctx, 3);
  Value global = LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalT,
                                               g.constantWords(words));
  Value smem = g.sharedSpace(k.i32, kNvfp4E4M3TableWords, 16);
  g.strided(g.tid, k.c(kNvfp4E4M3TableWords / 4), [&](Value r) {
    Value byte = k.toI64(k.imul(r, k.c(16)));
    NVVM::CpAsyncOp::create(
        k.b, k.loc,
        LLVM::GEPOp::create(k.b, k.loc, sharedT, k.b.getI8Type(), smem,
                            ValueRange{byte}),
        LLVM::GEPOp::create(k.b, k.loc, globalT, k.b.getI8Type(), global,
                            ValueRange{byte}),
        16, NVVM::LoadCacheModifierKind::CG, Value());
  });
  NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc);
  return LLVM::AddrSpaceCastOp::create(k.b, k.loc, k.ptrT, smem);
}

/// out[g, t, b] as indexScoreKernel, with S = Q K^T on tensor cores: one
/// CTA (indexThreadsFor's size) per (t, b) at a time; each warp takes 8-key
/// tiles of the block. With FP8 and NVFP4 keys two tiles (16 keys) are the
/// rows of each mma's A operand and the index heads its B columns
/// (indexKeysAsAFor); with bf16 keys the heads are the A rows (rows past G
/// zero) and each tile is B. The dI
/// channels are assigned to the k positions of the mma so that each lane
/// reads dI/4 consecutive channels of a key (16-byte loads, all issued
/// before the first mma); Q uses the same assignment, which leaves the dot
/// products unchanged. bf16 keys multiply bf16 queries (m16n8k16); FP8 and
/// NVFP4 keys multiply the queries rounded to E4M3 (indexQueriesE4M3) by
/// their E4M3 values (m16n8k32 E4M3 mma; indexKeyE4M3Words).
void indexScoreMmaKernel(GK &g, msa::IndexScoreOp op) {
  KB &k = g.k;
  g.declareLaunch(g.threads, 0,
                  indexCtasPerSMFor(op.getIndexCache().getType(), g.threads));
  const IndexScoreArgs a(g, op);
  Value q = a.q, cache = a.cache;
  msa::PagedCacheType type = a.type;
  const int64_t groups = a.groups, d = a.d, page = a.page;
  const int64_t tiles = page / (g.warps * 8); // 8-key tiles per warp
  // E4M3 x E4M3 products (FP8 and NVFP4 keys), else bf16 x bf16.
  const bool e4m3 = indexQueriesE4M3(type);
  assert(e4m3 == isDecodedCache(type) && "decoded caches are E4M3");
  // Per lane and key (channels [quad dI/4, (quad + 1) dI/4)): the operand
  // words (bf16 pairs or E4M3 quads) and the bf16 query words.
  const int64_t qWords = d / 8;
  // Keys as A with E4M3 keys: --gpu-index-f16-mma widens the keys to f16
  // pairs (one cvt per pair, as ptxas's widening of mma.sync E4M3 does) and
  // takes the queries as f16 pairs converted once per token, then runs two
  // f16 m16n8k16 mma per k32 step into the accumulator: ptxas's E4M3 mma
  // also converts the queries per mma and adds each mma's products to the
  // accumulator with 4 FADD.
  const bool keysAsA =
      indexKeysAsAFor(type) && tiles % 2 == 0; // an even number of tiles
  const bool f16Mma = e4m3 && keysAsA && indexF16Mma;
  const int64_t words = e4m3 && !f16Mma ? d / 16 : d / 8;
  const float scale = a.scale;
  Value quad = k.irem(g.lane, k.c(4)), row = k.idiv(g.lane, k.c(4));
  Value negInf = k.cf(-INFINITY);
  auto vec4 = VectorType::get({4}, k.i32);
  // The NVFP4 decode table (unless the target converts E2M1), copied into
  // shared memory when the CTA starts (waited for, with a barrier, before
  // the first item).
  Value decodeTable;
  if (isNVFP4Cache(type) && !g.e2m1)
    decodeTable = nvfp4E4M3TableInShared(g);

  Value inGroup = k.icmp(CmpI::ult, row, k.c(groups));
  // Q words of this lane for token t: row `row` (an index head; zero past
  // the G heads), channels [quad dI/4, (quad + 1) dI/4) (E4M3 quads with
  // FP8 and NVFP4 keys, queryWordsToE4M3), then the score scale.
  auto loadQueries = [&](Value t) -> SmallVector<Value> {
    Value qRow = k.iadd(k.imul(t, k.c(groups)), g.imin(row, k.c(groups - 1)));
    Value qBase = k.iadd(k.imul(qRow, k.c(d / 2)), k.imul(quad, k.c(qWords)));
    SmallVector<Value> qw;
    for (int64_t i = 0; i < qWords; ++i)
      qw.push_back(
          k.select(inGroup, g.loadI32(q, k.iadd(qBase, k.c(i))), g.ci32(0)));
    if (e4m3)
      qw = queryWordsToE4M3(g, qw);
    if (f16Mma) {
      // E4M3 word w (channels 4 w + 0..3) as f16 pairs 2 w (channels 0, 1)
      // and 2 w + 1 (2, 3).
      SmallVector<Value> pairs;
      for (Value w : qw)
        llvm::append_range(pairs, e4m3WordToOperands(g, w, /*f16=*/true));
      qw = std::move(pairs);
    }
    qw.push_back(k.cf(scale));
    return qw;
  };
  // With FP8 and NVFP4 keys the items carry their token (-1 before the
  // first) and loadQueries' values for it, so that a CTA's consecutive
  // blocks of one token load and convert the queries once. On the H200 at
  // 128K (docs/perf.md, fourteenth session) the f16 indexer took 44.6-44.9
  // against 47.2-47.6 us at batch 8 with FP8 keys (12.0-12.2 against 12.7
  // at batch 1) and 52.6-52.9 against 55.6 with NVFP4 keys; bf16 keys ran
  // slower that way (72.2-72.4 against 67.6-68.1) and load their queries
  // per item.
  const bool carry = e4m3;
  SmallVector<Value> init;
  if (carry) {
    init.push_back(k.c(-1));
    init.append(words, g.ci32(0));
    init.push_back(k.cf(0));
  }
  // Slot of this lane's key in 8-key tile j of the warp.
  auto tileSlot = [&](int64_t j) {
    return k.iadd(k.imul(k.iadd(k.imul(g.warp, k.c(tiles)), k.c(j)), k.c(8)),
                  row);
  };
  // NVFP4: the table's copy has to land before the first decode.
  if (decodeTable) {
    NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 0);
    g.sync();
  }
  indexScoreFrame(
      g, a, negInf, init,
      [&](Value t, Value p, Value, Value blk, Value phys, ValueRange carried) {
        SmallVector<Type> qTypes(words, k.i32);
        qTypes.push_back(k.f32);
        SmallVector<Value> held =
            carry ? g.ifElse(
                        k.icmp(CmpI::ne, t, carried[0]), qTypes,
                        [&]() { return loadQueries(t); },
                        [&]() -> SmallVector<Value> {
                          return SmallVector<Value>(carried.drop_front());
                        })
                  : loadQueries(t);
        SmallVector<Value> qw(held.begin(), held.begin() + words);
        Value scaleV = held.back();
        Value zero = g.ci32(0);
        // Every tile's key words first: E4M3 keys undecoded (cacheRowRaw;
        // decoded per tile below), bf16 keys as loaded.
        SmallVector<SmallVector<Value>> kw(tiles);
        for (int64_t j = 0; j < tiles && e4m3; ++j)
          kw[j] = cacheRowRaw(g, type, cache, phys, k.c(0), tileSlot(j),
                              k.imul(quad, k.c(d / 4)), d / 4);
        for (int64_t j = 0; j < tiles && !e4m3; ++j) {
          Value base = k.iadd(
              k.idiv(cacheOffset(k, phys, k.c(0), tileSlot(j), type), k.c(2)),
              k.imul(quad, k.c(words)));
          for (int64_t v = 0; v < words / 4; ++v) {
            Value ptr = k.gep(cache, k.iadd(base, k.c(4 * v)), k.i32);
            Value x = LLVM::LoadOp::create(k.b, k.loc, vec4, ptr, 16);
            for (int64_t e = 0; e < 4; ++e)
              kw[j].push_back(
                  LLVM::ExtractElementOp::create(k.b, k.loc, x, g.ci32(e)));
          }
        }
        Value m = negInf;
        // The lane's first key slot (tile 0, column 2 quad) and the last
        // visible slot of the block, min(p - b page, page) (both i32).
        auto i32Of = [&](Value v) {
          return arith::IndexCastOp::create(k.b, k.loc, k.i32, v).getResult();
        };
        Value slot0 =
            i32Of(k.iadd(k.imul(g.warp, k.c(tiles * 8)), k.imul(quad, k.c(2))));
        Value last =
            i32Of(g.imin(g.isub(p, k.imul(blk, k.c(page))), k.c(page)));
        // Keys as the A operand (an even number of tiles): one mma
        // (m16n8k32 E4M3, or m16n8k16 bf16: the same fragment layout) takes
        // tiles j and j + 1 (16 keys: rows `row` and row + 8) against the index
        // heads as the 8 columns (B = the lane's query words of head `row`), so
        // no A row is zero and half as many mma run. A lane's accumulators are
        // keys (j, row) and (j + 1, row) x heads 2 quad and 2 quad + 1; the
        // max-pool then reduces over the 8 lanes of a quad column.
        SmallVector<Value> mh(2, negInf);
        Value keySlot0 = i32Of(k.iadd(k.imul(g.warp, k.c(tiles * 8)), row));
        for (int64_t j = 0; j < tiles && keysAsA; j += 2) {
          SmallVector<Value> k0 =
              e4m3 ? indexKeyE4M3Words(g, type, kw[j], d / 4, decodeTable)
                   : kw[j];
          SmallVector<Value> k1 =
              e4m3 ? indexKeyE4M3Words(g, type, kw[j + 1], d / 4, decodeTable)
                   : kw[j + 1];
          SmallVector<Value> c(4, k.cf(0));
          for (int64_t ks = 0; ks < (e4m3 ? d / 32 : d / 16); ++ks) {
            if (f16Mma) {
              // E4M3 step ks as two f16 steps: key word 2 ks + h's channel
              // pairs (low half: k 2 quad, 2 quad + 1; high half: k 8 + 2
              // quad, ...) against query pairs 2 (2 ks + h) and + 1.
              for (int64_t h = 0; h < 2; ++h) {
                auto a0 = e4m3WordToOperands(g, k0[2 * ks + h], true);
                auto a1 = e4m3WordToOperands(g, k1[2 * ks + h], true);
                SmallVector<Value> av = {a0[0], a1[0], a0[1], a1[1]};
                SmallVector<Value> bv = {qw[2 * (2 * ks + h)],
                                         qw[2 * (2 * ks + h) + 1]};
                c = g.mma(av, bv, c, /*f16=*/true);
              }
              continue;
            }
            SmallVector<Value> av = {k0[2 * ks], k1[2 * ks], k0[2 * ks + 1],
                                     k1[2 * ks + 1]};
            SmallVector<Value> bv = {qw[2 * ks], qw[2 * ks + 1]};
            c = e4m3 ? mmaE4M3(g, av, bv, c) : g.mma(av, bv, c);
          }
          for (int64_t half = 0; half < 2; ++half) {
            // Key (j + half, row): slot keySlot0 + 8 (j + half).
            Value visible = arith::CmpIOp::create(
                k.b, k.loc, CmpI::sle, keySlot0,
                arith::SubIOp::create(k.b, k.loc, last,
                                      g.ci32(8 * (j + half))));
            for (int64_t e = 0; e < 2; ++e) {
              Value sc = k.mul(c[2 * half + e], scaleV);
              // A NaN score never wins the max-pool.
              Value better = g.andI(visible, k.fcmp(CmpF::OGT, sc, mh[e]));
              mh[e] = k.select(better, sc, mh[e]);
            }
          }
        }
        if (keysAsA) {
          for (int64_t e = 0; e < 2; ++e) {
            for (int64_t off : {4, 8, 16}) {
              Value o = g.shflXor(mh[e], off);
              mh[e] = k.select(k.fcmp(CmpF::OGT, o, mh[e]), o, mh[e]);
            }
            Value head = k.iadd(k.imul(quad, k.c(2)), k.c(e));
            k.ifThen(
                g.andI(g.eq(row, k.c(0)), k.icmp(CmpI::ult, head, k.c(groups))),
                [&] {
                  k.storeF(a.partial, k.iadd(k.imul(g.warp, k.c(groups)), head),
                           mh[e], k.f32);
                });
          }
        }
        for (int64_t j = 0; j < tiles && !keysAsA; ++j) {
          SmallVector<Value> c(4, k.cf(0));
          if (e4m3) {
            SmallVector<Value> kv =
                indexKeyE4M3Words(g, type, kw[j], d / 4, decodeTable);
            for (int64_t ks = 0; ks < d / 32; ++ks)
              c = mmaE4M3(g, {qw[2 * ks], zero, qw[2 * ks + 1], zero},
                          {kv[2 * ks], kv[2 * ks + 1]}, c);
          } else {
            for (int64_t ks = 0; ks < d / 16; ++ks)
              c = g.mma({qw[2 * ks], zero, qw[2 * ks + 1], zero},
                        {kw[j][2 * ks], kw[j][2 * ks + 1]}, c);
          }
          for (int64_t e = 0; e < 2; ++e) {
            // Key slot0 + 8 j + e of the block is visible when it is at
            // most `last` (32-bit: one subtraction per key).
            Value visible = arith::CmpIOp::create(
                k.b, k.loc, CmpI::sle, slot0,
                arith::SubIOp::create(k.b, k.loc, last, g.ci32(8 * j + e)));
            Value sc = k.mul(c[e], scaleV);
            // A NaN score never wins the max-pool.
            Value better = g.andI(visible, k.fcmp(CmpF::OGT, sc, m));
            m = k.select(better, sc, m);
          }
        }
        for (int64_t off : {1, 2}) {
          if (keysAsA)
            break;
          Value o = g.shflXor(m, off);
          m = k.select(k.fcmp(CmpF::OGT, o, m), o, m);
        }
        if (!keysAsA)
          k.ifThen(g.andI(g.eq(quad, k.c(0)), inGroup), [&] {
            k.storeF(a.partial, k.iadd(k.imul(g.warp, k.c(groups)), row), m,
                     k.f32);
          });
        SmallVector<Value> next;
        if (carry) {
          next.push_back(t);
          llvm::append_range(next, held);
        }
        return next;
      });
}

//===----------------------------------------------------------------------===//
// Block top-k
//===----------------------------------------------------------------------===//

bool blockTopKFits(msa::BlockTopKOp op, int64_t threads) {
  return static_cast<int64_t>(op.getK()) <= threads;
}

/// Sorts the candidates of a top-k row (block init + i has score
/// scores[srow + init + i] for i < count <= kSortBlocks) by (key
/// descending, block ascending), NaN ranked as -inf, with a bitonic network
/// in shared memory over the next power of two (padding (-inf,
/// INT32_MAX)), and writes the first `slots` blocks to out[orow + init...].
void bitonicTopK(GK &g, Value scores, Value srow, int64_t init, Value count,
                 Value out, Value orow, int64_t slots, Value sortKey,
                 Value sortBlk) {
  KB &k = g.k;
  Value negInf = k.cf(-INFINITY);
  auto better = [&](Value ka, Value ba, Value kb, Value bb) {
    return g.orI(k.fcmp(CmpF::OGT, ka, kb),
                 g.andI(k.fcmp(CmpF::OEQ, ka, kb), k.icmp(CmpI::slt, ba, bb)));
  };
  // n2 = the smallest power of two >= count (1 when count <= 1).
  Value c64 = k.toI64(g.isub(g.imin(count, k.c(kSortBlocks)), k.c(1)));
  Value lz = LLVM::CountLeadingZerosOp::create(k.b, k.loc, k.i64, c64,
                                               k.b.getBoolAttr(false));
  Value log2 = arith::IndexCastOp::create(
      k.b, k.loc, k.b.getIndexType(),
      arith::SubIOp::create(
          k.b, k.loc,
          arith::ConstantOp::create(k.b, k.loc, k.b.getI64IntegerAttr(64)),
          lz));
  Value n2 = arith::ShLIOp::create(k.b, k.loc, k.c(1), log2);
  g.strided(g.tid, n2, [&](Value i) {
    Value real = k.icmp(CmpI::slt, i, count);
    Value blk = k.iadd(k.c(init), i);
    Value sc =
        k.loadF(scores, k.iadd(srow, k.select(real, blk, k.c(init))), k.f32);
    Value key = k.select(k.fcmp(CmpF::UNO, sc, sc), negInf, sc);
    k.storeF(sortKey, i, k.select(real, key, negInf), k.f32);
    k.storeIndex(sortBlk, i, k.select(real, blk, k.c(INT32_MAX)));
  });
  g.sync();
  k.loop(k.c(1), k.iadd(log2, k.c(1)), [&](Value ls) {
    Value size = arith::ShLIOp::create(k.b, k.loc, k.c(1), ls);
    k.loop(k.c(0), ls, [&](Value r) {
      Value stride = arith::ShLIOp::create(k.b, k.loc, k.c(1),
                                           g.isub(g.isub(ls, k.c(1)), r));
      g.strided(g.tid, k.idiv(n2, k.c(2)), [&](Value i) {
        Value lo = k.iadd(k.imul(k.imul(k.idiv(i, stride), stride), k.c(2)),
                          k.irem(i, stride));
        Value hi = k.iadd(lo, stride);
        Value ka = k.loadF(sortKey, lo, k.f32), ba = k.loadIndex(sortBlk, lo);
        Value kb = k.loadF(sortKey, hi, k.f32), bb = k.loadIndex(sortBlk, hi);
        Value hiBetter = better(kb, bb, ka, ba);
        // Ascending runs ((lo & size) == 0) put the better one first.
        Value up = g.eq(arith::AndIOp::create(k.b, k.loc, lo, size), k.c(0));
        k.ifThen(k.select(up, hiBetter, g.notI(hiBetter)), [&] {
          k.storeF(sortKey, lo, kb, k.f32);
          k.storeIndex(sortBlk, lo, bb);
          k.storeF(sortKey, hi, ka, k.f32);
          k.storeIndex(sortBlk, hi, ba);
        });
      });
      g.sync();
    });
  });
  k.ifThen(k.icmp(CmpI::slt, g.tid, k.c(slots)), [&] {
    k.storeIndex(out, k.iadd(orow, k.iadd(g.tid, k.c(init))),
                 k.loadIndex(sortBlk, g.tid));
  });
  g.sync();
}

/// One CTA per (g, t) row. The selection is the host's repeated arg-max
/// (higher score first, lower block id on ties, NaN ranked as -inf): round
/// r takes the best candidate ranked after round r-1's winner in that total
/// order. Rows of up to kSortBlocks candidates are sorted by that order
/// (bitonicTopK) and the selection read off the front;
/// longer rows take repeated arg-max rounds: round r takes the best
/// candidate ranked after round r-1's winner (no taken-set needed),
/// reduced over the warp with shuffles, then over the warps through shared
/// memory.
void blockTopKKernel(GK &g, msa::BlockTopKOp op) {
  KB &k = g.k;
  Value scores = k.ptr(0), pos = k.ptr(1), out = k.ptr(2);
  const int64_t groups = shapeOf(op.getBlockScores())[0], kk = op.getK(),
                bs = op.getBlockSize(), local = op.getLocalBlocks(),
                init = op.getInitBlocks();
  Value T = k.scalar(0), MB = k.scalar(2);
  Value negInf = k.cf(-INFINITY);
  Value keyS = g.shared(k.f32, g.warps), blkS = g.shared(k.i32, g.warps);
  Value sortKey = g.shared(k.f32, kSortBlocks),
        sortBlk = g.shared(k.i32, kSortBlocks);
  // The better of two candidates (key, blk); blk -1 is "none".
  auto better = [&](Value ok, Value ob, Value bk, Value bb) {
    return g.andI(
        g.notI(g.eq(ob, k.c(-1))),
        g.orI(g.eq(bb, k.c(-1)), g.orI(k.fcmp(CmpF::OGT, ok, bk),
                                       g.andI(k.fcmp(CmpF::OEQ, ok, bk),
                                              k.icmp(CmpI::slt, ob, bb)))));
  };
  g.ctaLoop(k.imul(k.c(groups), T), [&](Value item) {
    Value gg = k.idiv(item, T), t = k.irem(item, T);
    Value L = k.idiv(k.loadIndex(pos, t), k.c(bs));
    Value n = k.iadd(L, k.c(1));
    Value orow = k.imul(item, k.c(kk));
    Value srow = k.imul(k.iadd(k.imul(gg, T), t), MB);
    Value many = k.icmp(CmpI::sgt, n, k.c(kk));
    g.ifElse(
        many, {},
        [&]() -> SmallVector<Value> {
          Value tid0 = g.eq(g.tid, k.c(0));
          for (int64_t i = 0; i < init; ++i)
            k.ifThen(tid0,
                     [&] { k.storeIndex(out, k.iadd(orow, k.c(i)), k.c(i)); });
          for (int64_t i = 0; i < local; ++i)
            k.ifThen(tid0, [&] {
              k.storeIndex(out, k.iadd(orow, k.c(kk - local + i)),
                           k.iadd(L, k.c(i - local + 1)));
            });
          // Candidates: blocks init .. L - local; thread i takes
          // first + i, first + i + threads, ...
          Value first = k.iadd(k.c(init), g.tid);
          Value last = k.iadd(L, k.c(1 - local));
          auto keyOf = [&](Value blk) {
            Value sc = k.loadF(scores, k.iadd(srow, blk), k.f32);
            return k.select(k.fcmp(CmpF::UNO, sc, sc), negInf, sc);
          };
          // The candidate (key, blk) against the running best (bk, bb),
          // given the previous round's winner.
          auto consider = [&](Value key, Value blk, Value exists, Value prevKey,
                              Value prevBlk, Value bk,
                              Value bb) -> std::pair<Value, Value> {
            Value after = g.orI(k.fcmp(CmpF::OLT, key, prevKey),
                                g.andI(k.fcmp(CmpF::OEQ, key, prevKey),
                                       k.icmp(CmpI::sgt, blk, prevBlk)));
            Value take = g.andI(
                exists, g.andI(after, g.orI(g.eq(bb, k.c(-1)),
                                            k.fcmp(CmpF::OGT, key, bk))));
            return {k.select(take, key, bk), k.select(take, blk, bb)};
          };
          // Rounds over a thread-local scan `scan(prevKey, prevBlk)`.
          auto rounds = [&](const std::function<std::pair<Value, Value>(
                                Value, Value)> &scan) {
            Value prevKey = k.cf(INFINITY), prevBlk = k.c(-1);
            for (int64_t slot = init; slot < kk - local; ++slot) {
              auto [bk0, bb0] = scan(prevKey, prevBlk);
              Value bk = bk0, bb = bb0;
              for (int64_t off = kWarp / 2; off >= 1; off /= 2) {
                Value ok = g.shflXor(bk, off), ob = g.shflXor(bb, off);
                Value take = better(ok, ob, bk, bb);
                bk = k.select(take, ok, bk);
                bb = k.select(take, ob, bb);
              }
              k.ifThen(g.eq(g.lane, k.c(0)), [&] {
                k.storeF(keyS, g.warp, bk, k.f32);
                k.storeIndex(blkS, g.warp, bb);
              });
              g.sync();
              bk = negInf;
              bb = k.c(-1);
              for (int64_t w = 0; w < g.warps; ++w) {
                Value ok = k.loadF(keyS, k.c(w), k.f32);
                Value ob = k.loadIndex(blkS, k.c(w));
                Value take = better(ok, ob, bk, bb);
                bk = k.select(take, ok, bk);
                bb = k.select(take, ob, bb);
              }
              g.sync();
              k.ifThen(tid0,
                       [&] { k.storeIndex(out, k.iadd(orow, k.c(slot)), bb); });
              prevKey = bk;
              prevBlk = bb;
            }
          };
          // Up to kSortBlocks candidates: one bitonic sort by (key
          // descending, block ascending) of kSortBlocks elements, padded
          // with (-inf, INT32_MAX), the selection read off the front.
          Value count = g.isub(last, k.c(init));
          Value fits = k.icmp(CmpI::sle, count, k.c(kSortBlocks));
          g.ifElse(
              fits, {},
              [&]() -> SmallVector<Value> {
                bitonicTopK(g, scores, srow, init, count, out, orow,
                            kk - local - init, sortKey, sortBlk);
                return {};
              },
              [&]() -> SmallVector<Value> {
                rounds([&](Value prevKey,
                           Value prevBlk) -> std::pair<Value, Value> {
                  auto loop = scf::ForOp::create(k.b, k.loc, first, last,
                                                 k.c(g.threads),
                                                 ValueRange{negInf, k.c(-1)});
                  OpBuilder::InsertionGuard guard(k.b);
                  k.b.setInsertionPointToEnd(loop.getBody());
                  Value blk = loop.getInductionVar();
                  auto [bk, bb] = consider(keyOf(blk), blk, g.i1(true), prevKey,
                                           prevBlk, loop.getRegionIterArgs()[0],
                                           loop.getRegionIterArgs()[1]);
                  scf::YieldOp::create(k.b, k.loc, ValueRange{bk, bb});
                  return {loop.getResult(0), loop.getResult(1)};
                });
                return {};
              });
          return {};
        },
        [&]() -> SmallVector<Value> {
          // n <= k: blocks 0..L in order, then -1.
          k.ifThen(k.icmp(CmpI::slt, g.tid, k.c(kk)), [&] {
            Value valid = k.icmp(CmpI::slt, g.tid, n);
            k.storeIndex(out, k.iadd(orow, g.tid),
                         k.select(valid, g.tid, k.c(-1)));
          });
          return {};
        });
  });
}

//===----------------------------------------------------------------------===//
// Split-KV attention (sparse and dense)
//===----------------------------------------------------------------------===//

/// The attention op's shapes: Hq, Hkv, D, page size, group Hq / Hkv, the
/// sparse K (block slots per row; 0 for dense attention), and the bounds of
/// the per-step chunk count (attentionStepChunks); `q8` when the op's
/// precision contract is q8 (#msa.attention_precision: E4M3 queries,
/// E4M3(448 P) in P V).
struct AttentionShape {
  int64_t hq, hkv, d, page, group, kk, minChunks, maxChunks;
  bool q8 = false;
};

AttentionShape attentionShape(Operation *op) {
  AttentionShape s;
  ArrayRef<int64_t> qs = shapeOf(op->getOperand(0));
  auto type = cast<msa::PagedCacheType>(op->getOperand(1).getType());
  s.hq = qs[1];
  s.d = qs[2];
  s.hkv = type.getHeads();
  s.page = type.getPageSize();
  s.group = s.hq / s.hkv;
  if (auto sparse = dyn_cast<msa::SparseAttentionOp>(op)) {
    s.q8 = sparse.getPrecision() == msa::AttentionPrecision::Q8;
    s.kk = shapeOf(sparse.getBlockIds())[2];
    s.minChunks = std::min(s.kk, kSparseChunks);
    s.maxChunks = std::min(s.kk, kSparseMaxChunks);
  } else {
    s.q8 = cast<msa::DenseAttentionOp>(op).getPrecision() ==
           msa::AttentionPrecision::Q8;
    s.kk = 0;
    s.minChunks = kDenseChunks;
    s.maxChunks = kDenseMaxChunks;
  }
  return s;
}

/// The step's chunk count C (an index, the same in both attention kernels):
/// ceil(kDecodeItems / (T Hkv)) clamped to [minChunks, maxChunks], so that
/// a decode step has about kDecodeItems (T, KV head, chunk) work items and
/// a step of many tokens keeps the fixed count minChunks (M3, Hkv = 4:
/// dense 64 chunks up to T = 2, 32 at T = 4, 16 from T = 8; sparse 8 at
/// every T, kSparseChunks = kSparseMaxChunks). A sparse row's K slots go to
/// chunks of ceil(K / C) slots, a dense row's blocks to chunks of
/// ceil(blocks / C) (trailing chunks may be empty).
Value attentionStepChunks(GK &g, const AttentionShape &s, Value T) {
  KB &k = g.k;
  Value rows =
      arith::MaxSIOp::create(k.b, k.loc, k.imul(T, k.c(s.hkv)), k.c(1));
  Value want = k.idiv(k.iadd(rows, k.c(kDecodeItems - 1)), rows);
  return g.imin(arith::MaxSIOp::create(k.b, k.loc, want, k.c(s.minChunks)),
                k.c(s.maxChunks));
}

/// Partials (of D + 2 floats per query head) of the fixed workspace: the
/// most T C a step with C > kDenseChunks needs (dense attention at steps of
/// fewer than kDecodeItems / (Hkv kDenseChunks) tokens; M3: 128 at T <= 7).
int64_t attentionFixedPartials(int64_t hkv) {
  int64_t most = 0;
  for (int64_t t = 1; t * hkv < kDecodeItems; ++t) {
    const int64_t c = std::min(
        std::max((kDecodeItems + t * hkv - 1) / (t * hkv), kDenseChunks),
        kDenseMaxChunks);
    if (c > kDenseChunks)
      most = std::max(most, t * c);
  }
  return most;
}

/// The workspace of the step's partials: rows (t Hq + h) C + chunk of
/// D + 2 floats. Steps with C <= kDenseChunks use the per-token workspace
/// (kDenseChunks partials per token and query head: buffer base + 1), the
/// others the fixed one (attentionFixedPartials: buffer base + 2).
Value attentionWorkspace(GK &g, int base, Value chunks) {
  KB &k = g.k;
  Value fixed = k.icmp(CmpI::sgt, chunks, k.c(kDenseChunks));
  return LLVM::SelectOp::create(k.b, k.loc, fixed, k.ptr(base + 2),
                                k.ptr(base + 1));
}

/// The fragment words one warp's mma tiles take from a 16-key group: `kw[nt]`
/// the K words of key key0 + nt * 8 + row, `vw[i]` the V words of key
/// key0 + 2 quad + {0, 1, 8, 9}[i] (lane (row, quad); see attentionGroupRaw for
/// which words).
struct GroupWords {
  SmallVector<SmallVector<Value>> kw, vw;
  /// True when the V words of keys past the position are already zero
  /// (attentionGroupFromRaw zeroes them before the decode).
  bool vMasked = false;
  /// True when the K (V) words are f16 pairs, decoded from an FP8 or NVFP4
  /// cache, else bf16 pairs; the query fragments are f16 with f16 K
  /// (queryWordsToF16), and P enters P V as f16 with f16 V.
  bool kF16 = false, vF16 = false;
  /// When not empty, the P V operand words themselves, vb[nt] = {b0, b1}
  /// of O tile nt (vw is then unused; V already masked).
  SmallVector<SmallVector<Value>> vb;
  /// True when every key of the group is known to be visible (the
  /// per-token attention's loop over fully visible blocks,
  /// --gpu-attention-full-loop): no masking code at all.
  bool knownFull = false;
};

/// Whether every key of the 16-key group at `key0` of block `blk` is
/// visible to a token at position `p` (every block of a token but its
/// last): uniform over a warp, so the masking of the other groups is a
/// branch rather than a per-value cost.
Value groupFullyVisible(KB &k, const AttentionShape &s, Value blk, Value key0,
                        Value p) {
  return k.icmp(CmpI::sle,
                k.iadd(k.imul(blk, k.c(s.page)), k.iadd(key0, k.c(15))), p);
}

static TuningOpt<int> attentionScoreChains(
    "gpu-attention-score-chains", 1,
    "Independent mma chains over the k-steps of each score "
    "tile of the tensor-core attention, summed at the end "
    "(tuning)");

static TuningOpt<int>
    attentionCtasPerSM("gpu-attention-ctas-per-sm", 0,
                       "CTAs per multiprocessor the tensor-core attention's "
                       "launch declares (registers capped to keep them "
                       "resident; 0: undeclared; tuning)");

static TuningOpt<bool> attentionExp2(
    "gpu-attention-exp2", true,
    "The tensor-core attention's online softmax in base 2: scores times "
    "scale * log2(e), each exponential one ex2.approx (instead of expf's "
    "range reduction), the warps' maxima back in natural units at their "
    "stash (tuning)");

static TuningOpt<int> attentionPTerms(
    "gpu-attention-p-terms", 2,
    "f16 terms of P in the tensor-core attention's P V products with f16 V "
    "(FP8 and NVFP4 caches): 2, a head and the tail P - head (about 22 "
    "bits), or 1, the head alone (11 bits, relative error at most 2^-12, "
    "half the P V mma; tuning)");

static TuningOpt<bool> attentionScoreFma(
    "gpu-attention-score-fma", true,
    "With --gpu-attention-exp2 and f16 V (FP8 and NVFP4 caches), each "
    "exponential's argument is one fma of the raw score, the scale and "
    "(log2 of the f16 P scale) - max, the row maxima taken on the raw "
    "scores and scaled once (tuning)");

/// Whether attentionGroupMath takes each exponential's argument in one fma
/// (--gpu-attention-score-fma) for a group with f16 V (`vF16`): then P and
/// the row sums carry kF16PScale, which the warp's stash divides out.
bool attentionScoreFmaFor(bool vF16) {
  return attentionExp2 && attentionScoreFma && vF16;
}

static TuningOpt<bool> attentionFullLoop(
    "gpu-attention-full-loop", true,
    "The per-token dense attention runs the loop steps over blocks every "
    "key of which the token sees first, without guards or masks (one basic "
    "block per step but for the O rescale), then the rest (tuning)");

static TuningOpt<int> attentionStepSoftmax(
    "gpu-attention-step-softmax", 0,
    "The per-token dense attention's loop over fully visible blocks "
    "(--gpu-attention-full-loop): 0, an online softmax update per 16-key "
    "group; 1, one per loop step (every group's scores, one row maximum "
    "and O rescale, then the P V products, V decoded after the scores), "
    "the rescale behind a uniform branch; 2, the same with O rescaled "
    "every step, no branch (tuning)");

static TuningOpt<bool> attentionSparseFullSteps(
    "gpu-attention-sparse-full-steps", true,
    "Sparse attention's per-token loop runs each step whose groups all lie "
    "in selected blocks the token sees whole as dense attention's full "
    "steps (no guards or masks; --gpu-attention-step-softmax applies), the "
    "others guarded: one uniform branch per step (tuning)");

static TuningOpt<int> attentionSparseAhead(
    "gpu-attention-sparse-ahead", 3,
    "16-key groups each warp of the per-token sparse attention loads ahead "
    "(heads wider than 64 channels; 0: as dense attention; tuning)");

static TuningOpt<bool> attentionStashWeights(
    "gpu-attention-stash-weights", true,
    "The per-token attention's combine of its warps' results computes each "
    "warp's weight exp(m_w - m) once per head instead of once per channel "
    "(tuning)");

static TuningOpt<bool> attentionRingUnroll(
    "gpu-attention-ring-unroll", true,
    "The per-token attention's loop over 16-key groups takes one group more "
    "than it loads ahead per step, so that its ring of groups in flight "
    "stays in place instead of moving by a copy per word (tuning)");

static TuningOpt<int> attentionStageAhead(
    "gpu-attention-stage-ahead", 0,
    "The per-token attention (FP8 and NVFP4 K and V caches, 128-channel "
    "heads, --gpu-attention-ring-unroll) loads N groups ahead into shared "
    "memory by cp.async, each lane its own words, instead of into "
    "registers (0: registers, the default; tuning)");

static TuningOpt<bool> attentionVPrmt(
    "gpu-attention-v-prmt", true,
    "The tensor-core attention's P V operand words (one 16-bit half from "
    "each of two keys' V words) as one byte permute each, instead of "
    "shifts and ors (tuning)");

/// The factor attentionGroupMath's f16 P operands carry (GroupWords::vF16).
constexpr float kF16PScale = 32768.0f;

/// The factor P carries in attentionGroupMath's P V products: kF16PScale
/// for f16 V under the exact contract; 448 under q8 (AttentionShape::q8),
/// whose operand is E4M3(448 P) (msa-m3-spec §3.2).
float attentionPScale(const AttentionShape &s) {
  return s.q8 ? 448.0f : kF16PScale;
}

/// The key offsets of a lane's four V rows in a 16-key group (plus 2 quad).
constexpr int64_t kVKeys[4] = {0, 1, 8, 9};

/// A 16-key group for attentionGroupsMath: keys key0 .. key0 + 15 of block
/// `blk`, its fragment words, and the query fragments its scores multiply
/// (per group: the per-token way may read them back from shared memory for
/// each group).
struct MathGroup {
  Value key0, blk;
  GroupWords words;
  SmallVector<SmallVector<Value>> qa;
  /// When set, called just before the group's P V products to make its V
  /// words (GroupWords::vw or vb): --gpu-attention-step-softmax decodes a
  /// step's V rows after every group's scores, so that its registers hold
  /// the undecoded words meanwhile.
  std::function<void(GroupWords &)> decodeV;
};

/// The 16-key groups `groups` for this warp, from their fragment words, as
/// one online softmax step: S = Q K^T of each group, one update of (max,
/// partial sum) per row over all their keys, O = O * alpha + sum of P V,
/// for a token at position `p`. `st` is (O fragments, max r, max r+8, sum
/// r, sum r+8); `scale` (FP32) multiplies the scores. One group is the
/// per-group softmax (attentionGroupMath); several share one row maximum,
/// one alpha and one O rescale (--gpu-attention-step-softmax), which is
/// the same softmax (FlashAttention-2's update for one block of keys, here
/// the groups' 16 n; Dao 2023, Algorithm 1) up to the FP32 rounding of the
/// exponentials' arguments. With --gpu-attention-exp2 the scores and maxima are
/// in units of log2(e) (scale * log2(e)) and P = 2^(s - max) by ex2.approx: the
/// same softmax (e^z = 2^(z log2 e)), which the warp's stash takes back to
/// natural units (max * ln 2).
SmallVector<Value> attentionGroupsMath(GK &g, const AttentionShape &s, Value p,
                                       MutableArrayRef<MathGroup> groups,
                                       Value scale, ValueRange st,
                                       bool rescaleAlways = false) {
  KB &k = g.k;
  const int64_t d = s.d, kSteps = d / 16, nTiles = d / 8;
  const int64_t n = groups.size();
  Value quad = k.irem(g.lane, k.c(4));
  Value negInf = k.cf(-INFINITY);
  SmallVector<Value> blockStart(n), full(n);
  for (int64_t gi = 0; gi < n; ++gi) {
    MathGroup &grp = groups[gi];
    blockStart[gi] = k.imul(grp.blk, k.c(s.page));
    full[gi] = grp.words.knownFull
                   ? g.i1(true)
                   : groupFullyVisible(k, s, grp.blk, grp.key0, p);
    // Values of keys past the position are never read by the host; zero
    // them so that P = 0 times a stale Inf or NaN stays 0.
    if (grp.words.vMasked)
      continue;
    assert(!grp.decodeV && "decodeV words must be masked before the decode");
    SmallVector<SmallVector<Value>> &vw = grp.words.vw;
    SmallVector<Value> vFlat;
    for (const SmallVector<Value> &row : vw)
      llvm::append_range(vFlat, row);
    SmallVector<Type> vTypes(vFlat.size(), k.i32);
    vFlat = g.ifElse(
        full[gi], vTypes, [&]() -> SmallVector<Value> { return vFlat; },
        [&]() -> SmallVector<Value> {
          SmallVector<Value> masked;
          for (int64_t i = 0; i < 4; ++i) {
            Value key =
                k.iadd(grp.key0, k.iadd(k.c(kVKeys[i]), k.imul(quad, k.c(2))));
            Value visible = k.icmp(CmpI::sle, k.iadd(blockStart[gi], key), p);
            for (Value w : vw[i])
              masked.push_back(k.select(visible, w, g.ci32(0)));
          }
          return masked;
        });
    for (int64_t i = 0, at = 0; i < int64_t(vw.size()); ++i)
      for (Value &w : vw[i])
        w = vFlat[at++];
  }
  // S fragments of each group's two 8-key tiles, scaled; -inf past the
  // position.
  SmallVector<SmallVector<Value>> svs(n); // [group][tile][4]
  const bool base2 = attentionExp2;
  Value sScale = base2 ? k.mul(scale, k.cf(float(M_LOG2E))) : scale;
  // --gpu-attention-score-fma (default on with exp2 and f16 V, i.e. FP8
  // and NVFP4 caches; bf16 V keeps the multiply): S stays unscaled
  // (sScale > 0, so the row maxima are the raw maxima times sScale), and
  // each exponential's argument is fma(s, sScale, log2(kF16PScale) -
  // mSub): P comes out times kF16PScale with f16 V, so the row sums carry
  // that factor too (divided out at the warp's stash, as O's). 16 fewer
  // multiplies and 8 fewer adds per group for 2 multiplies; on the H200
  // at batch 8 / 128K dense attention 304.5 -> 301.4 us (FP8), 321.0 ->
  // 315.8 us (NVFP4; docs/perf.md, thirty-third session).
  const bool vF16 = groups.front().words.vF16;
  const bool fmaScores = attentionScoreFmaFor(vF16);
  const float pScale = attentionPScale(s);
  // --gpu-attention-score-chains k-steps chains per tile, summed at the
  // end (shorter dependent mma chains; tuning).
  const int64_t chains = std::clamp<int64_t>(attentionScoreChains, 1,
                                             std::max<int64_t>(kSteps, 1));
  for (int64_t gi = 0; gi < n; ++gi) {
    MathGroup &grp = groups[gi];
    SmallVector<Value> &sv = svs[gi];
    for (int64_t nt = 0; nt < 2; ++nt) {
      SmallVector<SmallVector<Value>> c(chains, SmallVector<Value>(4, k.cf(0)));
      for (int64_t ks = 0; ks < kSteps; ++ks)
        c[ks % chains] =
            g.mma(grp.qa[ks],
                  {grp.words.kw[nt][2 * ks], grp.words.kw[nt][2 * ks + 1]},
                  c[ks % chains], grp.words.kF16);
      for (int64_t e = 0; e < 4; ++e) {
        Value x = c[0][e];
        for (int64_t j = 1; j < chains; ++j)
          x = k.add(x, c[j][e]);
        sv.push_back(fmaScores ? x : k.mul(x, sScale));
      }
    }
    SmallVector<Type> sTypes(sv.size(), k.f32);
    sv = g.ifElse(
        full[gi], sTypes, [&]() -> SmallVector<Value> { return sv; },
        [&]() -> SmallVector<Value> {
          SmallVector<Value> masked;
          // Columns of c0/c1 (and c2/c3): keys 2 * quad, 2 * quad + 1.
          for (int64_t nt = 0; nt < 2; ++nt)
            for (int64_t e = 0; e < 4; ++e) {
              Value slot = k.iadd(
                  grp.key0, k.iadd(k.c(nt * 8 + e % 2), k.imul(quad, k.c(2))));
              Value valid = k.icmp(CmpI::sle, k.iadd(blockStart[gi], slot), p);
              masked.push_back(k.select(valid, sv[nt * 4 + e], negInf));
            }
          return masked;
        });
  }
  SmallVector<Value> out(st.begin(), st.end());
  Value alpha[2];
  Value grew = arith::ConstantOp::create(k.b, k.loc, k.b.getBoolAttr(false));
  for (int64_t half = 0; half < 2; ++half) {
    // Row `row` holds c0, c1 of both tiles; row `row + 8` c2, c3.
    int64_t e0 = half * 2;
    Value mt;
    for (ArrayRef<Value> sv : svs) {
      Value m = k.maxf(k.maxf(sv[e0], sv[e0 + 1]),
                       k.maxf(sv[4 + e0], sv[4 + e0 + 1]));
      mt = mt ? k.maxf(mt, m) : m;
    }
    for (int64_t off : {1, 2})
      mt = k.maxf(mt, g.shflXor(mt, off));
    if (fmaScores)
      mt = k.mul(mt, sScale);
    Value mOld = st[nTiles * 4 + half];
    Value mNew = k.maxf(mOld, mt);
    // UNE: a NaN maximum counts as a change.
    grew = g.orI(grew, k.fcmp(CmpF::UNE, mNew, mOld));
    alpha[half] =
        k.select(k.fcmp(CmpF::OEQ, mNew, negInf), k.cf(1),
                 base2 ? g.ex2(k.sub(mOld, mNew)) : k.exp(k.sub(mOld, mNew)));
    Value sum = k.mul(st[nTiles * 4 + 2 + half], alpha[half]);
    // In base 2 the row's offset is 0 while all its keys are masked (mNew =
    // -inf), so that a masked score (-inf) gives 2^-inf = 0 without a test
    // per value (with a finite mNew it does too; a NaN stays NaN).
    Value mSub =
        base2 ? k.select(k.fcmp(CmpF::OEQ, mNew, negInf), k.cf(0), mNew) : mNew;
    Value bias = fmaScores ? k.sub(k.cf(std::log2(pScale)), mSub) : Value();
    for (SmallVector<Value> &sv : svs)
      for (int64_t nt = 0; nt < 2; ++nt)
        for (int64_t e = e0; e < e0 + 2; ++e) {
          Value &v = sv[nt * 4 + e];
          v = fmaScores
                  ? g.ex2(math::FmaOp::create(k.b, k.loc, v, sScale, bias))
              : base2 ? g.ex2(k.sub(v, mSub))
                      : k.select(k.fcmp(CmpF::OEQ, v, negInf), k.cf(0),
                                 k.exp(k.sub(v, mNew)));
          sum = k.add(sum, v);
        }
    out[nTiles * 4 + half] = mNew;
    out[nTiles * 4 + 2 + half] = sum;
  }
  // O * alpha, skipped when no row maximum of the warp moved (alpha = 1 in
  // every lane then, and the product is O): a uniform branch. With
  // `rescaleAlways` no branch: the multiplies every time.
  SmallVector<Value> o(st.begin(), st.begin() + nTiles * 4);
  SmallVector<Type> oTypes(o.size(), k.f32);
  auto rescaled = [&]() -> SmallVector<Value> {
    SmallVector<Value> scaled;
    for (int64_t i = 0; i < nTiles * 4; ++i)
      scaled.push_back(k.mul(o[i], alpha[(i % 4) / 2]));
    return scaled;
  };
  o = rescaleAlways ? rescaled()
                    : g.ifElse(g.anyLane(grew), oTypes, rescaled,
                               [&]() -> SmallVector<Value> { return o; });
  // P as the A operand (16 rows x 16 keys), split into a bf16 head and a
  // bf16 tail (P - head): two products keep P to about 16 bits, which the
  // host's FP32 reference needs (one bf16 P alone is 8 bits). With f16 V
  // both terms are f16 (about 22 bits) of P * kF16PScale (P <= 1), so that
  // P down to 2^-29 is held to f16's full precision (unscaled, f16's
  // subnormals would round P below 2^-14 to steps of 2^-24 and flush P
  // below 2^-25, which the FP32 row sum keeps); O then carries the factor
  // until the warp's stash (attentionKernel) divides it out.
  // --gpu-attention-p-terms=1 keeps the f16 head alone (P to f16's 11
  // bits, relative error at most 2^-12; MSA's FP8 kernels multiply
  // E4M3(448 P), spec 3.2): half the P V products.
  //
  // Under the q8 contract (s.q8; FP8 and NVFP4 caches) P carries 448 and
  // enters P V as one E4M3(448 P) term (cvt.rn.satfinite.e4m3x2.f32, then
  // widened exactly to the f16 or bf16 operand), the row sums keeping P
  // unrounded: MSA's FP8 decode contract (msa-m3-spec §3.2), half the
  // exact contract's P V products.
  const bool pTail = !s.q8 && (!vF16 || attentionPTerms != 1);
  const bool pScaled = vF16 || s.q8;
  Type pType = vF16 ? Type(k.b.getF16Type()) : Type(k.b.getBF16Type());
  for (int64_t gi = 0; gi < n; ++gi) {
    GroupWords &words = groups[gi].words;
    if (groups[gi].decodeV)
      groups[gi].decodeV(words);
    SmallVector<Value> head, tail;
    for (int64_t i = 0; i < 8; ++i) {
      Value pv =
          pScaled && !fmaScores ? k.mul(svs[gi][i], k.cf(pScale)) : svs[gi][i];
      if (!pTail) {
        head.push_back(pv);
        continue;
      }
      head.push_back(g.roundTo(pv, pType));
      tail.push_back(k.sub(pv, head.back()));
    }
    auto pack = [&](ArrayRef<Value> v) -> SmallVector<Value> {
      SmallVector<Value> r;
      for (int64_t i = 0; i < 8; i += 2)
        r.push_back(
            s.q8   ? e4m3PairToOperand(g, e4m3Pair(g, v[i], v[i + 1]), vF16)
            : vF16 ? g.packF16(v[i], v[i + 1])
                   : g.packBF16(v[i], v[i + 1]));
      return r;
    };
    SmallVector<Value> pa = pack(head),
                       pb = pTail ? pack(tail) : SmallVector<Value>();
    // V as B (keys x channels, column-major): channel `nt` of this lane's
    // piece of two keys per register.
    SmallVector<SmallVector<Value>> &vw = words.vw;
    auto half16 = [&](Value word, int64_t which) -> Value {
      Value v =
          which ? arith::ShRUIOp::create(k.b, k.loc, word, g.ci32(16)) : word;
      return arith::TruncIOp::create(k.b, k.loc, k.i16, v);
    };
    for (int64_t nt = 0; nt < nTiles; ++nt) {
      auto vword = [&](int64_t a, int64_t b) {
        // --gpu-attention-v-prmt: the two halves in one byte permute
        // (0x5410: both low halves, 0x7632: both high halves).
        if (attentionVPrmt)
          return g.prmt(vw[a][nt / 2], vw[b][nt / 2],
                        g.ci32(nt % 2 ? 0x7632 : 0x5410));
        return g.packBits(half16(vw[a][nt / 2], nt % 2),
                          half16(vw[b][nt / 2], nt % 2));
      };
      SmallVector<Value> c(o.begin() + nt * 4, o.begin() + nt * 4 + 4);
      Value b0 = words.vb.empty() ? vword(0, 1) : words.vb[nt][0];
      Value b1 = words.vb.empty() ? vword(2, 3) : words.vb[nt][1];
      c = g.mma(pa, {b0, b1}, c, vF16);
      if (pTail)
        c = g.mma(pb, {b0, b1}, c, vF16);
      for (int64_t e = 0; e < 4; ++e)
        o[nt * 4 + e] = c[e];
    }
  }
  for (int64_t i = 0; i < nTiles * 4; ++i)
    out[i] = o[i];
  return out;
}

/// One 16-key group of block `blk` (keys key0 .. key0 + 15 of the block) for
/// this warp, from its fragment words: attentionGroupsMath's softmax step
/// on that group alone.
SmallVector<Value> attentionGroupMath(GK &g, const AttentionShape &s,
                                      Value key0, Value blk, Value p,
                                      GroupWords words,
                                      ArrayRef<SmallVector<Value>> qa,
                                      Value scale, ValueRange st) {
  MathGroup grp{key0, blk, std::move(words),
                SmallVector<SmallVector<Value>>(qa.begin(), qa.end()), nullptr};
  return attentionGroupsMath(g, s, p, MutableArrayRef<MathGroup>(grp), scale,
                             st);
}

/// Scale bytes of `n` channels of an NVFP4 cache row (one per 16, at
/// least one), and the 32-bit words cacheRowRaw loads them into (4 per
/// word, one 16-bit load for 2).
int64_t nvfp4RawScaleBytes(int64_t n) { return std::max<int64_t>(n / 16, 1); }

Value nvfp4RawScaleByte(GK &g, ArrayRef<Value> scaleWords, int64_t n,
                        int64_t j) {
  KB &k = g.k;
  Value w = scaleWords[j / 4];
  if (nvfp4RawScaleBytes(n) == 1)
    return w;
  if (j % 4)
    w = arith::ShRUIOp::create(k.b, k.loc, w, g.ci32(8 * (j % 4)));
  return arith::AndIOp::create(k.b, k.loc, w, g.ci32(0xFF));
}
int64_t nvfp4RawScaleWords(int64_t n) {
  return (nvfp4RawScaleBytes(n) + 3) / 4;
}

/// The 32-bit registers one lane's `n` channels of a cache row take as
/// loaded (cacheRowRaw): bf16 n / 2 words, FP8 n / 4, NVFP4 n / 8 code
/// words (one 16-bit load for n = 4) and nvfp4RawScaleWords(n) scale words.
int64_t cacheRowRawWords(msa::PagedCacheType type, int64_t n) {
  if (!isDecodedCache(type))
    return n / 2;
  if (!isNVFP4Cache(type))
    return n / 4;
  return std::max<int64_t>(n / 8, 1) + nvfp4RawScaleWords(n);
}

/// Loads channels [c0, c0 + n) of row `key` of KV head `kvHead` in cache
/// page `phys` (n a multiple of 4, c0 a multiple of n), undecoded: the
/// cacheRowRawWords(type, n) values that decodeCacheRowRaw turns into the
/// n / 2 words of bf16 pairs (channel c0 + 2i in the low half of word i).
/// Vector loads where n allows (NVFP4: the codes in one 8- or 16-byte load
/// for 16 or 32 channels, the scale bytes in one 16- or 32-bit load). The
/// loads only: the decode ALU work happens when the words are used (a
/// group or more later).
SmallVector<Value> cacheRowRaw(GK &g, msa::PagedCacheType type, Value cache,
                               Value phys, Value kvHead, Value key, Value c0,
                               int64_t n) {
  KB &k = g.k;
  if (!isDecodedCache(type))
    return g.loadWords(
        cache,
        k.iadd(k.idiv(cacheOffset(k, phys, kvHead, key, type), k.c(2)),
               k.idiv(c0, k.c(2))),
        n / 2, (n / 2) % 4 == 0);
  CacheRow row = cacheRow(k, cache, type, phys, kvHead, key);
  if (!isNVFP4Cache(type))
    return g.loadWords(cache, k.idiv(k.iadd(row.data, c0), k.c(4)), n / 4,
                       n % 16 == 0);
  Value codeByte = k.iadd(row.data, k.idiv(c0, k.c(2)));
  SmallVector<Value> out;
  // A load of `count` i32 words (a vector when count > 1) aligned to their
  // size, from byte offset `at` of the cache.
  auto loadVector = [&](Value at, int64_t count) {
    if (count == 1)
      return SmallVector<Value>{g.loadI32(cache, k.idiv(at, k.c(4)))};
    auto vec = VectorType::get({count}, k.i32);
    Value v = LLVM::LoadOp::create(
        k.b, k.loc, vec, k.gep(cache, k.idiv(at, k.c(4)), k.i32), 4 * count);
    SmallVector<Value> words;
    for (int64_t e = 0; e < count; ++e)
      words.push_back(LLVM::ExtractElementOp::create(k.b, k.loc, v, g.ci32(e)));
    return words;
  };
  if (n % 32 == 0) {
    for (int64_t v = 0; v < n / 8; v += 4)
      llvm::append_range(out, loadVector(k.iadd(codeByte, k.c(4 * v)), 4));
  } else if (n == 16) {
    out = loadVector(codeByte, 2);
  } else if (n % 8 == 0) {
    for (int64_t v = 0; v < n / 8; ++v)
      llvm::append_range(out, loadVector(k.iadd(codeByte, k.c(4 * v)), 1));
  } else {
    out.push_back(arith::ExtUIOp::create(
        k.b, k.loc, k.i32, g.loadI16(cache, k.idiv(codeByte, k.c(2)))));
  }
  const int64_t scaleBytes = nvfp4RawScaleBytes(n);
  Value scaleAt = k.iadd(row.scales, k.idiv(c0, k.c(16)));
  if (scaleBytes % 4 == 0) {
    for (int64_t v = 0; v < scaleBytes / 4; ++v)
      out.push_back(
          g.loadI32(cache, k.idiv(k.iadd(scaleAt, k.c(4 * v)), k.c(4))));
  } else if (scaleBytes == 2) {
    out.push_back(arith::ExtUIOp::create(
        k.b, k.loc, k.i32, g.loadI16(cache, k.idiv(scaleAt, k.c(2)))));
  } else {
    Type i8 = k.b.getI8Type();
    out.push_back(arith::ExtUIOp::create(
        k.b, k.loc, k.i32,
        LLVM::LoadOp::create(k.b, k.loc, i8, k.gep(cache, scaleAt, i8))));
  }
  return out;
}

static TuningOpt<bool> attentionNvfp4E4M3(
    "gpu-attention-nvfp4-e4m3", true,
    "The tensor-core attention decodes NVFP4 cache rows through the E4M3 "
    "byte table (one lookup per 4 codes, then the FP8 widening) instead of "
    "the f16 operand table (tuning)");

/// Whether the per-token attention decodes its NVFP4 rows through the
/// E4M3 table (--gpu-attention-nvfp4-e4m3): an NVFP4 cache, no hardware
/// E2M1 conversions, and rows of a multiple of 8 channels per lane (D a
/// multiple of 64: D / 8 V channels).
bool attentionE4M3Table(const GK &g, msa::PagedCacheType type,
                        msa::PagedCacheType vtype, int64_t d) {
  return attentionNvfp4E4M3 && !g.e2m1 && d % 64 == 0 &&
         (isNVFP4Cache(type) || isNVFP4Cache(vtype));
}

/// The n / 2 words of cacheRowRaw's `raw`: bf16 pairs as loaded for bf16
/// rows; for FP8 and NVFP4 rows f16 pairs (`f16`) or bf16 pairs, exactly
/// as the host reads them (FP8: decodeE4M3, by e4m3PairToOperand; NVFP4:
/// nvfp4ToFP8Value, by nvfp4CodesToOperands with the rows of `table`,
/// nvfp4Table's words of the same operand type in shared memory, or with
/// g.e2m1 the hardware conversions; every E4M3 value is exact in f16 and
/// bf16).
///
/// With `e4m3Table` (--gpu-attention-nvfp4-e4m3; n a multiple of 8),
/// `table` is nvfp4E4M3Table's in shared memory instead: NVFP4 rows are
/// looked up as E4M3 bytes (indexKeyE4M3Words, as the indexer's) and
/// widened like an FP8 row's, which takes fewer instructions than the
/// operand table's low / high byte lookups and interleaving.
SmallVector<Value> decodeCacheRowRaw(GK &g, msa::PagedCacheType type,
                                     ArrayRef<Value> raw, int64_t n,
                                     Value table, bool f16, bool e4m3Table) {
  if (!isDecodedCache(type))
    return SmallVector<Value>(raw.begin(), raw.end());
  SmallVector<Value> out;
  if (!isNVFP4Cache(type) || e4m3Table) {
    SmallVector<Value> bytes(raw.begin(), raw.end());
    if (isNVFP4Cache(type))
      bytes = indexKeyE4M3Words(g, type, raw, n, table);
    for (Value x : bytes)
      llvm::append_range(out, e4m3WordToOperands(g, x, f16));
    return out;
  }
  const int64_t codeWords = std::max<int64_t>(n / 8, 1);
  return nvfp4CodesToOperands(
      g, raw.take_front(codeWords), n, table, f16, [&](int64_t j) {
        return nvfp4RawScaleByte(g, raw.drop_front(codeWords), n, j);
      });
}

/// The rows of a 16-key group one lane loads (attentionGroupRaw): K rows
/// key0 + nt * 8 + row (nt = 0, 1), channels [quad D/4, (quad + 1) D/4),
/// then V rows key0 + 2 quad + kVKeys[i], channels [row D/8, (row + 1) D/8),
/// for lane (row, quad).
///
/// The k positions of S = Q K^T are assigned to channels so that lane
/// (row n, quad q) reads words [q W, q W + W) of key n (W = D / 8); the O
/// tile columns so that lane (n, q) reads channels [n D/8, (n+1) D/8) of a
/// V row: every lane reads contiguous pieces. `qa` (attentionKernel's query
/// fragments) follows the same assignment.
int64_t attentionGroupRawWords(const AttentionShape &s,
                               msa::PagedCacheType type,
                               msa::PagedCacheType vtype) {
  return 2 * cacheRowRawWords(type, s.d / 4) +
         4 * cacheRowRawWords(vtype, s.d / 8);
}

/// Issues this lane's loads of 16-key group `grp` (keys 16 grp .. 16 grp +
/// 15) of cache page `phys`, K from `kc` (`type`) and V from `vc` (`vtype`,
/// which may differ): attentionGroupRawWords values, undecoded.
SmallVector<Value> attentionGroupRaw(GK &g, const AttentionShape &s, Value grp,
                                     Value phys, Value kvHead,
                                     msa::PagedCacheType type,
                                     msa::PagedCacheType vtype, Value kc,
                                     Value vc) {
  KB &k = g.k;
  const int64_t d = s.d;
  Value quad = k.irem(g.lane, k.c(4)), row = k.idiv(g.lane, k.c(4));
  Value key0 = k.imul(grp, k.c(16)); // slot of the group's first key
  SmallVector<Value> raw;
  for (int64_t nt = 0; nt < 2; ++nt)
    llvm::append_range(raw, cacheRowRaw(g, type, kc, phys, kvHead,
                                        k.iadd(key0, k.iadd(k.c(nt * 8), row)),
                                        k.imul(quad, k.c(d / 4)), d / 4));
  for (int64_t dk : kVKeys)
    llvm::append_range(
        raw, cacheRowRaw(g, vtype, vc, phys, kvHead,
                         k.iadd(key0, k.iadd(k.c(dk), k.imul(quad, k.c(2)))),
                         k.imul(row, k.c(d / 8)), d / 8));
  return raw;
}

/// --gpu-attention-stage-ahead: the pieces one lane copies of `n` channels
/// of a cache row (cacheRowRaw's loads, as cp.async sizes of 16, 8 or 4
/// bytes): FP8 n bytes in 16-byte pieces; NVFP4 the n / 2 code bytes in one
/// piece, then the aligned 32-bit word that holds the n / 16 scale bytes.
/// Only the shapes of 128-channel heads (n = 32 and 16) are staged.
SmallVector<int64_t> stagedRowPieces(msa::PagedCacheType type, int64_t n) {
  if (!isNVFP4Cache(type))
    return SmallVector<int64_t>(n / 16, 16);
  return {n / 2, 4};
}

bool attentionStageFits(const AttentionShape &s, msa::PagedCacheType type,
                        msa::PagedCacheType vtype) {
  return attentionStageAhead > 0 && attentionRingUnroll && s.d == 128 &&
         isDecodedCache(type) && isDecodedCache(vtype) &&
         attentionStepSoftmax == 0;
}

/// Bytes one lane stages per 16-key group (attentionGroupRaw's rows).
int64_t attentionStagedLaneBytes(const AttentionShape &s,
                                 msa::PagedCacheType type,
                                 msa::PagedCacheType vtype) {
  int64_t bytes = 0;
  for (int64_t size : stagedRowPieces(type, s.d / 4))
    bytes += 2 * size;
  for (int64_t size : stagedRowPieces(vtype, s.d / 8))
    bytes += 4 * size;
  return bytes;
}

/// The staged rows of one group in a warp's slot at byte `slot` of the
/// shared array `smem`: piece after piece, each as 32 lanes' pieces of its
/// size (lane l at l * size), so that a warp's reads of one piece are
/// conflict-free. `at` counts the slot's bytes used so far.
struct StagedRows {
  GK &g;
  Value smem, slot;
  int64_t at = 0;
  Value pieceAddress(int64_t size) {
    KB &k = g.k;
    auto sharedT = LLVM::LLVMPointerType::get(k.b.getContext(), 3);
    Value byte = k.iadd(k.iadd(slot, k.c(at)), k.imul(g.lane, k.c(size)));
    at += kWarp * size;
    return LLVM::GEPOp::create(k.b, k.loc, sharedT, k.b.getI8Type(), smem,
                               ValueRange{k.toI64(byte)});
  }
};

/// Copies (cp.async) this lane's pieces of channels [c0, c0 + n) of row
/// `key` (cacheRowRaw's bytes) into `rows`. `cacheG` is the cache as a
/// global-space pointer.
void stageCacheRow(GK &g, StagedRows &rows, msa::PagedCacheType type,
                   Value cacheG, Value phys, Value kvHead, Value key, Value c0,
                   int64_t n) {
  KB &k = g.k;
  auto globalT = LLVM::LLVMPointerType::get(k.b.getContext(), 1);
  CacheRow row = cacheRow(k, cacheG, type, phys, kvHead, key);
  auto copy = [&](Value byte, int64_t size) {
    Value from = LLVM::GEPOp::create(k.b, k.loc, globalT, k.b.getI8Type(),
                                     cacheG, ValueRange{k.toI64(byte)});
    // Through L1 (.ca) at every size: a K row's two 16-byte FP8 pieces of
    // a lane lie 16 bytes apart, so one copy instruction of the warp reads
    // half of each 32-byte sector of its rows and the next one the other
    // half; with .cg (L2 only) every sector was read from L2 twice (ncu,
    // H100, batch 8 / 128K: L2 87 % busy at 50 % DRAM throughput, L1 hit
    // rate 2 % against the register loads' 34 %; docs/perf.md,
    // thirty-eighth session).
    NVVM::CpAsyncOp::create(k.b, k.loc, rows.pieceAddress(size), from, size,
                            NVVM::LoadCacheModifierKind::CA, Value());
  };
  if (!isNVFP4Cache(type)) {
    for (int64_t j = 0; j < n / 16; ++j)
      copy(k.iadd(row.data, k.iadd(c0, k.c(16 * j))), 16);
    return;
  }
  copy(k.iadd(row.data, k.idiv(c0, k.c(2))), n / 2);
  Value scaleAt = k.iadd(row.scales, k.idiv(c0, k.c(16)));
  copy(k.imul(k.idiv(scaleAt, k.c(4)), k.c(4)), 4);
}

/// cacheRowRaw's words of the row stageCacheRow copied into `rows`.
SmallVector<Value> stagedCacheRow(GK &g, StagedRows &rows,
                                  msa::PagedCacheType type, Value c0,
                                  int64_t n) {
  KB &k = g.k;
  auto load = [&](int64_t size) {
    const int64_t words = size / 4;
    Value at = rows.pieceAddress(size);
    SmallVector<Value> out;
    if (words == 1) {
      out.push_back(LLVM::LoadOp::create(k.b, k.loc, k.i32, at, 4));
      return out;
    }
    auto vec = VectorType::get({words}, k.i32);
    Value v = LLVM::LoadOp::create(k.b, k.loc, vec, at, size);
    for (int64_t e = 0; e < words; ++e)
      out.push_back(LLVM::ExtractElementOp::create(k.b, k.loc, v, g.ci32(e)));
    return out;
  };
  SmallVector<Value> out;
  if (!isNVFP4Cache(type)) {
    for (int64_t j = 0; j < n / 16; ++j)
      llvm::append_range(out, load(16));
    return out;
  }
  out = load(n / 2);
  // The scale bytes from their aligned word: byte (c0 / 16) mod 4 on (a
  // row's scales start 4-byte aligned: 8 per row at D = 128, the only
  // staged head size).
  Value word = load(4)[0];
  Value shift = arith::IndexCastOp::create(
      k.b, k.loc, k.i32, k.imul(k.irem(k.idiv(c0, k.c(16)), k.c(4)), k.c(8)));
  word = arith::ShRUIOp::create(k.b, k.loc, word, shift);
  // One scale byte is used as the word itself (nvfp4RawScaleByte).
  if (nvfp4RawScaleBytes(n) == 1)
    word = arith::AndIOp::create(k.b, k.loc, word, g.ci32(0xFF));
  out.push_back(word);
  return out;
}

/// attentionGroupRaw's rows of group `grp` into (stage) or out of (read)
/// the warp's slot `slot`.
void stageAttentionGroup(GK &g, const AttentionShape &s, Value smem, Value slot,
                         Value grp, Value phys, Value kvHead,
                         msa::PagedCacheType type, msa::PagedCacheType vtype,
                         Value kg, Value vg) {
  KB &k = g.k;
  const int64_t d = s.d;
  Value quad = k.irem(g.lane, k.c(4)), row = k.idiv(g.lane, k.c(4));
  Value key0 = k.imul(grp, k.c(16));
  StagedRows rows{g, smem, slot};
  for (int64_t nt = 0; nt < 2; ++nt)
    stageCacheRow(g, rows, type, kg, phys, kvHead,
                  k.iadd(key0, k.iadd(k.c(nt * 8), row)),
                  k.imul(quad, k.c(d / 4)), d / 4);
  for (int64_t dk : kVKeys)
    stageCacheRow(g, rows, vtype, vg, phys, kvHead,
                  k.iadd(key0, k.iadd(k.c(dk), k.imul(quad, k.c(2)))),
                  k.imul(row, k.c(d / 8)), d / 8);
}

SmallVector<Value> stagedAttentionGroup(GK &g, const AttentionShape &s,
                                        Value smem, Value slot,
                                        msa::PagedCacheType type,
                                        msa::PagedCacheType vtype) {
  KB &k = g.k;
  const int64_t d = s.d;
  Value quad = k.irem(g.lane, k.c(4)), row = k.idiv(g.lane, k.c(4));
  StagedRows rows{g, smem, slot};
  SmallVector<Value> raw;
  for (int64_t nt = 0; nt < 2; ++nt)
    llvm::append_range(
        raw, stagedCacheRow(g, rows, type, k.imul(quad, k.c(d / 4)), d / 4));
  for (int64_t i = 0; i < 4; ++i)
    llvm::append_range(
        raw, stagedCacheRow(g, rows, vtype, k.imul(row, k.c(d / 8)), d / 8));
  return raw;
}

/// Group `grp` of block `blk` for attentionGroupsMath from
/// attentionGroupRaw's `raw` words, decoded here (`table`: the NVFP4 decode
/// table in shared memory, or null: no NVFP4 cache, or g.e2m1). With
/// `deferV` only the K rows are decoded here, and the V rows (as loaded,
/// masked) in MathGroup::decodeV, when the group's P V products need them.
MathGroup attentionGroupWords(GK &g, const AttentionShape &s, Value grp,
                              Value blk, Value p, ArrayRef<Value> raw,
                              msa::PagedCacheType type,
                              msa::PagedCacheType vtype, Value table,
                              ArrayRef<SmallVector<Value>> qa, bool knownFull,
                              bool deferV) {
  KB &k = g.k;
  const int64_t d = s.d;
  const int64_t kn = cacheRowRawWords(type, d / 4),
                vn = cacheRowRawWords(vtype, d / 8);
  // Zero the raw words of V rows past the position (decoded, zero codes
  // and a zero scale give 0 in every format), in the groups with such rows.
  Value key0 = k.imul(grp, k.c(16));
  SmallVector<Value> vRaw(raw.begin() + 2 * kn, raw.end());
  SmallVector<Type> vTypes(vRaw.size(), k.i32);
  if (!knownFull)
    vRaw = g.ifElse(
        groupFullyVisible(k, s, blk, key0, p), vTypes,
        [&]() -> SmallVector<Value> { return vRaw; },
        [&]() -> SmallVector<Value> {
          Value quad = k.irem(g.lane, k.c(4));
          SmallVector<Value> masked;
          for (int64_t i = 0; i < 4; ++i) {
            Value key =
                k.iadd(key0, k.iadd(k.c(kVKeys[i]), k.imul(quad, k.c(2))));
            Value visible =
                k.icmp(CmpI::sle, k.iadd(k.imul(blk, k.c(s.page)), key), p);
            for (int64_t j = 0; j < vn; ++j)
              masked.push_back(k.select(visible, vRaw[i * vn + j], g.ci32(0)));
          }
          return masked;
        });
  MathGroup out;
  out.key0 = key0;
  out.blk = blk;
  out.qa.assign(qa.begin(), qa.end());
  GroupWords &words = out.words;
  words.vMasked = true;
  words.knownFull = knownFull;
  words.kF16 = f16Operands(type);
  words.vF16 = f16Operands(vtype);
  const bool e4m3Table = attentionE4M3Table(g, type, vtype, d);
  for (int64_t nt = 0; nt < 2; ++nt)
    words.kw.push_back(decodeCacheRowRaw(g, type, raw.slice(nt * kn, kn), d / 4,
                                         table, words.kF16, e4m3Table));
  // --gpu-attention-v-prmt with V as E4M3 bytes (FP8, or NVFP4 through
  // the E4M3 table): each pair of keys' bytes interleaved first (prmt
  // 0x5140 / 0x7362: channels c, c + 1 of both keys), so that one
  // widening makes a P V operand word (keys 2 quad + {0, 1} or + {8, 9},
  // channel nt = 4 j + c of word j) instead of widening each key's pairs
  // and permuting them after.
  const bool vBytes = attentionVPrmt && (d / 8) % 4 == 0 &&
                      (isa<Float8E4M3FNType>(vtype.getElementType()) ||
                       (isNVFP4Cache(vtype) && e4m3Table));
  auto decodeV = [&g, d, vn, vtype, table, e4m3Table, vBytes,
                  vRaw](GroupWords &words) {
    for (int64_t i = 0; i < 4 && !vBytes; ++i)
      words.vw.push_back(
          decodeCacheRowRaw(g, vtype, ArrayRef<Value>(vRaw).slice(i * vn, vn),
                            d / 8, table, words.vF16, e4m3Table));
    if (!vBytes)
      return;
    SmallVector<SmallVector<Value>> bytes;
    for (int64_t i = 0; i < 4; ++i) {
      ArrayRef<Value> row = ArrayRef<Value>(vRaw).slice(i * vn, vn);
      bytes.push_back(isNVFP4Cache(vtype)
                          ? indexKeyE4M3Words(g, vtype, row, d / 8, table)
                          : SmallVector<Value>(row.begin(), row.end()));
    }
    words.vb.assign(d / 8, SmallVector<Value>(2));
    for (int64_t pr = 0; pr < 2; ++pr)
      for (int64_t j = 0; j < d / 32; ++j)
        for (int64_t h = 0; h < 2; ++h) {
          auto ops =
              e4m3WordToOperands(g,
                                 g.prmt(bytes[2 * pr][j], bytes[2 * pr + 1][j],
                                        g.ci32(h ? 0x7362 : 0x5140)),
                                 words.vF16);
          words.vb[4 * j + 2 * h][pr] = ops[0];
          words.vb[4 * j + 2 * h + 1][pr] = ops[1];
        }
  };
  if (deferV)
    out.decodeV = decodeV;
  else
    decodeV(words);
  return out;
}

/// attentionGroupsMath on group `grp` of block `blk` alone, from
/// attentionGroupRaw's `raw` words (attentionGroupWords).
SmallVector<Value>
attentionGroupFromRaw(GK &g, const AttentionShape &s, Value grp, Value blk,
                      Value p, ArrayRef<Value> raw, msa::PagedCacheType type,
                      msa::PagedCacheType vtype, Value table,
                      ArrayRef<SmallVector<Value>> qa, Value scale,
                      ValueRange st, bool knownFull = false) {
  MathGroup group = attentionGroupWords(g, s, grp, blk, p, raw, type, vtype,
                                        table, qa, knownFull, /*deferV=*/false);
  return attentionGroupsMath(g, s, p, MutableArrayRef<MathGroup>(group), scale,
                             st);
}

/// A 16-key group staged in shared memory (the multi-token attention path):
/// its 16 K rows, then its 16 V rows, D bf16 each, in 16-byte pieces.
int64_t stagedGroupBytes(int64_t d) { return 2 * 16 * d * 2; }

/// Piece position of 16-byte piece `c` of staged K (or V, `isV`) row `n`
/// (0..15). An XOR on the piece index, within aligned groups of 4 (K) or 8
/// (V) pieces, so that the fragment reads of attentionGroupMath's channel
/// assignment hit 8 distinct 16-byte bank groups per 8 lanes (one shared
/// memory wavefront of 16-byte loads) for D = 64 and 128: lanes (row, quad)
/// read piece quad D/32 + j of K row (nt 8 + row), and piece row D/64 + j of
/// V row (2 quad + {0, 1, 8, 9}). Other D keep the plain layout.
Value stagedPiece(KB &k, int64_t d, bool isV, Value n, Value c) {
  const int64_t pieces = d / 8;
  auto bit = [&](Value v, int64_t b) {
    return k.irem(k.idiv(v, k.c(int64_t(1) << b)), k.c(2));
  };
  Value mask;
  if (pieces == 16)
    mask = isV ? k.iadd(bit(n, 1), k.imul(bit(n, 2), k.c(4)))
               : k.iadd(bit(n, 0), k.imul(bit(c, 3), k.c(2)));
  else if (pieces == 8)
    mask = isV ? k.imul(k.irem(k.idiv(n, k.c(2)), k.c(4)), k.c(2)) : bit(n, 0);
  else
    return c;
  return arith::XOrIOp::create(k.b, k.loc, c, mask);
}

/// `count` 32-bit words of staged K (or V) row `n` from word `w0`, the rows
/// at byte `base` of the shared array `smem` (16-byte loads when
/// `aligned16`: w0 and count multiples of 4).
SmallVector<Value> stagedWords(GK &g, Value smem, Value base, int64_t d,
                               bool isV, Value n, Value w0, int64_t count,
                               bool aligned16) {
  KB &k = g.k;
  auto sharedT = LLVM::LLVMPointerType::get(k.b.getContext(), 3);
  Value rowAt = k.iadd(base, k.imul(n, k.c(2 * d)));
  auto at = [&](Value byte) {
    return LLVM::GEPOp::create(k.b, k.loc, sharedT, k.b.getI8Type(), smem,
                               ValueRange{k.toI64(byte)});
  };
  SmallVector<Value> out;
  if (aligned16) {
    auto vec = VectorType::get({4}, k.i32);
    for (int64_t j = 0; j < count / 4; ++j) {
      Value c = k.iadd(k.idiv(w0, k.c(4)), k.c(j));
      Value piece = stagedPiece(k, d, isV, n, c);
      Value x = LLVM::LoadOp::create(
          k.b, k.loc, vec, at(k.iadd(rowAt, k.imul(piece, k.c(16)))), 16);
      for (int64_t e = 0; e < 4; ++e)
        out.push_back(LLVM::ExtractElementOp::create(k.b, k.loc, x, g.ci32(e)));
    }
    return out;
  }
  for (int64_t i = 0; i < count; ++i) {
    Value w = k.iadd(w0, k.c(i));
    Value piece = stagedPiece(k, d, isV, n, k.idiv(w, k.c(4)));
    Value byte = k.iadd(k.iadd(rowAt, k.imul(piece, k.c(16))),
                        k.imul(k.irem(w, k.c(4)), k.c(4)));
    out.push_back(LLVM::LoadOp::create(k.b, k.loc, k.i32, at(byte), 4));
  }
  return out;
}

/// Copies the 16 keys from slot `key0` of cache page `phys` (KV head
/// `kvHead`) into the stage at byte `stage` of `smem`: K rows then V rows,
/// one cp.async of 16 bytes per piece, pieces tid, tid + threads, ...
/// `kg` and `vg` are the caches as global-space pointers.
void stageGroup(GK &g, Value smem, Value stage, msa::PagedCacheType type,
                Value kg, Value vg, Value phys, Value kvHead, Value key0) {
  KB &k = g.k;
  MLIRContext *ctx = k.b.getContext();
  auto globalT = LLVM::LLVMPointerType::get(ctx, 1);
  auto sharedT = LLVM::LLVMPointerType::get(ctx, 3);
  const int64_t d = type.getHeadDim(), pieces = d / 8, total = 16 * pieces;
  for (int64_t arr = 0; arr < 2; ++arr)
    for (int64_t i = 0; i * g.threads < total; ++i) {
      Value l = k.iadd(g.tid, k.c(i * g.threads));
      auto copy = [&] {
        Value n = k.idiv(l, k.c(pieces)), c = k.irem(l, k.c(pieces));
        Value from = LLVM::GEPOp::create(
            k.b, k.loc, globalT, k.i16, arr ? vg : kg,
            ValueRange{k.toI64(
                k.iadd(cacheOffset(k, phys, kvHead, k.iadd(key0, n), type),
                       k.imul(c, k.c(8))))});
        Value byte =
            k.iadd(k.iadd(stage, k.c(arr * 16 * d * 2)),
                   k.iadd(k.imul(n, k.c(2 * d)),
                          k.imul(stagedPiece(k, d, arr == 1, n, c), k.c(16))));
        Value to = LLVM::GEPOp::create(k.b, k.loc, sharedT, k.b.getI8Type(),
                                       smem, ValueRange{k.toI64(byte)});
        NVVM::CpAsyncOp::create(k.b, k.loc, to, from, 16,
                                NVVM::LoadCacheModifierKind::CG, Value());
      };
      if ((i + 1) * g.threads > total)
        k.ifThen(k.icmp(CmpI::ult, l, k.c(total)), copy);
      else
        copy();
    }
}

/// attentionGroupMath on the group staged at byte `stage` of `smem` (the
/// keys key0 .. key0 + 15 of block `blk`).
SmallVector<Value> attentionGroupStaged(GK &g, const AttentionShape &s,
                                        Value smem, Value stage, Value key0,
                                        Value blk, Value p,
                                        ArrayRef<SmallVector<Value>> qa,
                                        Value scale, ValueRange st) {
  KB &k = g.k;
  const int64_t d = s.d, kWords = d / 8, vWords = d / 16;
  Value quad = k.irem(g.lane, k.c(4)), row = k.idiv(g.lane, k.c(4));
  Value vStage = k.iadd(stage, k.c(16 * d * 2));
  GroupWords words;
  for (int64_t nt = 0; nt < 2; ++nt)
    words.kw.push_back(
        stagedWords(g, smem, stage, d, /*isV=*/false, k.iadd(k.c(nt * 8), row),
                    k.imul(quad, k.c(kWords)), kWords, kWords % 4 == 0));
  for (int64_t dk : kVKeys)
    words.vw.push_back(stagedWords(
        g, smem, vStage, d, /*isV=*/true, k.iadd(k.c(dk), k.imul(quad, k.c(2))),
        k.imul(row, k.c(vWords)), vWords, vWords % 4 == 0));
  return attentionGroupMath(g, s, key0, blk, p, std::move(words), qa, scale,
                            st);
}

bool attentionFits(Operation *op, int64_t threads) {
  if (op->getNumResults() != 1 && !op->getResult(1).use_empty())
    return false;
  AttentionShape s = attentionShape(op);
  auto type = cast<msa::PagedCacheType>(op->getOperand(1).getType());
  auto vtype = cast<msa::PagedCacheType>(op->getOperand(2).getType());
  // bf16 K and V, or FP8 / NVFP4 ones decoded to f16 operands.
  for (msa::PagedCacheType t : {type, vtype})
    if (!t.getElementType().isBF16() && !isDecodedCache(t))
      return false;
  Type qe = elementOf(op->getOperand(0));
  // bf16 queries only: the mma takes bf16 (or, converted exactly, f16)
  // operands, and rounding FP32 queries would change the scores beyond
  // summation order.
  if (!qe.isBF16())
    return false;
  const int64_t warps = threads / kWarp;
  // D <= 128 keeps the per-warp O tiles within 48 KiB of static shared
  // memory (4 warps x 16 rows x D floats).
  // K rows are read in slices of D / 4 channels, V rows of D / 8.
  return s.d % 32 == 0 && s.d <= 128 && s.group <= 16 &&
         s.page % (warps * 16) == 0 && cacheSlicesFit(type, s.d / 4) &&
         cacheSlicesFit(vtype, s.d / 8);
}

/// Work item (t, g, c): the query heads of KV head g of token t (the rows
/// of a 16-row tensor-core tile; rows past the group are zero) over chunk c
/// of the token's blocks, in one of two ways. The step has T Hkv C items,
/// C = attentionStepChunks(T) (many chunks for a decode step of few
/// tokens, so that it fills the GPU), tokens fastest.
///
/// Per token: each warp takes 16-key groups of every block of the chunk:
/// S = Q K^T by mma.sync m16n8k16 (bf16 in, FP32 out) from registers (Q)
/// and global memory (K), online softmax on the accumulator fragments,
/// O += P V by mma.sync with P repacked from the S fragments. Each warp
/// loads the K and V words of its next groups (kAheadWords registers for
/// D <= 64; kAheadWordsWide beyond, Q fragments then in shared memory)
/// before the math of the current one; FP8 / NVFP4 words are decoded only
/// when used (NVFP4 table in shared memory, or with g.e2m1 the hardware
/// conversions). The warps' (O, max, sum) are
/// combined in shared memory into the chunk's partial (unnormalized O, max,
/// sum) in the workspace; part 1 (attentionCombineKernel) combines the
/// chunks. P enters the P.V product as the sum of two bf16 terms (see
/// attentionGroupMath).
///
/// Several tokens (dense attention): the step's tokens form aligned runs of
/// R = warps tokens (t0 = t - t mod R). When the run lies within the step,
/// its tokens belong to one sequence and their positions lie in the same
/// block (so they have the same blocks and the same chunk split), one CTA
/// computes chunk c for all R tokens, one token per warp: it stages each
/// 16-key group's K and V once in shared memory (cp.async, a ring of R
/// groups) and every warp runs the per-token math on it, over all groups
/// of the chunk in order, then writes its token's partial straight to the
/// workspace. Of the run's R items for chunk c, the one with t mod R ==
/// c mod R does it and the others skip; every other run (a decode step's
/// tokens of different sequences, a run crossing a block or the step's end)
/// takes the per-token way. The choice depends on the item alone, so any
/// grid gives the same result, and the workspace layout is the same.
void attentionKernel(GK &g, Operation *op) {
  KB &k = g.k;
  const bool sparse = isa<msa::SparseAttentionOp>(op);
  AttentionShape s = attentionShape(op);
  Value q = k.ptr(0), kc = k.ptr(1), vc = k.ptr(2), table = k.ptr(3),
        seqs = k.ptr(4), pos = k.ptr(5);
  const int base = sparse ? 7 : 6;
  Value ids = sparse ? k.ptr(6) : Value();
  auto type = cast<msa::PagedCacheType>(op->getOperand(1).getType());
  auto vtype = cast<msa::PagedCacheType>(op->getOperand(2).getType());
  const float scale =
      sparse ? cast<msa::SparseAttentionOp>(op).getScale().convertToFloat()
             : cast<msa::DenseAttentionOp>(op).getScale().convertToFloat();
  const int64_t kk = s.kk;
  const int64_t d = s.d, kSteps = d / 16, nTiles = d / 8;
  const int64_t groupsPerBlock = s.page / 16;
  if (attentionCtasPerSM > 0)
    g.declareLaunch(g.threads, 0, attentionCtasPerSM);
  Value T = k.scalar(0);
  Value chunks = attentionStepChunks(g, s, T);
  Value ws = attentionWorkspace(g, base, chunks);
  // The NVFP4 decode table (nvfp4BF16Table) in shared memory, off the
  // global-memory path of the cache loads (none with g.e2m1).
  Value decodeTable;
  if (attentionE4M3Table(g, type, vtype, d)) {
    decodeTable = nvfp4E4M3TableInShared(g);
    NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 0);
    g.sync();
  } else if ((isNVFP4Cache(type) || isNVFP4Cache(vtype)) && !g.e2m1) {
    Value global = isNVFP4Cache(type)
                       ? nvfp4Table(g, type, f16Operands(type))
                       : nvfp4Table(g, vtype, f16Operands(vtype));
    decodeTable = g.shared(k.i32, kNvfp4TableWords);
    auto vec = VectorType::get({4}, k.i32);
    g.strided(g.tid, k.c(kNvfp4TableWords / 4), [&](Value r) {
      Value at = k.imul(r, k.c(4));
      Value v =
          LLVM::LoadOp::create(k.b, k.loc, vec, k.gep(global, at, k.i32), 16);
      LLVM::StoreOp::create(k.b, k.loc, v, k.gep(decodeTable, at, k.i32), 16);
    });
    g.sync();
  }
  // The warps' O tiles; the multi-token way stages its groups here first
  // (warps x 16 x D floats hold `warps` staged groups of 64 D bytes).
  Value oSmem = g.sharedSpace(k.f32, g.warps * 16 * d, 16);
  Value oS = LLVM::AddrSpaceCastOp::create(k.b, k.loc, k.ptrT, oSmem);
  Value mS = g.shared(k.f32, g.warps * 16), lS = g.shared(k.f32, g.warps * 16);
  // --gpu-attention-stash-weights: each (warp, head)'s combine weight.
  Value wS = attentionStashWeights ? g.shared(k.f32, g.warps * 16) : Value();
  Value negInf = k.cf(-INFINITY);
  Value quad = k.irem(g.lane, k.c(4)), row = k.idiv(g.lane, k.c(4));
  Value row8 = k.iadd(row, k.c(8));

  // Q fragments of token t (A, row-major 16 x 16 per k-step): rows `row`
  // and `row + 8` (query heads of the group; zero past it), the lane's D/8
  // words (16-byte loads) in the k assignment of attentionGroupRaw.
  auto queryFragments = [&](Value t, Value qHead0) {
    auto rowWords = [&](Value r) {
      Value inGroup = k.icmp(CmpI::ult, r, k.c(s.group));
      Value head = k.iadd(qHead0, g.imin(r, k.c(s.group - 1)));
      Value at = k.iadd(k.imul(k.iadd(k.imul(t, k.c(s.hq)), head), k.c(d / 2)),
                        k.imul(quad, k.c(d / 8)));
      SmallVector<Value> w = g.loadWords(q, at, d / 8, (d / 8) % 4 == 0);
      for (Value &x : w)
        x = k.select(inGroup, x, g.ci32(0));
      return w;
    };
    SmallVector<Value> qLo = rowWords(row), qHi = rowWords(row8);
    SmallVector<SmallVector<Value>> qa;
    for (int64_t ks = 0; ks < kSteps; ++ks)
      qa.push_back(
          {qLo[2 * ks], qHi[2 * ks], qLo[2 * ks + 1], qHi[2 * ks + 1]});
    return qa;
  };
  // Dense blocks of chunk `chunk` for a token at position p: slots [lo, hi).
  auto denseChunk = [&](Value p, Value chunk) -> std::pair<Value, Value> {
    Value nb = k.iadd(k.idiv(p, k.c(s.page)), k.c(1));
    Value per = k.idiv(k.iadd(nb, g.isub(chunks, k.c(1))), chunks);
    Value lo = g.imin(k.imul(chunk, per), nb);
    return {lo, g.imin(k.iadd(lo, per), nb)};
  };
  // Loop state: O fragments (4 per 8-channel tile), then max and partial
  // sum of rows `row` and `row + 8`.
  SmallVector<Value> init(nTiles * 4, k.cf(0));
  init.append({negInf, negInf, k.cf(0), k.cf(0)});
  SmallVector<Type> types(init.size(), k.f32);
  // Per-token way: raw words of one 16-key group per lane, and the groups
  // each warp loads ahead: for heads of up to 64 channels kAheadWords
  // registers (1 to 4 groups). Wider heads already hold 220-245 registers
  // (O 64, Q 32, the group's K and V words 64 at D = 128; ptxas, sm_90a):
  // their Q fragments wait in shared memory (qShared) and the groups ahead
  // get kAheadWordsWide registers (D = 128: FP8 and NVFP4 2 groups; a bf16
  // group, 64 words, would spill and stays at none).
  const int64_t rawWords = attentionGroupRawWords(s, type, vtype);
  // --gpu-attention-sparse-ahead overrides the wide heads' count for
  // sparse attention where they load ahead at all (FP8 and NVFP4 groups).
  // --gpu-attention-stage-ahead: the groups ahead wait in shared memory
  // (the warp's slots of stageSmem) instead of registers.
  const bool staged = attentionStageFits(s, type, vtype);
  const int64_t ahead = staged ? std::min<int64_t>(attentionStageAhead, 6)
                        : d <= 64
                            ? std::clamp<int64_t>(kAheadWords / rawWords, 1, 4)
                        : rawWords >= kAheadWordsWide ? 0
                        : sparse && attentionSparseAhead > 0
                            ? std::min<int64_t>(attentionSparseAhead, 4)
                            : std::min<int64_t>(kAheadWordsWide / rawWords, 4);
  const bool qShared = d > 64 && ahead > 0;
  const int64_t stageSlotBytes =
      staged ? kWarp * attentionStagedLaneBytes(s, type, vtype) : 0;
  Value stageSmem;
  if (staged) {
    const int64_t bytes = g.warps * (ahead + 1) * stageSlotBytes;
    if (attentionCtasPerSM > 0)
      g.declareLaunch(g.threads, bytes, attentionCtasPerSM);
    else
      g.declareDynamicShared(bytes);
    stageSmem = g.dynamicShared();
  }
  // This warp's (O, max, full sum) to rows [16 warp, 16 warp + 16) of oS,
  // mS and lS (the four lanes of a quad hold a row's partial sums).
  // With `vF16` (the per-token way's f16 V operands) or under the q8
  // contract O carries attentionGroupMath's attentionPScale (kF16PScale,
  // or 448), divided out here.
  auto stashWarp = [&](ArrayRef<Value> st, bool vF16) {
    // attentionGroupsMath's P carries attentionPScale with f16 V or under
    // the q8 contract (O does; the sums too with the fma scores).
    const bool pScaled = vF16 || s.q8;
    const float pScale = attentionPScale(s);
    Value l0 = st[nTiles * 4 + 2], l1 = st[nTiles * 4 + 3];
    for (int64_t off : {1, 2}) {
      l0 = k.add(l0, g.shflXor(l0, off));
      l1 = k.add(l1, g.shflXor(l1, off));
    }
    // --gpu-attention-score-fma: the sums carry the factor like O.
    if (attentionScoreFmaFor(vF16)) {
      l0 = k.mul(l0, k.cf(1.0 / pScale));
      l1 = k.mul(l1, k.cf(1.0 / pScale));
    }
    Value wRow = k.imul(g.warp, k.c(16));
    for (int64_t nt = 0; nt < nTiles; ++nt)
      for (int64_t e = 0; e < 4; ++e) {
        Value r = e < 2 ? row : row8;
        // Column n = 2 quad + e % 2 of O tile nt is channel n * D/8 + nt.
        Value col = k.iadd(
            k.imul(k.iadd(k.imul(quad, k.c(2)), k.c(e % 2)), k.c(nTiles)),
            k.c(nt));
        Value o = st[nt * 4 + e];
        if (pScaled)
          o = k.mul(o, k.cf(1.0 / pScale));
        k.storeF(oS, k.iadd(k.imul(k.iadd(wRow, r), k.c(d)), col), o, k.f32);
      }
    // attentionGroupMath's maxima in natural units (--gpu-attention-exp2).
    Value m0 = st[nTiles * 4], m1 = st[nTiles * 4 + 1];
    if (attentionExp2) {
      m0 = k.mul(m0, k.cf(float(M_LN2)));
      m1 = k.mul(m1, k.cf(float(M_LN2)));
    }
    k.ifThen(g.eq(quad, k.c(0)), [&] {
      k.storeF(mS, k.iadd(wRow, row), m0, k.f32);
      k.storeF(mS, k.iadd(wRow, row8), m1, k.f32);
      k.storeF(lS, k.iadd(wRow, row), l0, k.f32);
      k.storeF(lS, k.iadd(wRow, row8), l1, k.f32);
    });
  };
  // Workspace row of (token t, query head `head`, chunk).
  auto wsRow = [&](Value t, Value head, Value chunk) {
    return k.imul(
        k.iadd(k.imul(k.iadd(k.imul(t, k.c(s.hq)), head), chunks), chunk),
        k.c(d + 2));
  };

  auto perToken = [&](Value t, Value kvHead, Value chunk) {
    Value p = k.loadIndex(pos, t);
    Value seq = k.loadIndex(seqs, t);
    Value qHead0 = k.imul(kvHead, k.c(s.group));
    SmallVector<SmallVector<Value>> qa = queryFragments(t, qHead0);
    // f16 fragments with an FP8 or NVFP4 K cache (queryWordsToF16); under
    // the q8 contract each query value rounded to E4M3 (exact in the f16
    // or bf16 operand, no scaling).
    Value itemScale = k.cf(scale);
    if (s.q8) {
      for (SmallVector<Value> &f : qa)
        for (Value &v : f)
          v = bf16WordToE4M3Operand(g, v, f16Operands(type));
    } else if (f16Operands(type)) {
      SmallVector<Value> flat;
      for (const SmallVector<Value> &f : qa)
        llvm::append_range(flat, f);
      itemScale = k.mul(itemScale, queryWordsToF16(g, flat));
      for (size_t ks = 0, at = 0; ks < qa.size(); ++ks)
        for (Value &v : qa[ks])
          v = flat[at++];
    }
    // With qShared, the Q fragments wait in this warp's rows of oS during
    // the loop (lane-major 16-byte pieces, conflict-free) and are read
    // back per group: their D/4 registers hold a group loaded ahead
    // instead. stashWarp overwrites them after the loop.
    Value qAt;
    if (qShared) {
      qAt = k.iadd(k.imul(g.warp, k.c(16 * d)), k.imul(g.lane, k.c(4)));
      for (int64_t ks = 0; ks < kSteps; ++ks)
        for (int64_t e = 0; e < 4; ++e)
          g.storeI32(oS, k.iadd(qAt, k.c(ks * 4 * kWarp + e)), qa[ks][e]);
    }
    // Volatile: read per group, not hoisted out of the loop.
    auto sharedQ = [&]() -> SmallVector<SmallVector<Value>> {
      auto vec = VectorType::get({4}, k.i32);
      SmallVector<SmallVector<Value>> q;
      for (int64_t ks = 0; ks < kSteps; ++ks) {
        Value x = LLVM::LoadOp::create(
            k.b, k.loc, vec, k.gep(oS, k.iadd(qAt, k.c(ks * 4 * kWarp)), k.i32),
            16,
            /*isVolatile=*/true);
        q.emplace_back();
        for (int64_t e = 0; e < 4; ++e)
          q.back().push_back(
              LLVM::ExtractElementOp::create(k.b, k.loc, x, g.ci32(e)));
      }
      return q;
    };

    // Blocks of this chunk: slots [lo, hi).
    Value lo, hi;
    if (sparse) {
      Value per = k.idiv(k.iadd(k.c(kk), g.isub(chunks, k.c(1))), chunks);
      lo = g.imin(k.imul(chunk, per), k.c(kk));
      hi = g.imin(k.iadd(lo, per), k.c(kk));
    } else {
      std::tie(lo, hi) = denseChunk(p, chunk);
    }
    // This warp's items: group warp + j warps of each block, j < perBlock,
    // block-major (item i: slot lo + i / perBlock). The loads of item i +
    // ahead are issued before the math of item i (a ring of `ahead` items
    // in the loop's registers), so each warp keeps ahead + 1 groups of K
    // and V in flight; their words are decoded only when used.
    const int64_t perBlock = groupsPerBlock / g.warps;
    Value items = k.imul(g.isub(hi, lo), k.c(perBlock));
    Value sparseRow =
        sparse ? k.imul(k.iadd(k.imul(kvHead, T), t), k.c(kk)) : Value();
    auto blockOf = [&](Value i) {
      Value slot = k.iadd(lo, k.idiv(i, k.c(perBlock)));
      return sparse ? k.loadIndex(ids, k.iadd(sparseRow, slot)) : slot;
    };
    auto groupOf = [&](Value i) {
      return k.iadd(g.warp, k.imul(k.irem(i, k.c(perBlock)), k.c(g.warps)));
    };
    // An item in flight: its block (-1: none: past the chunk's end or an
    // unselected sparse slot, whose keys are not loaded) and its raw cache
    // words.
    SmallVector<Type> rawTypes(rawWords, k.i32), indexType{k.b.getIndexType()};
    auto globalPtrT = LLVM::LLVMPointerType::get(k.b.getContext(), 1);
    Value kg = staged
                   ? LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalPtrT, kc)
                         .getResult()
                   : Value();
    Value vg = staged
                   ? LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalPtrT, vc)
                         .getResult()
                   : Value();
    // Byte of this warp's ring slot `slot` in stageSmem.
    auto slotByte = [&](int64_t slot) {
      return k.iadd(k.imul(g.warp, k.c((ahead + 1) * stageSlotBytes)),
                    k.c(slot * stageSlotBytes));
    };
    // An item issued without branches (issueFlat): the block it loads
    // from and the block it carries. Past the end it loads a group of the
    // last item's block (valid addresses; its words are never used) and
    // carries block -1; in sparse attention an unselected slot (block -1)
    // loads from block 0 of the sequence and carries -1.
    auto flatItem = [&](Value i) -> std::pair<Value, Value> {
      Value last = g.isub(items, k.c(1));
      Value blk = blockOf(g.imin(i, last));
      Value inRange = k.icmp(CmpI::ult, i, items);
      Value from = blk;
      if (sparse) {
        Value selected = k.icmp(CmpI::sge, blk, k.c(0));
        from = k.select(selected, blk, k.c(0));
        inRange = g.andI(inRange, selected);
      }
      return {from, k.select(inRange, blk, k.c(-1))};
    };
    // Staged items: the copies of item i's group into `slot`, one cp.async
    // group per item (empty where there is nothing to load), and the item
    // as its block alone.
    auto issueStaged = [&](Value i, int64_t slot, bool flat) {
      SmallVector<Value> item;
      if (flat) {
        auto [from, carried] = flatItem(i);
        stageAttentionGroup(g, s, stageSmem, slotByte(slot), groupOf(i),
                            pageOf(k, table, seq, from), kvHead, type, vtype,
                            kg, vg);
        item.push_back(carried);
      } else {
        Value blk = g.ifElse(
            k.icmp(CmpI::ult, i, items), indexType,
            [&]() -> SmallVector<Value> { return {blockOf(i)}; },
            [&]() -> SmallVector<Value> { return {k.c(-1)}; })[0];
        k.ifThen(k.icmp(CmpI::sge, blk, k.c(0)), [&] {
          stageAttentionGroup(g, s, stageSmem, slotByte(slot), groupOf(i),
                              pageOf(k, table, seq, blk), kvHead, type, vtype,
                              kg, vg);
        });
        item.push_back(blk);
      }
      NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc);
      return item;
    };
    auto issue = [&](Value i) {
      Value blk = g.ifElse(
          k.icmp(CmpI::ult, i, items), indexType,
          [&]() -> SmallVector<Value> { return {blockOf(i)}; },
          [&]() -> SmallVector<Value> { return {k.c(-1)}; })[0];
      SmallVector<Value> item{blk};
      llvm::append_range(
          item, g.ifElse(
                    k.icmp(CmpI::sge, blk, k.c(0)), rawTypes,
                    [&]() -> SmallVector<Value> {
                      return attentionGroupRaw(g, s, groupOf(i),
                                               pageOf(k, table, seq, blk),
                                               kvHead, type, vtype, kc, vc);
                    },
                    [&]() -> SmallVector<Value> {
                      return SmallVector<Value>(rawWords, g.ci32(0));
                    }));
      return item;
    };
    // issue without branches (flatItem), for dense attention's loop over
    // fully visible blocks (--gpu-attention-full-loop) and sparse
    // attention's full steps (--gpu-attention-sparse-full-steps).
    auto issueFlat = [&](Value i) {
      auto [from, carried] = flatItem(i);
      SmallVector<Value> item{carried};
      llvm::append_range(item, attentionGroupRaw(g, s, groupOf(i),
                                                 pageOf(k, table, seq, from),
                                                 kvHead, type, vtype, kc, vc));
      return item;
    };
    SmallVector<Value> loopInit(init.begin(), init.end());
    for (int64_t a = 0; a < ahead; ++a)
      llvm::append_range(loopInit, staged ? issueStaged(k.c(a), a, false)
                                          : issue(k.c(a)));
    const size_t stateSize = init.size(), itemSize = staged ? 1 : rawWords + 1;
    // Item i's group on `state`: its block (-1: none, skipped where
    // `guard`: sparse slots, and the unrolled loop's items past the end).
    // `full`: the item is known to be valid and every key of it visible.
    // Staged items (`slot` >= 0): every copy but those of the `ahead`
    // items issued after it has landed (each lane reads its own words).
    auto step = [&](Value i, ArrayRef<Value> item, ArrayRef<Value> state,
                    bool guard, bool full = false,
                    int64_t slot = -1) -> SmallVector<Value> {
      Value blk = item[0];
      SmallVector<Value> raw(item.begin() + 1, item.end());
      if (slot >= 0)
        NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, ahead);
      auto math = [&]() -> SmallVector<Value> {
        if (slot >= 0)
          raw = stagedAttentionGroup(g, s, stageSmem, slotByte(slot), type,
                                     vtype);
        return attentionGroupFromRaw(g, s, groupOf(i), blk, p, raw, type, vtype,
                                     decodeTable, qShared ? sharedQ() : qa,
                                     itemScale, ValueRange(state), full);
      };
      if (!guard)
        return math();
      return g.ifElse(k.icmp(CmpI::sge, blk, k.c(0)), types, math,
                      [&]() -> SmallVector<Value> {
                        return SmallVector<Value>(state.begin(), state.end());
                      });
    };
    // --gpu-attention-ring-unroll: U = ahead + 1 items per loop step, item
    // i + u in ring slot u (u < U) and its successor `ahead` items on
    // issued into the slot of item i + u - 1, consumed the step before;
    // after U items every slot again holds the item of its own index, so
    // the loop carries the ring in place (one step per item moves every
    // slot down by one: a register copy per word ptxas cannot avoid).
    // Items past the end (the last step's, up to U - 1) are not loaded
    // (issue: block -1) and skipped.
    const int64_t unroll = attentionRingUnroll && ahead > 0 ? ahead + 1 : 1;
    SmallVector<Value> loopOut;
    if (unroll > 1) {
      Value steps = k.idiv(k.iadd(items, k.c(unroll - 1)), k.c(unroll));
      // One loop step: U items; with `full` (all U valid and visible) no
      // guard and no masking, so the step is one basic block but for the
      // O rescale (--gpu-attention-full-loop).
      auto body = [&](bool full) {
        return [&, full](Value t, ValueRange in) -> SmallVector<Value> {
          SmallVector<Value> state(in.take_front(stateSize));
          SmallVector<SmallVector<Value>> slots(unroll);
          for (int64_t a = 0; a < ahead; ++a)
            slots[a].assign(in.begin() + stateSize + a * itemSize,
                            in.begin() + stateSize + (a + 1) * itemSize);
          // --gpu-attention-step-softmax: the full steps' groups as one
          // softmax step (attentionGroupsMath), each group's K decoded and
          // scored as it comes, its V rows decoded for its P V products.
          const bool oneStep = full && attentionStepSoftmax > 0;
          SmallVector<MathGroup, 4> stepGroups;
          for (int64_t u = 0; u < unroll; ++u) {
            Value i = k.iadd(k.imul(t, k.c(unroll)), k.c(u));
            const int64_t into = (u + ahead) % unroll;
            slots[into] = staged
                              ? issueStaged(k.iadd(i, k.c(ahead)), into, full)
                          : full ? issueFlat(k.iadd(i, k.c(ahead)))
                                 : issue(k.iadd(i, k.c(ahead)));
            if (oneStep)
              stepGroups.push_back(attentionGroupWords(
                  g, s, groupOf(i), slots[u][0], p,
                  ArrayRef<Value>(slots[u]).drop_front(), type, vtype,
                  decodeTable, qShared ? sharedQ() : qa, /*knownFull=*/true,
                  /*deferV=*/true));
            else
              state = step(i, slots[u], state, /*guard=*/!full, full,
                           staged ? u : -1);
          }
          if (oneStep)
            state = attentionGroupsMath(
                g, s, p, stepGroups, itemScale, state,
                /*rescaleAlways=*/attentionStepSoftmax == 2);
          for (int64_t a = 0; a < ahead; ++a)
            llvm::append_range(state, slots[a]);
          return state;
        };
      };
      // --gpu-attention-full-loop (dense attention): the steps whose items
      // all lie in blocks every key of which the token sees (blocks below
      // (p + 1) / page) run first, without guards or masks; the rest (the
      // token's own block, the last step's items past the end) after. The
      // guards and masks made each group's math a branch region of its
      // own, so ptxas could not overlap one group's softmax and P V with
      // the next group's decode and scores: at M3's shape the loop step
      // takes 282 instead of 394 SASS instructions per group with FP8
      // caches (464 / 576 with NVFP4; ptxas, the rescale path not
      // counted), and on the H200 at batch 8 / 128K dense attention went
      // from 337 to 301 us (FP8) and 374 to 322 us (NVFP4; docs/perf.md,
      // thirty-third session).
      Value split = k.c(0);
      SmallVector<Value> carried = loopInit;
      if (attentionFullLoop && !sparse) {
        Value fullBlocks = k.idiv(k.iadd(p, k.c(1)), k.c(s.page));
        Value fullItems = k.imul(
            g.imin(g.imax(g.isub(fullBlocks, lo), k.c(0)), g.isub(hi, lo)),
            k.c(perBlock));
        split = k.idiv(fullItems, k.c(unroll));
        carried = k.reduceN(k.c(0), split, loopInit, body(true));
      }
      // --gpu-attention-sparse-full-steps: a step whose items all lie in
      // selected blocks below the token's own (its items in flight carry
      // their blocks; the one it issues first is looked up here) runs as
      // a full step, the others guarded: one uniform branch per step.
      if (attentionSparseFullSteps && sparse) {
        Value fullBlocks = k.idiv(k.iadd(p, k.c(1)), k.c(s.page));
        SmallVector<Type> carriedTypes;
        for (Value v : carried)
          carriedTypes.push_back(v.getType());
        auto isFull = [&](Value blk) {
          return g.andI(k.icmp(CmpI::sge, blk, k.c(0)),
                        k.icmp(CmpI::slt, blk, fullBlocks));
        };
        loopOut = k.reduceN(
            k.c(0), steps, carried,
            [&](Value t, ValueRange in) -> SmallVector<Value> {
              Value i0 = k.imul(t, k.c(unroll));
              Value next = k.iadd(i0, k.c(ahead));
              Value allFull =
                  g.andI(k.icmp(CmpI::ult, next, items),
                         isFull(blockOf(g.imin(next, g.isub(items, k.c(1))))));
              for (int64_t a = 0; a < ahead; ++a)
                allFull = g.andI(allFull, isFull(in[stateSize + a * itemSize]));
              return g.ifElse(
                  allFull, carriedTypes,
                  [&]() -> SmallVector<Value> { return body(true)(t, in); },
                  [&]() -> SmallVector<Value> { return body(false)(t, in); });
            });
      } else {
        loopOut = k.reduceN(split, steps, carried, body(false));
      }
    } else {
      loopOut = k.reduceN(
          k.c(0), items, loopInit,
          [&](Value i, ValueRange in) -> SmallVector<Value> {
            SmallVector<Value> state(in.take_front(stateSize));
            SmallVector<Value> next = issue(k.iadd(i, k.c(ahead)));
            SmallVector<Value> cur =
                ahead ? SmallVector<Value>(in.slice(stateSize, itemSize))
                      : next;
            SmallVector<Value> out = step(i, cur, state, sparse);
            // The ring moves by one item.
            if (ahead) {
              for (Value v : in.drop_front(stateSize + itemSize))
                out.push_back(v);
              llvm::append_range(out, next);
            }
            return out;
          });
    }
    SmallVector<Value> st(loopOut.begin(), loopOut.begin() + stateSize);
    if (staged)
      NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 0);
    // Every lane's last Q read precedes the warp's stash.
    if (qShared)
      NVVM::SyncWarpOp::create(k.b, k.loc, g.ci32(-1));
    stashWarp(st, f16Operands(vtype));
    g.sync();
    // This chunk's (acc, max, sum) per head, combining the warps.
    // --gpu-attention-stash-weights: thread h (< G) takes head h's maximum,
    // its warps' weights exp(m_w - m) (into wS) and weighted sum, once per
    // head; then each channel only multiplies and adds (the same values in
    // the same order as the per-channel form below, which computes each
    // weight for every one of the head's D channels: with few groups per
    // warp, as in sparse attention, that was about as many instructions
    // as the groups' own math; ptxas, docs/perf.md, thirty-fourth session).
    // Head h's largest warp maximum; warp wi's (weight exp(m_wi - m), row
    // sum) for head h; the index of channel c of warp wi's head h in oS.
    auto headMax = [&](Value h) {
      Value m = negInf;
      for (int64_t wi = 0; wi < g.warps; ++wi)
        m = k.maxf(m, k.loadF(mS, k.iadd(k.c(wi * 16), h), k.f32));
      return m;
    };
    auto warpWeight = [&](int64_t wi, Value h,
                          Value m) -> std::pair<Value, Value> {
      Value mw = k.loadF(mS, k.iadd(k.c(wi * 16), h), k.f32);
      Value lw = k.loadF(lS, k.iadd(k.c(wi * 16), h), k.f32);
      // UGT: a NaN sum keeps its (NaN) weight, as the host's would.
      Value wgt = k.select(k.fcmp(CmpF::UGT, lw, k.cf(0)), k.exp(k.sub(mw, m)),
                           k.cf(0));
      return {wgt, lw};
    };
    auto oIndex = [&](int64_t wi, Value h, Value c) {
      return k.iadd(k.imul(k.iadd(k.c(wi * 16), h), k.c(d)), c);
    };
    if (wS) {
      k.ifThen(k.icmp(CmpI::ult, g.tid, k.c(s.group)), [&] {
        Value h = g.tid;
        Value m = headMax(h);
        Value sum = k.cf(0);
        for (int64_t wi = 0; wi < g.warps; ++wi) {
          auto [wgt, lw] = warpWeight(wi, h, m);
          k.storeF(wS, k.iadd(k.c(wi * 16), h), wgt, k.f32);
          sum = k.add(sum, k.mul(wgt, lw));
        }
        Value r = wsRow(t, k.iadd(qHead0, h), chunk);
        k.storeF(ws, k.iadd(r, k.c(d)), m, k.f32);
        k.storeF(ws, k.iadd(r, k.c(d + 1)), sum, k.f32);
      });
      g.sync();
      g.strided(g.tid, k.c(s.group * d), [&](Value e) {
        Value h = k.idiv(e, k.c(d)), c = k.irem(e, k.c(d));
        Value acc = k.cf(0);
        for (int64_t wi = 0; wi < g.warps; ++wi)
          acc = k.add(acc, k.mul(k.loadF(wS, k.iadd(k.c(wi * 16), h), k.f32),
                                 k.loadF(oS, oIndex(wi, h, c), k.f32)));
        k.storeF(ws, k.iadd(wsRow(t, k.iadd(qHead0, h), chunk), c), acc, k.f32);
      });
      g.sync();
      return;
    }
    g.strided(g.tid, k.c(s.group * d), [&](Value e) {
      Value h = k.idiv(e, k.c(d)), c = k.irem(e, k.c(d));
      Value m = headMax(h);
      Value acc = k.cf(0), sum = k.cf(0);
      for (int64_t wi = 0; wi < g.warps; ++wi) {
        auto [wgt, lw] = warpWeight(wi, h, m);
        acc = k.add(acc, k.mul(wgt, k.loadF(oS, oIndex(wi, h, c), k.f32)));
        sum = k.add(sum, k.mul(wgt, lw));
      }
      Value r = wsRow(t, k.iadd(qHead0, h), chunk);
      k.storeF(ws, k.iadd(r, c), acc, k.f32);
      k.ifThen(g.eq(c, k.c(0)), [&] {
        k.storeF(ws, k.iadd(r, k.c(d)), m, k.f32);
        k.storeF(ws, k.iadd(r, k.c(d + 1)), sum, k.f32);
      });
    });
    g.sync();
  };

  // The multi-token way for the run of tokens [t0, t0 + warps), all of
  // sequence `seq` with positions in block p0 / page; warp w takes token
  // t0 + w.
  const int64_t stages = g.warps, stageBytes = stagedGroupBytes(d);
  auto globalT = LLVM::LLVMPointerType::get(k.b.getContext(), 1);
  auto multiToken = [&](Value t0, Value seq, Value p0, Value kvHead,
                        Value chunk) {
    Value t = k.iadd(t0, g.warp);
    Value p = k.loadIndex(pos, t);
    Value qHead0 = k.imul(kvHead, k.c(s.group));
    SmallVector<SmallVector<Value>> qa = queryFragments(t, qHead0);
    // The same blocks for every token of the run (p0's block).
    Value lo, hi;
    std::tie(lo, hi) = denseChunk(p0, chunk);
    Value groups = k.imul(g.isub(hi, lo), k.c(groupsPerBlock));
    Value kg = LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalT, kc);
    Value vg = LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalT, vc);
    // Group i of the chunk: block lo + i / (page / 16), keys from
    // 16 (i mod (page / 16)), in stage i mod stages.
    auto blockOf = [&](Value i) {
      return k.iadd(lo, k.idiv(i, k.c(groupsPerBlock)));
    };
    auto key0Of = [&](Value i) {
      return k.imul(k.irem(i, k.c(groupsPerBlock)), k.c(16));
    };
    auto stageOf = [&](Value i) {
      return k.imul(k.irem(i, k.c(stages)), k.c(stageBytes));
    };
    auto issue = [&](Value i) {
      stageGroup(g, oSmem, stageOf(i), type, kg, vg,
                 pageOf(k, table, seq, blockOf(i)), kvHead, key0Of(i));
    };
    auto commit = [&] { NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc); };
    // One cp.async group per chunk group (empty past the chunk's end), so
    // that waiting for all but the newest stages - 2 means group i landed.
    for (int64_t i = 0; i + 1 < stages; ++i) {
      k.ifThen(k.icmp(CmpI::ult, k.c(i), groups), [&] { issue(k.c(i)); });
      commit();
    }
    SmallVector<Value> st = k.reduceN(
        k.c(0), groups, init,
        [&](Value i, ValueRange in) -> SmallVector<Value> {
          // Every thread's copies of group i have landed; the barrier also
          // ends every warp's reads of group i - 1, whose stage is refilled
          // below.
          NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, stages - 2);
          g.sync();
          Value next = k.iadd(i, k.c(stages - 1));
          k.ifThen(k.icmp(CmpI::ult, next, groups), [&] { issue(next); });
          commit();
          return attentionGroupStaged(g, s, oSmem, stageOf(i), key0Of(i),
                                      blockOf(i), p, qa, k.cf(scale), in);
        });
    // The stages are free once every warp is past its last group.
    NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 0);
    g.sync();
    stashWarp(st, /*pScaled=*/false);
    g.sync();
    // Each token's partial is the chunk's: copy the warps' rows out.
    g.strided(g.tid, k.c(g.warps * s.group * d), [&](Value e) {
      Value wi = k.idiv(e, k.c(s.group * d));
      Value h = k.irem(k.idiv(e, k.c(d)), k.c(s.group));
      Value c = k.irem(e, k.c(d));
      Value sRow = k.iadd(k.imul(wi, k.c(16)), h);
      Value r = wsRow(k.iadd(t0, wi), k.iadd(qHead0, h), chunk);
      k.storeF(ws, k.iadd(r, c),
               k.loadF(oS, k.iadd(k.imul(sRow, k.c(d)), c), k.f32), k.f32);
      k.ifThen(g.eq(c, k.c(0)), [&] {
        k.storeF(ws, k.iadd(r, k.c(d)), k.loadF(mS, sRow, k.f32), k.f32);
        k.storeF(ws, k.iadd(r, k.c(d + 1)), k.loadF(lS, sRow, k.f32), k.f32);
      });
    });
    g.sync();
  };

  // Tokens vary fastest: CTAs running at once take the same KV head and
  // chunk of neighbouring tokens (runs), whose keys (the same or close
  // blocks in a prefill chunk) are then read from L2 instead of HBM.
  g.ctaLoop(k.imul(k.imul(T, k.c(s.hkv)), chunks), [&](Value w) {
    Value t = k.irem(w, T);
    Value kvHead = k.idiv(w, k.imul(T, chunks));
    Value chunk = k.irem(k.idiv(w, T), chunks);
    // The multi-token way for heads of whole 64-channel groups (16-byte
    // K and V pieces; measured on the H200 at D = 128), dense attention
    // with bf16 caches (the stages hold bf16 rows).
    if (sparse || g.warps < 2 || s.d % 64 != 0 ||
        !type.getElementType().isBF16() || !vtype.getElementType().isBF16()) {
      perToken(t, kvHead, chunk);
      return;
    }
    const int64_t run = g.warps;
    Value member = k.irem(t, k.c(run));
    Value t0 = g.isub(t, member);
    Value seq = k.loadIndex(seqs, t0);
    Value p0 = k.loadIndex(pos, t0);
    Value blk0 = k.idiv(p0, k.c(s.page));
    // Loads stay within the step (clamped) when the run does not.
    Value shared = k.icmp(CmpI::ule, k.iadd(t0, k.c(run)), T);
    Value last = g.isub(T, k.c(1));
    for (int64_t j = 1; j < run; ++j) {
      Value tj = g.imin(k.iadd(t0, k.c(j)), last);
      shared = g.andI(shared, g.eq(k.loadIndex(seqs, tj), seq));
      shared =
          g.andI(shared, g.eq(k.idiv(k.loadIndex(pos, tj), k.c(s.page)), blk0));
    }
    g.ifElse(
        shared, {},
        [&]() -> SmallVector<Value> {
          k.ifThen(g.eq(member, k.irem(chunk, k.c(run))),
                   [&] { multiToken(t0, seq, p0, kvHead, chunk); });
          return {};
        },
        [&]() -> SmallVector<Value> {
          perToken(t, kvHead, chunk);
          return {};
        });
  });
}

/// Part 1 of the attention kernel: out[t, h, c] = sum_chunks exp(m_k - M)
/// acc_k[c] / sum_chunks exp(m_k - M) l_k over the chunks with l_k > 0
/// (M = max m_k); 0 when no key was visible. One thread per output; the
/// chunks are the C = attentionStepChunks(T) that part 0 wrote (workspace
/// rows (t Hq + h) C + k of D + 2 floats: acc, then m, l), summed in chunk
/// order.
void attentionCombineKernel(GK &g, Operation *op) {
  KB &k = g.k;
  const bool sparse = isa<msa::SparseAttentionOp>(op);
  AttentionShape s = attentionShape(op);
  const int base = sparse ? 7 : 6;
  Value out = k.ptr(base);
  Type oe = elementOf(op->getResult(0));
  const int64_t d = s.d;
  Value negInf = k.cf(-INFINITY);
  Value chunks = attentionStepChunks(g, s, k.scalar(0));
  Value ws = attentionWorkspace(g, base, chunks);
  threadLoop(g, k.imul(k.scalar(0), k.c(s.hq * d)), [&](Value e) {
    Value th = k.idiv(e, k.c(d)), c = k.irem(e, k.c(d)); // th = t * hq + h
    Value row0 = k.imul(th, chunks);
    auto rowOf = [&](Value ch) { return k.imul(k.iadd(row0, ch), k.c(d + 2)); };
    Value mx = k.reduce(k.c(0), chunks, negInf, [&](Value ch, Value a) {
      return k.maxf(a, k.loadF(ws, k.iadd(rowOf(ch), k.c(d)), k.f32));
    });
    SmallVector<Value> sums = k.reduceN(
        k.c(0), chunks, {k.cf(0), k.cf(0)},
        [&](Value ch, ValueRange in) -> SmallVector<Value> {
          Value r = rowOf(ch);
          Value m = k.loadF(ws, k.iadd(r, k.c(d)), k.f32);
          Value l = k.loadF(ws, k.iadd(r, k.c(d + 1)), k.f32);
          Value acc = k.loadF(ws, k.iadd(r, c), k.f32);
          // UGT: a NaN sum keeps its (NaN) weight, as the host's would.
          Value wgt = k.select(k.fcmp(CmpF::UGT, l, k.cf(0)),
                               k.exp(k.sub(m, mx)), k.cf(0));
          return {k.add(in[0], k.mul(wgt, acc)), k.add(in[1], k.mul(wgt, l))};
        });
    Value num = sums[0], den = sums[1];
    // No visible key: output 0.
    Value denom = k.select(k.fcmp(CmpF::OGT, den, k.cf(0)), den, k.cf(1));
    k.storeF(out, e, k.div(num, denom), oe);
  });
}

//===----------------------------------------------------------------------===//
// Matrix-vector products: linear and logits
//===----------------------------------------------------------------------===//

/// Iterations a vectorized warp loop handles per step (issuing their loads
/// together, so a warp keeps several 16-byte loads in flight instead of
/// waiting for one per iteration): the largest of 4, 2, 1 dividing `iters`.
/// Sums still run in the original order.
int64_t unrollOf(int64_t iters) {
  return iters % 4 == 0 ? 4 : iters % 2 == 0 ? 2 : 1;
}

bool rowsDotFits(Operation *op, int64_t threads) {
  Value w = isa<msa::LogitsOp>(op) ? op->getOperand(2) : op->getOperand(1);
  Value x = op->getOperand(0);
  Type we = elementOf(w), xe = elementOf(x);
  return threads % kWarp == 0 && (we.isBF16() || we.isF32()) &&
         (xe.isBF16() || xe.isF32());
}

/// The operands of rowsDot: out [R, nOut] (type oe) = x [*, inner] (type
/// xe; row r is x[idx[r]] with a gather, else x[r]) times the weight rows
/// (type we) that `wRow(j)` locates as (weight, element offset): the
/// weight's base pointer and, when packed, its scales and global scale.
struct RowsDotArgs {
  Value x, idx, out, R;
  Type xe, we, oe;
  int64_t inner, nOut;
  std::function<std::pair<WeightRef, Value>(Value j)> wRow;
  /// The packed layout every row's weight shares (wRow then locates its
  /// payload and flat index), or none.
  WeightRef wPacked;
  /// `out` has a second FP32 array of R x nOut values at out + R nOut:
  /// where ringRowsF16 takes two channel halves (9-16 rows), the halves of
  /// the CTAs take one each (RingRowsF16::split), the second storing its
  /// sums there for the reader to add. rowsDot sets splitAbove to the
  /// rows above which (up to 16) it does (0: at no row count).
  bool splitOut = false;
  int64_t splitAbove = 0;
};

/// How mmaRowDots8 reads its row of x: bf16 values, FP32 ones holding
/// bf16 values, or f16 pairs (the A operand of f16 mma.sync, for weights
/// whose packedF16Format values enter as f16).
enum class RowX { BF16, F32, F16 };

bool ctaRowDotsFit(GK &g, int64_t n);
SmallVector<std::array<Value, 2>> ctaRowDots8(GK &g, Value x, Value xOff,
                                              RowX xForm,
                                              ArrayRef<WeightRef> ws,
                                              ArrayRef<Value> row0s, int64_t n);
SmallVector<Value> ctaRowsDots8F16(GK &g, Value xs, Value R, int64_t n,
                                   const WeightRef &w, Value row0,
                                   int64_t maxRows, Value slot);
std::unique_ptr<GK> groupView(GK &g, int64_t threads,
                              StringRef suffix = "_grp");

static TuningOpt<bool>
    rowsDotStream("gpu-rows-dot-stream", true,
                  "rowsDot's mma.sync tiles (bf16 weights): each warp "
                  "streams its 8 weight rows into shared memory by "
                  "row-contiguous cp.async (tuning)");

static TuningOpt<bool>
    rowsDotF16("gpu-rows-dot-f16", true,
               "rowsDot at 2-16 rows with per-tensor FP8 weights: f16 "
               "tensor-core operands, the rows converted to f16 once per "
               "CTA, and the kernel's launch for it (tuning; false: the "
               "bf16 decode of the mma tiles)");

static TuningOpt<int>
    f16RowsUnroll("gpu-f16-rows-unroll", 0,
                  "ctaRowsDots8F16: most steps whose weight loads a warp "
                  "issues together (0: 64 bytes per lane; tuning)");

static TuningOpt<int>
    f16RowsLaneBytes("gpu-f16-rows-lane-bytes", 16,
                     "ctaRowsDots8F16: consecutive weight bytes a lane loads "
                     "per step, 8 or 16 (tuning)");

static TuningOpt<bool>
    f16RowsOne("gpu-f16-rows-one", false,
               "rowsDot at one row with per-tensor FP8 weights: the f16 "
               "rows of 2-16 rows instead of the FP32 products (tuning)");

/// Threads of the groups that take rowsDot's f16 row items (groupView).
constexpr int64_t kF16RowsGroupThreads = 256;

/// Most 16-byte pieces of a row per thread that rowsToF16 holds in
/// registers.
constexpr int64_t kF16RowPieces = 16;

/// True when rowsToF16 takes rows of `n` values on g's CTA.
bool rowsToF16Fits(GK &g, int64_t n) {
  return n % 8 == 0 && (n / 8 + g.threads - 1) / g.threads <= kF16RowPieces;
}

static TuningOpt<int>
    f16RowBatch("gpu-f16-row-batch", 0,
                "rowsToF16: rows converted per batch (0: as many as "
                "keep kF16RowBatchWords loaded words per thread; "
                "tuning)");

/// Loaded words per thread that a batch of rowsToF16 keeps in registers.
constexpr int64_t kF16RowBatchWords = 32;

/// The magnitude bits (sign cleared) of the largest of the bf16 values in
/// `word` (two per word) and `m` (i32).
Value bf16PairMaxBits(GK &g, Value word, Value m) {
  KB &k = g.k;
  auto low15 = [&](Value v) -> Value {
    return arith::AndIOp::create(k.b, k.loc, v, g.ci32(0x7FFF));
  };
  Value lo = low15(word);
  Value hi = low15(arith::ShRUIOp::create(k.b, k.loc, word, g.ci32(16)));
  return arith::MaxUIOp::create(k.b, k.loc, m,
                                arith::MaxUIOp::create(k.b, k.loc, lo, hi));
}

/// {2^s, 2^-s} (FP32) for s = f16RowShift(e) (CacheDecode.h), e the
/// exponent field of `m`, the largest bf16 magnitude bits of a row (i32,
/// sign cleared): the factor that brings the row into f16's range before
/// the conversion (rowsToF16) and the one that undoes it on the sums.
std::pair<Value, Value> f16RowScales(GK &g, Value m) {
  KB &k = g.k;
  auto pow2 = [&](Value exponentField) -> Value {
    return arith::BitcastOp::create(
        k.b, k.loc, k.f32,
        arith::ShLIOp::create(k.b, k.loc, exponentField, g.ci32(23)));
  };
  Value e = arith::ShRUIOp::create(k.b, k.loc, m, g.ci32(7));
  Value sh = arith::SubIOp::create(k.b, k.loc, g.ci32(kF16QueryShiftBase), e);
  sh = arith::MinSIOp::create(k.b, k.loc, sh, g.ci32(kF16RowShiftMax));
  sh = arith::MaxSIOp::create(k.b, k.loc, sh, g.ci32(-kF16RowShiftMax));
  return {pow2(arith::AddIOp::create(k.b, k.loc, g.ci32(127), sh)),
          pow2(arith::SubIOp::create(k.b, k.loc, g.ci32(127), sh))};
}

/// The bf16 rows x[r n, (r + 1) n), r < R (R >= 1, at most the rows that
/// `dst` holds), as n / 2 words of f16 pairs each at word r n / 2 of `dst`
/// (shared memory, generic pointer), every value of row r times 2^s_r;
/// downs[r] (an FP32 shared array) receives the 2^-s_r that undoes it.
/// With `swizzle` the row's 16-byte piece p lands at piece p ^ (r mod 8):
/// ringRowsF16 reads several rows at one offset in one instruction, which
/// would otherwise hit the same banks. Called by every thread of the CTA;
/// `dst` and `downs` are complete after it. Rows go in batches
/// (kF16RowBatchWords, --gpu-f16-row-batch) whose loads issue together,
/// two barriers a batch: converted one row at a time, M3's 6,144-channel
/// rows cost about a microsecond each on the H200 before the first weight
/// load (docs/perf.md, twelfth session). s_r = f16RowShift(e) for the
/// row's largest bf16 exponent field e (CacheDecode.h) brings the largest
/// magnitude into [2^14, 2^15): below f16's 65504, and every value within
/// 2^-28 of it is an f16 normal number, so the conversion is exact (bf16
/// has 8 significant bits, f16 11) for those; smaller ones round to steps
/// of 2^-24 (an error of at most 2^-39 of the largest value each, below
/// the FP32 rounding of a dot product). A row holding Inf or NaN (e = 255)
/// keeps them, and its dot products are Inf or NaN as with FP32 products.
/// With `stride` (a multiple of 8, 0: n) the rows of x are `stride` values
/// apart and the n values converted start at value `column` of each (a
/// multiple of 8); the shift then follows those n values only.
void rowsToF16(GK &g, Value x, Value R, int64_t n, Value dst, Value downs,
               bool swizzle, int64_t stride = 0, int64_t column = 0) {
  if (stride == 0)
    stride = n;
  KB &k = g.k;
  // Piece p of thread t: 16 bytes at piece p * threads + t, if < n / 8
  // (others hold zeros and store nothing).
  const int64_t count = n / 8, pieces = (count + g.threads - 1) / g.threads;
  const int64_t batch =
      f16RowBatch > 0 ? int64_t(f16RowBatch)
                      : std::max<int64_t>(1, kF16RowBatchWords / (4 * pieces));
  auto pieceOf = [&](int64_t p) { return k.iadd(k.c(p * g.threads), g.tid); };
  auto inRow = [&](int64_t p) {
    return k.icmp(CmpI::ult, pieceOf(p), k.c(count));
  };
  const bool ragged = count % g.threads != 0;
  Value partial = g.shared(k.i32, batch * g.warps);
  auto loop = scf::ForOp::create(k.b, k.loc, k.c(0), R, k.c(batch));
  OpBuilder::InsertionGuard guard(k.b);
  k.b.setInsertionPoint(loop.getBody()->getTerminator());
  Value first = loop.getInductionVar(), last = k.iadd(R, k.c(-1));
  // Rows past R load row R - 1 again and store nothing.
  SmallVector<Value> rows, ms;
  SmallVector<SmallVector<SmallVector<Value>>> words(batch);
  for (int64_t i = 0; i < batch; ++i) {
    Value row = k.iadd(first, k.c(i));
    rows.push_back(row);
    Value base =
        k.iadd(k.imul(g.imin(row, last), k.c(stride / 2)), k.c(column / 2));
    for (int64_t p = 0; p < pieces; ++p) {
      Value piece = pieceOf(p);
      if (ragged)
        piece = g.imin(piece, k.c(count - 1));
      words[i].push_back(
          g.loadWords(x, k.iadd(base, k.imul(piece, k.c(4))), 4, true));
    }
  }
  for (int64_t i = 0; i < batch; ++i) {
    Value m = g.ci32(0);
    for (int64_t p = 0; p < pieces; ++p)
      for (Value &w : words[i][p]) {
        if (ragged)
          w = k.select(inRow(p), w, g.ci32(0));
        m = bf16PairMaxBits(g, w, m);
      }
    for (int64_t off = kWarp / 2; off >= 1; off /= 2)
      m = arith::MaxUIOp::create(k.b, k.loc, m, g.shflXor(m, off));
    ms.push_back(m);
  }
  k.ifThen(g.eq(g.lane, k.c(0)), [&] {
    for (int64_t i = 0; i < batch; ++i)
      g.storeI32(partial, k.iadd(k.c(i * g.warps), g.warp), ms[i]);
  });
  g.sync();
  for (int64_t i = 0; i < batch; ++i) {
    Value m = ms[i];
    for (int64_t w = 0; w < g.warps; ++w)
      m = arith::MaxUIOp::create(k.b, k.loc, m,
                                 g.loadI32(partial, k.c(i * g.warps + w)));
    Value up, down;
    std::tie(up, down) = f16RowScales(g, m);
    Value row = rows[i];
    k.ifThen(k.icmp(CmpI::ult, row, R), [&] {
      k.ifThen(g.eq(g.tid, k.c(0)), [&] { k.storeF(downs, row, down, k.f32); });
      Value dstWord = k.imul(row, k.c(n / 2));
      for (int64_t p = 0; p < pieces; ++p) {
        Value piece = pieceOf(p);
        if (swizzle)
          piece = arith::XOrIOp::create(k.b, k.loc, piece, k.irem(row, k.c(8)));
        Value at = k.imul(piece, k.c(4));
        auto store = [&] {
          for (int64_t j = 0; j < 4; ++j)
            g.storeI32(dst, k.iadd(dstWord, k.iadd(at, k.c(j))),
                       bf16WordToF16(g, words[i][p][j], up));
        };
        if (ragged && (p + 1) * g.threads > count)
          k.ifThen(inRow(p), store);
        else
          store();
      }
    });
  }
  g.sync(); // dst is complete; the next batch reuses `partial`
}

/// Shared memory for `rows` rows of n / 2 words of f16 pairs (rowsToF16):
/// the kernel's scratch when it holds them, else a static array.
Value f16RowsBuffer(GK &g, int64_t n, int64_t rows) {
  KB &k = g.k;
  if (g.scratch && g.scratchBytes >= 2 * n * rows)
    return LLVM::AddrSpaceCastOp::create(k.b, k.loc, k.ptrT, g.scratch);
  return g.shared(k.i32, n / 2 * rows);
}

/// The most rows of n channels f16RowsBuffer holds for rowsDot's f16
/// paths: the scratch's, or kF16StaticRowBytes of static shared memory,
/// at most 16 (one mma tile).
constexpr int64_t kF16StaticRowBytes = 32 * 1024;
static TuningOpt<int>
    f16RowsMax("gpu-f16-rows-max", 16,
               "Most rows of x that rowsDot's f16 rows take (tuning, "
               "testing; at most 16)");
int64_t f16RowsFit(GK &g, int64_t n) {
  const int64_t bytes =
      std::max(g.scratch ? g.scratchBytes : 0, kF16StaticRowBytes);
  return std::min<int64_t>(std::clamp<int64_t>(f16RowsMax, 0, 16),
                           bytes / (2 * n));
}

static TuningOpt<int>
    rowLoadBytes("gpu-row-load-bytes", 0,
                 "rowsDot at one row: weight bytes per lane whose loads a "
                 "warp issues together (0: kRowLoadBytesBF16 for bf16, "
                 "kRowLoadBytesFP8 for per-tensor FP8 weights, the unroll "
                 "of unrollOf / weightUnroll otherwise; tuning)");

/// Weight bytes per lane that rowsDot's one-row warps load together (the
/// largest divisor of the row's 16-byte steps that fits): on the H200
/// (docs/perf.md, eleventh session) M3's one-token bf16 linears and LM
/// head ran 4 % faster with 128 than with unrollOf's 64, its per-tensor
/// FP8 projections 4-5 % faster with 192 (the whole 6,144-channel row)
/// than with weightUnroll's 64 (other packed formats, not measured, keep
/// weightUnroll's). The sums run in the same order either way.
constexpr int64_t kRowLoadBytesBF16 = 128, kRowLoadBytesFP8 = 192;

static TuningOpt<bool>
    fp8RowTail("gpu-fp8-row-tail", true,
               "rowsDot at one row with per-tensor FP8 weights: the "
               "scale on the sum instead of on every weight (tuning)");

static TuningOpt<bool>
    f16Ring("gpu-f16-ring", true,
            "rowsDot at 2-8 rows with per-tensor FP8 weights: the "
            "weights stream through a cp.async ring in shared memory "
            "(ringRowsF16; tuning; false: ctaRowsDots8F16)");

static TuningOpt<int>
    f16RingStages("gpu-f16-ring-stages", 0,
                  "ringRowsF16's stages (0: as many as the scratch holds, "
                  "at most kRingMaxStages; tuning)");

static TuningOpt<bool>
    f16RingXRegisters("gpu-f16-ring-x-registers", false,
                      "ringRowsF16 holds x in registers at every row count, "
                      "not only where the rows leave no room for a ring "
                      "(testing)");

/// The shape of ringRowsF16 for at most maxRows rows of x: the rows (f16)
/// take the first 2 n maxRows bytes of the kernel's scratch, the ring
/// (`stages` KB per warp) follows; with `xInRegisters` each lane holds its
/// operands of x for all its steps in registers and the ring takes the
/// whole scratch once they are loaded (with --gpu-f16-ring-x-direct, the
/// default, they are loaded from global memory and never use it). With
/// `halves` = 2 (rows of x that do not fit the scratch whole) the
/// channels go in two passes of n / 2, x in registers.
struct RingRowsF16 {
  int64_t maxRows = 0, stages = 0, halves = 1;
  bool xInRegisters = false;
  /// With halves = 2: the CTAs' halves take a channel half each, one pass
  /// (RowsDotArgs::splitAbove).
  bool split = false;
  /// The weights' payload when it is in the head-major chunk-major order
  /// (PackedWeight::orderHeadMajor), whose column terms are the same for
  /// every matrix; null for row-major.
  const PackedWeight *order = nullptr;
};

/// Deepest ring ringRowsF16 takes, and the shallowest worth taking.
constexpr int64_t kRingMaxStages = 8, kRingMinStages = 3;

/// Deepest ring at 9-16 rows: with 6 stages (two items' copies ahead)
/// ptxas spilled 92 bytes in M3's MSA prologue at its 128 registers (16
/// rows hold 16 words of x per step), with 4 (one item ahead) none.
constexpr int64_t kRing16MaxStages = 4;

static TuningOpt<bool>
    f16RingXDirect("gpu-f16-ring-x-direct", true,
                   "ringRowsF16 with x in registers: each lane loads and "
                   "converts its operands of x from global memory, with a "
                   "power of two per row and warp (false: rowsToF16 per "
                   "row into shared memory first; tuning)");

static TuningOpt<bool> prologueProgrammatic(
    "gpu-programmatic-prologue", true,
    "Launch the fused attention prologue's parts as "
    "programmatic dependents (griddepcontrol): part 0 of the "
    "RMSNorm before it, part 1 of part 0 (false: each after "
    "the kernel before it finishes, as other launches)");

/// Every kernel a programmatic dependent of the one before it, waiting
/// first thing. Off: on the H200 (docs/perf.md, twenty-fifth session) M3's
/// two-layer decode step in a CUDA graph ran 1 % faster at one token, but
/// 0.7 % slower at 8 tokens, 1.6 % at 16 and 2.8 % at 64, than with only
/// the prologue's launches programmatic.
static TuningOpt<bool> programmaticLaunches(
    "gpu-programmatic-launches", false,
    "Launch every GPU kernel as a programmatic dependent of "
    "the one before it (sm_90+): each runs "
    "griddepcontrol.launch_dependents and then "
    "griddepcontrol.wait first (tuning; false: only the "
    "prologue's, --gpu-programmatic-prologue)");

static TuningOpt<bool>
    f16RingSplit("gpu-f16-ring-split", true,
                 "The fused prologue's two-pass 16-row projection "
                 "(ringRowsF16 halves) runs its two channel halves on "
                 "the two halves of the CTAs, one pass each, the sums "
                 "added by part 1 (tuning; false: two passes per CTA)");

/// Most steps per warp and item for which ringRowsF16 holds x in
/// registers (8 words each per 8 rows).
constexpr int64_t kRingMaxRegisterSteps = 8;

static TuningOpt<bool>
    f16RingHalves("gpu-f16-ring-halves", true,
                  "ringRowsF16 takes 9-16 rows of x in two passes over "
                  "the channels' halves where the rows do not fit the "
                  "scratch whole (tuning; false: the bf16-decode tiles)");

/// ringRowsF16's shape for at most `rows` (8 or fewer, or 16) rows of n
/// channels on g's scratch: stages 0 when it does not fit.
RingRowsF16 ringRowsFit(GK &g, int64_t n, int64_t rows) {
  RingRowsF16 ring;
  // Each warp adds an equal share (at most a lane each) of a partial
  // tile's 4 values per lane and group of 8 rows: 4 to 32 warps (8 to 32
  // for 16 rows), a power of two.
  if (!g.scratch || n % (64 * g.warps) != 0 || g.warps < 4 ||
      (4 * kWarp) % g.warps != 0 || (rows > 8 && (rows != 16 || g.warps < 8)))
    return ring;
  // 16 rows in registers cost 16 words a step: half the steps of 8 rows.
  const int64_t maxSteps =
      rows > 8 ? kRingMaxRegisterSteps / 2 : kRingMaxRegisterSteps;
  if (rows > 8 && rows * 2 * n > g.scratchBytes) {
    if (!f16RingHalves || n % (128 * g.warps) != 0)
      return ring;
    ring.halves = 2;
    n /= 2;
  }
  // Rows that leave no room for a ring stay in registers instead.
  ring.xInRegisters =
      f16RingXRegisters || ring.halves > 1 ||
      g.scratchBytes - rows * 2 * n < kRingMinStages * g.warps * 1024;
  if (ring.xInRegisters &&
      (n / (64 * g.warps) > maxSteps || rows * 2 * n > g.scratchBytes))
    return ring;
  const int64_t free = g.scratchBytes - (ring.xInRegisters ? 0 : rows * 2 * n);
  int64_t stages = free / (g.warps * 1024);
  stages = std::min(stages, f16RingStages > 0 ? int64_t(f16RingStages)
                            : rows > 8        ? kRing16MaxStages
                                              : kRingMaxStages);
  if (stages < kRingMinStages)
    return ring;
  ring.maxRows = rows;
  ring.stages = stages;
  return ring;
}

/// out[r, j] = (x[r] . w[j]) * tail * downs[r] for r < R <= maxRows (at
/// most 8, or 16) and j < nOut (a multiple of 16) by the CTA's W warps,
/// the weights streaming through shared memory. x: rowsToF16's swizzled
/// f16 rows in the scratch `xs` (shared address space); the weights: a
/// packedF16Format matrix located by wRow (16 consecutive features share
/// one matrix). `beforeLoop(h)` (rowsToF16 of the channels of pass h) runs
/// after the first copies are issued, as they do not depend on x (before
/// them with x in registers).
///
/// One CTA item per 16 features, the n channels split over the warps (n a
/// multiple of 64 W): warp w takes the 64-channel steps [w n / (64 W),
/// (w + 1) n / (64 W)) of each of its CTA's items, unrolled. In a step,
/// lane (g = lane / 4, t = lane % 4) copies 16 bytes of features g and
/// g + 8 at channel 16 t of the step by `cp.async` into its own 32 bytes
/// of the warp's ring stage and reads back only those: no barrier guards
/// the ring, and the copies of the next stages - 1 steps (across items)
/// are in flight while a step computes. The weights are the A operand of
/// f16 mma.sync m16n8k16 (channel 16 t + 4 m + {0, 1} is k = 2 t, 2 t + 1
/// of the step's mma m, + {2, 3} is k = 2 t + 8, 2 t + 9), x the B operand
/// the same way (row g + 8 u as column g of the mma of rows 8 u to 8 u +
/// 7, rows past R reading row R - 1): a weight byte costs half a
/// conversion and 1/256 (1/128 for 16 rows) of an mma. An item's partial
/// tiles meet in `tiles` (2 x W x 32 x 4 FP32 per group of 8 rows, the
/// half of the item's parity); every warp adds an equal share of them in
/// warp order and stores it. With ring.xInRegisters (rows of x that fill the
/// scratch) each lane holds its x operands of all its steps: by default
/// (--gpu-f16-ring-x-direct) it loads their bf16 words from `xRows` (the
/// rows of n channels in global memory) after the ring's first copies
/// issue and converts them itself, times 2^s per row with s =
/// f16RowShift of the row's largest exponent over the warp's channels of
/// the pass (the quad's lanes hold them), and its partial tiles take 2^-s
/// back (exact) before the warps' tiles meet: no shared memory, no
/// barrier and no `beforeLoop`; the sums are those of the per-row shift
/// whenever both convert exactly (on the H200 M3's decode-step dumps at 8
/// and 16 tokens were byte-identical to the per-row kernels'). Otherwise the
/// lane loads them from `beforeLoop`'s rows, and the ring's first copies wait
/// for that. With ring.halves = 2 (16 rows of M3's 6,144 channels: 192 KB of
/// f16 rows) the CTA runs its items twice, over channels [0, n / 2) then [n /
/// 2, n), each pass with its own x rows and shift: the first stores (x . w)
/// downs per value of `out` (an FP32 array), the second adds its own and
/// multiplies by the tail; each value is stored and reloaded by the same
/// thread. On the H200 (docs/perf.md, thirteenth session) M3's fused FP8
/// projections ran 8.5-11 % faster at 2-4 tokens and 4-5 % at 5-8 (x in
/// registers) than with ctaRowsDots8F16; at one token no faster than the
/// FP32 products. At 9-16 tokens (two passes; twenty-first session) they
/// took 21-26 % less time than with the bf16-decode tiles (16 tokens:
/// 40.1-40.6 against 54.3-55.0 us). Loading x directly (twenty-third
/// session) took M3's prologue from 38-40 to 31-32 us at 9-16 tokens and
/// from 25-26 to 22 us at 8: the per-row conversion into shared memory,
/// with its barriers, had held up the ring at the start of every pass.
/// With ring.order (the head-major chunk-major payload) a lane's copies
/// start from its row's term (orderedRowByte) and add the column term of
/// their channel (orderedColumnBytes, computed once per pass and step: a
/// 16-byte copy never crosses a 128-byte tile row), and an item's rows g +
/// 8 are 8 rows on in the same 128-row tile (16 features from a multiple
/// of 16).
void ringRowsF16(GK &g, Value xs, Value xRows, Value R, Value downs, int64_t n,
                 int64_t nOut, const RingRowsF16 &ring, Value tiles,
                 const std::function<std::pair<WeightRef, Value>(Value)> &wRow,
                 Value out, Type oe,
                 const std::function<void(int64_t)> &beforeLoop) {
  KB &k = g.k;
  MLIRContext *ctx = k.b.getContext();
  auto sharedT = LLVM::LLVMPointerType::get(ctx, 3);
  auto globalT = LLVM::LLVMPointerType::get(ctx, 1);
  auto v4 = VectorType::get({4}, k.i32);
  assert((ring.halves == 1 || (ring.xInRegisters && oe.isF32())) &&
         "ringRowsFit: two passes hold x in registers and sum in FP32");
  const int64_t F = 16, nh = n / ring.halves, per = nh / (64 * g.warps),
                S = ring.stages;
  // Groups of 8 rows: the B operands (and mma) per step.
  const int64_t groups = ring.maxRows > 8 ? 2 : 1;
  const int64_t ringByte = ring.xInRegisters ? 0 : ring.maxRows * 2 * nh;
  const int64_t stageBytes = 64 * F;
  // 32-bit offsets (the per-step arithmetic), widened at the address.
  auto i32 = [&](Value index) -> Value {
    return arith::IndexCastOp::create(k.b, k.loc, k.i32, index);
  };
  auto add32 = [&](Value a, int64_t c) -> Value {
    return arith::AddIOp::create(k.b, k.loc, a, g.ci32(c));
  };
  auto byteAt = [&](Type ptrT, Value base, Value off32, int64_t c) -> Value {
    Value off = arith::ExtUIOp::create(k.b, k.loc, k.i64, add32(off32, c));
    return LLVM::GEPOp::create(k.b, k.loc, ptrT, k.b.getI8Type(), base,
                               ValueRange{off});
  };
  Value quad = k.irem(g.lane, k.c(4)), r = k.idiv(g.lane, k.c(4));
  // This lane's 16 bytes of half h (features g + 8 h) of ring slot `slot`
  // (i32).
  Value ringLane =
      i32(k.iadd(k.c(ringByte), k.iadd(k.imul(g.warp, k.c(S * stageBytes)),
                                       k.imul(g.lane, k.c(16)))));
  auto ringAt = [&](Value slot, int64_t h) {
    Value off = arith::AddIOp::create(
        k.b, k.loc, ringLane,
        arith::MulIOp::create(k.b, k.loc, slot, g.ci32(stageBytes)));
    return byteAt(sharedT, xs, off, h * 512);
  };
  // This CTA's items: ctaId + kk numCtas < nOut / F, kk < items.
  Value count = k.c(nOut / F);
  Value left =
      arith::MaxSIOp::create(k.b, k.loc, k.c(0), g.isub(count, g.ctaId));
  Value items = k.idiv(k.iadd(left, g.isub(g.numCtas, k.c(1))), g.numCtas);
  // With ring.split, CTA c of each half (c < hc = numCtas / 2) takes the
  // items c + kk hc over the channels of its half of the CTAs (`side`; a
  // last, odd CTA none), one pass. The grid is the multiprocessors times
  // the CTAs per multiprocessor (NvidiaBinary), at least 2.
  Value cta = g.ctaId, nCtas = g.numCtas, side;
  if (ring.split) {
    nCtas = k.idiv(g.numCtas, k.c(2));
    Value raw = k.idiv(g.ctaId, nCtas);
    side = g.imin(raw, k.c(1));
    cta = g.isub(g.ctaId, k.imul(side, nCtas));
    left = arith::MaxSIOp::create(k.b, k.loc, k.c(0), g.isub(count, cta));
    items =
        k.select(k.icmp(CmpI::ult, raw, k.c(2)),
                 k.idiv(k.iadd(left, g.isub(nCtas, k.c(1))), nCtas), k.c(0));
  }
  // Partial tiles: a lane's c0..c3 of each group of rows.
  const int64_t kept = 4 * groups;
  const int64_t values = kWarp * kept, tileFloats = g.warps * values;
  const int64_t mine = values / g.warps;
  auto vt = VectorType::get({4}, k.f32);
  const int64_t ahead = (per + S - 2) / per;
  // With ring.order: the column term of the lane's channel of each step of
  // the pass (set per pass), a byte offset from its row's term.
  SmallVector<Value> columnBytes;
  const int64_t rowsBytes = ring.order ? 8 * kOrderTile : 8 * n;
  // Step ii of the item whose bytes start at `from`, into ring slot `slot`.
  auto issue = [&](Value from, int64_t ii, Value slot) {
    for (int64_t h = 0; h < 2; ++h) {
      Value src =
          ring.order
              ? LLVM::GEPOp::create(k.b, k.loc, globalT, k.b.getI8Type(), from,
                                    ValueRange{k.toI64(k.iadd(
                                        columnBytes[ii], k.c(h * rowsBytes)))})
              : LLVM::GEPOp::create(
                    k.b, k.loc, globalT, k.b.getI8Type(), from,
                    ArrayRef<LLVM::GEPArg>{int32_t(h * rowsBytes + ii * 64)});
      NVVM::CpAsyncOp::create(k.b, k.loc, ringAt(slot, h), src, 16,
                              NVVM::LoadCacheModifierKind::CG, Value());
    }
  };
  auto commit = [&] { NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc); };
  assert((!ring.split ||
          (ring.halves == 2 && ring.xInRegisters && f16RingXDirect)) &&
         "ringRowsF16: a split takes x directly");
  const int64_t passes = ring.split ? 1 : ring.halves;
  for (int64_t pass = 0; pass < passes; ++pass) {
    const bool lastPass = pass + 1 == passes;
    // The pass's first channel.
    Value passCh = ring.split ? k.imul(side, k.c(nh)) : k.c(pass * nh);
    // The lane's first channel of the pass (feature g, channel pass nh +
    // 64 w per + 16 t).
    auto laneCh = [&] {
      return k.iadd(
          passCh, k.iadd(k.imul(g.warp, k.c(per * 64)), k.imul(quad, k.c(16))));
    };
    if (ring.order) {
      Value ch0 = laneCh();
      WeightRef orderRef;
      orderRef.packed = ring.order;
      orderRef.chunkTiles = k.c(ring.order->orderRanks);
      columnBytes.clear();
      for (int64_t ii = 0; ii < per; ++ii)
        columnBytes.push_back(
            orderedColumnBytes(k, orderRef, k.iadd(ch0, k.c(ii * 64))));
    }
    // The lane's first weight byte (feature g, channel pass nh + 64 w per
    // + 16 t) of the CTA's item kk.
    auto itemBytes = [&](Value kk) -> Value {
      Value item = k.iadd(cta, k.imul(kk, nCtas));
      std::pair<WeightRef, Value> wAt = wRow(k.imul(item, k.c(F)));
      Value base =
          LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalT, wAt.first.base);
      Value byte =
          ring.order ? orderedRowByte(k, wAt.first,
                                      k.iadd(wAt.second, k.imul(r, k.c(n))))
                     : k.iadd(wAt.second, k.iadd(k.imul(r, k.c(n)), laneCh()));
      return LLVM::GEPOp::create(k.b, k.loc, globalT, k.b.getI8Type(), base,
                                 ValueRange{k.toI64(byte)});
    };
    // The CTA's steps run item after item; step s (item s / per, step s %
    // per of it) uses slot s % S, and its copies issue S - 1 steps
    // earlier.
    auto firstCopies = [&] {
      SmallVector<Value> from;
      for (int64_t s = 0; s + 1 < S; ++s) {
        const int64_t d = s / per;
        while (int64_t(from.size()) <= d)
          from.push_back(itemBytes(k.c(from.size())));
        k.ifThen(k.icmp(CmpI::ult, k.c(d), items),
                 [&] { issue(from[d], s % per, g.ci32(s % S)); });
        commit();
      }
    };
    // The first copies do not depend on x: they issue before x converts,
    // unless the ring overwrites x.
    const bool direct = ring.xInRegisters && f16RingXDirect;
    if (!ring.xInRegisters || direct)
      firstCopies();
    if (!direct)
      beforeLoop(pass);
    // The x rows of this lane's operands: row g + 8 u (rows past R read R
    // - 1); their 16-byte pieces 2 t and 2 t + 1 of a step, swizzled as
    // rowsToF16 stores them (the step's 8 pieces start at a multiple of
    // 8).
    SmallVector<SmallVector<Value>> xLane(groups);
    for (int64_t u = 0; u < groups; ++u) {
      Value xRow = g.imin(k.iadd(r, k.c(8 * u)), k.iadd(R, k.c(-1)));
      for (int64_t p = 0; p < 2; ++p) {
        Value low = arith::XOrIOp::create(k.b, k.loc,
                                          k.iadd(k.imul(quad, k.c(2)), k.c(p)),
                                          k.irem(xRow, k.c(8)));
        xLane[u].push_back(i32(k.iadd(
            k.imul(xRow, k.c(2 * nh)),
            k.iadd(k.imul(g.warp, k.c(per * 128)), k.imul(low, k.c(16))))));
      }
    }
    // x's words of this lane for the item's steps (8 per group of rows):
    // loaded per step, or (x in registers) once here, before the ring
    // reuses x's memory.
    auto xWords = [&](int64_t i) {
      SmallVector<Value> xw;
      for (int64_t u = 0; u < groups; ++u)
        for (int64_t p = 0; p < 2; ++p) {
          Value v = LLVM::LoadOp::create(
              k.b, k.loc, v4, byteAt(sharedT, xs, xLane[u][p], i * 128), 16);
          for (int64_t e = 0; e < 4; ++e)
            xw.push_back(
                LLVM::ExtractElementOp::create(k.b, k.loc, v, g.ci32(e)));
        }
      return xw;
    };
    SmallVector<SmallVector<Value>> xHeld;
    // With `direct`: the factor 2^-s of x row 8 u + 2 t + j (the mma
    // column of a lane's accumulator values j and 2 + j of group u) over
    // this warp's channels.
    SmallVector<SmallVector<Value>> colDown(groups);
    if (direct) {
      // Lane (g, t) loads the bf16 words of its operands (rows g + 8 u,
      // channels 16 t + 8 p of each step, p = 0, 1) straight from x, as
      // xWords would read them converted. Each row's power of two 2^s
      // follows its values in this warp's channels of the pass (the
      // largest exponent field over the quad's lanes, f16RowShift), as
      // rowsToF16's follows the row's: the warps' partial sums are scaled
      // back by 2^-s (exact) before they meet.
      SmallVector<SmallVector<Value>> raw(per);
      for (int64_t i = 0; i < per; ++i)
        for (int64_t u = 0; u < groups; ++u) {
          Value xRow = g.imin(k.iadd(r, k.c(8 * u)), k.iadd(R, k.c(-1)));
          for (int64_t p = 0; p < 2; ++p) {
            Value ch = k.iadd(
                k.iadd(passCh, k.c(i * 64 + p * 8)),
                k.iadd(k.imul(g.warp, k.c(per * 64)), k.imul(quad, k.c(16))));
            llvm::append_range(
                raw[i],
                g.loadWords(xRows,
                            k.idiv(k.iadd(k.imul(xRow, k.c(n)), ch), k.c(2)), 4,
                            true));
          }
        }
      SmallVector<Value> up(groups);
      for (int64_t u = 0; u < groups; ++u) {
        Value m = g.ci32(0);
        for (int64_t i = 0; i < per; ++i)
          for (int64_t e = 0; e < 8; ++e)
            m = bf16PairMaxBits(g, raw[i][8 * u + e], m);
        for (int64_t off : {1, 2})
          m = arith::MaxUIOp::create(k.b, k.loc, m, g.shflXor(m, off));
        Value down;
        std::tie(up[u], down) = f16RowScales(g, m);
        for (int64_t j = 0; j < 2; ++j) {
          Value from = arith::IndexCastOp::create(
              k.b, k.loc, k.i32,
              k.imul(k.iadd(k.imul(quad, k.c(2)), k.c(j)), k.c(4)));
          colDown[u].push_back(gpu::ShuffleOp::create(k.b, k.loc, down, from,
                                                      g.ci32(kWarp),
                                                      gpu::ShuffleMode::IDX)
                                   .getShuffleResult());
        }
      }
      for (int64_t i = 0; i < per; ++i) {
        xHeld.emplace_back();
        for (int64_t u = 0; u < groups; ++u)
          for (int64_t e = 0; e < 8; ++e)
            xHeld.back().push_back(bf16WordToF16(g, raw[i][8 * u + e], up[u]));
      }
    } else if (ring.xInRegisters) {
      for (int64_t i = 0; i < per; ++i)
        xHeld.push_back(xWords(i));
      g.sync(); // every lane's x is in registers: the ring may overwrite it
      firstCopies();
    }
    auto loop = scf::ForOp::create(k.b, k.loc, k.c(0), items, k.c(1));
    {
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPoint(loop.getBody()->getTerminator());
      Value kk = loop.getInductionVar();
      // Slot of the item's step 0, and the items whose copies its steps
      // issue.
      Value b0 = i32(k.irem(k.imul(kk, k.c(per)), k.c(S)));
      SmallVector<Value> from, valid;
      for (int64_t d = 0; d <= ahead; ++d) {
        from.push_back(itemBytes(k.iadd(kk, k.c(d))));
        valid.push_back(k.icmp(CmpI::ult, k.iadd(kk, k.c(d)), items));
      }
      SmallVector<SmallVector<Value>> acc(groups,
                                          SmallVector<Value>(4, k.cf(0)));
      for (int64_t i = 0; i < per; ++i) {
        // Step i's copies (this lane's own) have landed.
        NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, S - 2);
        const int64_t ahead_i = i + S - 1, d = ahead_i / per;
        Value slot =
            arith::RemUIOp::create(k.b, k.loc, add32(b0, ahead_i), g.ci32(S));
        k.ifThen(valid[d], [&] { issue(from[d], ahead_i % per, slot); });
        commit();
        Value cur = arith::RemUIOp::create(k.b, k.loc, add32(b0, i), g.ci32(S));
        SmallVector<SmallVector<Value>> f;
        for (int64_t h = 0; h < 2; ++h)
          f.push_back(g.e4m3WordsToF16(
              LLVM::LoadOp::create(k.b, k.loc, v4, ringAt(cur, h), 16), 4));
        SmallVector<Value> xw = ring.xInRegisters ? xHeld[i] : xWords(i);
        for (int64_t m = 0; m < 4; ++m)
          for (int64_t u = 0; u < groups; ++u)
            acc[u] = g.mma(
                {f[0][2 * m], f[1][2 * m], f[0][2 * m + 1], f[1][2 * m + 1]},
                {xw[8 * u + 2 * m], xw[8 * u + 2 * m + 1]}, acc[u], true);
      }
      // The partial tiles (every group of rows) meet in the half of the
      // item's parity; every warp adds V / W of the tile's V values in
      // warp order and stores them: value v = lane' kept + e (lane' the
      // lane that held it) is thread (v / (V / W), v % (V / W))'s. Readers
      // of a half finish before the next item's barrier, which writers of
      // the item after pass first.
      Value item = k.iadd(cta, k.imul(kk, nCtas));
      Value v = k.iadd(k.imul(g.warp, k.c(mine)), g.lane);
      Value holder = k.idiv(v, k.c(kept)), e = k.irem(v, k.c(kept));
      Value hq = k.irem(holder, k.c(4)), hr = k.idiv(holder, k.c(4));
      Value j0 = k.imul(item, k.c(F));
      // Value e = 4 u + 2 h + e' of a lane's tile is c_{2h+e'} of its
      // group u of rows: feature g + 8 h of row 8 u + 2 t + e'.
      Value e4 = groups > 1 ? k.irem(e, k.c(4)) : e;
      Value j = k.iadd(j0, k.iadd(hr, k.imul(k.idiv(e4, k.c(2)), k.c(8))));
      Value row = k.iadd(k.imul(hq, k.c(2)), k.irem(e4, k.c(2)));
      if (groups > 1)
        row = k.iadd(row, k.imul(k.idiv(e, k.c(4)), k.c(8)));
      std::pair<WeightRef, Value> wAt = wRow(j0);
      Value tail = lastPass ? g.packedTail(wAt.first, wAt.second) : Value();
      // The parity runs on across passes: with `direct` no barrier
      // separates a pass's last item from the next pass's first.
      Value half =
          k.irem(pass ? k.iadd(kk, k.imul(items, k.c(pass))) : kk, k.c(2));
      auto tileAt = [&](Value warp, Value lane) {
        return k.gep(
            tiles,
            k.iadd(k.imul(half, k.c(tileFloats)),
                   k.imul(k.iadd(k.imul(warp, k.c(kWarp)), lane), k.c(kept))),
            k.f32);
      };
      for (int64_t u = 0; u < groups; ++u) {
        Value packed = LLVM::UndefOp::create(k.b, k.loc, vt);
        for (int64_t e = 0; e < 4; ++e)
          packed = LLVM::InsertElementOp::create(
              k.b, k.loc, packed,
              direct ? k.mul(acc[u][e], colDown[u][e % 2]) : acc[u][e],
              g.ci32(e));
        LLVM::StoreOp::create(k.b, k.loc, packed,
                              k.gep(tileAt(g.warp, g.lane), k.c(4 * u), k.f32),
                              16);
      }
      // The scale loads before the barrier (with `direct` the partial
      // tiles are scaled back already).
      Value scale =
          direct ? Value()
                 : k.loadF(downs, g.imin(row, k.iadd(R, k.c(-1))), k.f32);
      if ((ring.halves == 1 || ring.split) && tail)
        scale = scale ? k.mul(scale, tail) : tail;
      g.sync();
      k.ifThen(g.andI(k.icmp(CmpI::ult, g.lane, k.c(mine)),
                      k.icmp(CmpI::ult, row, R)),
               [&] {
                 Value sum;
                 for (int64_t wi = 0; wi < g.warps; ++wi) {
                   Value x = k.loadF(tiles,
                                     k.iadd(k.imul(half, k.c(tileFloats)),
                                            k.iadd(k.c(wi * values), v)),
                                     k.f32);
                   sum = wi ? k.add(sum, x) : x;
                 }
                 Value at = k.iadd(k.imul(row, k.c(nOut)), j);
                 // The second half's sums: the array after R rows.
                 if (ring.split)
                   at = k.iadd(at, k.imul(side, k.imul(R, k.c(nOut))));
                 Value y = scale ? k.mul(sum, scale) : sum;
                 if (ring.halves > 1 && pass > 0) {
                   y = k.add(k.loadF(out, at, k.f32), y);
                   if (tail)
                     y = k.mul(y, tail);
                 }
                 k.storeF(out, at, y, oe);
               });
    }
    NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 0);
  }
}

/// rowsDot's streamed tiles: 32-channel chunks per stage and stages.
constexpr int64_t kStreamChunks = 8, kStreamStages = 3;

/// Fewest output features for which rowsDot takes mma.sync tiles.
constexpr int64_t kMmaMinFeatures = 4096;

/// out[r, j] = x[row(r)] . w[j] for r < R, j < Nout. R = 1 (decode of one
/// sequence, the LM head of one sequence): one warp per j, lanes stride
/// over the inner dimension (8 channels each with 16-byte loads when it is
/// a multiple of 256, several steps' loads in flight), then a butterfly
/// sum. R > 1 with bf16 x and weights and at least kMmaMinFeatures
/// features: mma.sync tiles of 16 rows x 8 features per warp (emitMma
/// below; with bf16 weights and the kernel's scratch shared memory the
/// weights stream in by cp.async, emitMmaStream, same sums in the same
/// order); otherwise tiles of kRowTile rows as for R = 1. Per-tensor FP8
/// weights with bf16 x take f16 tensor-core operands at 2-16 rows: with
/// their weights streamed where a ring fits (ringRowsF16; at 9-16 rows
/// that do not fit the scratch, in two passes over the channels for FP32
/// results), else ctaRowsDots8F16 (at most the rows the scratch holds).
void rowsDot(GK &g, RowsDotArgs &args) {
  KB &k = g.k;
  Value x = args.x, idx = args.idx, out = args.out, R = args.R;
  const bool logits = static_cast<bool>(idx);
  const int64_t inner = args.inner, nOut = args.nOut;
  Type xe = args.xe, we = args.we, oe = args.oe;
  const bool vec = inner % (kWarp * 8) == 0;
  auto weightRef = [&](WeightRef w) {
    w.type = we;
    return w;
  };
  auto emitTiles = [&](int64_t tile) {
    Value tiles = k.idiv(k.iadd(R, k.c(tile - 1)), k.c(tile));
    g.warpLoop(k.imul(tiles, k.c(nOut)), [&](Value item) {
      Value t = k.idiv(item, k.c(nOut)), j = k.irem(item, k.c(nOut));
      SmallVector<Value> rows, xOff;
      for (int64_t r = 0; r < tile; ++r) {
        Value row =
            g.imin(k.iadd(k.imul(t, k.c(tile)), k.c(r)), k.iadd(R, k.c(-1)));
        rows.push_back(row);
        Value src = logits ? k.loadIndex(idx, row) : row;
        xOff.push_back(k.imul(src, k.c(inner)));
      }
      std::pair<WeightRef, Value> wAt = args.wRow(j);
      WeightRef w = weightRef(wAt.first);
      Value wOff = wAt.second;
      SmallVector<Value> init(tile, k.cf(0));
      SmallVector<Value> acc;
      // One row of packedF16Format weights: the products of the E4M3
      // values (exact in FP32), the per-tensor scale once on the sum, not
      // per element (fewer instructions; docs/perf.md, eleventh session).
      const bool tailOnSum = fp8RowTail && vec && tile == 1 && w.packed &&
                             GK::packedF16Format(*w.packed);
      // Where every product is exact in FP32 (E4M3 or bf16 weights times
      // bf16 x: at most 8 x 8 significant bits; products below FP32's
      // normal range aside), an FMA rounds each step of the sum as the
      // multiply and add did: the same sums in half the arithmetic
      // instructions (ptxas keeps `mul.rn` and `add.rn` apart). On the
      // H200 M3's one-token FP8 projection ran 4 % faster (docs/perf.md,
      // twenty-seventh session).
      const bool exactProducts =
          xe.isBF16() && (tailOnSum || (!w.packed && we.isBF16()));
      if (vec) {
        // Packed weights take more steps per iteration (single rows).
        const int64_t iters = inner / (kWarp * 8);
        int64_t u = tile == 1 ? GK::weightUnroll(w, iters) : unrollOf(iters);
        const int64_t step = !w.packed             ? (we.isBF16() ? 16 : 32)
                             : w.packed->fourBit() ? 4
                                                   : 8;
        int64_t rowBytes = rowLoadBytes;
        if (rowBytes == 0)
          rowBytes = !w.packed && we.isBF16() ? kRowLoadBytesBF16
                     : w.packed && GK::packedF16Format(*w.packed)
                         ? kRowLoadBytesFP8
                         : 0;
        if (tile == 1 && rowBytes > 0) {
          u = 1;
          for (int64_t v = std::min<int64_t>(iters, rowBytes / step); v > 1;
               --v)
            if (iters % v == 0) {
              u = v;
              break;
            }
        }
        acc = k.reduceN(
            k.c(0), k.c(iters / u), init,
            [&](Value it, ValueRange a) -> SmallVector<Value> {
              SmallVector<Value> cols;
              SmallVector<GK::WeightRaw> wq;
              for (int64_t step = 0; step < u; ++step) {
                Value at = k.iadd(k.imul(it, k.c(u)), k.c(step));
                cols.push_back(
                    k.iadd(k.imul(at, k.c(kWarp * 8)), k.imul(g.lane, k.c(8))));
                Value at8 = k.iadd(wOff, cols.back());
                if (!tailOnSum) {
                  wq.push_back(g.loadWeightRaw(w, at8));
                  continue;
                }
                GK::WeightRaw raw; // the payload only
                raw.words.push_back(LLVM::LoadOp::create(
                    k.b, k.loc, VectorType::get({2}, k.i32),
                    k.gep(w.base, orderedByteIndex(k, w, at8), k.b.getI8Type()),
                    /*alignment=*/8));
                wq.push_back(raw);
              }
              SmallVector<Value> next(a.begin(), a.end());
              for (int64_t step = 0; step < u; ++step) {
                SmallVector<Value> wv;
                if (tailOnSum) {
                  auto f32x2 = VectorType::get({2}, k.f32);
                  auto f16x2 = VectorType::get({2}, k.b.getF16Type());
                  for (Value word : g.decodeWeightF16(w, wq[step])) {
                    Value h = LLVM::BitcastOp::create(k.b, k.loc, f16x2, word);
                    Value f = arith::ExtFOp::create(k.b, k.loc, f32x2, h);
                    for (int64_t e = 0; e < 2; ++e)
                      wv.push_back(LLVM::ExtractElementOp::create(k.b, k.loc, f,
                                                                  g.ci32(e)));
                  }
                } else {
                  wv = g.decodeWeight8(w, wq[step]);
                }
                for (int64_t r = 0; r < tile; ++r) {
                  SmallVector<Value> xq =
                      g.load8(x, k.iadd(xOff[r], cols[step]), xe);
                  for (int64_t e = 0; e < 8; ++e)
                    next[r] = exactProducts
                                  ? k.fma(xq[e], wv[e], next[r])
                                  : k.add(next[r], k.mul(xq[e], wv[e]));
                }
              }
              return next;
            });
      } else {
        acc = k.reduceN(
            k.c(0), k.idiv(k.iadd(k.c(inner), k.c(kWarp - 1)), k.c(kWarp)),
            init, [&](Value it, ValueRange a) -> SmallVector<Value> {
              Value col = k.iadd(k.imul(it, k.c(kWarp)), g.lane);
              Value in = k.icmp(CmpI::ult, col, k.c(inner));
              Value safe = k.select(in, col, k.c(0));
              Value wq =
                  k.select(in, loadWeight(k, w, k.iadd(wOff, safe)), k.cf(0));
              SmallVector<Value> next;
              for (int64_t r = 0; r < tile; ++r)
                next.push_back(k.add(
                    a[r], k.mul(k.loadF(x, k.iadd(xOff[r], safe), xe), wq)));
              return next;
            });
      }
      if (tailOnSum)
        acc[0] = k.mul(acc[0], g.packedTail(w, wOff));
      for (int64_t r = 0; r < tile; ++r) {
        Value sum = g.warpSum(acc[r]);
        Value real = k.icmp(CmpI::ult, k.iadd(k.imul(t, k.c(tile)), k.c(r)), R);
        k.ifThen(g.andI(real, g.eq(g.lane, k.c(r))), [&] {
          k.storeF(out, k.iadd(k.imul(rows[r], k.c(nOut)), j), sum, oe);
        });
      }
    });
  };
  // The mma tiles' shared pieces: the word offset of x row `row` (rows
  // past R read row R - 1), and the store of a lane's sums c (rows rowA
  // and rowB = rowA + 8, features 8 jg + 2 quad and + 1; rows past R not
  // stored).
  auto mmaXWord = [&](Value row) {
    Value c = g.imin(row, k.iadd(R, k.c(-1)));
    Value src = logits ? k.loadIndex(idx, c) : c;
    return k.imul(src, k.c(inner / 2));
  };
  auto storeMmaTile = [&](ArrayRef<Value> c, Value jg, Value quad, Value rowA,
                          Value rowB) {
    Value col = k.iadd(k.imul(jg, k.c(8)), k.imul(quad, k.c(2)));
    for (int64_t h = 0; h < 2; ++h) {
      Value row = h ? rowB : rowA;
      k.ifThen(k.icmp(CmpI::ult, row, R), [&] {
        for (int64_t e = 0; e < 2; ++e)
          k.storeF(out, k.iadd(k.imul(row, k.c(nOut)), k.iadd(col, k.c(e))),
                   c[2 * h + e], oe);
      });
    }
  };
  // Tensor-core tiles (bf16 x and weights): 16 rows of x times 8 weight
  // rows per warp item, mma.sync m16n8k16 with FP32 sums. Each lane reads
  // 16 contiguous bytes of its weight row (row lane / 4) and of its two x
  // rows (lane / 4 and lane / 4 + 8) per 32-channel chunk: words 0 and 1
  // are the k pairs (2 quad, 2 quad + 8) of the chunk's first mma, words 2
  // and 3 those of its second; A and B use the same channel assignment, so
  // the products are unchanged. Rows past R read row R - 1 and are not
  // stored (a row of A only reaches its own row of the result).
  // Packed weights (GK::packedMmaFormat) enter as bf16 values, their
  // tail factor multiplies the sums.
  auto emitMma = [&] {
    const int64_t groups = nOut / 8, chunks = inner / 32;
    // Up to 4 chunks' loads per lane per step: on the H200 (docs/perf.md,
    // sixth session) 4 ran 2-6 % faster than 8 at 8 and 16 rows and the
    // same at 32 and 64 (8 holds more registers in the kernels capped at
    // 128); the sums run in the same order either way. Packed weights
    // (4 or 8 bytes per chunk) take up to 64 bytes per lane.
    const bool packed = args.wPacked.packed;
    const int64_t u =
        packed ? GK::weightUnroll(args.wPacked, chunks) : unrollOf(chunks);
    Value tiles = k.idiv(k.iadd(R, k.c(15)), k.c(16));
    g.warpLoop(k.imul(tiles, k.c(groups)), [&](Value item) {
      // Row tiles fastest: the warps reading the same weight rows run
      // together, so the rows come from L2 after the first.
      Value t = k.irem(item, tiles), jg = k.idiv(item, tiles);
      Value quad = k.irem(g.lane, k.c(4)), r = k.idiv(g.lane, k.c(4));
      Value rowA = k.iadd(k.imul(t, k.c(16)), r);
      Value rowB = k.iadd(rowA, k.c(8));
      Value xa = mmaXWord(rowA), xb = mmaXWord(rowB);
      std::pair<WeightRef, Value> wAt =
          args.wRow(k.iadd(k.imul(jg, k.c(8)), r));
      WeightRef wr = weightRef(wAt.first);
      Value w = wr.base;
      Value wWord = k.idiv(wAt.second, k.c(2));
      Value lane0 = k.imul(quad, k.c(4)); // word of the lane in a chunk
      SmallVector<Value> init(4, k.cf(0));
      SmallVector<Value> c = k.reduceN(
          k.c(0), k.c(chunks / u), init,
          [&](Value it, ValueRange a) -> SmallVector<Value> {
            SmallVector<SmallVector<Value>> wq, ua, ub;
            SmallVector<GK::WeightRaw> raw;
            for (int64_t step = 0; step < u; ++step) {
              Value at =
                  k.iadd(k.imul(k.iadd(k.imul(it, k.c(u)), k.c(step)), k.c(16)),
                         lane0);
              if (packed)
                raw.push_back(g.loadWeightRaw(
                    wr, k.iadd(wAt.second, k.imul(at, k.c(2)))));
              else
                wq.push_back(g.loadWords(w, k.iadd(wWord, at), 4, true));
              ua.push_back(g.loadWords(x, k.iadd(xa, at), 4, true));
              ub.push_back(g.loadWords(x, k.iadd(xb, at), 4, true));
            }
            SmallVector<Value> next(a.begin(), a.end());
            for (int64_t step = 0; step < u; ++step) {
              if (packed)
                wq.push_back(g.decodeWeightBF16(wr, raw[step]));
              for (int64_t half = 0; half < 2; ++half)
                next =
                    g.mma({ua[step][2 * half], ub[step][2 * half],
                           ua[step][2 * half + 1], ub[step][2 * half + 1]},
                          {wq[step][2 * half], wq[step][2 * half + 1]}, next);
            }
            return next;
          });
      if (packed) {
        // The tail factor of the lane's output features (rows of the same
        // matrix: row jg * 8 + 2 quad).
        std::pair<WeightRef, Value> tAt =
            args.wRow(k.iadd(k.imul(jg, k.c(8)), k.imul(quad, k.c(2))));
        if (Value tail = g.packedTail(weightRef(tAt.first), tAt.second))
          for (Value &v : c)
            v = k.mul(v, tail);
      }
      storeMmaTile(c, jg, quad, rowA, rowB);
    });
  };
  // emitMma with the weights streamed (the same products and sums, in the
  // same order, so the results are bit-identical; on the H200 4-11 %
  // faster at 2-16 rows, docs/perf.md, eighth session): each warp copies
  // its 8 rows, kStreamChunks chunks (512 bytes of each row) per stage,
  // into its own kStreamStages-stage ring of the kernel's scratch shared
  // memory by cp.async, each instruction one row's 512 contiguous bytes
  // (the mma tiles' own loads touch 8 rows at 64 bytes each); the B
  // fragments are read from there (16-byte pieces XOR-swizzled by row
  // parity: the 8 lanes of a load phase, two rows, hit distinct banks).
  const int64_t streamStageBytes = 8 * kStreamChunks * 64;
  auto emitMmaStream = [&] {
    const int64_t groups = nOut / 8, chunks = inner / 32;
    const int64_t steps = chunks / kStreamChunks;
    MLIRContext *ctx = k.b.getContext();
    auto sharedT = LLVM::LLVMPointerType::get(ctx, 3);
    auto globalT = LLVM::LLVMPointerType::get(ctx, 1);
    auto vec = VectorType::get({4}, k.i32);
    Value tiles = k.idiv(k.iadd(R, k.c(15)), k.c(16));
    Value quad = k.irem(g.lane, k.c(4)), r = k.idiv(g.lane, k.c(4));
    Value ring = k.imul(g.warp, k.c(kStreamStages * streamStageBytes));
    auto smemAt = [&](Value byte) {
      return LLVM::GEPOp::create(k.b, k.loc, sharedT, k.b.getI8Type(),
                                 g.scratch, ValueRange{k.toI64(byte)});
    };
    // Byte of 16-byte piece `piece` (0..31) of row `row` in stage `st`.
    auto pieceByte = [&](Value st, Value row, Value piece) {
      Value swz = k.imul(k.irem(row, k.c(2)), k.c(4));
      return k.iadd(k.iadd(ring, k.imul(st, k.c(streamStageBytes))),
                    k.iadd(k.imul(row, k.c(kStreamChunks * 64)),
                           k.imul(arith::XOrIOp::create(k.b, k.loc, piece, swz),
                                  k.c(16))));
    };
    g.warpLoop(k.imul(tiles, k.c(groups)), [&](Value item) {
      Value t = k.irem(item, tiles), jg = k.idiv(item, tiles);
      Value rowA = k.iadd(k.imul(t, k.c(16)), r);
      Value rowB = k.iadd(rowA, k.c(8));
      Value xa = mmaXWord(rowA), xb = mmaXWord(rowB);
      SmallVector<Value> rowBase, rowOff;
      for (int64_t rr = 0; rr < 8; ++rr) {
        std::pair<WeightRef, Value> wAt =
            args.wRow(k.iadd(k.imul(jg, k.c(8)), k.c(rr)));
        rowBase.push_back(
            LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalT, wAt.first.base));
        rowOff.push_back(wAt.second);
      }
      auto issue = [&](Value st) {
        Value stage = k.irem(st, k.c(kStreamStages));
        for (int64_t rr = 0; rr < 8; ++rr) {
          Value elem =
              k.iadd(rowOff[rr], k.iadd(k.imul(st, k.c(kStreamChunks * 32)),
                                        k.imul(g.lane, k.c(8))));
          Value from =
              LLVM::GEPOp::create(k.b, k.loc, globalT, k.i16, rowBase[rr],
                                  ValueRange{k.toI64(elem)});
          NVVM::CpAsyncOp::create(
              k.b, k.loc, smemAt(pieceByte(stage, k.c(rr), g.lane)), from, 16,
              NVVM::LoadCacheModifierKind::CG, Value());
        }
      };
      auto commit = [&] { NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc); };
      for (int64_t st = 0; st + 1 < kStreamStages; ++st) {
        if (st < steps)
          issue(k.c(st));
        commit();
      }
      SmallVector<Value> init(4, k.cf(0));
      SmallVector<Value> c = k.reduceN(
          k.c(0), k.c(steps), init,
          [&](Value st, ValueRange a) -> SmallVector<Value> {
            // Step st's copies (all lanes') have landed; every lane is
            // past its reads of step st - 1, whose stage is refilled.
            NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, kStreamStages - 2);
            NVVM::SyncWarpOp::create(k.b, k.loc, g.ci32(-1));
            Value next = k.iadd(st, k.c(kStreamStages - 1));
            k.ifThen(k.icmp(CmpI::ult, next, k.c(steps)), [&] { issue(next); });
            commit();
            Value stage = k.irem(st, k.c(kStreamStages));
            SmallVector<Value> acc(a.begin(), a.end());
            for (int64_t ch = 0; ch < kStreamChunks; ++ch) {
              Value piece = k.iadd(k.c(ch * 4), quad);
              Value wv = LLVM::LoadOp::create(
                  k.b, k.loc, vec, smemAt(pieceByte(stage, r, piece)), 16);
              SmallVector<Value> wq;
              for (int64_t e = 0; e < 4; ++e)
                wq.push_back(
                    LLVM::ExtractElementOp::create(k.b, k.loc, wv, g.ci32(e)));
              Value at =
                  k.iadd(k.imul(k.iadd(k.imul(st, k.c(kStreamChunks)), k.c(ch)),
                                k.c(16)),
                         k.imul(quad, k.c(4)));
              SmallVector<Value> ua = g.loadWords(x, k.iadd(xa, at), 4, true);
              SmallVector<Value> ub = g.loadWords(x, k.iadd(xb, at), 4, true);
              for (int64_t half = 0; half < 2; ++half)
                acc = g.mma({ua[2 * half], ub[2 * half], ua[2 * half + 1],
                             ub[2 * half + 1]},
                            {wq[2 * half], wq[2 * half + 1]}, acc);
            }
            return acc;
          });
      // The ring is free once every lane is past its last reads.
      NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 0);
      NVVM::SyncWarpOp::create(k.b, k.loc, g.ci32(-1));
      storeMmaTile(c, jg, quad, rowA, rowB);
    });
  };
  // One warp per 8 features leaves too few warps for narrow outputs (the
  // K and V projections, 512 features: 64 warps): those keep kRowTile rows
  // per warp and feature.
  // One row of x and packed weights: a CTA per 8 features, the channels
  // split over its warps (ctaRowDots8).
  auto emitCtaMma = [&] {
    Value xOff = k.imul(logits ? k.loadIndex(idx, k.c(0)) : k.c(0), k.c(inner));
    g.ctaLoop(k.c(nOut / 8), [&](Value group) {
      Value j0 = k.imul(group, k.c(8));
      std::pair<WeightRef, Value> wAt = args.wRow(j0);
      std::array<Value, 2> d =
          ctaRowDots8(g, x, xOff, RowX::BF16, {weightRef(wAt.first)},
                      {wAt.second}, inner)[0];
      Value quad = k.irem(g.lane, k.c(4));
      k.ifThen(
          g.andI(k.icmp(CmpI::ult, g.lane, k.c(4)), g.eq(g.warp, k.c(0))), [&] {
            for (int64_t e = 0; e < 2; ++e)
              k.storeF(out, k.iadd(j0, k.iadd(k.imul(quad, k.c(2)), k.c(e))),
                       d[e], oe);
          });
    });
  };
  // Packed weights of packedF16Format at 2 to rowsF16 rows: the rows of x
  // enter as f16 (rowsToF16, each with its own power of two, once per CTA
  // into the scratch), each E4M3 pair in one conversion, a CTA per 8
  // features (ctaRowsDots8F16); the sums take the tail factor, then the
  // row's 2^-s. On the H200 (docs/perf.md, eleventh session) M3's fused
  // FP8 prologue ran 1.5-1.9x and its linears 1.9-2.7x faster at 2-8
  // tokens than with the bf16 decode of emitMma. At one row the FP32
  // products (emitTiles) ran faster than the same CTA path with one row.
  const int64_t rowsF16 = f16RowsFit(g, inner);
  auto emitCtaRowsF16 = [&] {
    Value xs = f16RowsBuffer(g, inner, rowsF16);
    Value downs = g.shared(k.f32, rowsF16);
    // Items on groups of kF16RowsGroupThreads threads (a CTA of more takes
    // several at once; with one group per 512-thread CTA M3's projections
    // ran 1.2-1.3x slower at 2-8 tokens, docs/perf.md).
    std::unique_ptr<GK> view;
    if (g.threads > kF16RowsGroupThreads)
      view = groupView(g, kF16RowsGroupThreads);
    GK &v = view ? *view : g;
    rowsToF16(g, x, R, inner, xs, downs, /*swizzle=*/false);
    v.ctaLoop(k.c(nOut / 8), [&](Value group) {
      Value j0 = k.imul(group, k.c(8));
      std::pair<WeightRef, Value> wAt = args.wRow(j0);
      // Items of this group alternate between two halves of the partial
      // sums' array (ctaRowsDots8F16's slot).
      Value slot = k.irem(
          k.idiv(arith::SubIOp::create(k.b, k.loc, group, v.ctaId), v.numCtas),
          k.c(2));
      SmallVector<Value> c = ctaRowsDots8F16(
          v, xs, R, inner, weightRef(wAt.first), wAt.second, rowsF16, slot);
      Value quad = k.irem(v.lane, k.c(4)), r = k.idiv(v.lane, k.c(4));
      Value col = k.iadd(j0, k.imul(quad, k.c(2)));
      k.ifThen(v.eq(v.warp, k.c(0)), [&] {
        for (int64_t h = 0; h < 2; ++h) {
          Value row = h ? k.iadd(r, k.c(8)) : r;
          k.ifThen(k.icmp(CmpI::ult, row, R), [&] {
            Value down = k.loadF(downs, row, k.f32);
            for (int64_t e = 0; e < 2; ++e)
              k.storeF(out, k.iadd(k.imul(row, k.c(nOut)), k.iadd(col, k.c(e))),
                       k.mul(c[2 * h + e], down), oe);
          });
        }
      });
    });
  };
  const bool packedMma =
      args.wPacked.packed && GK::packedMmaFormat(*args.wPacked.packed);
  const bool ctaF16 = rowsDotF16 && args.wPacked.packed &&
                      GK::packedF16Format(*args.wPacked.packed) &&
                      xe.isBF16() && nOut % 8 == 0 && inner % 32 == 0 &&
                      inner % std::min(g.threads, kF16RowsGroupThreads) == 0 &&
                      rowsToF16Fits(g, inner);
  const bool mma = xe.isBF16() &&
                   ((we.isBF16() && !args.wPacked.packed) || packedMma) &&
                   inner % 32 == 0 && nOut % 8 == 0 && nOut >= kMmaMinFeatures;
  const bool stream =
      rowsDotStream && g.scratch && !args.wPacked.packed &&
      (inner / 32) % kStreamChunks == 0 &&
      g.warps * kStreamStages * streamStageBytes <= g.scratchBytes;
  // At 2, 3-4 and 5-8 rows (where a ring of at least kRingMinStages
  // fits) the f16 rows with the weights streamed (ringRowsF16): on the
  // H200 (docs/perf.md, thirteenth session) M3's fused FP8 projections
  // ran 8.5-11 % faster at 2-4 rows and 4-5 % at 5-8, its linears 4.5-7 %
  // and 1 %, than with ctaRowsDots8F16. At one row the FP32 products
  // (emitTiles) ran as fast as the ring for the dense layer's projection
  // and faster for the rest. At 9-16 rows the ring where it fits, in two
  // passes over the channels where 16 rows do not fit the scratch (FP32
  // results only: the first pass's sums wait in `out`).
  SmallVector<RingRowsF16> rings;
  int64_t ringGroups = 1;
  // (A chunk-major payload only in its head-major variant, whose column
  // terms are the same for every matrix.)
  const PackedWeight *wp = args.wPacked.packed;
  if (f16Ring && ctaF16 && !logits && nOut % 16 == 0 &&
      rowsToF16Fits(g, inner) && (!wp->orderRanks || wp->orderHeadMajor))
    for (int64_t rows : {2, 4, 8, 16})
      if (RingRowsF16 ring = ringRowsFit(g, inner, rows);
          ring.stages && (ring.halves == 1 || oe.isF32())) {
        ring.order = wp->orderRanks ? wp : nullptr;
        ring.split = args.splitOut && ring.halves == 2 && f16RingXDirect;
        if (ring.split)
          args.splitAbove = rings.empty() ? 1 : rings.back().maxRows;
        rings.push_back(ring);
        ringGroups = rows > 8 ? 2 : 1;
      }
  Value ringTiles = rings.empty()
                        ? Value()
                        : g.shared(k.f32, 2 * g.warps * kWarp * 4 * ringGroups);
  auto emitRing = [&](const RingRowsF16 &ring) {
    Value downs = g.shared(k.f32, ring.maxRows);
    ringRowsF16(g, g.scratch, x, R, downs, inner, nOut, ring, ringTiles,
                args.wRow, out, oe, [&](int64_t pass) {
                  const int64_t nh = inner / ring.halves;
                  rowsToF16(g, x, R, nh,
                            LLVM::AddrSpaceCastOp::create(k.b, k.loc, k.ptrT,
                                                          g.scratch),
                            downs, /*swizzle=*/true, inner, pass * nh);
                });
  };
  g.ifElse(
      g.eq(R, k.c(1)), {},
      [&] {
        // Packed weights take the tensor cores at one row too: their
        // decode costs fewer instructions into bf16 mma operands than
        // into FP32 products.
        // E2M1 codes: a CTA per 8 features on the tensor cores. E4M3
        // payloads keep the FP32 products at one row: on the H200 their
        // bf16 decode made the tensor-core path slower (docs/perf.md,
        // seventh session), and so did f16 operands (eleventh session).
        if (packedMma && args.wPacked.packed->fourBit() && xe.isBF16() &&
            nOut % 8 == 0 && ctaRowDotsFit(g, inner))
          emitCtaMma();
        else if (ctaF16 && !logits && rowsF16 >= 1 && f16RowsOne)
          emitCtaRowsF16();
        else
          emitTiles(1);
        return SmallVector<Value>{};
      },
      [&] {
        auto others = [&] {
          if (mma && stream)
            emitMmaStream();
          else if (mma)
            emitMma();
          else
            emitTiles(kRowTile);
          return SmallVector<Value>{};
        };
        auto f16Rows = [&] {
          if (!ctaF16 || logits || rowsF16 < 2)
            return others();
          g.ifElse(
              k.icmp(CmpI::ule, R, k.c(rowsF16)), {},
              [&] {
                emitCtaRowsF16();
                return SmallVector<Value>{};
              },
              others);
          return SmallVector<Value>{};
        };
        // The ring's buckets first (R <= 2, then R <= 4).
        std::function<SmallVector<Value>(size_t)> ringOr =
            [&](size_t i) -> SmallVector<Value> {
          if (i == rings.size())
            return f16Rows();
          g.ifElse(
              k.icmp(CmpI::ule, R, k.c(rings[i].maxRows)), {},
              [&] {
                emitRing(rings[i]);
                return SmallVector<Value>{};
              },
              [&] { return ringOr(i + 1); });
          return SmallVector<Value>{};
        };
        return ringOr(0);
      });
}

/// msa.linear or msa.logits as rowsDot.
void rowsDotKernel(GK &g, Operation *op) {
  KB &k = g.k;
  const bool logits = isa<msa::LogitsOp>(op);
  Value wv = op->getOperand(logits ? 2 : 1);
  RowsDotArgs args;
  args.x = k.ptr(0);
  args.idx = logits ? k.ptr(1) : Value();
  Value w = k.ptr(logits ? 2 : 1);
  args.out = k.ptr(logits ? 3 : 2);
  args.inner = shapeOf(wv)[1];
  args.nOut = shapeOf(wv)[0];
  args.xe = elementOf(op->getOperand(0));
  args.we = elementOf(wv);
  args.oe = elementOf(op->getResult(0));
  args.R = k.scalar(logits ? 1 : 0);
  args.wPacked = weightOperand(k, logits ? 2 : 1, args.we);
  const int64_t inner = args.inner;
  WeightRef ref = args.wPacked;
  ref.base = w;
  args.wRow = [&k, ref, inner](Value j) -> std::pair<WeightRef, Value> {
    return {ref, k.imul(j, k.c(inner))};
  };
  rowsDot(g, args);
}

//===----------------------------------------------------------------------===//
// Tile GEMM for msa.linear on warpgroup MMA (sm_90a)
//===----------------------------------------------------------------------===//

// Tile shape and layouts: WgmmaLayout.h.
using wgmma::kABytes;
using wgmma::kBBytes;
using wgmma::kChunkK;
using wgmma::kCoreCols;
using wgmma::kLeadingByteOffset;
using wgmma::kStages;
using wgmma::kStrideByteOffset;
using wgmma::kTileM;
using wgmma::kTileN;
using wgmma::stepByte;

/// Steps with at least this many tokens take the tile path, when they make
/// at least kTileMinItems tiles; fewer keep the warp matrix-vector product.
/// A tile's time has a floor of K / kChunkK dependent chunk steps (about
/// 0.5 us each on the H200: 96 us for K = 6144), so a few tiles on an
/// otherwise idle GPU lose to the matrix-vector product (N = 512, K = 6144:
/// 20 us at T = 16, 73 us at T = 64 = 4 tiles); with many tiles they win
/// from 16 tokens on (N = 8192, K = 6144, T = 16: 88 us against 236 us).
constexpr int64_t kTileMinTokens = 16;
constexpr int64_t kTileMinItems = 8;

/// msa.linear, msa.logits and the attention prologue keep the mma.sync
/// tiles of rowsDot below this many tokens: they read the weights once per
/// 16 rows with L2 reuse across row tiles, while a 64 x 128 tile GEMM item
/// with few rows is bound by its K / kChunkK dependent steps. Measured on
/// the H200 (docs/perf.md), M3's q projection (8192 x 6144): 42 against
/// 90 us at 16 tokens, 49 against 96 at 32, 114 against 111 at 64; the
/// fused prologue 50 / 110, 79 / 113, 150 / 135.
static TuningOpt<int> linearTileMinTokensOption(
    "gpu-linear-tile-min-tokens", 64,
    "Fewest tokens of a step for which msa.linear, msa.logits "
    "and the attention prologue take the wgmma tile GEMM on "
    "sm_90a (tuning)");

/// Fewest tokens of a step for which msa.linear with `n` output features
/// takes the tile path.
int64_t linearTileMinTokens(int64_t n) {
  const int64_t nTiles = n / kTileN;
  const int64_t mTiles = (kTileMinItems + nTiles - 1) / nTiles;
  return std::max<int64_t>(linearTileMinTokensOption,
                           (mTiles - 1) * kTileM + 1);
}

/// True when msa.linear or msa.logits can take the wgmma tile path: bf16
/// input and weight (not dequantized block-scaled ones), a bf16 or f32
/// result, K a multiple of kChunkK and N a multiple of kTileN, one
/// warpgroup per CTA.
bool linearTileFits(Operation *op, int64_t threads) {
  if (!isa<msa::LinearOp, msa::LogitsOp>(op) || threads != wgmma::kThreads ||
      shapeOf(op->getOperand(0)).size() != 2)
    return false;
  Value wv = op->getOperand(isa<msa::LogitsOp>(op) ? 2 : 1);
  Type xe = elementOf(op->getOperand(0)), we = elementOf(wv),
       oe = elementOf(op->getResult(0));
  const int64_t kk = shapeOf(wv)[1], n = shapeOf(wv)[0];
  return xe.isBF16() && we.isBF16() && (oe.isBF16() || oe.isF32()) &&
         kk % kChunkK == 0 && n % kTileN == 0;
}

static TuningOpt<bool>
    packedTile("gpu-packed-tile", true,
               "msa.linear, the attention prologue and the MoE experts "
               "with per-tensor FP8 weights read in place take the "
               "wgmma tile GEMM on sm_90a from their thresholds "
               "(false: the warp paths at every step; tuning)");

static TuningOpt<int>
    packedTileLead("gpu-packed-tile-lead", 1,
                   "Chunk steps by which the tile GEMM's packed weight "
                   "loads run ahead of their decode (tuning)");

/// Measured on an H100 (docs/perf.md, fifty-sixth session): bit-exact, but
/// M3's fused prologue at 4,096 tokens took 4-5 % longer (1,596 against
/// 1,521 us dense, 1,843 against 1,771 MSA), so it stays off.
static TuningOpt<bool> e4m3IntegerDecode(
    "gpu-e4m3-integer-decode", false,
    "The tile GEMM decodes per-tensor FP8 weights to bf16 by integer "
    "operations and one bf16 multiply per pair (NaN bytes give +-480) "
    "instead of four conversions per pair (tuning)");

/// See packedTileOwnPart. Measured on an H100 (docs/perf.md,
/// fifty-seventh session; M3, 2 layers, FP8 per-tensor weights): the fused
/// prologue on its own launch took 11-18 % less time from 128 to 4,096
/// tokens (1,356 against 1,517 us dense, 1,519 against 1,778 MSA at
/// 4,096) than on the f16 rows' launch (packedTileSwitch: one CTA of two
/// groups of two warpgroups per SM, 3-stage rings without pipelined
/// wgmma), and GPU-checked; msa.linear's 16 launches 6-7 % less at 2,048-
/// 4,096 tokens, but 3-13 % more at 64 and 256 and about the same at 128
/// and 512, hence --gpu-packed-linear-own-launch-min-tokens.
static TuningOpt<bool> packedTileOwnLaunch(
    "gpu-packed-tile-own-launch", true,
    "msa.linear and the attention prologue with per-tensor FP8 weights "
    "run the tile GEMM on a launch of their own (the wide tile's) from "
    "their thresholds, not on the f16 rows' launch (tuning)");
static TuningOpt<int> packedLinearOwnLaunchMinTokens(
    "gpu-packed-linear-own-launch-min-tokens", 1024,
    "With --gpu-packed-tile-own-launch, fewest tokens of a step for which "
    "msa.linear's tile GEMM takes its own launch (at least "
    "--gpu-packed-tile-min-tokens; 0: never) (tuning)");

/// Fewest tokens of a step for which a per-tensor FP8 msa.linear
/// (linearTilePacked) takes the tile GEMM, and the same for the attention
/// prologue (prologuePackedTiled); below, rowsDot's f16 rows and ring (up
/// to 16 rows) or its mma.sync tiles. Measured on the H200 (docs/perf.md,
/// twenty-eighth session; M3, 2 layers): the tile GEMM's linears took
/// 1,020-1,040 us from 24 to 64 tokens against 612 / 686 / 1,026 / 1,118 /
/// 1,243 us for rowsDot at 24 / 32 / 40 / 48 / 64, its prologues about 300
/// us against 192-214 at 24-48 and 301-303 at 64; at 512 tokens 1,436
/// against 8,959 us (linears) and 629 against 1,884 (prologues).
static TuningOpt<int> packedTileMinTokensOption(
    "gpu-packed-tile-min-tokens", 40,
    "Fewest tokens of a step for which msa.linear with "
    "per-tensor FP8 weights read in place takes the wgmma "
    "tile GEMM on sm_90a (tuning)");
static TuningOpt<int> packedPrologueTileMinTokensOption(
    "gpu-packed-prologue-tile-min-tokens", 64,
    "Fewest tokens of a step for which the attention "
    "prologue with per-tensor FP8 weights read in place "
    "takes the wgmma tile GEMM on sm_90a (tuning)");

/// True when the tile GEMM may take the weights in launch slots `slots`
/// (--gpu-packed-tile): each a per-tensor (or per-matrix) FP8 E4M3 weight
/// read in place (GK::packedF16Format), the one packed format TileGemm
/// decodes (TileRows::bPacked).
bool packedTileSlots(const PackedOperands *packed, ArrayRef<int> slots) {
  if (!packedTile || !packed)
    return false;
  return llvm::all_of(slots, [&](int slot) {
    auto it = packed->find(slot);
    return it != packed->end() && GK::packedF16Format(it->second);
  });
}

int64_t packedTileMinTokens() {
  return std::max<int64_t>(1, packedTileMinTokensOption);
}
int64_t packedPrologueTileMinTokens() {
  return std::max<int64_t>(1, packedPrologueTileMinTokensOption);
}

/// True when msa.linear's weight (slot 1) is a per-tensor FP8 E4M3 weight
/// read in place (GK::packedF16Format: the weights that take rowsDot's
/// f16 rows and their launch, f16RowsLaunch), with a bf16 input, a bf16 or
/// f32 result, K a multiple of kChunkK and N a multiple of kTileN: from
/// packedTileMinTokens tokens its wgmma kernel runs the tile GEMM, which
/// decodes the weight into its stages (TileRows::bPacked), on that launch
/// (packedTileSwitch).
bool linearTilePacked(Operation *op, int64_t threads,
                      const PackedOperands *packed) {
  // The launch of the f16 rows (f16RowsLaunch) carries the tile's rings.
  if (!rowsDotF16 || !isa<msa::LinearOp>(op) || threads != kGpuThreads ||
      shapeOf(op->getOperand(0)).size() != 2 || !packedTileSlots(packed, {1}))
    return false;
  Value wv = op->getOperand(1);
  Type xe = elementOf(op->getOperand(0)), oe = elementOf(op->getResult(0));
  const int64_t kk = shapeOf(wv)[1], n = shapeOf(wv)[0];
  return xe.isBF16() && (oe.isBF16() || oe.isF32()) && kk % kChunkK == 0 &&
         n % kTileN == 0;
}

/// The wgmma matrix descriptor (wgmma::descriptor, base offset 0) of the
/// operand at byte `offset` of the shared array at shared-window address
/// `smemAddr` (i64), with the address-independent bits `fixed`
/// (wgmma::descriptorFixedBits, and the swizzle mode's bits).
Value wgmmaDescriptorWithBits(KB &k, Value smemAddr, Value offset,
                              uint64_t fixed) {
  auto ci64 = [&](uint64_t v) {
    return arith::ConstantOp::create(k.b, k.loc,
                                     k.b.getI64IntegerAttr(int64_t(v)));
  };
  Value addr = arith::AddIOp::create(k.b, k.loc, smemAddr, k.toI64(offset));
  Value start = arith::ShRUIOp::create(
      k.b, k.loc, arith::AndIOp::create(k.b, k.loc, addr, ci64(0x3FFFF)),
      ci64(4));
  return arith::OrIOp::create(k.b, k.loc, start, ci64(fixed));
}

/// The wgmma matrix descriptor (wgmma::descriptor, base offset 0) of the
/// operand at byte `offset` of the shared array at shared-window address
/// `smemAddr` (i64): no swizzle, or with `swizzled` the 64-byte swizzle
/// (wgmma::kSwizzle64Bits).
Value wgmmaDescriptor(KB &k, Value smemAddr, Value offset, bool swizzled) {
  uint64_t fixed =
      swizzled
          ? wgmma::descriptorFixedBits(wgmma::kSwizzleLeadingByteOffset,
                                       wgmma::kSwizzleStrideByteOffset) |
                wgmma::kSwizzle64Bits
          : wgmma::descriptorFixedBits(kLeadingByteOffset, kStrideByteOffset);
  return wgmmaDescriptorWithBits(k, smemAddr, offset, fixed);
}

/// The operand rows of one work item of the tile GEMM, both bf16 and
/// K-major with `kk` channels per row: `aRow(r)` gives a global-space
/// pointer to A row r (r < kTileM) and whether it exists (rows that do not
/// are zero-filled and read nothing; a null flag means always), `bRow(r)`
/// a pointer to B row r (r < kTileN). Called once per item, before the K
/// loop, so gathers (token or expert indices) cost one load per row.
struct TileRows {
  std::function<std::pair<Value, Value>(Value r)> aRow;
  std::function<Value(Value r)> bRow;
  /// A packed B read in place (GK::packedMmaFormat; null: bf16 rows by
  /// bRow): `bIndex(r)` gives the flat index of B row r's first element.
  /// The threads load each 8-element piece (GK::loadWeightRaw), decode it
  /// to bf16 exactly (GK::decodeWeightBF16, without the packedTail factor,
  /// which the caller multiplies into the tile) and store it into the
  /// stage, instead of copying it by cp.async.
  const WeightRef *bPacked = nullptr;
  std::function<Value(Value r)> bIndex;
  /// With bPacked, optionally the weight of B row r (its payload, scales
  /// and global scale; bPacked's format), for B tiles that gather rows of
  /// several weights (the MoE experts' gate and up rows).
  std::function<WeightRef(Value r)> bPackedRow;
};

static TuningOpt<bool>
    wgmmaSwizzle("gpu-wgmma-swizzle", true,
                 "The tile GEMM stages its operands in the 64-byte "
                 "swizzled layout (else the no-swizzle core-matrix "
                 "layout) (tuning)");

static TuningOpt<bool>
    wgmmaPipeline("gpu-wgmma-pipeline", true,
                  "The wide tile GEMM keeps one chunk's wgmma in flight "
                  "while it issues the next chunk's barrier and copies "
                  "(tuning)");

/// The warpgroup-MMA tile GEMM (sm_90a) shared by msa.linear, msa.logits
/// and the MoE experts: one CTA of wgmma::kThreads threads computes a
/// kTileM x kTileN FP32 tile D = A B^T per work item, wgmma.mma_async
/// m64n128k16 (bf16 in, FP32 accumulators in registers) over K, operands
/// staged by cp.async in a kStages-deep ring of shared memory, in the
/// 64-byte swizzled layout (wgmma::swizzledTileByte) unless
/// --gpu-wgmma-swizzle=false.
class TileGemm {
public:
  /// One warpgroup (g's CTA) per kTileM x kTileN tile, its ring in a
  /// static shared array.
  TileGemm(GK &g, int64_t kk)
      : g(g), k(g.k), kk(kk), warpgroups(1), stages(kStages) {
    MLIRContext *ctx = k.b.getContext();
    globalT = LLVM::LLVMPointerType::get(ctx, 1);
    sharedT = LLVM::LLVMPointerType::get(ctx, 3);
    smem = g.sharedSpace(k.b.getI8Type(), kStages * stageBytes(),
                         wgmma::kSwizzleAtomBytes);
    smemAddr = LLVM::PtrToIntOp::create(k.b, k.loc, k.i64, smem);
    accT = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(kTileM * kTileN / wgmma::kThreads, k.f32));
  }
  /// `warpgroups` warpgroups (all of g's CTA, or the one warpgroup of a
  /// warpgroupView) per (64 warpgroups) x kTileN tile, its ring of
  /// `ringStages` stages at `ring` (shared address space, e.g. in the
  /// dynamic shared memory).
  TileGemm(GK &g, int64_t kk, int64_t warpgroups, int64_t ringStages,
           Value ring)
      : g(g), k(g.k), kk(kk), warpgroups(warpgroups), stages(ringStages) {
    assert(g.threads == warpgroups * wgmma::kThreads &&
           "one warpgroup per 64-row strip");
    MLIRContext *ctx = k.b.getContext();
    globalT = LLVM::LLVMPointerType::get(ctx, 1);
    sharedT = LLVM::LLVMPointerType::get(ctx, 3);
    smem = ring;
    smemAddr = LLVM::PtrToIntOp::create(k.b, k.loc, k.i64, smem);
    accT = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(kTileM * kTileN / wgmma::kThreads, k.f32));
    // This warpgroup's strip of the A tile.
    if (warpgroups > 1)
      stripA = k.imul(k.idiv(g.tid, k.c(wgmma::kThreads)), k.c(kABytes));
  }

  /// Rows of A per tile.
  int64_t tileM() const { return warpgroups * kTileM; }

  /// `p` (a generic pointer) in the global address space, for cp.async.
  Value global(Value p) {
    return LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalT, p);
  }

  /// The FP32 tile A B^T of one work item (accumulator registers; see
  /// forEachPair). The caller must g.sync() after its epilogue, before the
  /// next item's copies refill stages other warps may still be reading.
  Value run(const TileRows &rows) {
    const int64_t chunks = kk / kChunkK;
    // Each thread's copies j = tid, tid + threads, ... (row and channel
    // by wgmma::swizzledCopyRow / swizzledCopyChannel, or copyRow /
    // copyChannel without the swizzle): source row pointers, channel, for
    // A the 16 or 0 bytes to read, and `to`, the copy's byte in its stage.
    struct Copy {
      Value from, size, channel;
      Value to;
    };
    SmallVector<Copy> copies, packedCopies;
    SmallVector<WeightRef> packedRefs; // per packed copy
    auto plan = [&](int64_t nRows, int64_t tileOffset, bool isA) {
      for (int64_t i = 0; i < nRows * kCoreCols / g.threads; ++i) {
        Value j = k.iadd(g.tid, k.c(i * g.threads));
        Value r, kc, to;
        if (swizzled) {
          // wgmma::swizzledCopyRow / swizzledCopyChannel / swizzledTileByte.
          r = k.idiv(j, k.c(kCoreCols));
          Value u = k.irem(j, k.c(kCoreCols));
          kc = k.imul(u, k.c(8));
          Value piece = arith::XOrIOp::create(
              k.b, k.loc, u, k.irem(k.idiv(r, k.c(2)), k.c(4)));
          to = k.iadd(k.imul(r, k.c(wgmma::kSwizzleRowBytes)),
                      k.imul(piece, k.c(16)));
        } else {
          // wgmma::copyRow / copyChannel; tileByte is 16 j.
          r = k.iadd(k.imul(k.idiv(j, k.c(8 * kCoreCols)), k.c(8)),
                     k.irem(j, k.c(8)));
          kc = k.imul(k.irem(k.idiv(j, k.c(8)), k.c(kCoreCols)), k.c(8));
          to = k.imul(j, k.c(16));
        }
        Copy c{Value(), Value(), kc, k.iadd(to, k.c(tileOffset))};
        if (isA) {
          auto [from, valid] = rows.aRow(r);
          c.from = from;
          if (valid)
            c.size = k.select(valid, g.ci32(16), g.ci32(0));
          copies.push_back(c);
        } else if (rows.bPacked) {
          c.from = rows.bIndex(r);
          packedCopies.push_back(c);
          packedRefs.push_back(rows.bPackedRow ? rows.bPackedRow(r)
                                               : *rows.bPacked);
        } else {
          c.from = rows.bRow(r);
          copies.push_back(c);
        }
      }
    };
    plan(tileM(), 0, /*isA=*/true);
    plan(kTileN, aBytes(), /*isA=*/false);

    // Copies chunk `chunk` into its stage as one cp.async group (a packed
    // B aside: loadPacked, storePacked).
    auto issue = [&](Value chunk) {
      Value base = k.imul(k.irem(chunk, k.c(stages)), k.c(stageBytes()));
      Value k0 = k.imul(chunk, k.c(kChunkK));
      for (const Copy &c : copies) {
        Value from =
            LLVM::GEPOp::create(k.b, k.loc, globalT, k.i16, c.from,
                                ValueRange{k.toI64(k.iadd(k0, c.channel))});
        Value to =
            LLVM::GEPOp::create(k.b, k.loc, sharedT, k.b.getI8Type(), smem,
                                ValueRange{k.toI64(k.iadd(base, c.to))});
        NVVM::CpAsyncOp::create(k.b, k.loc, to, from, 16,
                                NVVM::LoadCacheModifierKind::CG, c.size);
      }
    };
    // A packed B's pieces of chunk `chunk`: loadPacked issues their
    // payload loads (a word vector per piece), storePacked decodes them to
    // bf16 and stores them into the chunk's stage (plain st.shared, which
    // the fence.proxy.async before the chunk's barrier publishes to the
    // wgmma like the cp.async copies). Per-tensor FP8 only
    // (packedTileSlots): its decode needs no block scale, so only the
    // payload travels from load to decode.
    assert((!rows.bPacked || GK::packedF16Format(*rows.bPacked->packed)) &&
           "TileGemm decodes per-tensor FP8 weights only");
    auto pieceIndex = [&](const Copy &c, Value chunk) {
      return k.iadd(c.from, k.iadd(k.imul(chunk, k.c(kChunkK)), c.channel));
    };
    // A chunk-major payload (PackedWeight::orderRanks; one weight, the
    // prologue's): each copy's row term once (orderedRowByte), each
    // chunk's column term once per thread (orderedColumnBytes; a chunk's
    // kChunkK channels lie in one 128-byte tile row), not
    // orderedByteIndex's divisions per piece.
    const bool ordered = rows.bPacked && rows.bPacked->packed->orderRanks;
    assert((!ordered || (!rows.bPackedRow && kOrderTile % kChunkK == 0)) &&
           "one chunk-major weight per tile");
    if (ordered)
      for (Copy &c : packedCopies)
        c.from = orderedRowByte(k, *rows.bPacked, c.from);
    auto loadPacked = [&](Value chunk) {
      SmallVector<Value> words;
      Value column = ordered ? orderedColumnBytes(k, *rows.bPacked,
                                                  k.imul(chunk, k.c(kChunkK)))
                             : Value();
      for (auto [c, ref] : llvm::zip(packedCopies, packedRefs)) {
        if (!ordered) {
          words.push_back(g.loadWeightRaw(ref, pieceIndex(c, chunk)).words[0]);
          continue;
        }
        words.push_back(LLVM::LoadOp::create(
            k.b, k.loc, VectorType::get({2}, k.i32),
            k.gep(ref.base, k.iadd(c.from, k.iadd(column, c.channel)),
                  k.b.getI8Type()),
            /*alignment=*/8));
      }
      return words;
    };
    auto storePacked = [&](Value chunk, ArrayRef<Value> words) {
      Value base = k.imul(k.irem(chunk, k.c(stages)), k.c(stageBytes()));
      auto v4 = VectorType::get({4}, k.i32);
      for (auto [c, ref, w] : llvm::zip(packedCopies, packedRefs, words)) {
        GK::WeightRaw raw;
        raw.words.push_back(w);
        SmallVector<Value> bf = g.decodeWeightBF16(ref, raw, e4m3IntegerDecode);
        Value v = LLVM::PoisonOp::create(k.b, k.loc, v4);
        for (int64_t e = 0; e < 4; ++e)
          v = LLVM::InsertElementOp::create(k.b, k.loc, v, bf[e], g.ci32(e));
        Value to =
            LLVM::GEPOp::create(k.b, k.loc, sharedT, k.b.getI8Type(), smem,
                                ValueRange{k.toI64(k.iadd(base, c.to))});
        LLVM::StoreOp::create(k.b, k.loc, v, to, /*alignment=*/16);
      }
    };
    auto commit = [&] { NVVM::CpAsyncCommitGroupOp::create(k.b, k.loc); };

    // Chunks in flight ahead of the one being multiplied: with pipelined
    // wgmma the stage of chunk c - 1 is still being read while chunk c is
    // multiplied, so one stage fewer is refilled.
    const int64_t ahead = pipelined ? stages - 2 : stages - 1;
    assert(ahead >= 1 && "the ring needs a stage to fill ahead");
    for (int64_t s = 0; s < ahead; ++s) {
      if (s < chunks) {
        issue(k.c(s));
        if (!packedCopies.empty())
          storePacked(k.c(s), loadPacked(k.c(s)));
      }
      commit();
    }
    // A packed B's payload runs `lead` steps ahead of its decode
    // (--gpu-packed-tile-lead): step c stores chunk c + ahead, loaded in
    // step c - lead, and loads chunk c + ahead + lead (the last chunk again
    // past the end). `pending` holds the loaded chunks' words in order.
    const int64_t lead = std::max<int64_t>(1, packedTileLead);
    const size_t pieces = packedCopies.size();
    auto clampChunk = [&](Value chunk) {
      return g.imin(chunk, k.c(chunks - 1));
    };
    SmallVector<Value> pending;
    for (int64_t l = 0; pieces && l < lead; ++l)
      llvm::append_range(pending, loadPacked(clampChunk(k.c(ahead + l))));
    // One chunk: acc += A[.., chunk] B[.., chunk]^T. The first chunk starts
    // the sum (no accumulator registers are written before the first
    // wgmma, as the wgmma.fence rules require).
    auto step = [&](Value chunk, Value a, bool first,
                    SmallVector<Value> &payload) -> Value {
      // This thread's copies of `chunk` have landed; make them visible to
      // the async proxy (wgmma reads shared memory through it), then wait
      // for every thread's. The barrier also ends every warpgroup's reads
      // of the stage refilled below: that of chunk - 1 (chunk - 2 when
      // pipelined, whose wgmma each warpgroup waited for before it).
      NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, ahead - 1);
      NVVM::FenceProxyOp::create(
          k.b, k.loc, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(k.b.getContext(),
                                     NVVM::SharedSpace::shared_cta));
      g.sync();
      Value next = k.iadd(chunk, k.c(ahead));
      k.ifThen(k.icmp(CmpI::ult, next, k.c(chunks)), [&] { issue(next); });
      commit();
      Value base = k.imul(k.irem(chunk, k.c(stages)), k.c(stageBytes()));
      NVVM::WgmmaFenceAlignedOp::create(k.b, k.loc);
      for (int64_t s = 0; s < kChunkK / 16; ++s) {
        Value at = k.iadd(
            base, k.c(swizzled ? wgmma::swizzledStepByte(s) : stepByte(s)));
        Value descA = wgmmaDescriptor(
            k, smemAddr, stripA ? k.iadd(at, stripA) : at, swizzled);
        Value descB =
            wgmmaDescriptor(k, smemAddr, k.iadd(at, k.c(aBytes())), swizzled);
        a = mma(a, descA, descB, /*accumulate=*/!first || s > 0);
      }
      NVVM::WgmmaGroupSyncAlignedOp::create(k.b, k.loc);
      // A packed B's chunk `next` decodes while this chunk's wgmma runs
      // (its stage is not one the wgmma in flight reads), and the payload
      // of the chunk after it loads.
      if (pieces) {
        k.ifThen(k.icmp(CmpI::ult, next, k.c(chunks)), [&] {
          storePacked(next, ArrayRef<Value>(payload).take_front(pieces));
        });
        SmallVector<Value> rest(ArrayRef<Value>(payload).drop_front(pieces));
        llvm::append_range(rest,
                           loadPacked(clampChunk(k.iadd(next, k.c(lead)))));
        payload = rest;
      }
      // Pipelined: this chunk's wgmma runs on while the next chunk's
      // barrier and copies are issued; the previous chunk's has finished.
      NVVM::WgmmaWaitGroupSyncOp::create(k.b, k.loc, pipelined ? 1 : 0);
      return a;
    };
    Value acc =
        step(k.c(0), LLVM::PoisonOp::create(k.b, k.loc, accT), true, pending);
    SmallVector<Value> init{acc};
    llvm::append_range(init, pending);
    SmallVector<Value> loop = k.reduceN(
        k.c(1), k.c(chunks), init,
        [&](Value chunk, ValueRange carried) -> SmallVector<Value> {
          SmallVector<Value> payload(carried.drop_front());
          SmallVector<Value> r{step(chunk, carried[0], false, payload)};
          llvm::append_range(r, payload);
          return r;
        });
    acc = loop[0];
    if (pipelined)
      NVVM::WgmmaWaitGroupSyncOp::create(k.b, k.loc, 0);
    return acc;
  }

  /// Calls fn(r, c, i, v0, v1) for each pair of adjacent columns (c, c + 1)
  /// of tile row r (tile coordinates) that this thread's accumulators
  /// (i, i + 1) hold: wgmma::accumulatorRow(i, t), wgmma::accumulatorCol(i,
  /// t). `i` (even, < kTileN / 2) is a compile-time index.
  void forEachPair(
      Value acc,
      const std::function<void(Value, Value, int64_t, Value, Value)> &fn) {
    Value row = k.iadd(k.imul(g.warp, k.c(16)), k.idiv(g.lane, k.c(4)));
    Value col = k.imul(k.irem(g.lane, k.c(4)), k.c(2));
    for (int64_t i = 0; i < kTileN / 2; i += 2)
      fn(k.iadd(row, k.c(8 * ((i / 2) % 2))), k.iadd(col, k.c(8 * (i / 4))), i,
         LLVM::ExtractValueOp::create(k.b, k.loc, acc, i),
         LLVM::ExtractValueOp::create(k.b, k.loc, acc, i + 1));
  }

  /// Stores the pair (v0, v1) at element `at` of `out` as bf16 or FP32.
  void storePair(Value out, Value at, Type oe, Value v0, Value v1) {
    if (oe.isBF16()) {
      LLVM::StoreOp::create(k.b, k.loc, g.packBF16(v0, v1),
                            k.gep(out, at, k.i16), /*alignment=*/4);
      return;
    }
    auto pair = VectorType::get({2}, k.f32);
    Value v = LLVM::PoisonOp::create(k.b, k.loc, pair);
    v = LLVM::InsertElementOp::create(k.b, k.loc, v, v0, g.ci32(0));
    v = LLVM::InsertElementOp::create(k.b, k.loc, v, v1, g.ci32(1));
    LLVM::StoreOp::create(k.b, k.loc, v, k.gep(out, at, k.f32),
                          /*alignment=*/8);
  }

private:
  /// Bytes of a stage's A tile and of a stage (A then B).
  int64_t aBytes() const { return warpgroups * kABytes; }
  int64_t stageBytes() const { return aBytes() + kBBytes; }

  // D = A B + D, or D = A B without `accumulate` (D's registers unread).
  Value mma(Value acc, Value descA, Value descB, bool accumulate) {
    MLIRContext *ctx = k.b.getContext();
    return NVVM::WgmmaMmaAsyncOp::create(
        k.b, k.loc, accT, acc, descA, descB,
        NVVM::MMAShapeAttr::get(ctx, kTileM, kTileN, 16),
        NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::bf16),
        NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::bf16),
        NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
        NVVM::WGMMAScaleOutAttr::get(ctx, accumulate
                                              ? NVVM::WGMMAScaleOut::one
                                              : NVVM::WGMMAScaleOut::zero),
        NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
        NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::col),
        /*satfinite=*/nullptr);
  }

  GK &g;
  KB &k;
  int64_t kk, warpgroups, stages;
  /// Whether a chunk's wgmma overlaps the next chunk's barrier and copies
  /// (--gpu-wgmma-pipeline): with the wide tile's deep ring only. Measured
  /// on the H200 with swizzled stages (docs/perf.md, ninth session): 1-8 %
  /// faster at 512 tokens with the wide tile; with the 4-stage ring of
  /// one-warpgroup tiles, whose copies then run only 2 chunks ahead, up to
  /// 25 % slower.
  bool pipelined = wgmmaPipeline && stages >= wgmma::kWideStages;
  /// Whether the stages hold the 64-byte swizzled layout
  /// (--gpu-wgmma-swizzle).
  bool swizzled = wgmmaSwizzle;
  Type globalT, sharedT, accT;
  Value smem, smemAddr;
  /// Byte of this thread's warpgroup's 64-row strip in a stage's A tile
  /// (index; null with one warpgroup).
  Value stripA;
};

/// out[t, j] = x[t] . w[j] for t < T (msa.linear), or out[i, j] =
/// hidden[token_indices[i]] . lm_head[j] for i < R (msa.logits), as
/// CTA-stride work items of kTileM rows x kTileN features (row tiles vary
/// fastest, so CTAs running at once share weight tiles in L2) on the tile
/// GEMM; rows past T are zero-filled and not stored. With a `ring` (shared
/// address space) the tiles have `warpgroups` x 64 rows (g's CTA has that
/// many warpgroups) and the ring `stages` stages there; without, kTileM
/// rows in a static ring of kStages.
void linearTileKernel(GK &g, Operation *op, Value T, Value ring = Value(),
                      int64_t warpgroups = 1, int64_t stages = kStages) {
  KB &k = g.k;
  const bool logits = isa<msa::LogitsOp>(op);
  Value wv = op->getOperand(logits ? 2 : 1);
  const int64_t kk = shapeOf(wv)[1], n = shapeOf(wv)[0];
  Type oe = elementOf(op->getResult(0));
  TileGemm tile =
      ring ? TileGemm(g, kk, warpgroups, stages, ring) : TileGemm(g, kk);
  const int64_t tileM = tile.tileM();
  Value x = tile.global(k.ptr(0)), idx = logits ? k.ptr(1) : Value(),
        w = tile.global(k.ptr(logits ? 2 : 1)), out = k.ptr(logits ? 3 : 2);
  Value mTiles = k.idiv(k.iadd(T, k.c(tileM - 1)), k.c(tileM));
  Value lastRow = k.iadd(T, k.c(-1));
  auto rowPtr = [&](Value base, Value row) {
    return LLVM::GEPOp::create(k.b, k.loc, base.getType(), k.i16, base,
                               ValueRange{k.toI64(k.imul(row, k.c(kk)))});
  };

  // A packed weight (linearTilePacked) is read in place, its tail factor
  // multiplied into the tile.
  const WeightRef wref = weightOperand(k, logits ? 2 : 1, elementOf(wv));
  const bool packed = wref.packed != nullptr;
  Value tail = packed ? g.packedTail(wref, k.c(0)) : Value();

  g.ctaLoop(k.imul(mTiles, k.c(n / kTileN)), [&](Value item) {
    Value row0 = k.imul(k.irem(item, mTiles), k.c(tileM));
    Value col0 = k.imul(k.idiv(item, mTiles), k.c(kTileN));
    TileRows rows;
    rows.aRow = [&](Value r) -> std::pair<Value, Value> {
      Value row = k.iadd(row0, r);
      Value valid = k.icmp(CmpI::ult, row, T);
      Value src = g.imin(row, lastRow);
      if (logits)
        src = k.loadIndex(idx, src);
      return {rowPtr(x, src), valid};
    };
    rows.bRow = [&](Value r) { return rowPtr(w, k.iadd(col0, r)); };
    if (packed) {
      rows.bPacked = &wref;
      rows.bIndex = [&](Value r) { return k.imul(k.iadd(col0, r), k.c(kk)); };
    }
    Value acc = tile.run(rows);
    tile.forEachPair(acc, [&](Value r, Value c, int64_t, Value v0, Value v1) {
      Value row = k.iadd(row0, r);
      if (tail) {
        v0 = k.mul(v0, tail);
        v1 = k.mul(v1, tail);
      }
      k.ifThen(k.icmp(CmpI::ult, row, T), [&] {
        tile.storePair(out, k.iadd(k.imul(row, k.c(n)), k.iadd(col0, c)), oe,
                       v0, v1);
      });
    });
    g.sync();
  });
}

/// Warpgroup tid / 128 of g's CTA (wgmma::kWideThreads threads) as a CTA
/// of its own: 128 threads (tid % 128, warps tid / 32 % 4), CTA warpgroup
/// numCtas + ctaId of 2 numCtas, synchronized by named barrier 1 +
/// warpgroup. The first numCtas virtual CTAs are the first warpgroups of
/// all CTAs, so a round of fewer items than CTAs spreads over the SMs
/// rather than pairing up on half of them (with CTA 2 ctaId + warpgroup,
/// M3's o_proj at 64 tokens ran 1.85x slower). Kernels built on it must
/// not use g's CTA barrier or shared arrays.
std::unique_ptr<GK> warpgroupView(GK &g) {
  KB &k = g.k;
  auto view =
      std::make_unique<GK>(k, g.globals, g.name + "_wg", wgmma::kThreads);
  Value wg = k.idiv(g.tid, k.c(wgmma::kThreads));
  view->tid = k.irem(g.tid, k.c(wgmma::kThreads));
  view->warp = k.irem(g.warp, k.c(wgmma::kThreads / kWarp));
  view->lane = g.lane;
  view->ctaId = k.iadd(k.imul(wg, g.numCtas), g.ctaId);
  view->numCtas = k.imul(g.numCtas, k.c(wgmma::kWideWarpgroups));
  view->barrierId =
      arith::IndexCastOp::create(k.b, k.loc, k.i32, k.iadd(wg, k.c(1)));
  return view;
}

/// g's CTA as CTAs of `threads` threads (a divisor of g.threads; the
/// groups as warpgroupView's warpgroups: virtual CTA group numCtas +
/// ctaId, named barrier 1 + group, and shared arrays of their own, named
/// after g's with `suffix`: views of one kernel that allocate must each
/// take their own suffix, or their arrays' names collide).
std::unique_ptr<GK> groupView(GK &g, int64_t threads, StringRef suffix) {
  KB &k = g.k;
  const int64_t groups = g.threads / threads;
  auto view =
      std::make_unique<GK>(k, g.globals, g.name + suffix.str(), threads);
  Value grp = k.idiv(g.tid, k.c(threads));
  view->tid = k.irem(g.tid, k.c(threads));
  view->warp = k.irem(g.warp, k.c(threads / kWarp));
  view->lane = g.lane;
  view->ctaId = k.iadd(k.imul(grp, g.numCtas), g.ctaId);
  view->numCtas = k.imul(g.numCtas, k.c(groups));
  view->barrierId =
      arith::IndexCastOp::create(k.b, k.loc, k.i32, k.iadd(grp, k.c(1)));
  view->sharedGroup = grp;
  view->sharedGroups = groups;
  return view;
}

/// Fewest tokens of a step for which a wide-tile kernel takes the wide
/// tile: more than one kTileM tile, so that at most the last tile is part
/// padding. The wide tile needs as many item rounds as kTileM tiles on
/// the two warpgroups of the same 2 CTAs per SM (a round of 128-token
/// items on the grid's CTAs, or of 64-token items on its warpgroups), and
/// reads the weights half as often.
constexpr int64_t kWideTileMinTokens = kTileM + 1;

/// Fewest kWideTileM x kTileN items of a step for which a wide-tile kernel
/// takes the wide tile; below it each warpgroup takes kTileM-token items
/// (twice as many, spread over twice as many SMs). Measured on the H200
/// (docs/perf.md, M3's projections at 64-4,096 tokens): at 16-32 wide
/// items the wide tile ran 0.73-0.90x the speed of one-warpgroup tiles, at
/// 48 and more 1.13-1.53x.
constexpr int64_t kWideTileMinItems = 48;

/// The body of a wide-tile kernel (g's CTA: wgmma::kWideThreads threads,
/// wgmma::kWideSharedBytes of dynamic shared memory and
/// wgmma::kWideCtasPerSM CTAs per SM, declared here) for a step of T
/// tokens whose tile GEMM of `n` output features runs from `minTokens`
/// tokens: from max(minTokens, kWideTileMinTokens) tokens and
/// kWideTileMinItems wide items (ceil(T / kWideTileM) ceil(n / kTileN))
/// tile(g, the dynamic shared memory, kWideWarpgroups, kWideStages); else
/// from `minTokens` tokens each warpgroup on its own kTileM-token items,
/// tile(warpgroupView(g), its kRingBytes half, 1, kStages); else small()
/// on g's 256 threads.
void wideTileSwitch(
    GK &g, Value T, int64_t n, int64_t minTokens,
    const std::function<void(GK &, Value, int64_t, int64_t)> &tile,
    const std::function<void()> &small) {
  KB &k = g.k;
  g.declareLaunch(wgmma::kWideThreads, wgmma::kWideSharedBytes,
                  wgmma::kWideCtasPerSM);
  Value smem = g.dynamicShared();
  Value tiled = k.icmp(CmpI::sge, T, k.c(minTokens));
  // ceil(T / kWideTileM) >= ceil(kWideTileMinItems / nTiles).
  const int64_t nTiles = (n + kTileN - 1) / kTileN;
  const int64_t mItems = (kWideTileMinItems + nTiles - 1) / nTiles;
  const int64_t wideMin = std::max(
      {minTokens, kWideTileMinTokens, (mItems - 1) * wgmma::kWideTileM + 1});
  Value wide = k.icmp(CmpI::sge, T, k.c(wideMin));
  g.ifElse(
      wide, {},
      [&]() -> SmallVector<Value> {
        tile(g, smem, wgmma::kWideWarpgroups, wgmma::kWideStages);
        return {};
      },
      [&]() -> SmallVector<Value> {
        g.ifElse(
            tiled, {},
            [&]() -> SmallVector<Value> {
              std::unique_ptr<GK> view = warpgroupView(g);
              Value wg = k.idiv(g.tid, k.c(wgmma::kThreads));
              Value ring = LLVM::GEPOp::create(
                  k.b, k.loc, smem.getType(), k.b.getI8Type(), smem,
                  ValueRange{k.toI64(k.imul(wg, k.c(wgmma::kRingBytes)))});
              tile(*view, ring, 1, kStages);
              return {};
            },
            [&]() -> SmallVector<Value> {
              g.scratch = smem;
              g.scratchBytes = wgmma::kWideSharedBytes;
              small();
              g.scratch = Value();
              g.scratchBytes = 0;
              return {};
            });
        return {};
      });
}

/// The body of a kernel on the f16 rows' launch (f16RowsLaunch: one CTA of
/// kF16RowsThreads threads per SM, its dynamic shared memory in
/// g.scratch) whose per-tensor FP8 projection takes the tile GEMM from
/// `minTokens` tokens: the CTA as groups of wgmma::kWideWarpgroups
/// warpgroups (groupView), each running tile(its group, its share of the
/// shared memory, kWideWarpgroups, the stages that share holds) on
/// kWideTileM-row tiles; below, small() on the whole CTA.
void packedTileSwitch(
    GK &g, Value T, int64_t minTokens,
    const std::function<void(GK &, Value, int64_t, int64_t)> &tile,
    const std::function<void()> &small) {
  KB &k = g.k;
  const int64_t groups = g.threads / wgmma::kWideThreads;
  const int64_t ringBytes = g.scratchBytes / groups;
  const int64_t stages = ringBytes / wgmma::kWideStageBytes;
  assert(groups >= 1 && stages >= 2 && "packedTileSwitch: the f16 rows launch");
  g.ifElse(
      k.icmp(CmpI::sge, T, k.c(minTokens)), {},
      [&]() -> SmallVector<Value> {
        // Its own names: the small steps' f16 rows take groupView's "_grp".
        std::unique_ptr<GK> view = groupView(g, wgmma::kWideThreads, "_tile");
        Value ring = LLVM::GEPOp::create(
            k.b, k.loc, g.scratch.getType(), k.b.getI8Type(), g.scratch,
            ValueRange{k.toI64(k.imul(view->sharedGroup, k.c(ringBytes)))});
        tile(*view, ring, wgmma::kWideWarpgroups, stages);
        return {};
      },
      [&]() -> SmallVector<Value> {
        small();
        return {};
      });
}

//===----------------------------------------------------------------------===//
// Warp dot products, row-wise and element-wise kernels
//===----------------------------------------------------------------------===//

/// sum_{i < n} a[aOff + i] * b[bOff + i] over the warp (every lane gets the
/// sum): 8 channels per lane with 16-byte loads when n is a multiple of 256
/// (offsets then multiples of 8; several steps' loads in flight), else one
/// channel per lane.
Value warpDot(GK &g, Value a, Value aOff, Type aType, const WeightRef &b,
              Value bOff, int64_t n) {
  KB &k = g.k;
  Value acc;
  if (n % (kWarp * 8) == 0) {
    const int64_t iters = n / (kWarp * 8), u = GK::weightUnroll(b, iters);
    acc = k.reduce(k.c(0), k.c(iters / u), k.cf(0), [&](Value it, Value s) {
      SmallVector<SmallVector<Value>> xs;
      SmallVector<GK::WeightRaw> ys;
      for (int64_t step = 0; step < u; ++step) {
        Value at = k.iadd(k.imul(it, k.c(u)), k.c(step));
        Value col = k.iadd(k.imul(at, k.c(kWarp * 8)), k.imul(g.lane, k.c(8)));
        xs.push_back(g.load8(a, k.iadd(aOff, col), aType));
        ys.push_back(g.loadWeightRaw(b, k.iadd(bOff, col)));
      }
      for (int64_t step = 0; step < u; ++step) {
        SmallVector<Value> y = g.decodeWeight8(b, ys[step]);
        for (int64_t e = 0; e < 8; ++e)
          s = k.add(s, k.mul(xs[step][e], y[e]));
      }
      return s;
    });
  } else {
    // Strided lanes: i = lane, lane + 32, ...
    auto loop = scf::ForOp::create(k.b, k.loc, g.lane, k.c(n), k.c(kWarp),
                                   ValueRange{k.cf(0)});
    {
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPointToEnd(loop.getBody());
      Value i = loop.getInductionVar();
      Value x = k.loadF(a, k.iadd(aOff, i), aType);
      Value y = loadWeight(k, b, k.iadd(bOff, i));
      scf::YieldOp::create(
          k.b, k.loc,
          ValueRange{k.add(loop.getRegionIterArgs()[0], k.mul(x, y))});
    }
    acc = loop.getResult(0);
  }
  return g.warpSum(acc);
}

/// Dot products of one row of x with 8 consecutive rows of each weight in
/// `ws` (packedMmaFormat) by mma.sync m16n8k16, the row in all 16 rows of
/// A: x[xOff + c] (bf16; FP32 holding bf16 values with RowX::F32; f16
/// with RowX::F16, the weights then packedF16Format and the products f16
/// ones) times w[row0 + j * n + c] for j < 8, c < n (n a multiple of 32,
/// xOff and row0 of 8). Returns per weight the lane's two sums, rows 2
/// (lane % 4) and 2 (lane % 4) + 1, complete (tail factor applied) in
/// lanes 0-3. With `first` (a chunk index) and `chunks`, only channels [32
/// first, 32 (first + chunks)) are summed and no tail factor is applied (a
/// part of ctaRowDots8).
SmallVector<std::array<Value, 2>>
mmaRowDots8(GK &g, Value x, Value xOff, RowX xForm, ArrayRef<WeightRef> ws,
            ArrayRef<Value> row0s, int64_t n, Value first = Value(),
            int64_t part = 0) {
  KB &k = g.k;
  const bool xF32 = xForm == RowX::F32, f16 = xForm == RowX::F16;
  const int64_t chunks = first ? part : n / 32, count = ws.size();
  const int64_t u = GK::weightUnroll(ws[0], chunks);
  Value quad = k.irem(g.lane, k.c(4)), r = k.idiv(g.lane, k.c(4));
  SmallVector<Value> wFlat;
  for (int64_t i = 0; i < count; ++i)
    wFlat.push_back(k.iadd(row0s[i], k.imul(r, k.c(n))));
  Value lane8 = k.imul(quad, k.c(8)); // element of the lane in a chunk
  if (first)
    lane8 = k.iadd(lane8, k.imul(first, k.c(32)));
  SmallVector<Value> init(4 * count, k.cf(0));
  SmallVector<Value> c = k.reduceN(
      k.c(0), k.c(chunks / u), init,
      [&](Value it, ValueRange a) -> SmallVector<Value> {
        SmallVector<SmallVector<GK::WeightRaw>> raw(count);
        SmallVector<SmallVector<Value>> xs;
        for (int64_t step = 0; step < u; ++step) {
          Value at = k.iadd(
              k.imul(k.iadd(k.imul(it, k.c(u)), k.c(step)), k.c(32)), lane8);
          for (int64_t i = 0; i < count; ++i)
            raw[i].push_back(g.loadWeightRaw(ws[i], k.iadd(wFlat[i], at)));
          if (!xF32) {
            xs.push_back(
                g.loadWords(x, k.idiv(k.iadd(xOff, at), k.c(2)), 4, true));
            continue;
          }
          // Exact: the FP32 values are bf16 numbers.
          SmallVector<Value> f = g.load8(x, k.iadd(xOff, at), k.f32);
          SmallVector<Value> words;
          for (int64_t e = 0; e < 8; e += 2) {
            Value lo = arith::BitcastOp::create(k.b, k.loc, k.i32, f[e]);
            Value hi = arith::BitcastOp::create(k.b, k.loc, k.i32, f[e + 1]);
            words.push_back(g.prmt(lo, hi, g.ci32(0x7632)));
          }
          xs.push_back(words);
        }
        SmallVector<Value> next(a.begin(), a.end());
        for (int64_t step = 0; step < u; ++step)
          for (int64_t i = 0; i < count; ++i) {
            SmallVector<Value> wq =
                f16 ? g.decodeWeightF16(ws[i], raw[i][step])
                    : g.decodeWeightBF16(ws[i], raw[i][step]);
            SmallVector<Value> acc(next.begin() + 4 * i,
                                   next.begin() + 4 * i + 4);
            for (int64_t half = 0; half < 2; ++half)
              acc = g.mma({xs[step][2 * half], xs[step][2 * half],
                           xs[step][2 * half + 1], xs[step][2 * half + 1]},
                          {wq[2 * half], wq[2 * half + 1]}, acc, f16);
            std::copy(acc.begin(), acc.end(), next.begin() + 4 * i);
          }
        return next;
      });
  SmallVector<std::array<Value, 2>> out;
  for (int64_t i = 0; i < count; ++i) {
    std::array<Value, 2> pair = {c[4 * i], c[4 * i + 1]};
    if (!first)
      if (Value tail = g.packedTail(ws[i], row0s[i]))
        for (Value &v : pair)
          v = k.mul(v, tail);
    out.push_back(pair);
  }
  return out;
}

/// True when ctaRowDots8 can split n channels over the CTA's warps.
bool ctaRowDotsFit(GK &g, int64_t n) { return n % (32 * g.warps) == 0; }

/// mmaRowDots8 by the whole CTA (every thread calls it for the same rows):
/// warp w sums channel chunks [w n / (32 W), (w + 1) n / (32 W)) of the W
/// warps, the partial sums meet in shared memory and are added in warp
/// order, then the tail factor. One row gives a warp few independent
/// loads; four warps per 8 rows keep four times as many in flight. The
/// result is valid in every lane (rows 2 (lane % 4) and 2 (lane % 4) +
/// 1). Needs ctaRowDotsFit.
SmallVector<std::array<Value, 2>>
ctaRowDots8(GK &g, Value x, Value xOff, RowX xForm, ArrayRef<WeightRef> ws,
            ArrayRef<Value> row0s, int64_t n) {
  KB &k = g.k;
  const int64_t count = ws.size(), per = n / 32 / g.warps;
  SmallVector<std::array<Value, 2>> part = mmaRowDots8(
      g, x, xOff, xForm, ws, row0s, n, k.imul(g.warp, k.c(per)), per);
  Value smem = g.shared(k.f32, g.warps * count * 8);
  Value quad = k.irem(g.lane, k.c(4));
  k.ifThen(k.icmp(CmpI::ult, g.lane, k.c(4)), [&] {
    for (int64_t i = 0; i < count; ++i)
      for (int64_t e = 0; e < 2; ++e)
        k.storeF(
            smem,
            k.iadd(k.imul(k.iadd(k.imul(g.warp, k.c(count)), k.c(i)), k.c(8)),
                   k.iadd(k.imul(quad, k.c(2)), k.c(e))),
            part[i][e], k.f32);
  });
  g.sync();
  SmallVector<std::array<Value, 2>> out;
  for (int64_t i = 0; i < count; ++i) {
    std::array<Value, 2> pair;
    for (int64_t e = 0; e < 2; ++e) {
      Value sum;
      for (int64_t w = 0; w < g.warps; ++w) {
        Value v = k.loadF(smem,
                          k.iadd(k.c((w * count + i) * 8),
                                 k.iadd(k.imul(quad, k.c(2)), k.c(e))),
                          k.f32);
        sum = w ? k.add(sum, v) : v;
      }
      pair[e] = sum;
    }
    if (Value tail = g.packedTail(ws[i], row0s[i]))
      for (Value &v : pair)
        v = k.mul(v, tail);
    out.push_back(pair);
  }
  g.sync(); // the next item's partials reuse the array
  return out;
}

/// Dot products of R <= 16 rows of f16 x (rowsToF16's words: row r at
/// word r n / 2 of `xs`) with 8 consecutive rows of a packedF16Format
/// weight (w[row0 + j n + c], j < 8, c < n, n a multiple of 32 W for the
/// CTA's W warps) by f16 mma.sync m16n8k16, the x rows the rows of A (rows
/// past R read row R - 1), by the whole CTA as ctaRowDots8 splits the
/// channels: warp w sums chunks [w n / (32 W), (w + 1) n / (32 W)), the
/// partial tiles meet in shared memory (the half `slot`, 0 or 1, which
/// consecutive items of the group alternate) and warp 0 adds them in warp
/// order, then the tail factor. Each lane loads 16 consecutive weight
/// bytes per step (--gpu-f16-rows-lane-bytes; 8 when n is not a multiple
/// of 64 W), and with maxRows <= 8 rows of x, A's rows 8-15 repeat rows
/// 0-7 instead of a second shared-memory load: on the H200 (docs/perf.md,
/// twelfth session) the L1 (global and shared loads, the partial tiles'
/// bank conflicts) was what limited M3's projections at 2-8 rows. Returns
/// the lane's C fragment (rows lane / 4 and lane / 4 + 8, features 2 (lane
/// % 4) and + 1: c0, c1, c2, c3) in warp 0, zeros in the others.
SmallVector<Value> ctaRowsDots8F16(GK &g, Value xs, Value R, int64_t n,
                                   const WeightRef &w, Value row0,
                                   int64_t maxRows, Value slot) {
  KB &k = g.k;
  // Each lane reads `lb` consecutive weight bytes of its feature (lane / 4)
  // per step, at offset (lane % 4) lb of the step's 4 lb channels; a
  // warp's step covers those 4 lb channels of its 8 features.
  const int64_t lb = f16RowsLaneBytes == 16 && n % (64 * g.warps) == 0 ? 16 : 8;
  const int64_t chunk = 4 * lb, per = n / chunk / g.warps;
  int64_t u = f16RowsUnroll > 0 ? int64_t(f16RowsUnroll) : 64 / lb;
  for (u = std::min(u, per); u > 1 && per % u != 0;)
    --u;
  // Rows 8-15 of A (C) exist only for more than 8 rows of x; with at most
  // 8 they repeat rows 0-7 instead of a second load (their sums are not
  // used).
  const bool rows8 = maxRows <= 8;
  Value quad = k.irem(g.lane, k.c(4)), r = k.idiv(g.lane, k.c(4));
  Value last = k.iadd(R, k.c(-1));
  Value xa = k.imul(g.imin(r, last), k.c(n / 2));
  Value xb = k.imul(g.imin(k.iadd(r, k.c(8)), last), k.c(n / 2));
  Value wFlat = k.iadd(row0, k.imul(r, k.c(n)));
  // A chunk-major payload (PackedWeight::orderRanks): the row's term once,
  // each step's column term (orderedRowByte, orderedColumnBytes).
  const bool ordered = w.packed && w.packed->orderRanks;
  if (ordered)
    wFlat = orderedRowByte(k, w, wFlat);
  auto globalT = LLVM::LLVMPointerType::get(k.b.getContext(), 1);
  Value wGlobal = LLVM::AddrSpaceCastOp::create(k.b, k.loc, globalT, w.base);
  Value laneAt = k.iadd(k.imul(quad, k.c(lb)),
                        k.imul(k.imul(g.warp, k.c(per)), k.c(chunk)));
  SmallVector<Value> init(4, k.cf(0));
  SmallVector<Value> c = k.reduceN(
      k.c(0), k.c(per / u), init,
      [&](Value it, ValueRange a) -> SmallVector<Value> {
        // The u steps' weight loads issue first; the rows (shared memory)
        // are read step by step.
        SmallVector<Value> wq, words;
        for (int64_t step = 0; step < u; ++step) {
          Value at =
              k.iadd(k.imul(k.iadd(k.imul(it, k.c(u)), k.c(step)), k.c(chunk)),
                     laneAt);
          Value idx =
              k.iadd(wFlat, ordered ? orderedColumnBytes(k, w, at) : at);
          // Decoded below, after every step's load issued.
          Value from = LLVM::GEPOp::create(k.b, k.loc, globalT, k.b.getI8Type(),
                                           wGlobal, ValueRange{k.toI64(idx)});
          wq.push_back(LLVM::LoadOp::create(
              k.b, k.loc, VectorType::get({lb / 4}, k.i32), from,
              /*alignment=*/lb));
          words.push_back(k.idiv(at, k.c(2)));
        }
        SmallVector<Value> acc(a.begin(), a.end());
        for (int64_t step = 0; step < u; ++step) {
          SmallVector<Value> ua =
              g.loadWords(xs, k.iadd(xa, words[step]), lb / 2, true);
          SmallVector<Value> ub =
              rows8 ? ua
                    : g.loadWords(xs, k.iadd(xb, words[step]), lb / 2, true);
          SmallVector<Value> f = g.e4m3WordsToF16(wq[step], lb / 4);
          for (int64_t m = 0; m < lb / 4; ++m)
            acc = g.mma({ua[2 * m], ub[2 * m], ua[2 * m + 1], ub[2 * m + 1]},
                        {f[2 * m], f[2 * m + 1]}, acc, true);
        }
        return acc;
      });
  // Partial tiles [warp][lane][4] (one 16-byte store a lane), in the half
  // of the array for the item's `slot`, summed in warp order by warp 0:
  // warp 0 reads this item's half before it reaches the barrier of the
  // next item, which every warp passes before it stores the item after
  // (the other half), so no second barrier is needed.
  const int64_t tileFloats = g.warps * kWarp * 4;
  Value smem = g.shared(k.f32, 2 * tileFloats);
  Value half = k.imul(slot, k.c(tileFloats));
  auto v4 = VectorType::get({4}, k.f32);
  auto tileAt = [&](Value warp) {
    return k.gep(
        smem,
        k.iadd(half, k.imul(k.iadd(k.imul(warp, k.c(kWarp)), g.lane), k.c(4))),
        k.f32);
  };
  Value packed = LLVM::UndefOp::create(k.b, k.loc, v4);
  for (int64_t e = 0; e < 4; ++e)
    packed = LLVM::InsertElementOp::create(k.b, k.loc, packed, c[e], g.ci32(e));
  LLVM::StoreOp::create(k.b, k.loc, packed, tileAt(g.warp), /*alignment=*/16);
  g.sync();
  Value tail = g.packedTail(w, row0);
  SmallVector<Type> types(4, k.f32);
  return g.ifElse(
      g.eq(g.warp, k.c(0)), types,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> sum;
        for (int64_t wi = 0; wi < g.warps; ++wi) {
          Value t = LLVM::LoadOp::create(k.b, k.loc, v4, tileAt(k.c(wi)),
                                         /*alignment=*/16);
          for (int64_t e = 0; e < 4; ++e) {
            Value v = LLVM::ExtractElementOp::create(k.b, k.loc, t, g.ci32(e));
            if (wi)
              sum[e] = k.add(sum[e], v);
            else
              sum.push_back(v);
          }
        }
        if (tail)
          for (Value &v : sum)
            v = k.mul(v, tail);
        return sum;
      },
      [&]() -> SmallVector<Value> { return SmallVector<Value>(4, k.cf(0)); });
}

bool moeExpertsFits(msa::MoEExpertsOp op) {
  for (Value v : {op.getInput(), op.getGateWeights(), op.getUpWeights(),
                  op.getDownWeights()}) {
    Type e = elementOf(v);
    if (!e.isBF16() && !e.isF32())
      return false;
  }
  return true;
}

/// The warp path of the MoE experts (parts 0 and 2 of 4; parts 1 and 3
/// are empty). Part 0: act[t, slot, n] = swiglu(x[t] . w1[e, n], x[t] .
/// w3[e, n]) for e = ids[t, slot], one warp per (t, slot, n), rounded to
/// the activation type as the host's separate projections are. Part 2:
/// out[t, c] = sum_slot w[t, slot] * (act[t, slot] . w2[e, c]), one warp
/// per (t, c).
void moeExpertsKernel(GK &g, msa::MoEExpertsOp op, int64_t part) {
  KB &k = g.k;
  Value in = k.ptr(0), rw = k.ptr(1), ri = k.ptr(2), out = k.ptr(6),
        act = k.ptr(7);
  const MoEExpertsShape s(op);
  const int64_t inner = s.inner, h = s.h, topK = s.topK;
  Type ie = s.ie;
  WeightRef w1 = weightOperand(k, 3, s.we), w3 = weightOperand(k, 4, s.we),
            w2 = weightOperand(k, 5, s.de);
  Value T = k.scalar(0);
  // Packed experts of bf16-exact formats: 8 features per warp item on the
  // tensor cores (mmaRowDots8); lanes 0-3 finish 2 features each.
  const bool mma =
      w1.packed && w3.packed && w2.packed && GK::packedMmaFormat(*w1.packed) &&
      GK::packedMmaFormat(*w3.packed) && GK::packedMmaFormat(*w2.packed) &&
      ie.isBF16() && h % 32 == 0 && inner % 32 == 0;
  // With channels for every warp, a CTA takes each item (ctaRowDots8).
  auto itemLoop = [&](bool cta, Value count,
                      const std::function<void(Value)> &body) {
    if (cta)
      g.ctaLoop(count, body);
    else
      g.warpLoop(count, body);
  };
  auto rowDots = [&](bool cta, Value x, Value xOff, bool xF32,
                     ArrayRef<WeightRef> ws, ArrayRef<Value> row0s, int64_t n) {
    const RowX form = xF32 ? RowX::F32 : RowX::BF16;
    return cta ? ctaRowDots8(g, x, xOff, form, ws, row0s, n)
               : mmaRowDots8(g, x, xOff, form, ws, row0s, n);
  };
  // Lanes 0-3 (of warp 0 when a CTA takes the item) store.
  auto storer = [&](bool cta) {
    Value lanes = k.icmp(CmpI::ult, g.lane, k.c(4));
    return cta ? g.andI(lanes, g.eq(g.warp, k.c(0))) : lanes;
  };
  if (mma && part == 0) {
    const bool cta = ctaRowDotsFit(g, h);
    itemLoop(cta, k.imul(T, k.c(topK * inner / 8)), [&](Value item) {
      Value slotRow = k.idiv(item, k.c(inner / 8)); // t * topK + slot
      Value t = k.idiv(slotRow, k.c(topK));
      Value n0 = k.imul(k.irem(item, k.c(inner / 8)), k.c(8));
      Value e = k.loadIndex(ri, slotRow);
      Value row0 = k.imul(k.iadd(k.imul(e, k.c(inner)), n0), k.c(h));
      SmallVector<std::array<Value, 2>> d =
          rowDots(cta, in, k.imul(t, k.c(h)), false, {w1, w3}, {row0, row0}, h);
      Value quad = k.irem(g.lane, k.c(4));
      k.ifThen(storer(cta), [&] {
        for (int64_t i = 0; i < 2; ++i) {
          Value gv = g.roundTo(d[0][i], ie), uv = g.roundTo(d[1][i], ie);
          Value a = swigluOAI(k, gv, uv, s.alpha, s.limit);
          Value n = k.iadd(n0, k.iadd(k.imul(quad, k.c(2)), k.c(i)));
          k.storeF(act, k.iadd(k.imul(slotRow, k.c(inner)), n),
                   g.roundTo(a, ie), k.f32);
        }
      });
    });
    return;
  }
  if (mma && part == 2) {
    const bool cta = ctaRowDotsFit(g, inner);
    itemLoop(cta, k.imul(T, k.c(h / 8)), [&](Value item) {
      Value t = k.idiv(item, k.c(h / 8));
      Value c0 = k.imul(k.irem(item, k.c(h / 8)), k.c(8));
      Value quad = k.irem(g.lane, k.c(4));
      std::array<Value, 2> acc = {k.cf(0), k.cf(0)};
      for (int64_t slot = 0; slot < topK; ++slot) {
        Value at = k.iadd(k.imul(t, k.c(topK)), k.c(slot));
        Value e = k.loadIndex(ri, at);
        Value w = k.loadF(rw, at, k.f32);
        Value row0 = k.imul(k.iadd(k.imul(e, k.c(h)), c0), k.c(inner));
        std::array<Value, 2> dv = rowDots(cta, act, k.imul(at, k.c(inner)),
                                          true, {w2}, {row0}, inner)[0];
        for (int64_t i = 0; i < 2; ++i)
          acc[i] = k.add(acc[i], k.mul(w, dv[i]));
      }
      k.ifThen(storer(cta), [&] {
        for (int64_t i = 0; i < 2; ++i)
          k.storeF(out,
                   k.iadd(k.imul(t, k.c(h)),
                          k.iadd(c0, k.iadd(k.imul(quad, k.c(2)), k.c(i)))),
                   acc[i], ie);
      });
    });
    return;
  }
  if (part == 0) {
    g.warpLoop(k.imul(T, k.c(topK * inner)), [&](Value item) {
      Value t = k.idiv(item, k.c(topK * inner));
      Value slotRow = k.idiv(item, k.c(inner)); // t * topK + slot
      Value n = k.irem(item, k.c(inner));
      Value e = k.loadIndex(ri, slotRow);
      Value row = k.imul(k.iadd(k.imul(e, k.c(inner)), n), k.c(h));
      Value xOff = k.imul(t, k.c(h));
      Value gv = g.roundTo(warpDot(g, in, xOff, ie, w1, row, h), ie);
      Value uv = g.roundTo(warpDot(g, in, xOff, ie, w3, row, h), ie);
      Value a = swigluOAI(k, gv, uv, s.alpha, s.limit);
      k.ifThen(g.eq(g.lane, k.c(0)),
               [&] { k.storeF(act, item, g.roundTo(a, ie), k.f32); });
    });
    return;
  }
  if (part != 2)
    return;
  g.warpLoop(k.imul(T, k.c(h)), [&](Value item) {
    Value t = k.idiv(item, k.c(h)), c = k.irem(item, k.c(h));
    Value acc = k.cf(0);
    for (int64_t slot = 0; slot < topK; ++slot) {
      Value at = k.iadd(k.imul(t, k.c(topK)), k.c(slot));
      Value e = k.loadIndex(ri, at);
      Value w = k.loadF(rw, at, k.f32);
      Value row = k.imul(k.iadd(k.imul(e, k.c(h)), c), k.c(inner));
      Value dv = warpDot(g, act, k.imul(at, k.c(inner)), k.f32, w2, row, inner);
      acc = k.add(acc, k.mul(w, dv));
    }
    k.ifThen(g.eq(g.lane, k.c(0)), [&] { k.storeF(out, item, acc, ie); });
  });
}

/// Experts of an msa.moe_experts op (its gate weights' first dimension).
int64_t moeExpertCount(msa::MoEExpertsOp op) {
  return shapeOf(op.getGateWeights())[0];
}

/// True when the MoE experts' gate, up and down weights (slots 3-5) are
/// per-tensor (per-matrix) FP8 E4M3 weights read in place
/// (GK::packedF16Format), which the tile GEMM decodes into its stages
/// (TileRows::bPacked).
bool moeWeightsTilePacked(const PackedOperands *packed) {
  return packedTileSlots(packed, {3, 4, 5});
}

/// True when the MoE experts can take the grouped tile GEMM (sm_90a): bf16
/// activations, bf16 weights or per-tensor FP8 ones read in place
/// (moeWeightsTilePacked), H and the expert width multiples of the tile's
/// K chunk, H of kTileN and the expert width of kTileN / 2 (gate and up
/// share a tile), at most 1024 experts (counted in shared memory).
bool moeExpertsTileFits(msa::MoEExpertsOp op, int64_t threads,
                        const PackedOperands *packed) {
  const MoEExpertsShape s(op);
  const bool weights =
      (s.we.isBF16() && s.de.isBF16()) ||
      (s.we.isF32() && s.de.isF32() && moeWeightsTilePacked(packed));
  return threads == wgmma::kThreads && s.ie.isBF16() && weights &&
         s.h % kChunkK == 0 && s.h % kTileN == 0 && s.inner % kChunkK == 0 &&
         s.inner % (kTileN / 2) == 0 && moeExpertCount(op) <= 1024;
}

/// Fewest tokens of a step for which the MoE experts take the grouped tile
/// GEMM: at least kTileMinTokens, and enough (token, slot) pairs for two
/// per expert on average. Below, most experts get one row, which the tile
/// pads to kTileM, and the warp path reads the same weight rows once.
int64_t moeTileMinTokens(msa::MoEExpertsOp op) {
  const MoEExpertsShape s(op);
  return std::max(kTileMinTokens,
                  (2 * moeExpertCount(op) + s.topK - 1) / s.topK);
}

/// FP32 workspace elements per token the MoE experts' GPU kernels use: the
/// larger of the warp path's FP32 activations and the tile path's layout
/// (moeTileKernel), whose fixed part fits in the kTileMinTokens tokens the
/// tile path needs at least.
int64_t moeWorkspacePerToken(msa::MoEExpertsOp op) {
  const MoEExpertsShape s(op);
  const int64_t experts = moeExpertCount(op);
  const int64_t tile = s.topK * (s.h + s.inner / 2 + 2) +
                       (3 * experts + 2 + kTileMinTokens - 1) / kTileMinTokens;
  return std::max(s.topK * s.inner, tile);
}

/// The grouped tile GEMM path of the MoE experts (sm_90a), four launches
/// over the P = T * topK (token, slot) pairs, with the workspace laid out
/// (in 4-byte words) as y: FP32 [P, H] | act: bf16 [P, inner] | perm: i32
/// [P] | offsets: i32 [E + 1] | tileStart: i32 [E + 1] | tileExpert: i32
/// [ceil(P / kTileM) + E].
///   Part 0 (one CTA) buckets the pairs by expert: perm[offsets[e] ..
///     offsets[e + 1]) are expert e's pairs (in no particular order: every
///     row of a tile is computed independently); expert e's rows form
///     tiles tileStart[e] .. tileStart[e + 1] of kTileM rows, each tagged
///     with its expert in tileExpert.
///   Part 1: per (row tile, 64 features n0..n0+63): B is 64 rows of w1[e]
///     then the same 64 rows of w3[e], so each thread holds gate and up of
///     the same (row, n) (accumulators i and i + 32); act[row, n] =
///     swiglu(gate, up) with both rounded to bf16 first, rounded to bf16,
///     as the host does.
///   Part 2: per (row tile, 128 output channels): y[pair, c] = act[row] .
///     w2[e, c] (FP32, unrounded, stored by pair).
///   Part 3: out[t, c] = sum over slots in order of w[t, slot] * y[t *
///     topK + slot, c], rounded to bf16: the host's summation order.
void moeTileKernel(GK &g, msa::MoEExpertsOp op, int64_t part, Value T) {
  KB &k = g.k;
  const MoEExpertsShape s(op);
  const int64_t inner = s.inner, h = s.h, topK = s.topK;
  const int64_t experts = moeExpertCount(op);
  Value in = k.ptr(0), rw = k.ptr(1), ri = k.ptr(2), w1 = k.ptr(3),
        w3 = k.ptr(4), w2 = k.ptr(5), out = k.ptr(6), ws = k.ptr(7);
  Value pairs = k.imul(T, k.c(topK));
  // Word offsets of the workspace arrays.
  Value actAt = k.imul(pairs, k.c(h));
  Value permAt = k.iadd(actAt, k.imul(pairs, k.c(inner / 2)));
  Value offsetsAt = k.iadd(permAt, pairs);
  Value tileStartAt = k.iadd(offsetsAt, k.c(experts + 1));
  Value tileExpertAt = k.iadd(tileStartAt, k.c(experts + 1));
  Value act = k.gep(ws, actAt, k.f32);
  auto word = [&](Value at, Value i) { return k.iadd(at, i); };

  if (part == 0) {
    k.ifThen(g.eq(g.ctaId, k.c(0)), [&] {
      Value count = g.shared(k.i32, experts);
      auto atomicAdd = [&](Value e, Value v) -> Value {
        Value old = LLVM::AtomicRMWOp::create(
            k.b, k.loc, LLVM::AtomicBinOp::add, k.gep(count, e, k.i32), v,
            LLVM::AtomicOrdering::monotonic);
        return arith::IndexCastOp::create(k.b, k.loc, k.b.getIndexType(), old);
      };
      g.strided(g.tid, k.c(experts),
                [&](Value e) { g.storeI32(count, e, g.ci32(0)); });
      g.sync();
      g.strided(g.tid, pairs,
                [&](Value i) { atomicAdd(k.loadIndex(ri, i), g.ci32(1)); });
      g.sync();
      // Thread 0: exclusive prefix sums of rows and tiles; the counters
      // become each expert's next free position.
      k.ifThen(g.eq(g.tid, k.c(0)), [&] {
        SmallVector<Value> end =
            k.reduceN(k.c(0), k.c(experts), {k.c(0), k.c(0)},
                      [&](Value e, ValueRange acc) -> SmallVector<Value> {
                        Value n = k.loadIndex(count, e);
                        k.storeIndex(ws, word(offsetsAt, e), acc[0]);
                        k.storeIndex(ws, word(tileStartAt, e), acc[1]);
                        k.storeIndex(count, e, acc[0]);
                        Value tiles =
                            k.idiv(k.iadd(n, k.c(kTileM - 1)), k.c(kTileM));
                        return {k.iadd(acc[0], n), k.iadd(acc[1], tiles)};
                      });
        k.storeIndex(ws, word(offsetsAt, k.c(experts)), end[0]);
        k.storeIndex(ws, word(tileStartAt, k.c(experts)), end[1]);
      });
      g.sync();
      g.strided(g.tid, pairs, [&](Value i) {
        Value at = atomicAdd(k.loadIndex(ri, i), g.ci32(1));
        k.storeIndex(ws, word(permAt, at), i);
      });
      g.strided(g.tid, k.c(experts), [&](Value e) {
        Value lo = k.loadIndex(ws, word(tileStartAt, e));
        Value hi = k.loadIndex(ws, word(tileStartAt, k.iadd(e, k.c(1))));
        auto loop = scf::ForOp::create(k.b, k.loc, lo, hi, k.c(1));
        OpBuilder::InsertionGuard guard(k.b);
        k.b.setInsertionPoint(loop.getBody()->getTerminator());
        k.storeIndex(ws, word(tileExpertAt, loop.getInductionVar()), e);
      });
    });
    return;
  }

  if (part == 3) {
    threadLoop(g, k.imul(T, k.c(h)), [&](Value item) {
      Value t = k.idiv(item, k.c(h)), c = k.irem(item, k.c(h));
      Value acc = k.cf(0);
      for (int64_t slot = 0; slot < topK; ++slot) {
        Value at = k.iadd(k.imul(t, k.c(topK)), k.c(slot));
        Value y = k.loadF(ws, k.iadd(k.imul(at, k.c(h)), c), k.f32);
        acc = k.add(acc, k.mul(k.loadF(rw, at, k.f32), y));
      }
      k.storeF(out, item, acc, s.ie);
    });
    return;
  }

  // Parts 1 and 2: work items (row tile, feature tile), row tiles fastest.
  const bool gateUp = part == 1;
  TileGemm tile(g, gateUp ? h : inner);
  Value tiles = k.loadIndex(ws, word(tileStartAt, k.c(experts)));
  // Packed weights (moeWeightsTilePacked) are read in place, each
  // matrix's tail factor multiplied into its part of the tile.
  const WeightRef ref1 = weightOperand(k, 3, s.we),
                  ref3 = weightOperand(k, 4, s.we),
                  ref2 = weightOperand(k, 5, s.de);
  const bool packed = ref1.packed && ref3.packed && ref2.packed;
  // The tail of expert e's matrix of `ref` ([E, rows, cols]).
  auto tailOf = [&](const WeightRef &ref, Value e) -> Value {
    if (!packed)
      return Value();
    const PackedWeight &p = *ref.packed;
    return g.packedTail(ref, k.imul(e, k.c(p.rows() * p.cols())));
  };
  auto times = [&](Value v, Value t) { return t ? k.mul(v, t) : v; };
  const int64_t nTiles = gateUp ? inner / (kTileN / 2) : h / kTileN;
  Value xg = tile.global(in), w1g = tile.global(w1), w3g = tile.global(w3),
        w2g = tile.global(w2), actg = tile.global(act);
  auto rowPtr = [&](Value base, Value row, int64_t len) {
    return LLVM::GEPOp::create(k.b, k.loc, base.getType(), k.i16, base,
                               ValueRange{k.toI64(k.imul(row, k.c(len)))});
  };
  g.ctaLoop(k.imul(tiles, k.c(nTiles)), [&](Value item) {
    Value mt = k.irem(item, tiles), nt = k.idiv(item, tiles);
    Value e = k.loadIndex(ws, word(tileExpertAt, mt));
    Value start = k.iadd(
        k.loadIndex(ws, word(offsetsAt, e)),
        k.imul(g.isub(mt, k.loadIndex(ws, word(tileStartAt, e))), k.c(kTileM)));
    Value end = k.loadIndex(ws, word(offsetsAt, k.iadd(e, k.c(1))));
    Value last = k.iadd(end, k.c(-1));
    TileRows rows;
    if (gateUp) {
      Value n0 = k.imul(nt, k.c(kTileN / 2));
      rows.aRow = [&](Value r) -> std::pair<Value, Value> {
        Value p = k.iadd(start, r);
        Value pair = k.loadIndex(ws, word(permAt, g.imin(p, last)));
        return {rowPtr(xg, k.idiv(pair, k.c(topK)), h),
                k.icmp(CmpI::ult, p, end)};
      };
      rows.bRow = [&](Value r) -> Value {
        Value up = k.icmp(CmpI::uge, r, k.c(kTileN / 2));
        Value n = k.iadd(n0, k.irem(r, k.c(kTileN / 2)));
        Value row = k.iadd(k.imul(e, k.c(inner)), n);
        return LLVM::SelectOp::create(k.b, k.loc, up, rowPtr(w3g, row, h),
                                      rowPtr(w1g, row, h));
      };
      Value tail1, tail3;
      if (packed) {
        rows.bPacked = &ref1;
        rows.bIndex = [&](Value r) {
          Value n = k.iadd(n0, k.irem(r, k.c(kTileN / 2)));
          return k.imul(k.iadd(k.imul(e, k.c(inner)), n), k.c(h));
        };
        rows.bPackedRow = [&](Value r) {
          Value up = k.icmp(CmpI::uge, r, k.c(kTileN / 2));
          auto pick = [&](Value a, Value b) {
            return a ? LLVM::SelectOp::create(k.b, k.loc, up, a, b).getResult()
                     : Value();
          };
          WeightRef w = ref1;
          w.base = pick(ref3.base, ref1.base);
          w.scales = pick(ref3.scales, ref1.scales);
          w.global = pick(ref3.global, ref1.global);
          return w;
        };
        tail1 = tailOf(ref1, e);
        tail3 = tailOf(ref3, e);
      }
      Value acc = tile.run(rows);
      tile.forEachPair(acc, [&](Value r, Value c, int64_t i, Value g0,
                                Value g1) {
        if (i >= kTileN / 4)
          return; // the up half
        Value u0 =
            times(LLVM::ExtractValueOp::create(k.b, k.loc, acc, i + kTileN / 4),
                  tail3);
        Value u1 = times(
            LLVM::ExtractValueOp::create(k.b, k.loc, acc, i + kTileN / 4 + 1),
            tail3);
        g0 = times(g0, tail1);
        g1 = times(g1, tail1);
        Value p = k.iadd(start, r);
        k.ifThen(k.icmp(CmpI::ult, p, end), [&] {
          auto swiglu = [&](Value gv, Value uv) {
            return swigluOAI(k, g.roundTo(gv, s.ie), g.roundTo(uv, s.ie),
                             s.alpha, s.limit);
          };
          tile.storePair(act, k.iadd(k.imul(p, k.c(inner)), k.iadd(n0, c)),
                         s.ie, swiglu(g0, u0), swiglu(g1, u1));
        });
      });
    } else {
      Value c0 = k.imul(nt, k.c(kTileN));
      rows.aRow = [&](Value r) -> std::pair<Value, Value> {
        Value p = k.iadd(start, r);
        return {rowPtr(actg, g.imin(p, last), inner),
                k.icmp(CmpI::ult, p, end)};
      };
      rows.bRow = [&](Value r) -> Value {
        return rowPtr(w2g, k.iadd(k.imul(e, k.c(h)), k.iadd(c0, r)), inner);
      };
      Value tail2;
      if (packed) {
        rows.bPacked = &ref2;
        rows.bIndex = [&](Value r) {
          return k.imul(k.iadd(k.imul(e, k.c(h)), k.iadd(c0, r)), k.c(inner));
        };
        tail2 = tailOf(ref2, e);
      }
      Value acc = tile.run(rows);
      tile.forEachPair(acc, [&](Value r, Value c, int64_t, Value v0, Value v1) {
        v0 = times(v0, tail2);
        v1 = times(v1, tail2);
        Value p = k.iadd(start, r);
        k.ifThen(k.icmp(CmpI::ult, p, end), [&] {
          Value pair = k.loadIndex(ws, word(permAt, p));
          tile.storePair(ws, k.iadd(k.imul(pair, k.c(h)), k.iadd(c0, c)), k.f32,
                         v0, v1);
        });
      });
    }
    g.sync();
  });
}

//===----------------------------------------------------------------------===//
// Attention prologue: QKV projection, per-head norms, RoPE, cache inserts
//===----------------------------------------------------------------------===//

/// msa.attention_prologue as its GPU kernels see it: five branches (q, k,
/// v, index_q, index_k; the last two only with the index branch) of heads
/// of kTileN channels, laid end to end as one projection of
/// `totalHeads * kTileN` output channels ("global head" gh of the
/// concatenation is local head gh - start[kind] of branch `kind`).
struct PrologueShape {
  enum Kind { Q, K, V, IQ, IK, kKinds };
  explicit PrologueShape(msa::AttentionPrologueOp op)
      : op(op), hasIndex(static_cast<bool>(op.getIndexQWeight())),
        hidden(shapeOf(op.getInput())[1]), act(elementOf(op.getInput())) {
    msa::PagedCacheType kv = op.getKeyCache().getType();
    heads[Q] = shapeOf(op.getQ())[1];
    heads[K] = heads[V] = kv.getHeads();
    heads[IQ] = hasIndex ? shapeOf(op.getIndexQ())[1] : 0;
    heads[IK] = hasIndex ? 1 : 0;
    for (int kind = 0; kind < kKinds; ++kind) {
      start[kind] = totalHeads;
      totalHeads += heads[kind];
    }
  }
  /// The weight, norm weight (null for v) and head dimension operands of
  /// branch `kind`.
  Value weight(int kind) const {
    Value w[] = {op.getQWeight(), op.getKWeight(), op.getVWeight(),
                 op.getIndexQWeight(), op.getIndexKWeight()};
    return w[kind];
  }
  Value norm(int kind) const {
    Value n[] = {op.getQNormWeight(), op.getKNormWeight(), Value(),
                 op.getIndexQNormWeight(), op.getIndexKNormWeight()};
    return n[kind];
  }
  int64_t headDim(int kind) const {
    if (kind == Q)
      return shapeOf(op.getQ())[2];
    if (kind == IQ)
      return shapeOf(op.getIndexQ())[2];
    if (kind == IK)
      return op.getIndexCache().getType().getHeadDim();
    return op.getKeyCache().getType().getHeadDim();
  }
  int kinds() const { return hasIndex ? kKinds : IQ; }

  mutable msa::AttentionPrologueOp op; // accessors are not const
  bool hasIndex;
  int64_t hidden;
  Type act;
  int64_t heads[kKinds], start[kKinds], totalHeads = 0;
};

/// How the kernels would read projection weight `w` of the prologue: its
/// element type, and for a `bsq.dequantize` of a `bsq.pack` the quantized
/// type, the payload and scale element types and how the global scale is
/// given (the fields of ProgramBuilder's packed layout but the shape).
std::string prologueWeightForm(Value w) {
  std::string form;
  llvm::raw_string_ostream os(form);
  os << elementOf(w);
  auto dq = w.getDefiningOp<bsq::DequantizeOp>();
  if (!dq)
    return form;
  os << "=" << elementOf(dq.getInput());
  if (auto pack = dq.getInput().getDefiningOp<bsq::PackOp>()) {
    os << "," << elementOf(pack.getData()) << ","
       << elementOf(pack.getScales());
    if (Value g = pack.getGlobalScale())
      os << (g.getDefiningOp<arith::DivFOp>() ? ",1/g" : ",g");
  }
  return form;
}

/// The launch slot of the projection weight of branch `kind` (the
/// operands' order: PrologueBuffers).
int prologueWeightSlot(int kind) {
  using P = PrologueShape;
  return kind < P::IQ ? 1 + kind : 11 + (kind - P::IQ);
}

/// True when the prologue's projections can take the wgmma tile GEMM on
/// its wide launch: bf16 weights (per-tensor FP8 ones read in place take
/// prologuePackedTiled's; other block-scaled ones, read in place or as
/// FP32 copies, take the warp path at every step).
bool prologueTiled(const PrologueShape &s) {
  for (int kind = 0; kind < s.kinds(); ++kind)
    if (!elementOf(s.weight(kind)).isBF16())
      return false;
  return true;
}

/// True when the prologue's projections are per-tensor FP8 E4M3 weights
/// read in place (GK::packedF16Format, every branch: prologueFits makes
/// them one form), which from packedPrologueTileMinTokens tokens take the tile
/// GEMM decoding them into its stages, on the f16 rows' launch
/// (packedTileSwitch).
bool prologuePackedTiled(const PrologueShape &s, const PackedOperands *packed) {
  SmallVector<int> slots;
  for (int kind = 0; kind < s.kinds(); ++kind)
    slots.push_back(prologueWeightSlot(kind));
  // The launch of the f16 rows (f16RowsLaunch) carries the tile's rings.
  return rowsDotF16 && packedTileSlots(packed, slots);
}

/// True when msa.attention_prologue has GPU kernels: bf16 activations;
/// bf16 weights, or FP32 ones of one form in every branch (block-scaled,
/// prologueWeightForm; the warp path only); heads of kTileN channels in
/// every branch (the tile holds one
/// head, so the norm and RoPE see a whole head), bf16, f32, FP8 E4M3 or
/// NVFP4 caches, a rotated half of whole 8-channel groups (RoPE pairs then
/// sit in one thread's accumulators), H a multiple of 256.
bool prologueFits(msa::AttentionPrologueOp op, int64_t threads) {
  if (threads != wgmma::kThreads)
    return false;
  const PrologueShape s(op);
  if (!s.act.isBF16() || !elementOf(op.getQ()).isBF16() ||
      s.hidden % (kWarp * 8) != 0 || s.hidden % kChunkK != 0)
    return false;
  // The projections run as one rowsDot over the concatenated weights: bf16
  // weights, or FP32 ones (block-scaled weights dequantized by
  // bsq.dequantize, read in place or as copies) of one form, so that one
  // packed layout decodes every branch.
  const std::string form = prologueWeightForm(s.weight(0));
  for (int kind = 0; kind < s.kinds(); ++kind) {
    Type we = elementOf(s.weight(kind));
    if ((!we.isBF16() && !we.isF32()) ||
        prologueWeightForm(s.weight(kind)) != form || s.headDim(kind) != kTileN)
      return false;
    if (Value n = s.norm(kind)) {
      Type ne = elementOf(n);
      if (!ne.isBF16() && !ne.isF32())
        return false;
    }
  }
  SmallVector<msa::PagedCacheType> caches = {op.getKeyCache().getType()};
  if (s.hasIndex)
    caches.push_back(op.getIndexCache().getType());
  for (msa::PagedCacheType c : caches) {
    Type ce = c.getElementType();
    if (!ce.isBF16() && !ce.isF32() && !isa<Float8E4M3FNType>(ce) &&
        !isNVFP4Cache(c))
      return false;
  }
  const int64_t r = op.getRotaryDim();
  return r % 16 == 0 && r <= kTileN;
}

/// The operands of the prologue's GPU kernels (buffer order of the host
/// kernel, then the FP32 workspace [T, totalHeads * kTileN]) and the RoPE
/// inverse-frequency table.
struct PrologueBuffers {
  PrologueBuffers(GK &g, const PrologueShape &s) {
    for (int kind = 0; kind < s.kinds(); ++kind)
      wSlot[kind] = prologueWeightSlot(kind);
    loadPointers(g.k, s);
    invFreq = g.constantTable(ropeInverseFrequencies(
        s.op.getTheta().convertToDouble(), s.op.getRotaryDim()));
  }
  /// The same buffers with their pointers loaded from the launch table
  /// again, here: a kernel whose epilogue follows a long loop takes these,
  /// so that the epilogue's pointers are not live (or spilled) across the
  /// loop.
  PrologueBuffers reloaded(GK &g, const PrologueShape &s) const {
    PrologueBuffers copy = *this;
    copy.loadPointers(g.k, s);
    return copy;
  }
  Value in, table, seqs, pos, ws, invFreq;
  Value w[PrologueShape::kKinds], norm[PrologueShape::kKinds],
      cache[PrologueShape::kKinds], out[PrologueShape::kKinds];
  /// Launch slots of the projection weights.
  int wSlot[PrologueShape::kKinds] = {};

private:
  void loadPointers(KB &k, const PrologueShape &s) {
    using P = PrologueShape;
    in = k.ptr(0);
    w[P::Q] = k.ptr(1), w[P::K] = k.ptr(2), w[P::V] = k.ptr(3);
    norm[P::Q] = k.ptr(4), norm[P::K] = k.ptr(5);
    cache[P::K] = k.ptr(6), cache[P::V] = k.ptr(7);
    table = k.ptr(8), seqs = k.ptr(9), pos = k.ptr(10);
    int next = 11;
    if (s.hasIndex) {
      w[P::IQ] = k.ptr(next++), w[P::IK] = k.ptr(next++);
      norm[P::IQ] = k.ptr(next++), norm[P::IK] = k.ptr(next++);
      cache[P::IK] = k.ptr(next++);
    }
    out[P::Q] = k.ptr(next++);
    if (s.hasIndex)
      out[P::IQ] = k.ptr(next++);
    ws = k.ptr(next);
  }
};

/// Where the prologue writes token `t`'s row of branch `kind` (local head
/// `head`): q / index_q rows of their activations, or the k / v / index_k
/// cache slot at (block_table[seq, p / page], p % page); `at` is the
/// element offset (NVFP4: byte offset of the codes) of the row's first
/// channel in `base`, `type` the stored element type, `scales` (NVFP4
/// only) the byte offset of the row's first block scale (cacheRow).
struct PrologueRow {
  Value base, at;
  Type type;
  Value scales;
};
PrologueRow prologueRow(GK &g, const PrologueShape &s, const PrologueBuffers &b,
                        int kind, Value head, Value t) {
  KB &k = g.k;
  if (kind == PrologueShape::Q || kind == PrologueShape::IQ)
    return {b.out[kind],
            k.imul(k.iadd(k.imul(t, k.c(s.heads[kind])), head), k.c(kTileN)),
            s.act, Value()};
  msa::PagedCacheType type = kind == PrologueShape::IK
                                 ? s.op.getIndexCache().getType()
                                 : s.op.getKeyCache().getType();
  Value p = k.loadIndex(b.pos, t);
  Value phys = pageOf(k, b.table, k.loadIndex(b.seqs, t),
                      k.idiv(p, k.c(type.getPageSize())));
  CacheRow row = cacheRow(k, b.cache[kind], type, phys, head,
                          k.irem(p, k.c(type.getPageSize())));
  return {row.cache, row.data, type.getElementType(), row.scales};
}

/// True when branch `kind` goes to an NVFP4 cache.
bool prologueNVFP4(const PrologueShape &s, int kind) {
  if (kind == PrologueShape::Q || kind == PrologueShape::IQ)
    return false;
  return isNVFP4Cache(kind == PrologueShape::IK ? s.op.getIndexCache().getType()
                                                : s.op.getKeyCache().getType());
}

/// The NVFP4 scale (as storeNVFP4Block's) of a 16-channel block
/// whose values the lanes lane ^ 0..3 hold 4 each (`four`: this lane's):
/// the absolute maximum of this lane's values, then over the 4 lanes by
/// butterfly shuffles (every lane gets it; maximumf is exact and order
/// free). Every lane of the warp must call it.
NVFP4Scale prologueQuadScale(GK &g, ArrayRef<Value> four) {
  KB &k = g.k;
  Value amax = k.cf(0);
  for (Value v : four)
    amax = k.maxf(amax, math::AbsFOp::create(k.b, k.loc, v));
  for (int64_t off : {1, 2})
    amax = k.maxf(amax, g.shflXor(amax, off));
  return nvfp4Scale(k, nvfp4ScaleByte(k, amax));
}

/// Stores channels `c` and c + 1 (even `c`; values `lo`, `hi`) of the
/// NVFP4 row `row` as one code byte of a block of scale `scale`.
void storeNVFP4Pair(KB &k, const PrologueRow &row, Value c,
                    const NVFP4Scale &scale, Value lo, Value hi) {
  Type i8 = k.b.getI8Type();
  Value code = nvfp4Code(k, scale, lo);
  Value byte = nvfp4PackCodes(k, code, nvfp4Code(k, scale, hi));
  LLVM::StoreOp::create(k.b, k.loc,
                        arith::TruncIOp::create(k.b, k.loc, i8, byte),
                        k.gep(row.base, k.iadd(row.at, k.idiv(c, k.c(2))), i8));
}

/// Stores the E4M3 scale byte of block `block` of the NVFP4 row `row`.
void storeNVFP4Scale(KB &k, const PrologueRow &row, Value block,
                     const NVFP4Scale &scale) {
  LLVM::StoreOp::create(
      k.b, k.loc, scale.byte,
      k.gep(row.base, k.iadd(row.scales, block), k.b.getI8Type()));
}

/// The epilogue of one (64-token tile at row0, head) item of branch `kind`
/// (local head `head`), from this thread's values in the wgmma accumulator
/// layout (`value(i)`: the FP32 projection of accumulatorRow(i, tid),
/// accumulatorCol(i, tid)): rounds to the activation type; for normed
/// branches the per-head RMSNorm (sum of squares over the quad that holds
/// a row) and the NeoX RoPE (channel c < rotary_dim / 2 with c +
/// rotary_dim / 2, both in this thread), each rounded again as the unfused
/// kernels do; then q / index_q go to their activations and k / v /
/// index_k into the caches at (block_table[seq, p / page], p % page),
/// converted as msa.kv_cache_insert converts those rounded values (an
/// NVFP4 block of 16 channels is 4 values in each thread of the quad).
void prologueEpilogue(GK &g, const PrologueShape &s, const PrologueBuffers &b,
                      int kind, Value head, Value row0, Value T,
                      const std::function<Value(int64_t)> &value) {
  KB &k = g.k;
  msa::AttentionPrologueOp op = s.op;
  const int64_t d = kTileN, r = op.getRotaryDim(), half = r / 2;
  const bool normed = kind != PrologueShape::V;
  const bool nvfp4 = prologueNVFP4(s, kind);
  Type ne = normed ? elementOf(s.norm(kind)) : Type();
  Value quad = k.irem(g.lane, k.c(4));
  Value rowBase = k.iadd(k.imul(g.warp, k.c(16)), k.idiv(g.lane, k.c(4)));
  for (int64_t hf = 0; hf < 2; ++hf) {
    Value t = k.iadd(row0, k.iadd(rowBase, k.c(8 * hf)));
    Value valid = k.icmp(CmpI::ult, t, T);
    Value tc = g.imin(t, k.iadd(T, k.c(-1)));
    // vals[2 j + e]: channel 8 j + 2 quad + e.
    SmallVector<Value> vals, cols;
    for (int64_t j = 0; j < d / 8; ++j)
      for (int64_t e = 0; e < 2; ++e) {
        vals.push_back(g.roundTo(value(4 * j + 2 * hf + e), s.act));
        cols.push_back(k.iadd(k.imul(quad, k.c(2)), k.c(8 * j + e)));
      }
    if (normed) {
      Value ss = k.cf(0);
      for (Value v : vals)
        ss = k.add(ss, k.mul(v, v));
      for (int64_t off : {1, 2})
        ss = k.add(ss, g.shflXor(ss, off));
      Value inv = rmsInverse(k, ss, d, op.getEps().convertToFloat());
      for (size_t i = 0; i < vals.size(); ++i)
        vals[i] = g.roundTo(rmsNormValue(k, vals[i], inv,
                                         k.loadF(b.norm[kind], cols[i], ne),
                                         op.getUnitOffset()),
                            s.act);
      Value p = arith::SIToFPOp::create(
          k.b, k.loc, k.f32,
          arith::IndexCastOp::create(k.b, k.loc, k.i64,
                                     k.loadIndex(b.pos, tc)));
      for (int64_t i = 0; i < half / 4; ++i) { // channels below half
        const int64_t partner = i + half / 4;  // channel + half
        Value angle = k.mul(p, k.loadF(b.invFreq, cols[i], k.f32));
        Value cs = math::CosOp::create(k.b, k.loc, angle);
        Value sn = math::SinOp::create(k.b, k.loc, angle);
        Value a = vals[i], bb = vals[partner];
        vals[i] = g.roundTo(k.sub(k.mul(a, cs), k.mul(bb, sn)), s.act);
        vals[partner] = g.roundTo(k.add(k.mul(bb, cs), k.mul(a, sn)), s.act);
      }
    }
    // NVFP4: block jb is vals[4 jb + 2 m + e] (channel 16 jb + 8 m +
    // 2 quad + e) of the quad's threads; the scales (shuffles) before the
    // divergent stores.
    SmallVector<NVFP4Scale> scales;
    if (nvfp4)
      for (int64_t jb = 0; jb < d / 16; ++jb)
        scales.push_back(
            prologueQuadScale(g, ArrayRef<Value>(vals).slice(4 * jb, 4)));
    k.ifThen(valid, [&] {
      PrologueRow row = prologueRow(g, s, b, kind, head, t);
      if (!nvfp4) {
        for (size_t i = 0; i < vals.size(); ++i)
          k.storeF(row.base, k.iadd(row.at, cols[i]), vals[i], row.type);
        return;
      }
      for (int64_t jb = 0; jb < d / 16; ++jb) {
        for (int64_t m = 0; m < 2; ++m) {
          const int64_t i = 4 * jb + 2 * m;
          storeNVFP4Pair(k, row, cols[i], scales[jb], vals[i], vals[i + 1]);
        }
        k.ifThen(k.icmp(CmpI::eq, quad, k.c(jb % 4)),
                 [&] { storeNVFP4Scale(k, row, k.c(jb), scales[jb]); });
      }
    });
  }
}

bool prologueSplitOut(msa::AttentionPrologueOp op,
                      const PackedOperands *packed);

/// The epilogue of token `t`, global head `gh` (branch `kind`, local head
/// `head`) from its FP32 projection row in the workspace, for one warp:
/// lane l holds channels 4 l .. 4 l + 3. The roundings of
/// prologueEpilogue: the projection rounded to the activation type; for
/// normed branches the per-head RMSNorm (warp sum of squares) and the NeoX
/// RoPE (channel c < rotary_dim / 2 with c + rotary_dim / 2, which lane
/// l + rotary_dim / 8 holds), each rounded; then q / index_q to their
/// activations, k / v / index_k into the caches (an NVFP4 block of 16
/// channels is the 4 lanes 4 j .. 4 j + 3). With `given`, the projection's
/// 4 FP32 values of the lane come from it instead of the workspace.
void prologueRowEpilogue(GK &g, const PrologueShape &s,
                         const PrologueBuffers &b, int kind, Value head,
                         Value t, Value gh, Value T,
                         const std::function<SmallVector<Value>()> &given) {
  static_assert(kTileN == 4 * kWarp, "a head is 4 channels per lane");
  KB &k = g.k;
  msa::AttentionPrologueOp op = s.op;
  const int64_t d = kTileN, n = s.totalHeads * kTileN;
  const int64_t r = op.getRotaryDim(), half = r / 2;
  Value c0 = k.imul(g.lane, k.c(4));
  Value rowAt = k.iadd(k.imul(t, k.c(n)), k.iadd(k.imul(gh, k.c(d)), c0));
  // The loads that do not depend on the projection come first, in one
  // block with the sums' (a chain of latencies otherwise): the output
  // row (block table), the norm weights, the position and frequencies.
  PrologueRow row = prologueRow(g, s, b, kind, head, t);
  const bool normed = kind != PrologueShape::V;
  SmallVector<Value> weights, freqs;
  Value low, high, p;
  if (normed) {
    Type ne = elementOf(s.norm(kind));
    for (int64_t e = 0; e < 4; ++e)
      weights.push_back(k.loadF(b.norm[kind], k.iadd(c0, k.c(e)), ne));
    low = k.icmp(CmpI::ult, c0, k.c(half));
    high =
        g.andI(k.icmp(CmpI::uge, c0, k.c(half)), k.icmp(CmpI::ult, c0, k.c(r)));
    p = arith::SIToFPOp::create(
        k.b, k.loc, k.f32,
        arith::IndexCastOp::create(k.b, k.loc, k.i64, k.loadIndex(b.pos, t)));
    // The frequency index of this lane's channels (pass-through lanes read
    // index 0 and keep their values).
    Value f0 = k.select(low, c0, k.select(high, g.isub(c0, k.c(half)), k.c(0)));
    for (int64_t e = 0; e < 4; ++e)
      freqs.push_back(k.loadF(b.invFreq, k.iadd(f0, k.c(e)), k.f32));
  }
  // Part 0's sums: where part 1 started before part 0 finished
  // (GK::declareProgrammatic), once it has.
  if (g.programmatic && !given)
    g.gridDependencyWait();
  SmallVector<Value> sums;
  if (given)
    sums = given();
  else
    for (int64_t e = 0; e < 4; ++e)
      sums.push_back(k.loadF(b.ws, k.iadd(rowAt, k.c(e)), k.f32));
  // With prologueSplitOut, where part 0 split this step (flag 1 at 2 T n)
  // the sums of the second channel half follow the step's T rows.
  if (!given && prologueSplitOut(op, k.packed)) {
    Value split = k.fcmp(arith::CmpFPredicate::ONE,
                         k.loadF(b.ws, k.imul(T, k.c(2 * n)), k.f32), k.cf(0));
    SmallVector<Type> types(4, k.f32);
    sums = g.ifElse(
        split, types,
        [&] {
          SmallVector<Value> added;
          for (int64_t e = 0; e < 4; ++e)
            added.push_back(k.add(
                sums[e],
                k.loadF(b.ws, k.iadd(k.imul(T, k.c(n)), k.iadd(rowAt, k.c(e))),
                        k.f32)));
          return added;
        },
        [&] { return sums; });
  }
  SmallVector<Value> vals;
  for (Value v : sums)
    vals.push_back(g.roundTo(v, s.act));
  if (normed) {
    Value ss = k.cf(0);
    for (Value v : vals)
      ss = k.add(ss, k.mul(v, v));
    Value inv = rmsInverse(k, g.warpSum(ss), d, op.getEps().convertToFloat());
    for (int64_t e = 0; e < 4; ++e)
      vals[e] = g.roundTo(
          rmsNormValue(k, vals[e], inv, weights[e], op.getUnitOffset()), s.act);
    for (int64_t e = 0; e < 4; ++e) {
      auto shuffle = [&](gpu::ShuffleMode mode) {
        return gpu::ShuffleOp::create(k.b, k.loc, vals[e],
                                      static_cast<int32_t>(half / 4), kWarp,
                                      mode)
            .getShuffleResult();
      };
      Value above = shuffle(gpu::ShuffleMode::DOWN); // lane + half / 4
      Value below = shuffle(gpu::ShuffleMode::UP);   // lane - half / 4
      Value angle = k.mul(p, freqs[e]);
      Value cs = math::CosOp::create(k.b, k.loc, angle);
      Value sn = math::SinOp::create(k.b, k.loc, angle);
      Value a = k.select(low, vals[e], below);
      Value bb = k.select(low, above, vals[e]);
      Value ra = g.roundTo(k.sub(k.mul(a, cs), k.mul(bb, sn)), s.act);
      Value rb = g.roundTo(k.add(k.mul(bb, cs), k.mul(a, sn)), s.act);
      vals[e] = k.select(low, ra, k.select(high, rb, vals[e]));
    }
  }
  if (prologueNVFP4(s, kind)) {
    NVFP4Scale scale = prologueQuadScale(g, vals);
    for (int64_t m = 0; m < 2; ++m)
      storeNVFP4Pair(k, row, k.iadd(c0, k.c(2 * m)), scale, vals[2 * m],
                     vals[2 * m + 1]);
    k.ifThen(k.icmp(CmpI::eq, k.irem(g.lane, k.c(4)), k.c(0)),
             [&] { storeNVFP4Scale(k, row, k.idiv(g.lane, k.c(4)), scale); });
    return;
  }
  for (int64_t e = 0; e < 4; ++e)
    k.storeF(row.base, k.iadd(row.at, k.iadd(c0, k.c(e))), vals[e], row.type);
}

/// Fewest tokens of a step for which the prologue takes the fused tile
/// GEMM (as msa.linear with all the branches' channels).
int64_t prologueTileMinTokens(const PrologueShape &s) {
  return linearTileMinTokens(s.totalHeads * kTileN);
}

/// Calls body(kind, local head) in the branch of global head `gh`.
void prologueByKind(GK &g, const PrologueShape &s, Value gh,
                    const std::function<void(int, Value)> &body) {
  KB &k = g.k;
  std::function<void(int)> from = [&](int kind) {
    if (kind + 1 == s.kinds()) {
      body(kind, g.isub(gh, k.c(s.start[kind])));
      return;
    }
    g.ifElse(
        k.icmp(CmpI::ult, gh, k.c(s.start[kind + 1])), {},
        [&]() -> SmallVector<Value> {
          body(kind, g.isub(gh, k.c(s.start[kind])));
          return {};
        },
        [&]() -> SmallVector<Value> {
          from(kind + 1);
          return {};
        });
  };
  from(0);
}

/// The fused path (sm_90a, steps of at least prologueTileMinTokens
/// tokens), part 0: work items (64-token tile, global head), token tiles
/// fastest; the tile GEMM of x with the head's kTileN weight rows, then
/// prologueEpilogue straight from the accumulators (the projection never
/// reaches memory).
void prologueTileKernel(GK &g, const PrologueShape &s, Value T,
                        Value ring = Value(), int64_t warpgroups = 1,
                        int64_t stages = kStages) {
  KB &k = g.k;
  PrologueBuffers b(g, s);
  TileGemm tile = ring ? TileGemm(g, s.hidden, warpgroups, stages, ring)
                       : TileGemm(g, s.hidden);
  const int64_t tileM = tile.tileM();
  Value x = tile.global(b.in);
  Value w[PrologueShape::kKinds];
  for (int kind = 0; kind < s.kinds(); ++kind)
    w[kind] = tile.global(b.w[kind]);
  Value mTiles = k.idiv(k.iadd(T, k.c(tileM - 1)), k.c(tileM));
  Value lastRow = k.iadd(T, k.c(-1));
  auto rowPtr = [&](Value base, Value row) {
    return LLVM::GEPOp::create(k.b, k.loc, base.getType(), k.i16, base,
                               ValueRange{k.toI64(k.imul(row, k.c(s.hidden)))});
  };
  // Packed weights (prologuePackedTiled: one form in every branch) are
  // read in place through one layout, as prologueWarpKernel does.
  WeightRef ref[PrologueShape::kKinds];
  PackedWeight layout;
  for (int kind = 0; kind < s.kinds(); ++kind) {
    ref[kind] = weightOperand(k, b.wSlot[kind], elementOf(s.weight(kind)));
    if (const PackedWeight *p = ref[kind].packed)
      if (!layout.format || p->rows() > layout.rows())
        layout = *p;
  }
  const bool packed = static_cast<bool>(layout.format);
  if (packed)
    for (int kind = 0; kind < s.kinds(); ++kind) {
      assert(ref[kind].packed && "prologuePackedTiled: one form");
      ref[kind].packed = &layout;
    }
  g.ctaLoop(k.imul(mTiles, k.c(s.totalHeads)), [&](Value item) {
    Value row0 = k.imul(k.irem(item, mTiles), k.c(tileM));
    Value gh = k.idiv(item, mTiles);
    // The branch's weight and first row of the head (uniform per item).
    Value base = w[0], first = k.imul(gh, k.c(kTileN));
    WeightRef wk = ref[0];
    auto pick = [&](Value in, Value a, Value other) {
      return a ? LLVM::SelectOp::create(k.b, k.loc, in, a, other).getResult()
               : Value();
    };
    for (int kind = 1; kind < s.kinds(); ++kind) {
      Value in = k.icmp(CmpI::uge, gh, k.c(s.start[kind]));
      base = LLVM::SelectOp::create(k.b, k.loc, in, w[kind], base);
      first = k.select(in, k.imul(g.isub(gh, k.c(s.start[kind])), k.c(kTileN)),
                       first);
      if (packed) {
        wk.base = pick(in, ref[kind].base, wk.base);
        wk.scales = pick(in, ref[kind].scales, wk.scales);
        wk.global = pick(in, ref[kind].global, wk.global);
        if (wk.chunkTiles)
          wk.chunkTiles = k.select(in, ref[kind].chunkTiles, wk.chunkTiles);
      }
    }
    TileRows rows;
    rows.aRow = [&](Value r) -> std::pair<Value, Value> {
      Value row = k.iadd(row0, r);
      return {rowPtr(x, g.imin(row, lastRow)), k.icmp(CmpI::ult, row, T)};
    };
    rows.bRow = [&](Value r) { return rowPtr(base, k.iadd(first, r)); };
    Value tail;
    if (packed) {
      rows.bPacked = &wk;
      rows.bIndex = [&](Value r) {
        return k.imul(k.iadd(first, r), k.c(s.hidden));
      };
      tail = g.packedTail(wk, k.imul(first, k.c(s.hidden)));
    }
    Value acc = tile.run(rows);
    prologueByKind(g, s, gh, [&](int kind, Value head) {
      prologueEpilogue(g, s, b, kind, head, row0, T, [&](int64_t i) -> Value {
        Value v = LLVM::ExtractValueOp::create(k.b, k.loc, acc, i);
        return tail ? k.mul(v, tail) : v;
      });
    });
    g.sync();
  });
}

/// The projection weights of the prologue's branches as one matrix of
/// totalHeads * kTileN rows (prologueFits: one form for all). Packed
/// weights share one layout, with the most rows of any branch: the decode
/// indexes a branch's scales by its own (row, column), which a matrix of at
/// least as many rows maps the same way.
struct PrologueWeights {
  PrologueWeights(GK &g, const PrologueShape &s, const PrologueBuffers &b,
                  Type we)
      : g(g), s(s) {
    for (int kind = 0; kind < s.kinds(); ++kind) {
      ref[kind] = weightOperand(g.k, b.wSlot[kind], we);
      if (const PackedWeight *p = ref[kind].packed) {
        if (!layout.format || p->rows() > layout.rows())
          layout = *p;
      }
    }
    if (layout.format)
      for (int kind = 0; kind < s.kinds(); ++kind) {
        assert(ref[kind].packed && "prologueFits: one form for all branches");
        ref[kind].packed = &layout;
      }
  }
  PrologueWeights(const PrologueWeights &) = delete;
  /// The weight of output row `j` of the concatenation (its branch's) and
  /// the element offset of the row's first channel in it.
  std::pair<WeightRef, Value> row(Value j) const {
    KB &k = g.k;
    Value gh = k.idiv(j, k.c(kTileN));
    WeightRef w = ref[0];
    Value first = j;
    auto pick = [&](Value in, Value a, Value b) {
      return a ? LLVM::SelectOp::create(k.b, k.loc, in, a, b).getResult()
               : Value();
    };
    for (int kind = 1; kind < s.kinds(); ++kind) {
      Value in = k.icmp(CmpI::uge, gh, k.c(s.start[kind]));
      w.base = pick(in, ref[kind].base, w.base);
      w.scales = pick(in, ref[kind].scales, w.scales);
      w.global = pick(in, ref[kind].global, w.global);
      if (w.chunkTiles)
        w.chunkTiles = k.select(in, ref[kind].chunkTiles, w.chunkTiles);
      first = k.select(in, g.isub(j, k.c(s.start[kind] * kTileN)), first);
    }
    return {w, k.imul(first, k.c(s.hidden))};
  }

  GK &g;
  const PrologueShape &s;
  WeightRef ref[PrologueShape::kKinds];
  PackedWeight layout;
};

/// The unfused-projection path (steps below the tile threshold, and
/// targets without wgmma). Part 0: the projection of every branch into
/// the FP32 workspace ws[t, gh * kTileN + c] by rowsDot over the
/// concatenated weights. Part 1: one warp per (token, global head) runs
/// prologueRowEpilogue on the workspace row.
void prologueWarpKernel(GK &g, const PrologueShape &s, int64_t part, Value T) {
  KB &k = g.k;
  PrologueBuffers b(g, s);
  const int64_t n = s.totalHeads * kTileN;
  if (part == 0) {
    RowsDotArgs args;
    args.x = b.in;
    args.out = b.ws;
    args.R = T;
    args.xe = s.act;
    args.we = elementOf(s.weight(0));
    args.oe = k.f32;
    args.inner = s.hidden;
    args.nOut = n;
    PrologueWeights weights(g, s, b, args.we);
    args.wPacked = weights.ref[0];
    args.wRow = [&](Value j) { return weights.row(j); };
    args.splitOut = prologueSplitOut(s.op, k.packed);
    rowsDot(g, args);
    if (args.splitOut) {
      // Whether this step split its projection, for part 1: 1 after the
      // two arrays (2 T n) when it did, else 0.
      Value split = k.cf(0);
      if (args.splitAbove)
        split = k.select(g.andI(k.icmp(CmpI::sgt, T, k.c(args.splitAbove)),
                                k.icmp(CmpI::sle, T, k.c(16))),
                         k.cf(1), k.cf(0));
      k.ifThen(g.andI(g.eq(g.ctaId, k.c(0)), g.eq(g.tid, k.c(0))),
               [&] { k.storeF(b.ws, k.imul(T, k.c(2 * n)), split, k.f32); });
    }
    return;
  }
  g.warpLoop(k.imul(T, k.c(s.totalHeads)), [&](Value item) {
    Value t = k.irem(item, T), gh = k.idiv(item, T);
    prologueByKind(g, s, gh, [&](int kind, Value head) {
      prologueRowEpilogue(g, s, b, kind, head, t, gh, T, nullptr);
    });
  });
  // Every thread, items or not, waits for part 0 before it exits: part 1
  // does not finish (and the launches after it do not start) before
  // part 0 has.
  if (g.programmatic)
    g.gridDependencyWait();
}

static TuningOpt<bool>
    prologueClusters("gpu-prologue-clusters", true,
                     "The fused attention prologue with per-tensor FP8 weights "
                     "at 1-16 tokens (sm_90a): one kernel, a thread-block "
                     "cluster per head that projects, sums in distributed "
                     "shared memory and runs the epilogue "
                     "(prologueClusterKernel, prologueClusterMmaKernel; "
                     "false: parts 0 and 1 at every step)");

static TuningOpt<int>
    prologueClusterSize("gpu-prologue-cluster-size", 8,
                        "CTAs per head of the prologue's cluster kernels, each "
                        "over 1/N of the channels (1-8, the 2-16-token kernel "
                        "4-8; tuning)");

/// `prefetch.L2 [p]`: the 128-byte line holding generic address `p` into
/// L2, without a register waiting for it.
void prefetchL2(KB &k, Value p) {
  NVVM::PrefetchOp::create(
      k.b, k.loc,
      NVVM::PrefetchCacheLevelAttr::get(k.b.getContext(),
                                        NVVM::PrefetchCacheLevel::L2),
      NVVM::CacheEvictionPriorityAttr(), p, Value());
}

static TuningOpt<int> prologueClusterAhead(
    "gpu-prologue-cluster-ahead", 0,
    "Loop steps of weight rows the prologue's cluster "
    "kernels prefetch into L2 ahead of their loads: steps "
    "0..N-1 before the input is read, step i + N in step i "
    "(a step: a round of rows at one token, a chunk group at "
    "2-16; 0: none; tuning)");

static TuningOpt<int> prologueClusterRows(
    "gpu-prologue-cluster-rows", 4,
    "Weight rows whose loads a warp of the one-token prologue "
    "cluster kernel issues together (tuning; on the H200 8 "
    "took M3's MSA prologue in 18.5 us against 19.5 with 4, "
    "not yet checked against the reference; docs/perf.md)");

static TuningOpt<int> prologueClusterRing(
    "gpu-prologue-cluster-ring", 0,
    "Stages of the one-token prologue cluster kernel's weight ring: "
    "each CTA's weight rows stream into shared memory by bulk "
    "asynchronous copies (cp.async.bulk, one per row slice, "
    "completing on an mbarrier per stage), N stages in flight, "
    "instead of each warp's loads into registers (0: registers; "
    "tuning)");

static TuningOpt<int> prologueClusterRingRows(
    "gpu-prologue-cluster-ring-rows", 8,
    "Weight rows per stage of --gpu-prologue-cluster-ring (a "
    "multiple of the CTA's warps; tuning)");

static TuningOpt<bool> prologueClusterRingEarly(
    "gpu-prologue-cluster-ring-early", false,
    "--gpu-prologue-cluster-ring issues its first stages' copies "
    "before the kernel waits for the RMSNorm before it (the "
    "weights do not depend on it; tuning)");

static TuningOpt<bool> prologueClusterEarlyRound(
    "gpu-prologue-cluster-early-round", true,
    "The one-token prologue cluster kernel issues its first round of "
    "weight loads (into registers) before it waits for the RMSNorm "
    "before it, as the weights do not depend on it (on an H100 M3's "
    "RMSNorm and dense prologue took 25.6 us against 27.4; "
    "docs/perf.md, forty-first session; tuning)");

static TuningOpt<bool> prologueClusterAsyncSums(
    "gpu-prologue-cluster-async-sums", true,
    "The one-token prologue cluster kernel sends its CTAs' sums to the "
    "leader with st.async, completing on an mbarrier of the leader which "
    "only its first warp waits on, instead of stores and a second cluster "
    "barrier (on an H100 M3's one-token prologue took 22.5 / 23.9 us "
    "against 22.9 / 24.3; docs/perf.md, forty-fourth session; tuning)");

static TuningOpt<bool> prologueClusterEpilogueLoadsFirst(
    "gpu-prologue-cluster-epilogue-loads-first", true,
    "The prologue's cluster kernels (1-16 tokens, with their sums by "
    "st.async) issue the epilogue's loads that do not depend on the sums "
    "(the cache row through the block table, the norm weights, the "
    "position, the RoPE frequencies) before they wait for the sums, so that "
    "their latencies overlap the exchange (on an H100 M3's prologue took "
    "0.1-0.4 us less at 1-16 tokens; docs/perf.md, forty-fourth session; "
    "tuning)");

/// CTAs per multiprocessor the cluster kernel's registers are capped for
/// (80 registers at 128 threads), so that every head's cluster is resident
/// at once (M3: 72 or 77 heads of 8 CTAs, 6 x 132 / 8 = 99 clusters). On
/// the H200 (docs/perf.md, twenty-ninth session) a cap for 8 CTAs (64
/// registers) spilled in the MSA layer's kernel, which then took 22.5 us
/// at one token instead of 19.6.
constexpr int64_t kPrologueClusterCtasPerSM = 6;

bool prologueClustered(const PrologueShape &s, const PackedOperands *packed) {
  const int64_t n = prologueClusterSize, rows = prologueClusterRows;
  if (!prologueClusters || !packed || n < 1 || n > 8 || rows < 1 ||
      kTileN % (kGpuThreads / kWarp * rows) != 0 || !s.act.isBF16() ||
      s.hidden % (n * kWarp * 8) != 0)
    return false;
  for (int kind = 0; kind < s.kinds(); ++kind) {
    auto it = packed->find(prologueWeightSlot(kind));
    if (it == packed->end() || !GK::packedF16Format(it->second))
      return false;
  }
  return true;
}

/// A cluster kernel's work for the steps it serves (`launched`): `body`
/// where it holds. With `waitsInside` (a body that waits for the previous
/// kernel itself, after issuing loads that do not depend on it) the
/// threads of other steps wait in the else branch, so that the kernel
/// never finishes before the previous one; otherwise the kernel waited
/// before.
static void stepOrWait(GK &g, Value launched, llvm::function_ref<void()> body,
                       bool waitsInside) {
  if (!waitsInside) {
    g.k.ifThen(launched, body);
    return;
  }
  g.ifElse(
      launched, {},
      [&]() -> SmallVector<Value> {
        body();
        return {};
      },
      [&]() -> SmallVector<Value> {
        g.gridDependencyWait();
        return {};
      });
}

/// The sums' mbarrier of a cluster kernel (--gpu-prologue-cluster-async-sums,
/// --gpu-prologue-cluster-mma-async-sums): thread 0 initializes `bar` (one
/// arrival) and fences the init at cluster scope, which the caller's
/// relaxed cluster arrival then publishes to the senders; where expect()
/// it also arrives expecting bytes() (i32; both built there) of st.async
/// transactions. The transaction count may go below zero if a sender's
/// bytes come first: the phase needs this arrival too.
void initSumsBarrier(GK &g, Value bar, llvm::function_ref<Value()> expect,
                     llvm::function_ref<Value()> bytes, bool init = true) {
  KB &k = g.k;
  k.ifThen(g.eq(g.tid, k.c(0)), [&] {
    if (init) {
      NVVM::MBarrierInitOp::create(k.b, k.loc, bar, g.ci32(1), Value());
      NVVM::FenceMbarrierInitOp::create(k.b, k.loc);
    }
    k.ifThen(expect(), [&] {
      NVVM::MBarrierArriveExpectTxOp::create(k.b, k.loc, Type(), bar, bytes(),
                                             NVVM::MemScopeKind::CTA,
                                             /*relaxed=*/false, Value());
    });
  });
}

/// initSumsBarrier's arrival alone, for the mbarrier's next phase (its
/// previous phase complete, as every waiter on it has seen).
void armSumsBarrier(GK &g, Value bar, llvm::function_ref<Value()> expect,
                    llvm::function_ref<Value()> bytes) {
  initSumsBarrier(g, bar, expect, bytes, /*init=*/false);
}

/// `st.async` of `values` (one or two f32) to `remote` (shared::cluster),
/// completing their bytes on the mbarrier `remoteBar` (shared::cluster) of
/// the same CTA; release at cluster scope.
void stAsyncSums(KB &k, Value remote, ArrayRef<Value> values, Value remoteBar) {
  auto asInt = [&](Value ptr) {
    return LLVM::PtrToIntOp::create(k.b, k.loc, k.b.getI64Type(), ptr)
        .getResult();
  };
  SmallVector<Value> operands{asInt(remote)};
  operands.append(values.begin(), values.end());
  operands.push_back(asInt(remoteBar));
  const bool pair = values.size() == 2;
  LLVM::InlineAsmOp::create(
      k.b, k.loc, TypeRange(), operands,
      pair ? "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 "
             "[$0], {$1, $2}, [$3];"
           : "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 "
             "[$0], $1, [$2];",
      pair ? "l,f,f,l,~{memory}" : "l,f,l,~{memory}",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(k.b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
}

/// Waits for the phase of parity `parity` (i32; null: 0, the first
/// phase) of the mbarrier `bar` (shared::cta) to complete, acquire at
/// cluster scope (the st.async senders' release).
void waitSumsBarrier(KB &k, Value bar, Value parity = Value()) {
  SmallVector<Value> operands{
      LLVM::PtrToIntOp::create(k.b, k.loc, k.b.getI64Type(), bar).getResult()};
  if (parity)
    operands.push_back(parity);
  LLVM::InlineAsmOp::create(
      k.b, k.loc, TypeRange(), operands,
      std::string("{\n.reg .pred p;\nmsac_sums_wait${:uid}:\n"
                  "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 "
                  "p, [$0], ") +
          (parity ? "$1" : "0") + ";\n@!p bra msac_sums_wait${:uid};\n}",
      parity ? "l,r,~{memory}" : "l,~{memory}", /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(k.b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
}

/// Where a CTA of the prologue's cluster kernels (rank `rank` of the
/// cluster of the head whose first row is at flat element `first` of
/// weight `w`, over channels [rank S, rank S + S), S = H / N) finds a
/// lane's weight bytes when `w`'s payload is in the chunk-major order
/// (PackedWeight::orderRanks): at(r) + chunks(c) is the byte of channel
/// rank S + 128 c + `laneChannel` of the head's row r (r < 128,
/// laneChannel < S; orderedRowByte and orderedColumnBytes of that row and
/// channel, the chunk's tiles N or H N on).
struct ClusterTiles {
  ClusterTiles() = default;
  ClusterTiles(GK &g, const PrologueShape &s, const WeightRef &w, Value first,
               Value rank, Value laneChannel)
      : k(&g.k) {
    const int64_t n = w.packed->orderRanks;
    assert(n && s.hidden % (n * kOrderTile) == 0 && "a chunk-major payload");
    chunkBytes = k->imul(w.chunkTiles, k->c(kOrderTile * kOrderTile));
    laneOrigin = k->iadd(
        orderedRowByte(*k, w, first),
        orderedColumnBytes(
            *k, w, k->iadd(k->imul(rank, k->c(s.hidden / n)), laneChannel)));
  }
  Value at(Value row) const {
    return k->iadd(laneOrigin, k->imul(row, k->c(kOrderTile)));
  }
  Value chunks(Value c) const { return k->imul(c, chunkBytes); }
  Value chunks(int64_t c) const { return chunks(k->c(c)); }

  KB *k = nullptr;
  Value laneOrigin, chunkBytes;
};

/// The fused prologue of a one-token step (sm_90a, per-tensor FP8 weights
/// read in place; part 2, launched at T = 1 only, where parts 0, 1 and 3
/// are not):
/// one kernel, no workspace. Each global head gh is a thread-block cluster
/// of N CTAs (N = --gpu-prologue-cluster-size; grid totalHeads * N, CTA
/// rank r = ctaid mod N, as the cluster spans N consecutive CTAs along x).
/// CTA r reads channels [r H / N, (r + 1) H / N) of the head's kTileN
/// weight rows: a warp per row (rows taken kGpuThreads / 32 *
/// --gpu-prologue-cluster-rows at a time, each warp's loads issued
/// together), each lane 8 E4M3 bytes per 256 channels, the products with
/// the bf16 input exact in FP32 FMAs as rowsDot's one-row path computes
/// them, the warp's sum times the per-tensor scale. The CTA's kTileN sums
/// go to slot r of the leader's (rank 0) shared memory (distributed shared
/// memory, mapa; by default st.async completing on the leader's mbarrier,
/// which only its warp 0 waits on, --gpu-prologue-cluster-async-sums, after
/// issuing the epilogue's loads that do not need the sums,
/// --gpu-prologue-cluster-epilogue-loads-first), and the leader's warp 0
/// adds the N slots in rank order and runs prologueRowEpilogue on them:
/// norm, RoPE, quantization and the cache insert, without a second launch
/// or the projection in global memory. A programmatic dependent of the RMSNorm
/// before it; each warp issues its first round of weight loads before it
/// waits for the norm (--gpu-prologue-cluster-early-round; on an H100 the
/// norm and M3's dense prologue took 25.6 us against 27.4, docs/perf.md,
/// forty-first session). On the H200 (docs/perf.md, twenty-ninth session) M3's
/// one-token prologue took 17.1 us (dense layer) and 19.5 us (MSA layer)
/// in a CUDA graph, against 20.5 and 22.5 us for parts 0 and 1.
void prologueClusterKernel(GK &g, const PrologueShape &s, Value T) {
  KB &k = g.k;
  const int64_t n = prologueClusterSize, rowsAtOnce = prologueClusterRows;
  const int64_t slice = s.hidden / n, steps = slice / (kWarp * 8);
  const int64_t perRound = g.warps * rowsAtOnce;
  g.declareGrid(g.threads, s.totalHeads * n, n, kPrologueClusterCtasPerSM);
  g.declareTokens(1, 1);
  if (prologueProgrammatic || programmaticLaunches)
    g.declareProgrammatic();
  PrologueBuffers b(g, s);
  PrologueWeights weights(g, s, b, elementOf(s.weight(0)));
  Value own = g.shared(k.f32, kTileN);
  Value all = g.sharedSpace(k.f32, n * kTileN, 16);
  auto clusterPtr = LLVM::LLVMPointerType::get(k.b.getContext(), 7);
  // --gpu-prologue-cluster-ring: a ring of `ringStages` stages of
  // `ringRows` weight rows' slices (slice bytes each) in static shared
  // memory, full[s] an mbarrier per slot completed by its bulk copies'
  // bytes; within 40 KB of static shared memory, else registers.
  // (Not with the chunk-major order, PackedWeight::orderRanks: a row's
  // slice is not contiguous there.)
  const bool ordered = weights.layout.orderRanks != 0;
  const int64_t ringRows = prologueClusterRingRows;
  int64_t ringStages = ordered ? 0 : std::max<int64_t>(prologueClusterRing, 0);
  if (ringRows < g.warps || ringRows > kWarp || ringRows % g.warps != 0 ||
      kTileN % ringRows != 0 || slice % 16 != 0 ||
      ringStages * ringRows * slice > 40 * 1024)
    ringStages = 0;
  const int64_t ringCount = ringStages ? kTileN / ringRows : 0;
  const int64_t stageBytes = ringRows * slice;
  ringStages = std::min(ringStages, ringCount);
  auto sharedPtr = LLVM::LLVMPointerType::get(k.b.getContext(), 3);
  auto globalPtr = LLVM::LLVMPointerType::get(k.b.getContext(), 1);
  Value ring, full;
  if (ringStages) {
    ring = g.sharedSpace(k.b.getI8Type(), ringStages * stageBytes, 128);
    full = g.sharedSpace(k.i64, ringStages, 8);
  }
  auto fullAt = [&](Value slot) {
    return LLVM::GEPOp::create(k.b, k.loc, sharedPtr, k.i64, full,
                               ValueRange{k.toI64(slot)});
  };
  // Stage `stage` (rows stage * ringRows ...) into slot `slot`: warp 0's
  // lane 0 expects its bytes on full[slot], lane r < ringRows copies row
  // r's slice (the caller is warp 0).
  auto issueStage = [&](Value stage, Value slot) {
    Value rank = k.irem(g.ctaId, k.c(n)), gh = k.idiv(g.ctaId, k.c(n));
    const std::pair<WeightRef, Value> headRow =
        weights.row(k.imul(gh, k.c(kTileN)));
    const WeightRef &w = headRow.first;
    Value first = headRow.second;
    Value bar = fullAt(slot);
    k.ifThen(g.eq(g.lane, k.c(0)), [&] {
      NVVM::MBarrierArriveExpectTxOp::create(
          k.b, k.loc, Type(), bar, g.ci32(stageBytes), NVVM::MemScopeKind::CTA,
          /*relaxed=*/false, Value());
    });
    k.ifThen(k.icmp(CmpI::ult, g.lane, k.c(ringRows)), [&] {
      Value row = k.iadd(k.imul(stage, k.c(ringRows)), g.lane);
      Value at = k.iadd(
          first, k.iadd(k.imul(row, k.c(s.hidden)), k.imul(rank, k.c(slice))));
      Value src = LLVM::AddrSpaceCastOp::create(
          k.b, k.loc, globalPtr, k.gep(w.base, at, k.b.getI8Type()));
      Value dst = LLVM::GEPOp::create(
          k.b, k.loc, sharedPtr, k.b.getI8Type(), ring,
          ValueRange{k.toI64(k.iadd(k.imul(slot, k.c(stageBytes)),
                                    k.imul(g.lane, k.c(slice))))});
      // As a shared::cluster address (the form PTX 8.0 has).
      dst = LLVM::AddrSpaceCastOp::create(
          k.b, k.loc, LLVM::LLVMPointerType::get(k.b.getContext(), 7), dst);
      NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
          k.b, k.loc, dst, src, bar, g.ci32(slice), Value(), Value());
    });
  };
  // The barriers and the first stages (before the wait for the RMSNorm
  // with --gpu-prologue-cluster-ring-early: the weights do not depend on
  // it).
  auto startRing = [&] {
    k.ifThen(g.eq(g.tid, k.c(0)), [&] {
      for (int64_t i = 0; i < ringStages; ++i)
        NVVM::MBarrierInitOp::create(k.b, k.loc, fullAt(k.c(i)), g.ci32(1),
                                     Value());
      NVVM::FenceMbarrierInitOp::create(k.b, k.loc);
    });
    g.sync();
    k.ifThen(g.eq(g.warp, k.c(0)), [&] {
      for (int64_t i = 0; i < ringStages; ++i)
        issueStage(k.c(i), k.c(i));
    });
  };
  const bool early = ringStages && prologueClusterRingEarly;
  const bool earlyRound = !ringStages && prologueClusterEarlyRound;
  // Every thread waits for the RMSNorm before anything else, steps of
  // other sizes too (launched by a runtime that ignores the token bounds,
  // the kernel does nothing, but it does not finish before the norm);
  // with the early ring or round, one-token steps first issue weight
  // copies or loads, which do not depend on the norm.
  const bool waitInside = early || earlyRound;
  if (!waitInside)
    g.gridDependencyWait();
  const bool asyncSums = prologueClusterAsyncSums;
  Value sumsBar = asyncSums ? g.sharedSpace(k.i64, 1, 8) : Value();
  auto body = [&] {
    if (early) {
      startRing();
      g.gridDependencyWait();
    }
    // --gpu-prologue-cluster-async-sums: the leader expects every CTA's
    // kTileN sums (4 bytes each).
    if (asyncSums)
      initSumsBarrier(
          g, sumsBar, [&] { return g.eq(k.irem(g.ctaId, k.c(n)), k.c(0)); },
          [&] { return g.ci32(4 * n * kTileN); });
    // Every CTA of the cluster must have started before another writes
    // its shared memory: arrive now, wait before the copy.
    NVVM::ClusterArriveRelaxedOp::create(k.b, k.loc, UnitAttr());
    if (ringStages && !early)
      startRing();
    Value rank = k.irem(g.ctaId, k.c(n)), gh = k.idiv(g.ctaId, k.c(n));
    const std::pair<WeightRef, Value> headRow =
        weights.row(k.imul(gh, k.c(kTileN)));
    const WeightRef &w = headRow.first;
    Value first = headRow.second;
    Value scale = g.packedTail(w, first);
    Value c0 = k.iadd(k.imul(rank, k.c(slice)), k.imul(g.lane, k.c(8)));
    // Round r's weight lines into L2 (--gpu-prologue-cluster-ahead): lane
    // l < rowsAtOnce * lines takes line l mod lines of the warp's row
    // l / lines of the round (none where the slice is not whole 128-byte
    // lines or they outnumber the lanes).
    const int64_t rounds = kTileN / perRound, lines = slice / 128;
    Value weightBase = w.base, weightFirst = first;
    const int64_t ahead =
        ringStages ? 0 : std::clamp<int64_t>(prologueClusterAhead, 0, rounds);
    auto prefetchRound = [&](Value r) {
      if (slice % 128 != 0 || rowsAtOnce * lines > kWarp || ordered)
        return;
      k.ifThen(
          g.andI(k.icmp(CmpI::ult, r, k.c(rounds)),
                 k.icmp(CmpI::ult, g.lane, k.c(rowsAtOnce * lines))),
          [&] {
            Value row =
                k.iadd(k.imul(r, k.c(perRound)),
                       k.iadd(k.imul(k.idiv(g.lane, k.c(lines)), k.c(g.warps)),
                              g.warp));
            Value at = k.iadd(
                weightFirst,
                k.iadd(k.imul(row, k.c(s.hidden)),
                       k.iadd(k.imul(rank, k.c(slice)),
                              k.imul(k.irem(g.lane, k.c(lines)), k.c(128)))));
            prefetchL2(k, k.gep(weightBase, at, k.b.getI8Type()));
          });
    };
    for (int64_t a = 0; a < ahead; ++a)
      prefetchRound(k.c(a));
    // The chunk-major order: step j's 256 channels are the slice's
    // 128-channel chunks 2 j and 2 j + 1 (lanes 16-31 in the second).
    ClusterTiles tiles;
    if (ordered)
      tiles = ClusterTiles(g, s, w, first, rank, k.imul(g.lane, k.c(8)));
    // Round `it`'s rows of this warp and their raw weight words.
    auto loadRound = [&](Value it, SmallVector<Value> &rows,
                         SmallVector<SmallVector<GK::WeightRaw>> &raw) {
      raw.assign(rowsAtOnce, {});
      for (int64_t i = 0; i < rowsAtOnce; ++i) {
        rows.push_back(k.iadd(k.imul(it, k.c(perRound)),
                              k.iadd(k.c(i * g.warps), g.warp)));
        Value at = k.iadd(first, k.iadd(k.imul(rows[i], k.c(s.hidden)), c0));
        if (ordered)
          at = tiles.at(rows[i]);
        for (int64_t j = 0; j < steps; ++j) {
          GK::WeightRaw r; // the payload only (the scale: on the sum)
          Value step = ordered ? tiles.chunks(2 * j) : k.c(j * kWarp * 8);
          r.words.push_back(LLVM::LoadOp::create(
              k.b, k.loc, VectorType::get({2}, k.i32),
              k.gep(w.base, k.iadd(at, step), k.b.getI8Type()),
              /*alignment=*/8));
          raw[i].push_back(r);
        }
      }
    };
    SmallVector<Value> rows0;
    SmallVector<SmallVector<GK::WeightRaw>> raw0;
    if (earlyRound) {
      loadRound(k.c(0), rows0, raw0);
      g.gridDependencyWait();
    }
    // The input row, written by the RMSNorm: the lane's 8 values per step.
    SmallVector<SmallVector<Value>> xs;
    for (int64_t j = 0; j < steps; ++j)
      xs.push_back(g.load8(b.in, k.iadd(c0, k.c(j * kWarp * 8)), s.act));
    auto f32x2 = VectorType::get({2}, k.f32);
    auto f16x2 = VectorType::get({2}, k.b.getF16Type());
    // The warp's sum of row `row` from its raw words (a word pair per
    // step) into own[row].
    auto rowSum = [&](Value row, ArrayRef<GK::WeightRaw> raw) {
      Value acc = k.cf(0);
      for (int64_t j = 0; j < steps; ++j) {
        int64_t e = 0;
        for (Value word : g.decodeWeightF16(w, raw[j])) {
          Value h = LLVM::BitcastOp::create(k.b, k.loc, f16x2, word);
          Value f = arith::ExtFOp::create(k.b, k.loc, f32x2, h);
          for (int64_t half = 0; half < 2; ++half, ++e)
            acc = k.fma(
                xs[j][e],
                LLVM::ExtractElementOp::create(k.b, k.loc, f, g.ci32(half)),
                acc);
        }
      }
      Value sum = k.mul(g.warpSum(acc), scale);
      k.ifThen(g.eq(g.lane, k.c(0)), [&] { k.storeF(own, row, sum, k.f32); });
    };
    if (ringStages) {
      // Stage i in slot i mod ringStages, its barrier's phase i /
      // ringStages: wait, read the warp's rows into registers, and once
      // every warp has (a CTA barrier) warp 0 refills the slot with stage
      // i + ringStages; then the products.
      auto loop =
          scf::ForOp::create(k.b, k.loc, k.c(0), k.c(ringCount), k.c(1));
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPoint(loop.getBody()->getTerminator());
      Value i = loop.getInductionVar();
      Value slot = k.irem(i, k.c(ringStages));
      Value parity = arith::IndexCastOp::create(
          k.b, k.loc, k.i32, k.irem(k.idiv(i, k.c(ringStages)), k.c(2)));
      NVVM::MBarrierTryWaitParityOp::create(k.b, k.loc, fullAt(slot), parity,
                                            g.ci32(0x989680));
      const int64_t perWarp = ringRows / g.warps;
      SmallVector<SmallVector<GK::WeightRaw>> raw(perWarp);
      SmallVector<Value> rows;
      for (int64_t r = 0; r < perWarp; ++r) {
        Value local = k.iadd(k.c(r * g.warps), g.warp);
        rows.push_back(k.iadd(k.imul(i, k.c(ringRows)), local));
        Value at =
            k.iadd(k.imul(slot, k.c(stageBytes)),
                   k.iadd(k.imul(local, k.c(slice)), k.imul(g.lane, k.c(8))));
        for (int64_t j = 0; j < steps; ++j) {
          GK::WeightRaw one;
          one.words.push_back(LLVM::LoadOp::create(
              k.b, k.loc, VectorType::get({2}, k.i32),
              LLVM::GEPOp::create(
                  k.b, k.loc, sharedPtr, k.b.getI8Type(), ring,
                  ValueRange{k.toI64(k.iadd(at, k.c(j * kWarp * 8)))}),
              /*alignment=*/8));
          raw[r].push_back(one);
        }
      }
      k.ifThen(
          k.icmp(CmpI::ult, k.iadd(i, k.c(ringStages)), k.c(ringCount)), [&] {
            g.sync();
            k.ifThen(g.eq(g.warp, k.c(0)),
                     [&] { issueStage(k.iadd(i, k.c(ringStages)), slot); });
          });
      for (int64_t r = 0; r < perWarp; ++r)
        rowSum(rows[r], raw[r]);
    } else {
      // Round 0 from the early loads (--gpu-prologue-cluster-early-round),
      // with the prefetch its loop step would have issued.
      if (earlyRound && ahead > 0)
        prefetchRound(k.c(ahead));
      for (int64_t i = 0; i < static_cast<int64_t>(rows0.size()); ++i)
        rowSum(rows0[i], raw0[i]);
      auto loop = scf::ForOp::create(k.b, k.loc, k.c(earlyRound ? 1 : 0),
                                     k.c(rounds), k.c(1));
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPoint(loop.getBody()->getTerminator());
      Value it = loop.getInductionVar();
      if (ahead > 0)
        prefetchRound(k.iadd(it, k.c(ahead)));
      SmallVector<Value> rows;
      SmallVector<SmallVector<GK::WeightRaw>> raw;
      loadRound(it, rows, raw);
      for (int64_t i = 0; i < rowsAtOnce; ++i)
        rowSum(rows[i], raw[i]);
    }
    g.sync();
    NVVM::ClusterWaitOp::create(k.b, k.loc, UnitAttr());
    // This CTA's sums to slot `rank` of the leader's array.
    Value slot = NVVM::MapaOp::create(
        k.b, k.loc, clusterPtr, all,
        arith::IndexCastOp::create(k.b, k.loc, k.i32, k.c(0)));
    g.strided(g.tid, k.c(kTileN), [&](Value i) {
      Value v = k.loadF(own, i, k.f32);
      Value at = LLVM::GEPOp::create(
          k.b, k.loc, clusterPtr, k.f32, slot,
          ValueRange{arith::IndexCastOp::create(
              k.b, k.loc, k.i64, k.iadd(k.imul(rank, k.c(kTileN)), i))});
      if (asyncSums)
        stAsyncSums(k, at, {v},
                    NVVM::MapaOp::create(
                        k.b, k.loc, clusterPtr, sumsBar,
                        arith::IndexCastOp::create(k.b, k.loc, k.i32, k.c(0))));
      else
        LLVM::StoreOp::create(k.b, k.loc, v, at, /*alignment=*/4);
    });
    // Release the copies, acquire the others' (barrier.cluster.arrive /
    // wait default to release / acquire); with the async sums only the
    // leader's first warp waits, on its mbarrier.
    if (!asyncSums) {
      NVVM::ClusterArriveOp::create(k.b, k.loc, UnitAttr());
      NVVM::ClusterWaitOp::create(k.b, k.loc, UnitAttr());
    }
    Value sums = LLVM::AddrSpaceCastOp::create(k.b, k.loc, k.ptrT, all);
    // --gpu-prologue-cluster-epilogue-loads-first: the wait inside the
    // epilogue, after its loads that do not depend on the sums.
    const bool loadsFirst = asyncSums && prologueClusterEpilogueLoadsFirst;
    k.ifThen(g.andI(g.eq(rank, k.c(0)), g.eq(g.warp, k.c(0))), [&] {
      if (asyncSums && !loadsFirst)
        waitSumsBarrier(k, sumsBar);
      prologueByKind(g, s, gh, [&](int kind, Value head) {
        prologueRowEpilogue(g, s, b, kind, head, k.c(0), gh, T, [&] {
          if (loadsFirst)
            waitSumsBarrier(k, sumsBar);
          SmallVector<Value> v;
          for (int64_t e = 0; e < 4; ++e) {
            Value c = k.iadd(k.imul(g.lane, k.c(4)), k.c(e));
            Value total = k.loadF(sums, c, k.f32);
            for (int64_t r = 1; r < n; ++r)
              total = k.add(total,
                            k.loadF(sums, k.iadd(c, k.c(r * kTileN)), k.f32));
            v.push_back(total);
          }
          return v;
        });
      });
    });
  };
  stepOrWait(g, k.icmp(CmpI::eq, T, k.c(1)), body, waitInside);
}

/// CTAs per multiprocessor the tensor-core cluster kernel's registers are
/// capped for (96 registers at 128 threads): 5 x 132 = 660 CTAs hold M3's
/// 72 or 77 clusters of 8. On the H200 (docs/perf.md, thirtieth session)
/// a cap for 6 (80 registers) made M3's prologue at 2-16 tokens 1.5-1.9x
/// slower (27-37 us against 18-22).
constexpr int64_t kPrologueClusterMmaCtasPerSM = 5;

/// Part 4's passes: on an H100 (docs/perf.md, fifty-second session) M3's
/// prologue took 54-55 us at 17-32 tokens (2 passes) against 77-93 for
/// rowsDot's mma.sync tiles, 106 against 137 at 63-64 (4 passes). With its
/// weights past L1 (fifty-fourth session, H100) 108.7 / 111.6 us against
/// the tile GEMM's 135.4 / 140.4 at 80 tokens (5 passes), 126.6 / 134.3
/// against 136.0 / 141.7 at 96 (6), but 167.0 / 178.5 against 144.3 /
/// 149.6 at 128 (8): so 96.
static TuningOpt<int> prologueClusterMaxTokens(
    "gpu-prologue-cluster-max-tokens", 96,
    "Most tokens of a step whose fused prologue runs as one "
    "thread-block-cluster kernel with f16 tensor-core "
    "products (prologueClusterMmaKernel: part 3 at 2-16 "
    "tokens, part 4 above in one pass over the weights per "
    "16 tokens, up to 128; 16: no part 4; 1: parts 0 and 1 "
    "from two tokens)");

static TuningOpt<int> prologueClusterMmaMinTokens(
    "gpu-prologue-cluster-mma-min-tokens", 0,
    "Fewest tokens of a step that prologueClusterMmaKernel runs (2, or 1: "
    "one-token steps too, and the one-token cluster kernel, part 2, never "
    "launches; 0, the default: 1 where the weights take the head-major "
    "order, whose one-token loads part 2 does not keep within a tile, else "
    "2)");

/// The fewest tokens of a step that part 3 (prologueClusterMmaKernel) runs
/// for an op whose weights are `packed`: --gpu-prologue-cluster-mma-min-
/// tokens, or where that is 0, 1 with the head-major weight order
/// (PackedWeight::orderHeadMajor) and 2 otherwise.
static int64_t clusterMmaMinTokens(const PackedOperands *packed) {
  if (prologueClusterMmaMinTokens != 0)
    return prologueClusterMmaMinTokens;
  if (!packed)
    return 2;
  auto it = packed->find(prologueWeightSlot(0));
  return it != packed->end() && it->second.orderRanks &&
                 it->second.orderHeadMajor
             ? 1
             : 2;
}

static TuningOpt<int> prologueClusterLaneBytes(
    "gpu-prologue-cluster-lane-bytes", 32,
    "Consecutive E4M3 bytes of a weight row each lane of the "
    "prologue's tensor-core cluster kernel loads per chunk "
    "(16 or 32; tuning)");

static TuningOpt<int> prologueClusterMmaCtas(
    "gpu-prologue-cluster-mma-ctas", kPrologueClusterMmaCtasPerSM,
    "CTAs per multiprocessor the registers of the prologue's "
    "tensor-core cluster kernel are capped for (4-6: its "
    "shared memory fits 6; tuning)");

static TuningOpt<int> prologueClusterPrefetch(
    "gpu-prologue-cluster-prefetch", 0,
    "Chunks of its weight rows the prologue's tensor-core "
    "cluster kernel prefetches into L2 before it waits for "
    "the RMSNorm (tuning)");

static TuningOpt<bool> prologueClusterPairRows(
    "gpu-prologue-cluster-pair-rows", true,
    "The prologue's tensor-core cluster kernel keeps token rows t and t + 8 "
    "of its f16 input interleaved in shared memory, so that one ld.shared.v4 "
    "is one mma A operand (no register copies; 32 lane bytes; tuning)");

static TuningOpt<bool> prologueClusterMmaEarly(
    "gpu-prologue-cluster-mma-early", true,
    "The prologue's tensor-core cluster kernel (2-16 tokens) issues its "
    "first chunk group's weight loads (into registers) before it waits for "
    "the RMSNorm before it, as the weights do not depend on it (the wait "
    "then carries a memory clobber; on an H100 M3's RMSNorm and dense "
    "prologue took 26.8-29.2 us against 28.0-31.1; docs/perf.md, "
    "forty-second session; tuning)");

static TuningOpt<bool> prologueClusterReload(
    "gpu-prologue-cluster-reload", true,
    "The prologue's tensor-core cluster kernel (2-16 tokens) loads its "
    "epilogue's buffer pointers from the launch table after its chunk loop "
    "instead of at its start, so that they are not live across the loop "
    "(M3's MSA layer spilled 28 bytes without; on an H100 its prologue "
    "took 25.6-27.4 us against 27.2-29.0; docs/perf.md, forty-second "
    "session; tuning)");

static TuningOpt<bool> prologueClusterMmaRolling(
    "gpu-prologue-cluster-mma-rolling", true,
    "The prologue's tensor-core cluster kernel (2-16 tokens) loads the next "
    "chunk group's weights of a tile as soon as it has converted the "
    "current group's words of that tile (a rolling window of loop-carried "
    "registers), so that a warp always has a group of loads in flight (on "
    "the H200 M3's dense prologue took 18.1-19.8 us against 18.4-20.2; "
    "docs/perf.md, forty-third session; tuning)");

static TuningOpt<int> prologueClusterMmaEarlyTiles(
    "gpu-prologue-cluster-mma-early-tiles", 2,
    "With --gpu-prologue-cluster-mma-early: how many of a warp's 4 weight "
    "tiles have their first chunk group's loads issued before the wait for "
    "the RMSNorm; the others' go out after the loads of the step's input "
    "rows, so that the input waits behind fewer loads and the fill holds "
    "fewer registers (0-4; on an H100 M3's dense prologue took 23.6 / 24.0 "
    "/ 24.9 us at 2 / 8 / 16 tokens with 2, against 23.8 / 24.7 / 26.3 "
    "with all 4; docs/perf.md, forty-fifth session; tuning)");

static TuningOpt<bool> prologueClusterPassesProgrammatic(
    "gpu-prologue-cluster-passes-programmatic", false,
    "Part 4 of the fused prologue (its steps above 16 tokens, in passes) is a "
    "programmatic dependent of the RMSNorm before it, like part 3 (false, "
    "the default: an ordinary launch after the norm, so that no cluster "
    "waits for the norm's CTAs to leave and then runs all its passes after "
    "the others; on an H100 the RMSNorm and M3's MSA prologue took 99.8 / "
    "128.8 us at 48 / 64 tokens against 110.4 / 144.6 as a programmatic "
    "dependent, the dense layer's 0.9-2.6 us more at 17-48; docs/perf.md, "
    "fifty-second session; tuning)");

static TuningOpt<bool> prologueClusterMmaAsyncSums(
    "gpu-prologue-cluster-mma-async-sums", true,
    "The prologue's tensor-core cluster kernel (2-16 tokens) sends each "
    "token's sums to the CTA that finishes it with st.async, completing on "
    "an mbarrier of that CTA which only its epilogue warps wait on, instead "
    "of stores and a second cluster barrier (on an H100 0.3-0.7 us faster "
    "at 2-16 tokens; docs/perf.md, forty-third session; tuning)");

static TuningOpt<bool> prologueClusterMmaInterleave(
    "gpu-prologue-cluster-mma-interleave", false,
    "The prologue's tensor-core cluster kernel (2-16 tokens) gives CTA r of "
    "a head's cluster of N the channel chunks r, r + N, r + 2 N, ... "
    "(4 x --gpu-prologue-cluster-lane-bytes channels each) instead of the "
    "contiguous slice [r H / N, (r + 1) H / N), so that the cluster's CTAs, "
    "moving through their chunks at about the same pace, read neighbouring "
    "bytes of each weight row (bench/weight_layout.cu: 1.3 us off the bare "
    "stream of M3's dense layer on an H100; the kernel, which spills 20 / 76 "
    "bytes with it at the default early tiles, was 1.3-2.0 / 3.6-4.1 us "
    "slower in M3's dense / MSA layer at 2-16 tokens; docs/perf.md, "
    "forty-seventh session; tuning)");

static TuningOpt<bool> prologueClusterMmaWeightsNoL1(
    "gpu-prologue-cluster-mma-weights-no-l1", false,
    "Part 3 of the fused prologue (the tensor-core cluster kernel of up to "
    "16 tokens) loads its weights with ld.global.nc.L1::no_allocate (the "
    "read-only path, no L1 lines: each weight byte is read once per pass) "
    "instead of generic loads (on an H100 at 16 tokens 0.35 / 1.15 us "
    "faster in M3's dense / MSA layer, at 2 tokens 0.4 us slower / 0.2 us "
    "faster; docs/perf.md, fifty-third session; tuning)");

static TuningOpt<int> prologueClusterMmaWeightsNoL1MinTokens(
    "gpu-prologue-cluster-mma-weights-no-l1-min-tokens", 4,
    "Part 3 of the fused prologue loads its weights with "
    "ld.global.nc.L1::no_allocate in steps of at least N tokens and with "
    "generic loads below (its pass built twice, under a branch on the "
    "step's token count; 0: off, the loads of "
    "--gpu-prologue-cluster-mma-weights-no-l1 in every step). On an H100, "
    "with the RMSNorm before it, N = 4 against generic loads everywhere: "
    "no slower at 1-2 tokens, 0.95 us faster in M3's MSA layer at 16, 0.3 "
    "us slower in its dense layer at 4-8 (docs/perf.md, fifty-fifth "
    "session; tuning)");

static TuningOpt<bool> prologueClusterPassesWeightsNoL1(
    "gpu-prologue-cluster-passes-weights-no-l1", true,
    "Part 4 of the fused prologue (its steps above 16 tokens, in passes) loads "
    "its weights with ld.global.nc.L1::no_allocate instead of generic loads "
    "(on an H100 at 32 tokens 46.3 / 49.1 us against 54.6 / 59.3 in M3's "
    "dense / MSA layer; docs/perf.md, fifty-third session; tuning)");

/// A 16-byte load of global memory at the generic address `p` as inline
/// PTX `ld.global<qualifiers>.v4.u32` (e.g. ".nc.L1::no_allocate": PTX
/// ISA, ld), as a vector of 4 i32, kept in program order with the kernel's
/// other side effects. The .nc path is for bytes no kernel of the step
/// writes (weights).
static Value loadGlobalV4(KB &k, Value p, llvm::StringRef qualifiers) {
  MLIRContext *ctx = k.b.getContext();
  auto i32 = k.b.getI32Type();
  auto st = LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
  std::string text = ("{\n.reg .u64 g;\ncvta.to.global.u64 g, $4;\nld.global" +
                      qualifiers + ".v4.u32 {$0, $1, $2, $3}, [g];\n}")
                         .str();
  Value r =
      LLVM::InlineAsmOp::create(
          k.b, k.loc, st, ValueRange{p}, text, "=r,=r,=r,=r,l",
          /*has_side_effects=*/true, /*is_align_stack=*/false,
          LLVM::tailcallkind::TailCallKind::None,
          LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT), ArrayAttr())
          .getRes();
  auto v4 = VectorType::get({4}, i32);
  Value v = LLVM::PoisonOp::create(k.b, k.loc, v4);
  for (int64_t i = 0; i < 4; ++i)
    v = LLVM::InsertElementOp::create(
        k.b, k.loc, v, LLVM::ExtractValueOp::create(k.b, k.loc, r, i), k.ci(i));
  return v;
}

static TuningOpt<int> prologueClusterChunks(
    "gpu-prologue-cluster-chunks", 1,
    "Chunks (4 x --gpu-prologue-cluster-lane-bytes channels) "
    "whose weight loads a warp of the prologue's tensor-core "
    "cluster kernel issues together (tuning)");

namespace {
/// The tensor-core cluster kernel's most tokens per step (the rows of its
/// mma.sync A operand).
constexpr int64_t kClusterMmaTokens = 16;
/// The most passes of kClusterMmaTokens tokens over the weights the
/// tensor-core cluster kernel takes in a step
/// (--gpu-prologue-cluster-max-tokens up to 8 x 16 = 128).
constexpr int64_t kClusterMmaMaxPasses = 8;
/// Most static shared memory of a CTA of the tensor-core cluster kernel
/// (6 of them fit an H200 multiprocessor's 227 KB; the kernel is capped
/// for kPrologueClusterMmaCtasPerSM).
constexpr int64_t kClusterMmaSharedBytes = 36 * 1024;

/// Channels of one loop chunk of the tensor-core cluster kernel: the 4
/// lanes of a quad load --gpu-prologue-cluster-lane-bytes consecutive E4M3
/// bytes each of a weight row.
int64_t clusterMmaChunk() { return 4 * prologueClusterLaneBytes; }

/// Steps a CTA of the tensor-core cluster kernel finishes (token t: CTA
/// t mod N, its local step t / N).
int64_t clusterMmaLocal(int64_t n) { return (kClusterMmaTokens + n - 1) / n; }
/// Passes over the weights the tensor-core cluster kernel takes at most:
/// one per kClusterMmaTokens tokens of --gpu-prologue-cluster-max-tokens.
int64_t clusterMmaPasses() {
  return (prologueClusterMaxTokens + kClusterMmaTokens - 1) / kClusterMmaTokens;
}
/// 32-bit words of a row of the f16 input slice in shared memory (H / N
/// channels, padded by 16 bytes: the two rows a quarter-warp reads start
/// 4 banks apart; with 32 bytes per lane its lanes 0 and 2 of a row still
/// meet, a 2-way conflict per ld.shared.v4).
int64_t clusterMmaRowWords(const PrologueShape &s, int64_t n) {
  return s.hidden / n / 2 + 4;
}
/// With --gpu-prologue-cluster-pair-rows (32 lane bytes, 4 warps): the
/// 16-byte units of pair row p (token rows p and p + 8; unit u holds words
/// 2u' and 2u' + 1 of both rows, row p first: {x_p[2u'], x_{p+8}[2u'],
/// x_p[2u'+1], x_{p+8}[2u'+1]}, u' = u, one mma A operand) sit at unit u +
/// u / 8: a pad unit after every 8, so that the 4 lanes of a quad, 8 units
/// apart, read 4 different bank groups; the pair row's stride is 4 mod 8
/// units, so that the two quads of a quarter warp take the other 4.
int64_t clusterMmaPairUnit(int64_t u) { return u + u / 8; }
int64_t clusterMmaPairRowWords(const PrologueShape &s, int64_t n) {
  const int64_t units = clusterMmaPairUnit(s.hidden / n / 4);
  return 4 * (units + ((4 - units % 8) + 8) % 8);
}
bool clusterMmaPairRows(const PrologueShape &s, int64_t n, int64_t warps) {
  return prologueClusterPairRows && prologueClusterLaneBytes == 32 &&
         warps == 4 && (s.hidden / n) % 64 == 0;
}
/// 32-bit words of the kernel's f16 input slice in shared memory (xs):
/// kClusterMmaTokens rows, or 8 pair rows with
/// --gpu-prologue-cluster-pair-rows.
int64_t clusterMmaInputWords(const PrologueShape &s, int64_t n, int64_t warps) {
  return clusterMmaPairRows(s, n, warps)
             ? 8 * clusterMmaPairRowWords(s, n)
             : kClusterMmaTokens * clusterMmaRowWords(s, n);
}
} // namespace

/// True when steps of 2 to --gpu-prologue-cluster-max-tokens tokens take
/// prologueClusterMmaKernel (part 3; parts 0 and 1 then launch from one
/// token more).
bool prologueClusterMma(const PrologueShape &s, const PackedOperands *packed) {
  const int64_t n = prologueClusterSize;
  if (!prologueClustered(s, packed) || prologueClusterMaxTokens < 2 ||
      clusterMmaPasses() > kClusterMmaMaxPasses ||
      prologueClusterMmaMinTokens < 0 || prologueClusterMmaMinTokens > 2 ||
      prologueClusterChunks < 1 || kTileN % (kGpuThreads / kWarp * 8) != 0 ||
      clusterMmaLocal(n) > kGpuThreads / kWarp ||
      kClusterMmaTokens % (kGpuThreads / kWarp) != 0 ||
      (prologueClusterLaneBytes != 16 && prologueClusterLaneBytes != 32) ||
      (s.hidden / n) % clusterMmaChunk() != 0)
    return false;
  // xs, downs and recv (prologueClusterMmaKernel).
  const int64_t bytes = 4 * clusterMmaInputWords(s, n, kGpuThreads / kWarp) +
                        4 * kClusterMmaTokens +
                        4 * n * clusterMmaLocal(n) * kTileN;
  return bytes <= kClusterMmaSharedBytes;
}

/// The fused prologue of a step of 2 to --gpu-prologue-cluster-max-tokens
/// tokens (sm_90a, per-tensor FP8 weights read in place): one kernel, no
/// workspace, the clusters of prologueClusterKernel (N CTAs per global
/// head gh, CTA r over channels [r H / N, (r + 1) H / N)) with f16
/// tensor-core products. The CTA converts its channel slice of the step's
/// input rows to f16 in shared memory, each row times the power of two
/// 2^s_t of rowsToF16 (f16RowShift of the slice's largest magnitude: no
/// overflow, and exact but for values below 2^-28 of the largest), the
/// sums times 2^-s_t (rows T..15 are zeros, their sums never stored). Warp
/// w takes weight rows [32 w, 32 w + 32) of the head as four mma.sync
/// m16n8k16 B operands of 8 rows, the 16 token rows as A. Per chunk of
/// 4 L channels (L = --gpu-prologue-cluster-lane-bytes, 32) lane (q, i)
/// (q = lane / 4, i = lane mod 4) loads L E4M3 bytes at channel L i of
/// weight row q of each tile and L f16 values at channel L i of token rows
/// q and q + 8; the chunk's L / 4 mmas per tile take channels L i + 4 j ..
/// + 3 at k slots {2 i, 2 i + 1, 2 i + 8, 2 i + 9} (a permutation of the
/// chunk's channels that A and B share, so the
/// sums are those of the chunk). FP32 accumulators, times the per-tensor
/// scale. Token t's sums go to CTA t mod N (distributed shared memory,
/// slot [r][t / N]; by default st.async completing on that CTA's mbarrier,
/// --gpu-prologue-cluster-mma-async-sums); warp t / N of that CTA issues
/// the epilogue's loads that do not need the sums
/// (--gpu-prologue-cluster-epilogue-loads-first), waits for them all, adds
/// the N slots in rank order and runs prologueRowEpilogue: up to 16
/// epilogues in parallel over the cluster.
/// Steps of more than 16 tokens (--gpu-prologue-cluster-max-tokens up to
/// 128) take one pass of all the above per 16 token rows, each streaming
/// the weights again: the mbarrier's phase p completes pass p, and a
/// release arrival on the cluster barrier after each pass's epilogue keeps
/// the next pass's sums out of slots not yet read.
/// With --gpu-prologue-cluster-mma-early (default) the kernel's steps
/// issue chunk group 0's weight loads of each warp's first two tiles
/// (--gpu-prologue-cluster-mma-early-tiles) before griddepcontrol.wait, so
/// that they overlap the RMSNorm before it, and the other two tiles' right
/// after the loads of the step's input rows; with
/// --gpu-prologue-cluster-mma-rolling (default) each tile's loads of the
/// next group go out as soon as its words of the current one are
/// converted. On the H200 (docs/perf.md, forty-third session) M3's
/// prologue at 2-16 tokens took 18.1-19.8 us (dense layer) and 19.4-21.2
/// us (MSA layer) in a CUDA graph with the rolling window, against a
/// stream of the weights of 14.3 / 15.4 us.
void prologueClusterMmaKernel(GK &g, const PrologueShape &s, Value T,
                              bool passes) {
  KB &k = g.k;
  const int64_t n = prologueClusterSize, slice = s.hidden / n;
  const int64_t laneBytes = prologueClusterLaneBytes;
  const int64_t chunks = slice / clusterMmaChunk();
  const int64_t local = clusterMmaLocal(n);
  const int64_t rowWords = clusterMmaRowWords(s, n);
  const int64_t tiles = kTileN / g.warps / 8;
  int64_t u = std::min<int64_t>(prologueClusterChunks, chunks);
  while (chunks % u != 0)
    --u;
  g.declareGrid(g.threads, s.totalHeads * n, n,
                std::clamp<int64_t>(prologueClusterMmaCtas, 4, 6));
  // Part 3 (one pass) runs the steps of up to kClusterMmaTokens tokens,
  // part 4 (`passes`) those above.
  const int64_t minTokens =
      passes ? kClusterMmaTokens + 1 : clusterMmaMinTokens(k.packed);
  const int64_t maxTokens =
      passes ? int64_t(prologueClusterMaxTokens)
             : std::min<int64_t>(prologueClusterMaxTokens, kClusterMmaTokens);
  g.declareTokens(minTokens, maxTokens);
  // The CTA's channels: chunk j of the slice (clusterMmaChunk() channels)
  // at channel sliceStart(r) + j * chunkStep (--gpu-prologue-cluster-mma-
  // interleave: chunks r, r + N, ...; else the slice [r H / N, (r + 1) H /
  // N)).
  const bool interleave = prologueClusterMmaInterleave;
  const int64_t chunkStep =
      interleave ? n * clusterMmaChunk() : clusterMmaChunk();
  auto sliceStart = [&](Value r) {
    return k.imul(r, k.c(interleave ? clusterMmaChunk() : slice));
  };
  if ((prologueProgrammatic || programmaticLaunches) &&
      (!passes || prologueClusterPassesProgrammatic || programmaticLaunches))
    g.declareProgrammatic();
  PrologueBuffers b(g, s);
  PrologueWeights weights(g, s, b, elementOf(s.weight(0)));
  const bool pairRows = clusterMmaPairRows(s, n, g.warps);
  const int64_t pairWords = clusterMmaPairRowWords(s, n);
  Value xs = g.shared(k.i32, clusterMmaInputWords(s, n, g.warps));
  Value downs = g.shared(k.f32, kClusterMmaTokens);
  Value recv = g.sharedSpace(k.f32, n * local * kTileN, 16);
  auto clusterPtr = LLVM::LLVMPointerType::get(k.b.getContext(), 7);
  auto v4i32 = VectorType::get({4}, k.i32);
  // The lane's weight row in tile 0 (the other tiles' rows at constant
  // offsets): row q of lane (q, i) of a quad.
  auto weightRow = [&] {
    return k.iadd(k.imul(g.warp, k.c(8 * tiles)), k.idiv(g.lane, k.c(4)));
  };
  // Chunk group `grp`'s weight lines into L2: lane (q, j) of a quad takes
  // the group's lines of row q of tiles j, j + 4, ...; no registers held,
  // unlike the loads. The weights are not written by the RMSNorm, so this
  // may run before griddepcontrol.wait.
  const int64_t groups = chunks / u;
  // The chunk-major order (PackedWeight::orderRanks, prologueWeightOrder:
  // a chunk is one 128 x 128-byte tile): rows 128 bytes apart, chunks
  // ClusterTiles::chunks apart.
  const bool ordered = weights.layout.orderRanks != 0;
  assert((!ordered || (!interleave && clusterMmaChunk() == kOrderTile)) &&
         "prologueWeightOrder: whole tiles of one slice");
  const int64_t rowBytes = ordered ? kOrderTile : s.hidden;
  auto prefetchGroup = [&](Value grp) {
    Value gh = k.idiv(g.ctaId, k.c(n)), rank = k.irem(g.ctaId, k.c(n));
    std::pair<WeightRef, Value> head = weights.row(k.imul(gh, k.c(kTileN)));
    Value inQuad = k.irem(g.lane, k.c(4));
    ClusterTiles order;
    if (ordered)
      order = ClusterTiles(g, s, head.first, head.second, rank, k.c(0));
    Value lineAt = k.gep(
        head.first.base,
        ordered ? order.at(weightRow())
                : k.iadd(head.second, k.iadd(k.imul(weightRow(), k.c(s.hidden)),
                                             sliceStart(rank))),
        k.b.getI8Type());
    k.ifThen(k.icmp(CmpI::ult, grp, k.c(groups)), [&] {
      for (int64_t c = 0; c < u; ++c) {
        Value chunk = k.iadd(k.imul(grp, k.c(u)), k.c(c));
        Value off =
            ordered ? order.chunks(chunk) : k.imul(chunk, k.c(chunkStep));
        for (int64_t nt = 0; nt < tiles; ++nt)
          k.ifThen(g.eq(inQuad, k.c(nt % 4)), [&] {
            // Every 128-byte line of the chunk's row piece.
            for (int64_t l = 0; l * 128 < clusterMmaChunk(); ++l)
              prefetchL2(k, k.gep(lineAt,
                                  k.iadd(off, k.c(8 * nt * rowBytes + 128 * l)),
                                  k.b.getI8Type()));
          });
      }
    });
  };
  // --gpu-prologue-cluster-prefetch: the first chunks (whole groups) while
  // the RMSNorm runs.
  const int64_t prefetch = std::min<int64_t>(prologueClusterPrefetch, chunks);
  for (int64_t a = 0; a * u < prefetch; ++a)
    prefetchGroup(k.c(a));
  // As prologueClusterKernel: the RMSNorm first, in every step; with
  // --gpu-prologue-cluster-mma-early the kernel's own steps first issue
  // chunk group 0's weight loads, which do not depend on it.
  const bool earlyGroup = prologueClusterMmaEarly;
  const int64_t earlyTiles =
      std::clamp<int64_t>(prologueClusterMmaEarlyTiles, 0, tiles);
  if (!earlyGroup)
    g.gridDependencyWait();
  Value launched = g.andI(k.icmp(CmpI::sge, T, k.c(minTokens)),
                          k.icmp(CmpI::sle, T, k.c(maxTokens)));
  Value rank = k.irem(g.ctaId, k.c(n)), gh = k.idiv(g.ctaId, k.c(n));
  std::pair<WeightRef, Value> head = weights.row(k.imul(gh, k.c(kTileN)));
  const WeightRef &w = head.first;
  Value first = head.second;
  Value scale = g.packedTail(w, first);
  Value c0 = sliceStart(rank);
  Value quad = k.idiv(g.lane, k.c(4)), inQuad = k.irem(g.lane, k.c(4));
  // The lane's weight bytes at chunk 0 (the other tiles' rows at
  // constant offsets).
  Value wRow = weightRow();
  ClusterTiles order;
  if (ordered)
    order = ClusterTiles(g, s, w, first, rank, k.imul(inQuad, k.c(laneBytes)));
  Value wAt = k.gep(
      w.base,
      ordered
          ? order.at(wRow)
          : k.iadd(first, k.iadd(k.imul(wRow, k.c(s.hidden)),
                                 k.iadd(c0, k.imul(inQuad, k.c(laneBytes))))),
      k.b.getI8Type());
  // One 16-byte word of the weights (--gpu-prologue-cluster-mma-weights-no-l1,
  // --gpu-prologue-cluster-passes-weights-no-l1).
  // (Part 3 with --gpu-prologue-cluster-mma-weights-no-l1-min-tokens:
  // set while the body builds the pass of its branch for the steps of
  // that many tokens or more.)
  bool weightsNoL1 =
      passes ? prologueClusterPassesWeightsNoL1 : prologueClusterMmaWeightsNoL1;
  const int64_t noL1MinTokens =
      passes || weightsNoL1
          ? 0
          : std::max<int64_t>(prologueClusterMmaWeightsNoL1MinTokens, 0);
  auto weightLoad = [&](Value at) -> Value {
    if (weightsNoL1)
      return loadGlobalV4(k, at, ".nc.L1::no_allocate");
    return LLVM::LoadOp::create(k.b, k.loc, v4i32, at, 16);
  };
  // Chunk group `it`'s weight loads, all in flight together: per chunk,
  // tiles x laneBytes / 16 words of 16 bytes.
  // Tiles [firstTile, endTile) only, where given (their words in the
  // same order, appended to `raw` by the caller).
  auto loadGroup = [&](Value it, int64_t firstTile = 0, int64_t endTile = -1) {
    if (endTile < 0)
      endTile = tiles;
    SmallVector<SmallVector<Value>> raw(u);
    for (int64_t c = 0; c < u; ++c) {
      Value chunk = k.iadd(k.imul(it, k.c(u)), k.c(c));
      Value off = ordered ? order.chunks(chunk) : k.imul(chunk, k.c(chunkStep));
      for (int64_t nt = firstTile; nt < endTile; ++nt)
        for (int64_t v = 0; v < laneBytes / 16; ++v)
          raw[c].push_back(weightLoad(
              k.gep(wAt, k.iadd(off, k.c(8 * nt * rowBytes + 16 * v)),
                    k.b.getI8Type())));
    }
    return raw;
  };
  // --gpu-prologue-cluster-mma-async-sums: the mbarrier the CTA's
  // tokens' sums complete (4 bytes per weight row and CTA of the cluster).
  const bool asyncSums = prologueClusterMmaAsyncSums;
  Value sumsBar = asyncSums ? g.sharedSpace(k.i64, 1, 8) : Value();
  // Whether this CTA finishes any of a pass's `tokens` tokens, and the
  // bytes of their sums: 4 per weight row and CTA of the cluster.
  auto hasTokens = [&](Value tokens) {
    return k.icmp(CmpI::ult, rank, tokens);
  };
  auto sumsBytes = [&](Value tokens) {
    Value mine =
        k.iadd(k.idiv(g.isub(k.iadd(tokens, k.c(-1)), rank), k.c(n)), k.c(1));
    return arith::IndexCastOp::create(k.b, k.loc, k.i32,
                                      k.imul(mine, k.c(4 * n * kTileN)))
        .getResult();
  };
  // One pass over the weights for token rows [base, base + Tb) of the
  // step (Tb <= kClusterMmaTokens; steps of more tokens take
  // ceil(T / kClusterMmaTokens) passes, each streaming every weight
  // again). The caller has arrived on the cluster barrier; `first`: the
  // kernel's first pass, which waits for the RMSNorm; `parity`: the phase
  // of the sums' mbarrier this pass completes (null: phase 0).
  auto pass = [&](Value base, Value Tb, bool first, Value parity) {
    SmallVector<SmallVector<Value>> raw0;
    if (earlyGroup)
      raw0 = loadGroup(k.c(0), 0, earlyTiles);
    if (first && earlyGroup)
      g.gridDependencyWait(/*clobber=*/true);
    // --gpu-prologue-cluster-ahead: groups 0..N-1 before the input's
    // fill, group i + N in the loop's step i (rolling: groups 1..N before
    // the fill, as group 0 is being loaded, group i + 1 + N in step i).
    const int64_t ahead = std::clamp<int64_t>(prologueClusterAhead, 0, groups);
    const int64_t firstAhead = prologueClusterMmaRolling ? 1 : 0;
    for (int64_t a = firstAhead; a < ahead + firstAhead; ++a)
      prefetchGroup(k.c(a));
    // The slice of every token row as f16 pairs, times 2^s_t (rowsToF16's
    // f16RowShift of the slice's largest magnitude, so that any finite
    // bf16 value converts without overflow), into xs; 2^-s_t into downs.
    // Warp w takes rows w, w + warps, ..., each lane 16-byte pieces lane,
    // lane + 32, ...; its loads are all issued first (rows T..15 are
    // zeros, not loaded), then the warp's maximum per row, the conversion
    // and the stores.
    const int64_t pieces = slice / 8, perLane = pieces / kWarp;
    const int64_t rowsPerWarp = kClusterMmaTokens / g.warps;
    SmallVector<SmallVector<Value>> raws(rowsPerWarp);
    // With --gpu-prologue-cluster-mma-interleave, piece lane + 32 p (local
    // channel 8 piece) is in the CTA's chunk lane / P + 32 p / P (P pieces
    // per chunk, 32 a multiple of P): the lane's part of that offset,
    // as a pointer into the input rows' row 0, computed once outside the
    // rows' branches.
    const int64_t perChunk = clusterMmaChunk() / 8;
    assert(kWarp % perChunk == 0 && "a lane's pieces, 32 apart");
    Value laneIn =
        interleave
            ? k.gep(b.in,
                    k.iadd(c0, k.iadd(k.imul(k.idiv(g.lane, k.c(perChunk)),
                                             k.c(chunkStep)),
                                      k.imul(k.irem(g.lane, k.c(perChunk)),
                                             k.c(8)))),
                    k.i16)
            : Value();
    auto rowOf = [&](int64_t j) { return k.iadd(g.warp, k.c(j * g.warps)); };
    auto pieceOf = [&](int64_t p) { return k.iadd(g.lane, k.c(p * kWarp)); };
    for (int64_t j = 0; j < rowsPerWarp; ++j) {
      Value t = rowOf(j);
      for (int64_t p = 0; p < perLane; ++p)
        raws[j].push_back(g.ifElse(
            k.icmp(CmpI::ult, t, Tb), {v4i32},
            [&]() -> SmallVector<Value> {
              if (interleave)
                return {LLVM::LoadOp::create(
                    k.b, k.loc, v4i32,
                    k.gep(laneIn,
                          k.iadd(k.imul(k.iadd(base, t), k.c(s.hidden)),
                                 k.c(p * kWarp / perChunk * chunkStep)),
                          k.i16),
                    16)};
              Value src = k.iadd(k.imul(k.iadd(base, t), k.c(s.hidden)),
                                 k.iadd(c0, k.imul(pieceOf(p), k.c(8))));
              // Not ld.global.nc, which declares the bytes read-only for
              // the kernel's whole run: in a programmatic dependent launch
              // the RMSNorm writes them while it runs (with .nc the GPU
              // check failed at 1-16 tokens; docs/perf.md, fifty-third
              // session).
              return {LLVM::LoadOp::create(k.b, k.loc, v4i32,
                                           k.gep(b.in, src, k.i16), 16)};
            },
            [&]() -> SmallVector<Value> {
              return {LLVM::ZeroOp::create(k.b, k.loc, v4i32)};
            })[0]);
    }
    // --gpu-prologue-cluster-mma-early-tiles: the rest of group 0.
    if (earlyGroup && earlyTiles < tiles) {
      SmallVector<SmallVector<Value>> rest = loadGroup(k.c(0), earlyTiles);
      for (int64_t c = 0; c < u; ++c)
        raw0[c].append(rest[c].begin(), rest[c].end());
    }
    if (!first) {
      // Every warp is done with the input rows and the sums of the pass
      // before (this pass's first weight loads and its input's loads in
      // flight already); the mbarrier's next phase expects this CTA's
      // tokens of the pass (its phase p completes pass p).
      g.sync();
      if (asyncSums)
        armSumsBarrier(
            g, sumsBar, [&] { return hasTokens(Tb); },
            [&] { return sumsBytes(Tb); });
    }
    // Row j's f16 words (perLane x 4, piece-major) times its 2^s_t, whose
    // 2^-s_t lane 0 stores into downs.
    auto convertRow = [&](int64_t j) {
      Value t = rowOf(j);
      Value m = g.ci32(0);
      for (Value raw : raws[j])
        for (int64_t e = 0; e < 4; ++e)
          m = bf16PairMaxBits(
              g, LLVM::ExtractElementOp::create(k.b, k.loc, raw, g.ci32(e)), m);
      for (int64_t off = kWarp / 2; off >= 1; off /= 2)
        m = arith::MaxUIOp::create(k.b, k.loc, m, g.shflXor(m, off));
      Value up, down;
      std::tie(up, down) = f16RowScales(g, m);
      k.ifThen(g.eq(g.lane, k.c(0)), [&] { k.storeF(downs, t, down, k.f32); });
      SmallVector<Value> words;
      for (int64_t p = 0; p < perLane; ++p)
        for (int64_t e = 0; e < 4; ++e)
          words.push_back(bf16WordToF16(
              g,
              LLVM::ExtractElementOp::create(k.b, k.loc, raws[j][p], g.ci32(e)),
              up));
      return words;
    };
    // Pair row j's units (--gpu-prologue-cluster-pair-rows) from the words
    // of its rows t (`lo`) and t + 8 (`hi`).
    auto storePairRow = [&](int64_t j, ArrayRef<Value> lo, ArrayRef<Value> hi) {
      for (int64_t p = 0; p < perLane; ++p)
        for (int64_t h = 0; h < 2; ++h) {
          // Unit 2 piece + h: words 4 piece + 2 h and + 1 of rows t, t + 8.
          Value out = LLVM::UndefOp::create(k.b, k.loc, v4i32);
          const Value words[4] = {lo[4 * p + 2 * h], hi[4 * p + 2 * h],
                                  lo[4 * p + 2 * h + 1], hi[4 * p + 2 * h + 1]};
          for (int64_t e = 0; e < 4; ++e)
            out = LLVM::InsertElementOp::create(k.b, k.loc, out, words[e],
                                                g.ci32(e));
          Value unit = k.iadd(k.imul(pieceOf(p), k.c(2)), k.c(h));
          Value at = k.iadd(unit, k.idiv(unit, k.c(8)));
          LLVM::StoreOp::create(k.b, k.loc, out,
                                k.gep(xs,
                                      k.iadd(k.imul(rowOf(j), k.c(pairWords)),
                                             k.imul(at, k.c(4))),
                                      k.i32),
                                16);
        }
    };
    // Row j's words as f16 pieces into xs.
    auto storeRow = [&](int64_t j, ArrayRef<Value> words) {
      for (int64_t p = 0; p < perLane; ++p) {
        Value out = LLVM::UndefOp::create(k.b, k.loc, v4i32);
        for (int64_t e = 0; e < 4; ++e)
          out = LLVM::InsertElementOp::create(k.b, k.loc, out, words[4 * p + e],
                                              g.ci32(e));
        LLVM::StoreOp::create(k.b, k.loc, out,
                              k.gep(xs,
                                    k.iadd(k.imul(rowOf(j), k.c(rowWords)),
                                           k.imul(pieceOf(p), k.c(4))),
                                    k.i32),
                              16);
      }
    };
    // --gpu-prologue-cluster-pair-rows: row t's words (conv) wait for
    // those of row t + 8 (the warp's row j + 8 / warps), and both go out
    // as pair row t's units (clusterMmaPairUnit).
    SmallVector<SmallVector<Value>> conv(rowsPerWarp);
    for (int64_t j = 0; j < rowsPerWarp; ++j) {
      conv[j] = convertRow(j);
      if (!pairRows)
        storeRow(j, conv[j]);
    }
    for (int64_t j = 0; pairRows && j < 8 / g.warps; ++j)
      storePairRow(j, conv[j], conv[j + 8 / g.warps]);
    g.sync();
    // The lane's token row q at chunk 0 (token row q + 8 at a constant
    // offset).
    Value xAt =
        pairRows ? k.gep(xs,
                         k.iadd(k.imul(quad, k.c(pairWords)),
                                k.imul(inQuad, k.c(4 * clusterMmaPairUnit(8)))),
                         k.i32)
                 : k.gep(xs,
                         k.iadd(k.imul(quad, k.c(rowWords)),
                                k.imul(inQuad, k.c(laneBytes / 2))),
                         k.i32);
    // Chunk group `it`'s products from its raw weight words into the
    // accumulators. With `refill` (--gpu-prologue-cluster-mma-rolling),
    // each tile's raw words, once converted, are replaced by refill(c,
    // nt) (the next group's loads of that tile) in `raw`.
    using Refill = std::function<SmallVector<Value>(int64_t, int64_t)>;
    auto mmaGroup = [&](Value it, MutableArrayRef<SmallVector<Value>> raw,
                        ValueRange a,
                        const Refill &refill = nullptr) -> SmallVector<Value> {
      SmallVector<Value> next(a.begin(), a.end());
      for (int64_t c = 0; c < u; ++c) {
        Value off = k.imul(k.iadd(k.imul(it, k.c(u)), k.c(c)),
                           k.c(clusterMmaChunk() / 2));
        // The lane's words of token rows q (x[0]) and q + 8 (x[1]).
        SmallVector<Value> x[2];
        // --gpu-prologue-cluster-pair-rows: unit j of the lane's
        // segment of the chunk (32 units, padded to 36) is mma j's A.
        SmallVector<SmallVector<Value>> units;
        for (int64_t j = 0; pairRows && j < laneBytes / 4; ++j) {
          Value at =
              k.iadd(k.imul(k.iadd(k.imul(it, k.c(u)), k.c(c)),
                            k.c(4 * clusterMmaPairUnit(clusterMmaChunk() / 4))),
                     k.c(4 * j));
          Value vec = LLVM::LoadOp::create(k.b, k.loc, v4i32,
                                           k.gep(xAt, at, k.i32), 16);
          units.emplace_back();
          for (int64_t e = 0; e < 4; ++e)
            units.back().push_back(
                LLVM::ExtractElementOp::create(k.b, k.loc, vec, g.ci32(e)));
        }
        for (int64_t h = 0; h < 2 && !pairRows; ++h)
          for (int64_t v = 0; v < laneBytes / 8; ++v) {
            Value vec = LLVM::LoadOp::create(
                k.b, k.loc, v4i32,
                k.gep(xAt, k.iadd(off, k.c(8 * h * rowWords + 4 * v)), k.i32),
                16);
            for (int64_t e = 0; e < 4; ++e)
              x[h].push_back(
                  LLVM::ExtractElementOp::create(k.b, k.loc, vec, g.ci32(e)));
          }
        for (int64_t nt = 0; nt < tiles; ++nt) {
          SmallVector<Value> wf;
          for (int64_t v = 0; v < laneBytes / 16; ++v)
            for (Value word :
                 g.e4m3WordsToF16(raw[c][nt * (laneBytes / 16) + v], 4))
              wf.push_back(word);
          if (refill) {
            SmallVector<Value> fresh = refill(c, nt);
            for (int64_t v = 0; v < laneBytes / 16; ++v)
              raw[c][nt * (laneBytes / 16) + v] = fresh[v];
          }
          for (int64_t j = 0; j < laneBytes / 4; ++j) {
            SmallVector<Value> d = g.mma(
                pairRows ? units[j]
                         : SmallVector<Value>{x[0][2 * j], x[1][2 * j],
                                              x[0][2 * j + 1], x[1][2 * j + 1]},
                {wf[2 * j], wf[2 * j + 1]},
                ArrayRef<Value>(next).slice(4 * nt, 4), /*f16=*/true);
            for (int64_t e = 0; e < 4; ++e)
              next[4 * nt + e] = d[e];
          }
        }
      }
      return next;
    };
    SmallVector<Value> acc(4 * tiles, k.cf(0));
    if (prologueClusterMmaRolling) {
      // A rolling window: group `it + 1`'s loads of tile nt go out as soon
      // as group `it`'s words of that tile are converted, so that a warp
      // always has a group's loads in flight; the window's words are loop
      // carried.
      if (!earlyGroup)
        raw0 = loadGroup(k.c(0));
      SmallVector<Value> carried(acc);
      for (const SmallVector<Value> &words : raw0)
        carried.append(words.begin(), words.end());
      const int64_t perChunk = tiles * (laneBytes / 16);
      auto unpack = [&](ValueRange all) {
        SmallVector<SmallVector<Value>> raw(u);
        for (int64_t c = 0; c < u; ++c)
          raw[c].assign(all.begin() + 4 * tiles + c * perChunk,
                        all.begin() + 4 * tiles + (c + 1) * perChunk);
        return raw;
      };
      carried = k.reduceN(
          k.c(0), k.c(groups - 1), carried,
          [&](Value it, ValueRange all) -> SmallVector<Value> {
            if (ahead > 0)
              prefetchGroup(k.iadd(it, k.c(ahead + 1)));
            SmallVector<SmallVector<Value>> raw = unpack(all);
            Value following = k.iadd(it, k.c(1));
            SmallVector<Value> out = mmaGroup(
                it, raw, all.take_front(4 * tiles), [&](int64_t c, int64_t nt) {
                  SmallVector<Value> fresh;
                  Value chunk = k.iadd(k.imul(following, k.c(u)), k.c(c));
                  Value off = ordered ? order.chunks(chunk)
                                      : k.imul(chunk, k.c(chunkStep));
                  for (int64_t v = 0; v < laneBytes / 16; ++v)
                    fresh.push_back(weightLoad(
                        k.gep(wAt, k.iadd(off, k.c(8 * nt * rowBytes + 16 * v)),
                              k.b.getI8Type())));
                  return fresh;
                });
            for (const SmallVector<Value> &words : raw)
              out.append(words.begin(), words.end());
            return out;
          });
      SmallVector<SmallVector<Value>> last = unpack(carried);
      acc = mmaGroup(k.c(groups - 1), last,
                     ValueRange(carried).take_front(4 * tiles));
    } else {
      if (earlyGroup) {
        // Group 0 from the early loads, with the prefetch its loop step
        // would have issued.
        if (ahead > 0)
          prefetchGroup(k.c(ahead));
        acc = mmaGroup(k.c(0), raw0, acc);
      }
      acc = k.reduceN(k.c(earlyGroup ? 1 : 0), k.c(groups), acc,
                      [&](Value it, ValueRange a) -> SmallVector<Value> {
                        if (ahead > 0)
                          prefetchGroup(k.iadd(it, k.c(ahead)));
                        SmallVector<SmallVector<Value>> raw = loadGroup(it);
                        return mmaGroup(it, raw, a);
                      });
    }
    // --gpu-prologue-cluster-reload: the epilogue's pointers, loaded
    // now (they complete during the cluster barrier).
    const PrologueBuffers eb = prologueClusterReload ? b.reloaded(g, s) : b;
    // Every CTA of the cluster has started (its shared memory exists).
    NVVM::ClusterWaitOp::create(k.b, k.loc, UnitAttr());
    // Lane (q, i) holds tokens q (acc 0, 1) and q + 8 (acc 2, 3) of rows
    // 8 nt + 2 i and + 1 of each tile: to slot [rank][t / N] of CTA t mod
    // N.
    auto v2f32 = VectorType::get({2}, k.f32);
    for (int64_t h = 0; h < 2; ++h) {
      Value t = k.iadd(quad, k.c(8 * h));
      k.ifThen(k.icmp(CmpI::ult, t, Tb), [&] {
        Value owner =
            arith::IndexCastOp::create(k.b, k.loc, k.i32, k.irem(t, k.c(n)));
        // The per-tensor scale and the row's 2^-s_t.
        Value factor = k.mul(scale, k.loadF(downs, t, k.f32));
        Value base = NVVM::MapaOp::create(k.b, k.loc, clusterPtr, recv, owner);
        Value slot = k.imul(k.iadd(k.imul(rank, k.c(local)), k.idiv(t, k.c(n))),
                            k.c(kTileN));
        for (int64_t nt = 0; nt < tiles; ++nt) {
          Value row = k.iadd(k.imul(g.warp, k.c(8 * tiles)),
                             k.iadd(k.c(8 * nt), k.imul(inQuad, k.c(2))));
          Value v = LLVM::UndefOp::create(k.b, k.loc, v2f32);
          for (int64_t e = 0; e < 2; ++e)
            v = LLVM::InsertElementOp::create(
                k.b, k.loc, v, k.mul(acc[4 * nt + 2 * h + e], factor),
                g.ci32(e));
          Value at =
              LLVM::GEPOp::create(k.b, k.loc, clusterPtr, k.f32, base,
                                  ValueRange{arith::IndexCastOp::create(
                                      k.b, k.loc, k.i64, k.iadd(slot, row))});
          if (!asyncSums) {
            LLVM::StoreOp::create(k.b, k.loc, v, at, /*alignment=*/8);
            continue;
          }
          // st.async: 8 bytes to the owner's slot, completing on its
          // mbarrier.
          stAsyncSums(
              k, at,
              {LLVM::ExtractElementOp::create(k.b, k.loc, v, g.ci32(0)),
               LLVM::ExtractElementOp::create(k.b, k.loc, v, g.ci32(1))},
              NVVM::MapaOp::create(k.b, k.loc, clusterPtr, sumsBar, owner));
        }
      });
    }
    if (!asyncSums) {
      NVVM::ClusterArriveOp::create(k.b, k.loc, UnitAttr());
      NVVM::ClusterWaitOp::create(k.b, k.loc, UnitAttr());
    }
    Value sums = LLVM::AddrSpaceCastOp::create(k.b, k.loc, k.ptrT, recv);
    Value t = k.iadd(k.imul(g.warp, k.c(n)), rank);
    // --gpu-prologue-cluster-epilogue-loads-first: the wait inside the
    // epilogue, after its loads that do not depend on the sums.
    const bool loadsFirst = asyncSums && prologueClusterEpilogueLoadsFirst;
    k.ifThen(
        g.andI(k.icmp(CmpI::ult, g.warp, k.c(local)), k.icmp(CmpI::ult, t, Tb)),
        [&] {
          // The CTA's tokens' sums, all of them (acquire at cluster scope:
          // the senders' st.async release).
          if (asyncSums && !loadsFirst)
            waitSumsBarrier(k, sumsBar, parity);
          prologueByKind(g, s, gh, [&](int kind, Value head) {
            prologueRowEpilogue(
                g, s, eb, kind, head, k.iadd(base, t), gh, T, [&] {
                  if (loadsFirst)
                    waitSumsBarrier(k, sumsBar, parity);
                  SmallVector<Value> v;
                  for (int64_t e = 0; e < 4; ++e) {
                    Value c = k.iadd(k.iadd(k.imul(g.warp, k.c(kTileN)),
                                            k.imul(g.lane, k.c(4))),
                                     k.c(e));
                    Value total = k.loadF(sums, c, k.f32);
                    for (int64_t r = 1; r < n; ++r)
                      total = k.add(total,
                                    k.loadF(sums,
                                            k.iadd(c, k.c(r * local * kTileN)),
                                            k.f32));
                    v.push_back(total);
                  }
                  return v;
                });
          });
        });
    // The sums' slots and the input rows are taken again by the next pass:
    // every CTA has read its sums (a release arrival, waited for before
    // the next pass's sends).
    if (passes)
      k.ifThen(k.icmp(CmpI::slt, k.iadd(base, k.c(kClusterMmaTokens)), T),
               [&] { NVVM::ClusterArriveOp::create(k.b, k.loc, UnitAttr()); });
  };
  auto body = [&] {
    // Pass 0's tokens (all of them in part 3).
    Value T0 = passes ? k.c(kClusterMmaTokens) : T;
    if (asyncSums)
      initSumsBarrier(
          g, sumsBar, [&] { return hasTokens(T0); },
          [&] { return sumsBytes(T0); });
    NVVM::ClusterArriveRelaxedOp::create(k.b, k.loc, UnitAttr());
    if (noL1MinTokens > minTokens && noL1MinTokens <= maxTokens) {
      // The pass twice: no-L1 weight loads from noL1MinTokens tokens,
      // generic ones below (T is the same in every thread).
      g.ifElse(
          k.icmp(CmpI::sge, T, k.c(noL1MinTokens)), {},
          [&]() -> SmallVector<Value> {
            weightsNoL1 = true;
            pass(k.c(0), T0, /*first=*/true, Value());
            weightsNoL1 = false;
            return {};
          },
          [&]() -> SmallVector<Value> {
            pass(k.c(0), T0, /*first=*/true, Value());
            return {};
          });
      return;
    }
    if (noL1MinTokens > 0 && noL1MinTokens <= minTokens)
      weightsNoL1 = true;
    pass(k.c(0), T0, /*first=*/true, Value());
    if (!passes)
      return;
    // Passes 1 .. ceil(T / 16) - 1.
    k.loop(
        k.c(1),
        k.idiv(k.iadd(T, k.c(kClusterMmaTokens - 1)), k.c(kClusterMmaTokens)),
        [&](Value p) {
          Value base = k.imul(p, k.c(kClusterMmaTokens));
          Value left = g.isub(T, base);
          Value Tb = k.select(k.icmp(CmpI::slt, left, k.c(kClusterMmaTokens)),
                              left, k.c(kClusterMmaTokens));
          pass(
              base, Tb, /*first=*/false,
              arith::IndexCastOp::create(k.b, k.loc, k.i32, k.irem(p, k.c(2))));
        });
  };
  stepOrWait(g, launched, body, earlyGroup);
}

bool moeRouterFits(msa::MoERouterOp op, int64_t threads) {
  Type ie = elementOf(op.getInput()), ge = elementOf(op.getGateWeight());
  return (ie.isBF16() || ie.isF32()) && (ge.isBF16() || ge.isF32()) &&
         shapeOf(op.getGateWeight())[0] <= 1024;
}

/// Part 0: the sigmoid score of every (token, expert), one warp each, into
/// the workspace (spread over the whole GPU, so the gate matrix streams at
/// full bandwidth even for one token). Part 1: one CTA per token; thread 0
/// takes the top-k by biased score (ties: lower id) and normalizes, as the
/// host does.
void moeRouterKernel(GK &g, msa::MoERouterOp op, int64_t part) {
  KB &k = g.k;
  const bool hasBias = static_cast<bool>(op.getCorrectionBias());
  Value in = k.ptr(0), gate = k.ptr(1);
  Value bias = hasBias ? k.ptr(2) : Value();
  Value weights = k.ptr(hasBias ? 3 : 2), ids = k.ptr(hasBias ? 4 : 3),
        work = k.ptr(hasBias ? 5 : 4);
  const int64_t h = shapeOf(op.getInput())[1],
                e = shapeOf(op.getGateWeight())[0], topK = op.getTopK();
  Type ie = elementOf(op.getInput()), ge = elementOf(op.getGateWeight());
  const float rsf = op.getRoutedScalingFactor().convertToFloat();
  const bool renorm = op.getRenormalize();
  if (part == 0) {
    g.warpLoop(k.imul(k.scalar(0), k.c(e)), [&](Value item) {
      Value t = k.idiv(item, k.c(e)), x = k.irem(item, k.c(e));
      Value logit = warpDot(g, in, k.imul(t, k.c(h)), ie, plainWeight(gate, ge),
                            k.imul(x, k.c(h)), h);
      Value sv = k.sigmoid(logit);
      k.ifThen(g.eq(g.lane, k.c(0)), [&] { k.storeF(work, item, sv, k.f32); });
    });
    return;
  }
  Value score = g.shared(k.f32, e), biased = g.shared(k.f32, e);
  g.ctaLoop(k.scalar(0), [&](Value t) {
    g.strided(g.tid, k.c(e), [&](Value x) {
      Value sv = k.loadF(work, k.iadd(k.imul(t, k.c(e)), x), k.f32);
      k.storeF(score, x, sv, k.f32);
      k.storeF(biased, x, hasBias ? k.add(sv, k.loadF(bias, x, k.f32)) : sv,
               k.f32);
    });
    g.sync();
    k.ifThen(g.eq(g.tid, k.c(0)), [&] {
      routerTopK(k, score, biased, weights, ids, t, e, topK, rsf, renorm);
    });
    g.sync();
  });
}

static TuningOpt<bool>
    rmsNormRowPerCta("gpu-rms-norm-cta", true,
                     "msa.rms_norm rows of 8 to 64 channels per thread on a "
                     "CTA each, in one pass (false: a warp per row; tuning)");

/// Most 16-byte steps of x per thread of rmsNormKernel's CTA rows.
constexpr int64_t kRMSNormCtaSteps = 8;

/// msa.rms_norm: a CTA per row for long rows, else one warp per row (sum
/// of squares, then the scaled row).
void rmsNormKernel(GK &g, msa::RMSNormOp op) {
  KB &k = g.k;
  Value in = k.ptr(0), w = k.ptr(1), out = k.ptr(2);
  const RMSNormShape s(op);
  const int64_t n = s.n, rowsPerToken = s.rowsPerToken;
  Type ie = s.ie, we = s.we;
  const float eps = s.eps;
  const bool offset = s.offset;
  // Long rows (the hidden state's, 6,144 channels in M3: 6 steps of 8
  // channels per thread of 128): a CTA per row. Every thread issues the
  // loads of its channels of x and of the weight at once, keeps them in
  // registers, and the sum of squares goes through the warps' sums in
  // shared memory; one pass, one wait for memory. A warp per row (below)
  // walks the row twice, a chain of dependent loads each time: on the H200
  // (docs/perf.md, twenty-fifth session) M3's norm of one token took 6.7 us
  // of a decode step's CUDA graph that way, 13.4 us at 8-16 tokens.
  if (rmsNormRowPerCta && n % (g.threads * 8) == 0 &&
      n / (g.threads * 8) <= kRMSNormCtaSteps) {
    const int64_t steps = n / (g.threads * 8);
    Value partial = g.shared(k.f32, g.warps);
    g.ctaLoop(k.imul(k.scalar(0), k.c(rowsPerToken)), [&](Value r) {
      Value base = k.imul(r, k.c(n));
      SmallVector<Value> cols;
      SmallVector<SmallVector<Value>> xs, ws;
      for (int64_t step = 0; step < steps; ++step) {
        cols.push_back(k.imul(k.iadd(k.c(step * g.threads), g.tid), k.c(8)));
        xs.push_back(g.load8(in, k.iadd(base, cols.back()), ie));
        ws.push_back(g.load8(w, cols.back(), we));
      }
      Value ss = k.cf(0);
      for (int64_t step = 0; step < steps; ++step)
        for (int64_t e = 0; e < 8; ++e)
          ss = k.add(ss, k.mul(xs[step][e], xs[step][e]));
      ss = g.warpSum(ss);
      k.ifThen(g.eq(g.lane, k.c(0)),
               [&] { k.storeF(partial, g.warp, ss, k.f32); });
      g.sync();
      Value total = k.loadF(partial, k.c(0), k.f32);
      for (int64_t i = 1; i < g.warps; ++i)
        total = k.add(total, k.loadF(partial, k.c(i), k.f32));
      // The next row's sums wait until every thread has read these.
      g.sync();
      Value inv = rmsInverse(k, total, n, eps);
      for (int64_t step = 0; step < steps; ++step)
        for (int64_t e = 0; e < 8; ++e)
          k.storeF(out, k.iadd(k.iadd(base, cols[step]), k.c(e)),
                   rmsNormValue(k, xs[step][e], inv, ws[step][e], offset), ie);
    });
    return;
  }
  g.warpLoop(k.imul(k.scalar(0), k.c(rowsPerToken)), [&](Value r) {
    Value base = k.imul(r, k.c(n));
    Value ss = warpDot(g, in, base, ie, plainWeight(in, ie), base, n);
    Value inv = rmsInverse(k, ss, n, eps);
    if (n % (kWarp * 8) == 0) {
      // 8 channels per lane with 16-byte loads, several steps at once.
      const int64_t iters = n / (kWarp * 8), u = unrollOf(iters);
      auto loop =
          scf::ForOp::create(k.b, k.loc, k.c(0), k.c(iters / u), k.c(1));
      OpBuilder::InsertionGuard guard(k.b);
      k.b.setInsertionPoint(loop.getBody()->getTerminator());
      SmallVector<Value> cols;
      SmallVector<SmallVector<Value>> xs, ws;
      for (int64_t step = 0; step < u; ++step) {
        Value at = k.iadd(k.imul(loop.getInductionVar(), k.c(u)), k.c(step));
        cols.push_back(
            k.iadd(k.imul(at, k.c(kWarp * 8)), k.imul(g.lane, k.c(8))));
        xs.push_back(g.load8(in, k.iadd(base, cols.back()), ie));
        ws.push_back(g.load8(w, cols.back(), we));
      }
      for (int64_t step = 0; step < u; ++step)
        for (int64_t e = 0; e < 8; ++e)
          k.storeF(out, k.iadd(k.iadd(base, cols[step]), k.c(e)),
                   rmsNormValue(k, xs[step][e], inv, ws[step][e], offset), ie);
      return;
    }
    auto loop = scf::ForOp::create(k.b, k.loc, g.lane, k.c(n), k.c(kWarp));
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPoint(loop.getBody()->getTerminator());
    Value i = loop.getInductionVar();
    Value x = k.loadF(in, k.iadd(base, i), ie);
    k.storeF(out, k.iadd(base, i),
             rmsNormValue(k, x, inv, k.loadF(w, i, we), offset), ie);
  });
}

/// One thread per element of the T x H output.
void embeddingKernel(GK &g, msa::EmbeddingOp op) {
  KB &k = g.k;
  Value ids = k.ptr(0), table = k.ptr(1), out = k.ptr(2);
  const int64_t h = shapeOf(op.getTable())[1];
  Type te = elementOf(op.getTable()), oe = elementOf(op.getResult());
  threadLoop(g, k.imul(k.scalar(0), k.c(h)), [&](Value i) {
    Value t = k.idiv(i, k.c(h)), col = k.irem(i, k.c(h));
    Value row = k.loadIndex(ids, t);
    k.storeF(out, i, k.loadF(table, k.iadd(k.imul(row, k.c(h)), col), te), oe);
  });
}

/// One thread per element of the T x heads x D values (bf16, f32 and FP8
/// caches: KB::storeF's conversion, as the host kernel's storeCacheRow);
/// for NVFP4 caches one thread per 16-channel block, quantized by
/// storeNVFP4Block as the host kernel does.
void kvInsertKernel(GK &g, msa::KVCacheInsertOp op) {
  KB &k = g.k;
  Value cache = k.ptr(0), table = k.ptr(1), seqs = k.ptr(2), pos = k.ptr(3),
        values = k.ptr(4);
  msa::PagedCacheType type = op.getCache().getType();
  const int64_t heads = type.getHeads(), d = type.getHeadDim(),
                page = type.getPageSize();
  Type ve = elementOf(op.getValues()), ce = type.getElementType();
  if (isNVFP4Cache(type)) {
    const int64_t blocks = d / 16;
    threadLoop(g, k.imul(k.scalar(0), k.c(heads * blocks)), [&](Value i) {
      Value t = k.idiv(i, k.c(heads * blocks));
      Value hh = k.irem(k.idiv(i, k.c(blocks)), k.c(heads));
      Value j = k.irem(i, k.c(blocks));
      Value p = k.loadIndex(pos, t);
      Value phys = pageOf(k, table, k.loadIndex(seqs, t), k.idiv(p, k.c(page)));
      CacheRow dst = cacheRow(k, cache, type, phys, hh, k.irem(p, k.c(page)));
      Value src = k.imul(k.iadd(k.imul(t, k.c(heads)), hh), k.c(d));
      storeNVFP4Block(k, dst, j, [&](Value c) {
        return k.loadF(values, k.iadd(src, c), ve);
      });
    });
    return;
  }
  threadLoop(g, k.imul(k.scalar(0), k.c(heads * d)), [&](Value i) {
    Value t = k.idiv(i, k.c(heads * d));
    Value hh = k.irem(k.idiv(i, k.c(d)), k.c(heads)), c = k.irem(i, k.c(d));
    Value p = k.loadIndex(pos, t);
    Value phys = pageOf(k, table, k.loadIndex(seqs, t), k.idiv(p, k.c(page)));
    Value dst = cacheOffset(k, phys, hh, k.irem(p, k.c(page)), type);
    k.storeF(cache, k.iadd(dst, c), k.loadF(values, i, ve), ce);
  });
}

/// One thread per rotated pair and per passed-through channel. The
/// inverse frequencies theta^(-2i/r) are the host's, folded at compile
/// time into a constant table.
void ropeKernel(GK &g, msa::RoPEOp op) {
  KB &k = g.k;
  Value in = k.ptr(0), pos = k.ptr(1), out = k.ptr(2);
  ArrayRef<int64_t> sh = shapeOf(op.getInput());
  const int64_t heads = sh[1], d = sh[2], r = op.getRotaryDim(), half = r / 2;
  const bool interleaved = op.getInterleaved();
  const double theta = op.getTheta().convertToDouble();
  Type e = elementOf(op.getInput());
  Value table = g.constantTable(ropeInverseFrequencies(theta, r));
  const int64_t per = half + (d - r); // work items per (token, head)
  threadLoop(g, k.imul(k.scalar(0), k.c(heads * per)), [&](Value w) {
    Value th = k.idiv(w, k.c(per)), i = k.irem(w, k.c(per));
    Value t = k.idiv(th, k.c(heads));
    Value base = k.imul(th, k.c(d));
    Value rotated = k.icmp(CmpI::ult, i, k.c(half));
    g.ifElse(
        rotated, {},
        [&]() -> SmallVector<Value> {
          Value p = arith::SIToFPOp::create(
              k.b, k.loc, k.f32,
              arith::IndexCastOp::create(k.b, k.loc, k.i64,
                                         k.loadIndex(pos, t)));
          Value angle = k.mul(p, k.loadF(table, i, k.f32));
          Value cs = math::CosOp::create(k.b, k.loc, angle);
          Value sn = math::SinOp::create(k.b, k.loc, angle);
          Value ia = interleaved ? k.imul(i, k.c(2)) : i;
          Value ib = interleaved ? k.iadd(k.imul(i, k.c(2)), k.c(1))
                                 : k.iadd(i, k.c(half));
          Value a = k.loadF(in, k.iadd(base, ia), e);
          Value bb = k.loadF(in, k.iadd(base, ib), e);
          k.storeF(out, k.iadd(base, ia), k.sub(k.mul(a, cs), k.mul(bb, sn)),
                   e);
          k.storeF(out, k.iadd(base, ib), k.add(k.mul(bb, cs), k.mul(a, sn)),
                   e);
          return {};
        },
        [&]() -> SmallVector<Value> {
          Value c = k.iadd(g.isub(i, k.c(half)), k.c(r));
          k.storeF(out, k.iadd(base, c), k.loadF(in, k.iadd(base, c), e), e);
          return {};
        });
  });
}

//===----------------------------------------------------------------------===//
// Indexer on warpgroup MMA (sm_90a)
//===----------------------------------------------------------------------===//

static TuningOpt<bool>
    indexWgmma("gpu-index-wgmma", false,
               "On targets with warpgroup MMA (sm_90a), the indexer "
               "scores FP8 and NVFP4 index keys with wgmma.mma_async "
               "(indexScoreWgmmaKernel): faster with NVFP4 keys, but "
               "the tensor core accumulates the E4M3 products with "
               "less than FP32 precision (index scores off by about "
               "3e-4 of their largest; default off: mma.sync, exact "
               "FP32 sums)");

static TuningOpt<int> indexWgmmaCtasPerSM(
    "gpu-index-wgmma-ctas-per-sm", 0,
    "CTAs per multiprocessor of the wgmma indexer, bounded "
    "by 227 KiB of shared memory (default 0: 6 with the keys "
    "in registers, 8 with the keys in shared memory; "
    "tuning)");

static TuningOpt<bool> indexWgmmaRegisterKeys(
    "gpu-index-wgmma-register-keys", true,
    "The wgmma indexer takes the keys as A from registers "
    "(each warp's 16 rows of a 64-key tile in the mma "
    "fragment layout; the default) or from shared memory "
    "(=false; tuning)");

static TuningOpt<bool> indexWgmmaPromote(
    "gpu-index-wgmma-promote", false,
    "The wgmma indexer starts a fresh accumulator for each 32-channel "
    "k-step and adds the k-steps' sums in FP32 registers (in k order), so "
    "that the tensor core's reduced-precision accumulation spans 32 "
    "products instead of dI (keys from registers only; M3's index scores "
    "on an H100: 7.5e-5 of the largest off FP32 sums against 4.8e-4, "
    "still above the spec's top-k gate; docs/perf.md, fortieth session)");

/// Shared-memory bytes of the wgmma indexer's operands: the token's
/// queries (B: 8 rows of dI E4M3 bytes) and, unless the keys are taken
/// from registers, the block's keys (A: page rows of dI E4M3 bytes), both
/// in the K-major no-swizzle core-matrix layout.
int64_t indexWgmmaOperandBytes(msa::PagedCacheType type) {
  const int64_t keyRows = indexWgmmaRegisterKeys ? 0 : type.getPageSize();
  return (keyRows + 8) * type.getHeadDim();
}

/// True when msa.index_score takes indexScoreWgmmaKernel on targets with
/// warpgroup MMA: with --gpu-index-wgmma (off by default: its sums are not
/// FP32-exact, see indexScoreWgmmaKernel for that and the H200 numbers),
/// when it fits: FP8 or NVFP4
/// index keys (E4M3 products, the spec's Q8KV8 / Q8KV4 contract), one key
/// head, bf16 queries, at most 8 index heads (the wgmma's N = 8), dI a
/// multiple of 32 (the k of one E4M3 wgmma) up to 256, a page a multiple
/// of 64 keys (the wgmma's M), whose copies divide evenly among the 128
/// threads, and operands that fit the 48 KiB of static shared memory.
bool indexScoreWgmmaFits(msa::IndexScoreOp op) {
  msa::PagedCacheType type = op.getIndexCache().getType();
  const int64_t d = type.getHeadDim(), page = type.getPageSize(),
                groups = shapeOf(op.getIndexQueries())[1];
  const int64_t pieces = page * (d / 32); // of 32 channels
  return indexWgmma && isDecodedCache(type) && type.getHeads() == 1 &&
         elementOf(op.getIndexQueries()).isBF16() && groups <= 8 &&
         d % 32 == 0 && d <= 256 && page % 64 == 0 &&
         pieces % wgmma::kThreads == 0 &&
         indexWgmmaOperandBytes(type) + kNvfp4E4M3TableWords * 4 +
                 4 * groups * 4 <=
             48 * 1024;
}

/// The wgmma matrix descriptor of a K-major no-swizzle operand at byte
/// `offset` of the shared array at shared-window address `smemAddr` (i64),
/// with leading-dimension byte offset `lbo` (core matrix to the next along
/// K) and stride byte offset `sbo` (8-row group to the next):
/// wgmma::descriptor.
Value wgmmaDescriptorNoSwizzle(KB &k, Value smemAddr, Value offset, int64_t lbo,
                               int64_t sbo) {
  return wgmmaDescriptorWithBits(k, smemAddr, offset,
                                 wgmma::descriptorFixedBits(lbo, sbo));
}

/// `wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3` with A from
/// registers: `a` holds this thread's four A words in mma.m16n8k32's
/// 8-bit A fragment layout over its warp's 16 rows of the 64 (word 0: row
/// lane / 4, bytes k = 4 (lane % 4) + 0..3; word 1: row + 8; words 2 and
/// 3: k + 16), B (8 columns) comes from the shared-memory descriptor
/// `descB`, and `acc` (a struct of four f32) is added to unless
/// `accumulate` is false. Inline PTX, as the NVVM dialect's
/// WgmmaMmaAsyncOp takes A by descriptor only; the caller issues
/// wgmma.fence before and commit / wait after, and keeps `a` unchanged
/// until the wait (PTX ISA, wgmma.mma_async).
Value wgmmaE4M3RegisterA(KB &k, Value acc, ArrayRef<Value> a, Value descB,
                         bool accumulate) {
  SmallVector<Value> operands;
  for (int64_t i = 0; i < 4; ++i)
    operands.push_back(LLVM::ExtractValueOp::create(k.b, k.loc, acc, i));
  llvm::append_range(operands, a);
  operands.push_back(descB);
  operands.push_back(arith::ConstantOp::create(
      k.b, k.loc, k.b.getI32IntegerAttr(accumulate ? 1 : 0)));
  static constexpr const char *kAsm =
      "{\n.reg .pred p;\nsetp.ne.b32 p, $13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
      "{$0, $1, $2, $3}, {$8, $9, $10, $11}, $12, p, 1, 1;\n}";
  return LLVM::InlineAsmOp::create(
             k.b, k.loc, acc.getType(), operands, kAsm,
             "=f,=f,=f,=f,0,1,2,3,r,r,r,r,l,n", /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(k.b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             ArrayAttr())
      .getRes();
}

/// out[g, t, b] as indexScoreMmaKernel (E4M3 products: the queries rounded
/// to E4M3 times the keys' E4M3 values), scored by warpgroup MMA: CTAs of
/// one warpgroup, each taking one run of consecutive (t, b) items, one
/// item at a time.
///   - A (M = keys), by default from registers
///     (--gpu-index-wgmma-register-keys): per 64-key tile m, each thread
///     loads keys 64 m + 16 warp + lane / 4 (+ 8), channels
///     [(lane % 4) dI / 4, (lane % 4 + 1) dI / 4) (cacheRowRaw), turns
///     them into E4M3 words (indexKeyE4M3Words: FP8 as stored, NVFP4
///     decoded) and hands k-step s its words 2 s and 2 s + 1 as the A
///     fragment (wgmmaE4M3RegisterA): k position 4 (lane % 4) + j of
///     k-step s is channel (lane % 4) dI / 4 + 8 s + j, 16 + 4 (lane % 4)
///     + j is channel (lane % 4) dI / 4 + 8 s + 4 + j, the channel order
///     of indexScoreMmaKernel's lanes. With =false the block's page rows
///     of dI E4M3 bytes go to shared memory, K-major without swizzle: core
///     matrices of 8 keys x 16 channels (128 bytes, key r % 8 at byte
///     16 (r % 8)), key group r / 8 and channel group c / 16 at core
///     matrix (r / 8) (dI / 16) + c / 16 (leading-dimension byte offset
///     128, stride byte offset 8 dI), each thread loading and storing
///     32-channel pieces of keys.
///   - B (N = 8 index heads, rows past G zero): the token's queries
///     rounded to E4M3 (queryWordsToE4M3) in the same layout, rewritten
///     when the CTA's token changes; with register keys their channels
///     are permuted into the A fragment's k order above.
///   - wgmma.mma_async m64n8k32 e4m3 (native FP8 tensor cores: no
///     widening to f16, unlike mma.sync's E4M3 shape on sm_90), page / 64
///     key tiles x dI / 32 k-steps; each thread's accumulators hold keys
///     64 m + 16 warp + lane / 4 (+ 8) x heads 2 (lane % 4) (+ 1)
///     (wgmma::accumulatorRow / accumulatorCol), max-pooled over the
///     visible keys by shuffles and across the 4 warps in shared memory
///     (indexScoreStoreMaxima).
/// The tensor core accumulates E4M3 products with less than FP32
/// precision (the PTX ISA leaves it unspecified): on the H200 the scores
/// are off by up to 2e-4 to 6e-4 of the largest score against an FP32
/// sum (bench/m3_ops_check.py), where indexScoreMmaKernel's are exact;
/// in the first MSA layer of small models, 1 to 19 of the 2,000-3,400
/// (token, group) block lists of a 2,100-token prompt then differ from
/// the reference's (msac-host-check, docs/perf.md eighteenth session). The
/// spec sums in FP32 (msa-m3-spec §2.3), so the kernel is opt-in
/// (--gpu-index-wgmma).
///
/// On the H200 at 128K (docs/perf.md, seventeenth and eighteenth
/// sessions; us at batch 8 / 1) NVFP4 keys take, with the keys in
/// registers at 6 CTAs per SM (80 registers): 34.7-35.5 /
/// 11.4-11.7, against 40.0-40.6 / 11.3-11.7 with the keys in shared
/// memory at 8 CTAs, indexScoreMmaKernel's 41.3-41.8 / 12.0-12.2 and FP8
/// keys' 38.3-38.5 / 10.5-10.8 on indexScoreMmaKernel. At 8 CTAs per SM
/// the register-key kernel is capped at 64 registers, spills and ptxas
/// serializes its wgmmas (37.9-38.2); 4 and 5 CTAs give 37.1 / 10.4-10.6
/// and 36.1-36.3 / 10.8-10.9. With FP8 keys it is no faster than
/// indexScoreMmaKernel: they take 38.1-39.3 / 10.9-11.1 with the keys in
/// registers (4-5 CTAs) and 65-75 / 14-16 from shared memory. Staging the FP8
/// keys by cp.async (75-79 us at batch 8), strided items (NVFP4 43.0) and
/// loading the next item's keys during the current one (NVFP4 40.7-41.9 at 6-8
/// CTAs per SM, 12.1-13.1 at batch 1) were no better.
void indexScoreWgmmaKernel(GK &g, msa::IndexScoreOp op) {
  KB &k = g.k;
  MLIRContext *ctx = k.b.getContext();
  const IndexScoreArgs a(g, op);
  msa::PagedCacheType type = a.type;
  const int64_t groups = a.groups, d = a.d, page = a.page;
  const int64_t coreCols = d / 16;    // core matrices along K
  const int64_t sbo = coreCols * 128; // 8-row groups
  // With the keys in registers only B (the queries) is in shared memory.
  const bool regKeys = indexWgmmaRegisterKeys;
  const int64_t aBytes = regKeys ? 0 : page * d, bBytes = 8 * d;
  const int64_t ctas = std::clamp<int64_t>(
      indexWgmmaCtasPerSM > 0 ? indexWgmmaCtasPerSM.getValue()
      : regKeys               ? 6
                              : 8,
      1, (227 * 1024) / (indexWgmmaOperandBytes(type) + 2 * 1024));
  g.declareLaunch(g.threads, 0, ctas);
  auto sharedT = LLVM::LLVMPointerType::get(ctx, 3);
  Type i8 = k.b.getI8Type();
  Value smem = g.sharedSpace(i8, aBytes + bBytes, 128);
  Value smemAddr = LLVM::PtrToIntOp::create(k.b, k.loc, k.i64, smem);
  auto sharedByte = [&](Value byte) {
    return LLVM::GEPOp::create(k.b, k.loc, sharedT, i8, smem,
                               ValueRange{k.toI64(byte)});
  };
  // Byte of the 16 channels 16 c.. of key (or head) r in an operand.
  auto coreByte = [&](Value r, Value c) {
    return k.iadd(
        k.imul(k.iadd(k.imul(k.idiv(r, k.c(8)), k.c(coreCols)), c), k.c(128)),
        k.imul(k.irem(r, k.c(8)), k.c(16)));
  };
  auto fenceAsync = [&] {
    NVVM::FenceProxyOp::create(
        k.b, k.loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  };

  // NVFP4: the decode table in shared memory (as indexScoreMmaKernel).
  Value decodeTable;
  if (isNVFP4Cache(type) && !g.e2m1) {
    decodeTable = nvfp4E4M3TableInShared(g);
    NVVM::CpAsyncWaitGroupOp::create(k.b, k.loc, 0);
    g.sync();
  }

  // B: head h's channels 8 c8..8 c8 + 7 (E4M3 bytes; zero past G) per
  // task, 8 bytes at coreByte(h, c8 / 2) + 8 (c8 % 2).
  auto writeQueries = [&](Value t) {
    auto vec2 = VectorType::get({2}, k.i32);
    g.strided(g.tid, k.c(8 * (d / 8)), [&](Value j) {
      Value h = k.idiv(j, k.c(d / 8)), c8 = k.irem(j, k.c(d / 8));
      Value inGroup = k.icmp(CmpI::ult, h, k.c(groups));
      Value qRow = k.iadd(k.imul(t, k.c(groups)), g.imin(h, k.c(groups - 1)));
      SmallVector<Value> qw = g.loadWords(
          a.q, k.iadd(k.imul(qRow, k.c(d / 2)), k.imul(c8, k.c(4))), 4, true);
      SmallVector<Value> e = queryWordsToE4M3(g, qw);
      if (regKeys) {
        // Channels 8 c8.. are bytes 8 s.. of quad q's d / 4 channels (q =
        // 8 c8 / (d / 4), s = 8 c8 % (d / 4) / 8): k positions 4 q..4 q + 3
        // and 16 + 4 q.. of k-step s, where the A fragment puts them.
        Value qd = k.idiv(c8, k.c(d / 32)), st = k.irem(c8, k.c(d / 32));
        for (int64_t i = 0; i < 2; ++i) {
          Value at = k.iadd(coreByte(h, k.iadd(k.imul(st, k.c(2)), k.c(i))),
                            k.imul(qd, k.c(4)));
          LLVM::StoreOp::create(k.b, k.loc, k.select(inGroup, e[i], g.ci32(0)),
                                sharedByte(at), 4);
        }
        return;
      }
      Value v = LLVM::PoisonOp::create(k.b, k.loc, vec2);
      for (int64_t i = 0; i < 2; ++i)
        v = LLVM::InsertElementOp::create(
            k.b, k.loc, v, k.select(inGroup, e[i], g.ci32(0)), g.ci32(i));
      Value at =
          k.iadd(k.c(aBytes), k.iadd(coreByte(h, k.idiv(c8, k.c(2))),
                                     k.imul(k.irem(c8, k.c(2)), k.c(8))));
      LLVM::StoreOp::create(k.b, k.loc, v, sharedByte(at), 8);
    });
  };

  // A: the block's keys into shared memory. loadKeys issues one item's key
  // loads into registers (the raw FP8 bytes or NVFP4 codes and scales,
  // cacheRowRaw), storeKeys decodes them (indexKeyE4M3Words) and stores
  // them; the query write sits between the two, under the loads' latency.
  // Piece j of the block (32 channels of a
  // key) is key r = 8 (j / (8 P)) + j % 8, piece j / 8 % P of its row (P =
  // dI / 32 pieces per row): eight consecutive threads fill two core
  // matrices of 128 contiguous bytes, a warp reads whole sectors of 8 keys.
  const int64_t P = d / 32;
  const int64_t perThread = regKeys ? 0 : page * P / g.threads;
  Value quad = k.irem(g.lane, k.c(4)), row = k.idiv(g.lane, k.c(4));
  // With regKeys, this thread's A rows: key 64 m + 16 warp + lane / 4 (+ 8)
  // of each 64-key tile m, channels [quad dI / 4, (quad + 1) dI / 4)
  // (cacheRowRaw of dI / 4 channels, tile-major, row then row + 8).
  const int64_t regRawWords = cacheRowRawWords(type, d / 4);
  auto loadRegisterKeys = [&](Value phys) {
    SmallVector<Value> raw;
    for (int64_t m = 0; m < page / 64; ++m)
      for (int64_t half = 0; half < 2; ++half) {
        Value key = k.iadd(k.iadd(k.imul(g.warp, k.c(16)), row),
                           k.c(64 * m + 8 * half));
        llvm::append_range(raw, cacheRowRaw(g, type, a.cache, phys, k.c(0), key,
                                            k.imul(quad, k.c(d / 4)), d / 4));
      }
    return raw;
  };
  const int64_t rawWords = cacheRowRawWords(type, 32);
  SmallVector<Value> keys, pieces;
  for (int64_t i = 0; i < perThread; ++i) {
    Value j = k.iadd(g.tid, k.c(i * g.threads));
    keys.push_back(
        k.iadd(k.imul(k.idiv(j, k.c(8 * P)), k.c(8)), k.irem(j, k.c(8))));
    pieces.push_back(k.irem(k.idiv(j, k.c(8)), k.c(P)));
  }
  auto loadKeys = [&](Value phys) {
    SmallVector<Value> raw;
    for (int64_t i = 0; i < perThread; ++i)
      llvm::append_range(raw,
                         cacheRowRaw(g, type, a.cache, phys, k.c(0), keys[i],
                                     k.imul(pieces[i], k.c(32)), 32));
    return raw;
  };
  auto storeKeys = [&](ValueRange raw) {
    auto vec4 = VectorType::get({4}, k.i32);
    for (int64_t i = 0; i < perThread; ++i) {
      SmallVector<Value> w = indexKeyE4M3Words(
          g, type, SmallVector<Value>(raw.slice(i * rawWords, rawWords)), 32,
          decodeTable);
      for (int64_t half = 0; half < 2; ++half) {
        Value v = LLVM::PoisonOp::create(k.b, k.loc, vec4);
        for (int64_t e = 0; e < 4; ++e)
          v = LLVM::InsertElementOp::create(k.b, k.loc, v, w[4 * half + e],
                                            g.ci32(e));
        Value c = k.iadd(k.imul(pieces[i], k.c(2)), k.c(half));
        LLVM::StoreOp::create(k.b, k.loc, v, sharedByte(coreByte(keys[i], c)),
                              16);
      }
    }
  };

  auto accT = LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(4, k.f32)); // m64n8: 64 x 8 / 128 per thread
  auto wgmmaOp = [&](Value acc, Value descA, Value descB, bool accumulate) {
    auto e4m3 = NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::e4m3);
    return NVVM::WgmmaMmaAsyncOp::create(
               k.b, k.loc, accT, acc, descA, descB,
               NVVM::MMAShapeAttr::get(ctx, 64, 8, 32), e4m3, e4m3,
               NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
               NVVM::WGMMAScaleOutAttr::get(
                   ctx, accumulate ? NVVM::WGMMAScaleOut::one
                                   : NVVM::WGMMAScaleOut::zero),
               NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
               NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
               NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
               NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::col),
               /*satfinite=*/nullptr)
        .getResult();
  };

  Value negInf = k.cf(-INFINITY);
  auto i32Of = [&](Value v) {
    return arith::IndexCastOp::create(k.b, k.loc, k.i32, v).getResult();
  };
  // The first key of this thread's accumulators: 16 warp + lane / 4.
  Value key0 = i32Of(k.iadd(k.imul(g.warp, k.c(16)), row));

  // Each CTA scores one run of consecutive items w = (t, b) = (w / MB, w %
  // MB), [c n, min((c + 1) n, T MB)) for CTA c and n = ceil(T MB / CTAs):
  // consecutive items mostly share their token (its position, sequence and
  // queries) and read neighbouring block-table entries.
  Value items = k.imul(a.T, a.MB);
  Value per = k.idiv(k.iadd(items, g.isub(g.numCtas, k.c(1))), g.numCtas);
  Value first = k.imul(g.ctaId, per);
  Value end = g.imin(k.iadd(first, per), items);
  auto loop =
      scf::ForOp::create(k.b, k.loc, first, end, k.c(1), ValueRange{k.c(-1)});
  {
    OpBuilder::InsertionGuard guard(k.b);
    k.b.setInsertionPointToEnd(loop.getBody());
    Value w = loop.getInductionVar();
    Value held = loop.getRegionIterArgs()[0];
    Value t = k.idiv(w, a.MB), blk = k.irem(w, a.MB);
    Value p = k.loadIndex(a.pos, t), seq = k.loadIndex(a.seqs, t);
    Value past = k.icmp(CmpI::sgt, blk, k.idiv(p, k.c(page)));
    // The key loads first, then the token's queries when it changed (every
    // thread has passed the previous item's wgmma and
    // indexScoreStoreMaxima's barriers), the decoded keys, the fence that
    // makes these stores visible to the async proxy, and every thread's.
    Value notPast = arith::XOrIOp::create(
        k.b, k.loc, past,
        arith::ConstantOp::create(k.b, k.loc, k.b.getBoolAttr(true)));
    if (!regKeys)
      k.ifThen(notPast, [&] {
        SmallVector<Value> raw = loadKeys(pageOf(k, a.table, seq, blk));
        k.ifThen(k.icmp(CmpI::ne, t, held), [&] { writeQueries(t); });
        storeKeys(raw);
        fenceAsync();
        g.sync();
      });
    g.ifElse(
        past, {},
        [&]() -> SmallVector<Value> {
          indexScorePastBlock(g, a, negInf, t, blk);
          return {};
        },
        [&]() -> SmallVector<Value> {
          // With regKeys: the keys into registers, the token's queries
          // when it changed (made visible to the async proxy and every
          // thread), the keys' E4M3 words as the A fragments.
          SmallVector<SmallVector<Value>> aWords;
          if (regKeys) {
            SmallVector<Value> raw =
                loadRegisterKeys(pageOf(k, a.table, seq, blk));
            k.ifThen(k.icmp(CmpI::ne, t, held), [&] {
              writeQueries(t);
              fenceAsync();
              g.sync();
            });
            for (int64_t r = 0; r < 2 * (page / 64); ++r)
              aWords.push_back(indexKeyE4M3Words(
                  g, type,
                  SmallVector<Value>(
                      ArrayRef<Value>(raw).slice(r * regRawWords, regRawWords)),
                  d / 4, decodeTable));
          }
          NVVM::WgmmaFenceAlignedOp::create(k.b, k.loc);
          SmallVector<Value> acc;
          // With --gpu-index-wgmma-promote: every k-step's own
          // accumulator (register A only), summed after the wait.
          const bool promote = indexWgmmaPromote && regKeys;
          for (int64_t m = 0; m < page / 64; ++m) {
            Value c = LLVM::PoisonOp::create(k.b, k.loc, accT);
            SmallVector<Value> steps; // promote: each k-step's own sums
            for (int64_t s = 0; s < d / 32; ++s) {
              Value descA = regKeys ? Value()
                                    : wgmmaDescriptorNoSwizzle(
                                          k, smemAddr,
                                          k.c(m * 8 * sbo + s * 256), 128, sbo);
              Value descB = wgmmaDescriptorNoSwizzle(
                  k, smemAddr, k.c(aBytes + s * 256), 128, sbo);
              if (!regKeys) {
                c = wgmmaOp(c, descA, descB, /*accumulate=*/s > 0);
                continue;
              }
              ArrayRef<Value> r0 = aWords[2 * m], r8 = aWords[2 * m + 1];
              Value in = promote ? LLVM::PoisonOp::create(k.b, k.loc, accT) : c;
              Value out = wgmmaE4M3RegisterA(
                  k, in, {r0[2 * s], r8[2 * s], r0[2 * s + 1], r8[2 * s + 1]},
                  descB, /*accumulate=*/!promote && s > 0);
              if (promote)
                steps.push_back(out);
              else
                c = out;
            }
            if (promote) {
              // The tile's k-steps done before the next tile's start (their
              // accumulators and A words freed), summed in k order.
              NVVM::WgmmaGroupSyncAlignedOp::create(k.b, k.loc);
              NVVM::WgmmaWaitGroupSyncOp::create(k.b, k.loc, 0);
              for (int64_t i = 0; i < 4; ++i) {
                Value sum =
                    LLVM::ExtractValueOp::create(k.b, k.loc, steps[0], i);
                for (size_t t = 1; t < steps.size(); ++t)
                  sum = k.add(sum, LLVM::ExtractValueOp::create(k.b, k.loc,
                                                                steps[t], i));
                c = LLVM::InsertValueOp::create(k.b, k.loc, c, sum, i);
              }
              if (m + 1 < page / 64)
                NVVM::WgmmaFenceAlignedOp::create(k.b, k.loc);
            }
            acc.push_back(c);
          }
          if (!promote) {
            NVVM::WgmmaGroupSyncAlignedOp::create(k.b, k.loc);
            NVVM::WgmmaWaitGroupSyncOp::create(k.b, k.loc, 0);
          }
          // Keys past the token's position (slot > min(p - b page, page))
          // never win; neither does a NaN score.
          Value last =
              i32Of(g.imin(g.isub(p, k.imul(blk, k.c(page))), k.c(page)));
          SmallVector<Value> mh(2, negInf);
          for (int64_t m = 0; m < page / 64; ++m)
            for (int64_t i = 0; i < 4; ++i) {
              Value visible = arith::CmpIOp::create(
                  k.b, k.loc, CmpI::sle, key0,
                  arith::SubIOp::create(k.b, k.loc, last,
                                        g.ci32(64 * m + 8 * (i / 2))));
              Value sc =
                  k.mul(LLVM::ExtractValueOp::create(k.b, k.loc, acc[m], i),
                        k.cf(a.scale));
              Value better = g.andI(visible, k.fcmp(CmpF::OGT, sc, mh[i % 2]));
              mh[i % 2] = k.select(better, sc, mh[i % 2]);
            }
          for (int64_t e = 0; e < 2; ++e) {
            for (int64_t off : {4, 8, 16}) {
              Value o = g.shflXor(mh[e], off);
              mh[e] = k.select(k.fcmp(CmpF::OGT, o, mh[e]), o, mh[e]);
            }
            Value head = k.iadd(k.imul(quad, k.c(2)), k.c(e));
            k.ifThen(
                g.andI(g.eq(row, k.c(0)), k.icmp(CmpI::ult, head, k.c(groups))),
                [&] {
                  k.storeF(a.partial, k.iadd(k.imul(g.warp, k.c(groups)), head),
                           mh[e], k.f32);
                });
          }
          indexScoreStoreMaxima(g, a, negInf, t, blk);
          return {};
        });
    scf::YieldOp::create(k.b, k.loc, ValueRange{k.select(past, held, t)});
  }
}
} // namespace

bool msac::kernels::hasGpuKernel(Operation *op, int64_t threads) {
  if (threads % kWarp)
    return false;
  return TypeSwitch<Operation *, bool>(op)
      .Case([&](msa::IndexScoreOp o) {
        return indexThreadsFor(o, threads) != 0 || indexScoreFits(o, threads);
      })
      .Case([&](msa::BlockTopKOp o) { return blockTopKFits(o, threads); })
      .Case<msa::SparseAttentionOp, msa::DenseAttentionOp>(
          [&](Operation *o) { return attentionFits(o, threads); })
      .Case<msa::LinearOp, msa::LogitsOp>(
          [&](Operation *o) { return rowsDotFits(o, threads); })
      .Case([&](msa::MoEExpertsOp o) { return moeExpertsFits(o); })
      .Case([&](msa::MoERouterOp o) { return moeRouterFits(o, threads); })
      .Case(
          [&](msa::AttentionPrologueOp o) { return prologueFits(o, threads); })
      .Case<msa::RMSNormOp, msa::EmbeddingOp, msa::KVCacheInsertOp,
            msa::RoPEOp>([&](Operation *o) {
        for (Value v : o->getOperands())
          if (auto t = dyn_cast<ShapedType>(v.getType())) {
            Type e = elementOf(v);
            if (!e.isBF16() && !e.isF32() && !e.isInteger(32))
              return false;
          }
        if (auto insert = dyn_cast<msa::KVCacheInsertOp>(o)) {
          msa::PagedCacheType type = insert.getCache().getType();
          Type ce = type.getElementType();
          return ce.isBF16() || ce.isF32() || isa<Float8E4M3FNType>(ce) ||
                 (isNVFP4Cache(type) && type.getHeadDim() % 16 == 0);
        }
        return true;
      })
      .Default([](Operation *) { return false; });
}

namespace {
/// --gpu-prologue-weight-order's values.
enum class PrologueOrder { Auto, RowMajor, ChunkMajor, HeadMajor };
} // namespace

static llvm::cl::opt<PrologueOrder> prologueOrder(
    "gpu-prologue-weight-order", llvm::cl::Hidden,
    llvm::cl::init(PrologueOrder::Auto),
    llvm::cl::sub(llvm::cl::SubCommand::getAll()),
    llvm::cl::cat(msac::gpuTuningOptionCategory()),
    llvm::cl::desc(
        "The order in which msac compile stores the fused attention "
        "prologue's per-tensor FP8 weights where its sm_90a cluster kernels "
        "take them (prologueWeightOrder; every kernel of the op, host "
        "included, then reads that order; default auto: head-major when the "
        "compile's targets include sm_90a, else row-major; docs/perf.md, "
        "fifty-third session)"),
    llvm::cl::values(
        clEnumValN(PrologueOrder::Auto, "auto",
                   "head-major with an sm_90a target, else row-major "
                   "(default)"),
        clEnumValN(PrologueOrder::RowMajor, "row-major",
                   "the checkpoint's [N, K] rows"),
        clEnumValN(PrologueOrder::ChunkMajor, "chunk-major",
                   "PackedWeight::orderRanks: per 128-channel chunk c of a "
                   "CTA's slice, the 128 x 128-byte tiles of every head and "
                   "rank side by side"),
        clEnumValN(PrologueOrder::HeadMajor, "head-major",
                   "each head's 128 rows where row-major has them, the "
                   "chunk-major order inside them, so that a CTA's next "
                   "chunk is 8 tiles (128 KB) on for every weight")));

/// What --gpu-prologue-weight-order=auto stands for
/// (setPrologueWeightOrderTargets).
static PrologueOrder autoPrologueOrder = PrologueOrder::RowMajor;

void msac::kernels::setPrologueWeightOrderTargets(bool sm90a) {
  autoPrologueOrder =
      sm90a ? PrologueOrder::HeadMajor : PrologueOrder::RowMajor;
}

/// --gpu-prologue-weight-order with auto resolved.
static PrologueOrder effectivePrologueOrder() {
  return prologueOrder == PrologueOrder::Auto ? autoPrologueOrder
                                              : PrologueOrder(prologueOrder);
}

bool msac::kernels::prologueWeightOrderHeadMajor() {
  return effectivePrologueOrder() == PrologueOrder::HeadMajor;
}

int64_t msac::kernels::prologueWeightOrder(Operation *op,
                                           const PackedOperands *packed) {
  auto prologue = dyn_cast<msa::AttentionPrologueOp>(op);
  if (!prologue || effectivePrologueOrder() == PrologueOrder::RowMajor)
    return 0;
  const PrologueShape s(prologue);
  const int64_t n = prologueClusterSize;
  // Part 3's chunks must be whole tiles, its CTA's channels one slice.
  if (!prologueClustered(s, packed) || !prologueClusterMma(s, packed) ||
      prologueClusterMmaInterleave || clusterMmaChunk() != kOrderTile ||
      s.hidden % (kOrderTile * n) != 0)
    return 0;
  for (int kind = 0; kind < s.kinds(); ++kind) {
    const PackedWeight &p = packed->find(prologueWeightSlot(kind))->second;
    if (p.shape.size() != 2 || p.rows() % kOrderTile != 0 || p.fourBit())
      return 0;
  }
  return n;
}

namespace {
/// The parts of `op`'s GPU kernel before packedTileOwnPart's.
int64_t basicKernelParts(Operation *op, const PackedOperands *packed) {
  if (isa<msa::MoEExpertsOp>(op))
    return 4;
  if (auto prologue = dyn_cast<msa::AttentionPrologueOp>(op)) {
    const PrologueShape s(prologue);
    if (prologueClusterMma(s, packed))
      return clusterMmaPasses() > 1 ? 5 : 4;
    return prologueClustered(s, packed) ? 3 : 2;
  }
  return isa<msa::MoERouterOp, msa::SparseAttentionOp, msa::DenseAttentionOp>(
             op)
             ? 2
             : 1;
}

/// With --gpu-packed-tile-own-launch, the part of a per-tensor FP8
/// msa.linear (linearTilePacked) or attention prologue
/// (prologuePackedTiled) that runs the tile GEMM on a launch of its own
/// (the wide tile's: wideTileSwitch) from its threshold, its last; the
/// parts before it then end below the threshold. -1 otherwise. On targets
/// without wgmma the part launches at no step.
int64_t packedTileOwnPart(Operation *op, const PackedOperands *packed) {
  if (!packedTileOwnLaunch)
    return -1;
  if (auto prologue = dyn_cast<msa::AttentionPrologueOp>(op)) {
    const PrologueShape s(prologue);
    if (prologueTiled(s) || !prologuePackedTiled(s, packed))
      return -1;
  } else if (packedLinearOwnLaunchMinTokens <= 0 ||
             !linearTilePacked(op, kGpuThreads, packed)) {
    return -1;
  }
  return basicKernelParts(op, packed);
}
} // namespace

int64_t msac::kernels::gpuKernelParts(Operation *op,
                                      const PackedOperands *packed) {
  return basicKernelParts(op, packed) +
         (packedTileOwnPart(op, packed) >= 0 ? 1 : 0);
}

GpuWorkspace msac::kernels::gpuWorkspace(Operation *op,
                                         const PackedOperands *packed) {
  if (auto moe = dyn_cast<msa::MoEExpertsOp>(op)) {
    // See moeWorkspacePerToken; no counters.
    return {moeWorkspacePerToken(moe), 0};
  }
  if (auto router = dyn_cast<msa::MoERouterOp>(op))
    return {shapeOf(router.getGateWeight())[0], 0}; // the scores
  if (auto prologue = dyn_cast<msa::AttentionPrologueOp>(op))
    // The projection on the warp path (with prologueSplitOut twice, and
    // the split flag at 2 T n).
    return {prologueSplitOut(prologue, packed)
                ? 2 * PrologueShape(prologue).totalHeads * kTileN + 1
                : PrologueShape(prologue).totalHeads * kTileN,
            0};
  if (!isa<msa::SparseAttentionOp, msa::DenseAttentionOp>(op))
    return {};
  // Room for kDenseChunks (>= any op's minChunks) partials of D + 2 floats
  // per token and query head, so that dense and sparse attention with the
  // same Hq and D share one workspace, and the fixed workspace of decode
  // steps with more chunks (attentionWorkspace; sparse attention's C never
  // exceeds kSparseMaxChunks = kDenseChunks, but it gets the same buffer so
  // that the launches stay alike).
  static_assert(kSparseMaxChunks <= kDenseChunks,
                "sparse steps must fit the per-token workspace");
  AttentionShape s = attentionShape(op);
  return {s.hq * kDenseChunks * (s.d + 2), 0,
          s.hq * attentionFixedPartials(s.hkv) * (s.d + 2)};
}

bool msac::kernels::hasE2M1Kernel(Operation *op, int64_t threads,
                                  int64_t part) {
  if (!hasGpuKernel(op, threads) || part != 0)
    return false;
  if (auto score = dyn_cast<msa::IndexScoreOp>(op))
    return indexThreadsFor(score, threads) != 0 &&
           isNVFP4Cache(score.getIndexCache().getType());
  if (!isa<msa::SparseAttentionOp, msa::DenseAttentionOp>(op))
    return false;
  for (int64_t i : {1, 2})
    if (isNVFP4Cache(cast<msa::PagedCacheType>(op->getOperand(i).getType())))
      return true;
  return false;
}

bool msac::kernels::hasWgmmaKernel(Operation *op, int64_t threads,
                                   const PackedOperands *packed) {
  if (!hasGpuKernel(op, threads))
    return false;
  if (auto moe = dyn_cast<msa::MoEExpertsOp>(op))
    return moeExpertsTileFits(moe, threads, packed);
  if (auto prologue = dyn_cast<msa::AttentionPrologueOp>(op)) {
    const PrologueShape s(prologue);
    return prologueTiled(s) || prologuePackedTiled(s, packed) ||
           prologueClustered(s, packed);
  }
  if (auto score = dyn_cast<msa::IndexScoreOp>(op))
    return threads == wgmma::kThreads && indexScoreWgmmaFits(score);
  return linearTileFits(op, threads) || linearTilePacked(op, threads, packed);
}

/// The launch of the msa.linear and attention-prologue (part 0) kernels
/// without a wgmma tile path whose weights take rowsDot's f16 rows
/// (packedF16Format, read in place): one CTA of kF16RowsThreads threads
/// per SM (the warps per SM of the default launch) with
/// kF16RowsSharedBytes of dynamic shared memory, the rowsDot scratch that
/// holds the f16 rows of x (f16RowsFit: 8 rows of M3's 6,144 channels).
/// On the H200 (docs/perf.md, eleventh session) two 256-thread CTAs per
/// SM made the bf16-decode tiles of 12-64 rows and a 512-token prefill
/// 5-38 % slower; this launch left them as fast or faster (but the MSA
/// prologue's 512-token prefill, 4-7 % slower). With 192 KB
/// (--gpu-f16-rows-shared-kb=192: 16 rows of 6,144 channels) M3's
/// prologue at 16 tokens took 43-46 us instead of 52, but at 64 tokens
/// 225-237 instead of 146 (the bf16-decode tiles lose the L1; twelfth
/// session).
constexpr int64_t kF16RowsThreads = 512, kF16RowsCtasPerSM = 1,
                  kF16RowsSharedBytes = 96 * 1024;
static TuningOpt<int>
    f16RowsSharedKB("gpu-f16-rows-shared-kb", kF16RowsSharedBytes / 1024,
                    "Dynamic shared memory (KiB) of the kernels that take "
                    "rowsDot's f16 rows (tuning; at most 227)");

/// Bytes of dynamic shared memory of the f16 rows' launches
/// (--gpu-f16-rows-shared-kb, clamped to 1..227 KiB).
int64_t f16RowsSharedBytes() {
  return std::clamp<int64_t>(f16RowsSharedKB, 1, 227) * int64_t(1024);
}
bool f16RowsLaunch(KB &k, Operation *op, int64_t part, int64_t threads) {
  if (!rowsDotF16 || part != 0 || !k.packed || threads != kGpuThreads)
    return false;
  if (auto p = dyn_cast<msa::AttentionPrologueOp>(op)) {
    if (prologueTiled(PrologueShape(p)))
      return false;
  } else if (!isa<msa::LinearOp>(op)) {
    return false;
  }
  // The projection (the prologue's every branch: one form) in slot 1.
  auto it = k.packed->find(1);
  return it != k.packed->end() && GK::packedF16Format(it->second) &&
         elementOf(op->getOperand(0)).isBF16();
}

namespace {
/// True when the fused prologue's warp path keeps a second FP32 array for
/// a projection split over the CTAs' halves (RowsDotArgs::splitOut):
/// per-tensor FP8 E4M3 projections whose 16 rows of bf16 x do not fit
/// the f16 rows' scratch (ringRowsF16 halves; gpuWorkspace doubles the
/// workspace and adds a flag). Part 0 decides per step whether it splits
/// and writes the flag; where it did, part 1 adds the two.
bool prologueSplitOut(msa::AttentionPrologueOp op,
                      const PackedOperands *packed) {
  PrologueShape s(op);
  // The projection (every branch: one form) in slot 1.
  auto it = packed ? packed->find(1) : PackedOperands::const_iterator();
  if (!packed || it == packed->end() || !GK::packedF16Format(it->second))
    return false;
  return f16RingSplit && f16RingXDirect && f16RingHalves &&
         16 * 2 * s.hidden > f16RowsSharedBytes();
}
} // namespace

void msac::kernels::emitGpuKernel(KB &k, Operation *op, ModuleOp globals,
                                  StringRef kernelName, int64_t threads,
                                  int64_t part, bool wgmma, bool wideTiles,
                                  bool e2m1) {
  // The wide tile (wideTileSwitch) runs on CTAs of two warpgroups.
  auto prologue = dyn_cast<msa::AttentionPrologueOp>(op);
  const bool wide = wgmma && wideTiles && part == 0 &&
                    (prologue ? prologueTiled(PrologueShape(prologue))
                              : linearTileFits(op, threads));
  const bool f16Rows = !wide && f16RowsLaunch(k, op, part, threads);
  // The packed tile GEMM on its own launch (packedTileOwnPart): its part,
  // and ownMin, the threshold where the parts before it end; the
  // prologue's start at firstUnclustered, where its cluster kernels (parts
  // 2 to 4) end, and so does its own part at the earliest.
  int64_t firstUnclustered = 1;
  if (prologue && wgmma) {
    const PrologueShape s(prologue);
    if (prologueClustered(s, k.packed))
      firstUnclustered =
          prologueClusterMma(s, k.packed) ? prologueClusterMaxTokens + 1 : 2;
  }
  const int64_t ownPart = packedTileOwnPart(op, k.packed);
  const int64_t ownMin =
      !prologue
          ? std::max<int64_t>(packedTileMinTokens(),
                              packedLinearOwnLaunchMinTokens)
          : std::max<int64_t>(packedPrologueTileMinTokens(), firstUnclustered);
  if (ownPart >= 0 && part == ownPart) {
    GK g(k, globals, kernelName, wgmma::kWideThreads);
    if (!wgmma) {
      g.declareTokens(2, 1);
      return;
    }
    g.declareTokens(ownMin, 0);
    // The first launch of the op at these steps: as part 0 (below).
    if (programmaticLaunches || (prologue && prologueProgrammatic)) {
      g.launchDependents();
      g.declareProgrammatic();
      g.gridDependencyWait();
    }
    if (prologue) {
      const PrologueShape s(prologue);
      Value T = k.scalar(0);
      wideTileSwitch(
          g, T, s.totalHeads * kTileN, ownMin,
          [&](GK &tg, Value ring, int64_t warpgroups, int64_t stages) {
            prologueTileKernel(tg, s, T, ring, warpgroups, stages);
          },
          [] {});
      return;
    }
    Value rows = k.scalar(0);
    wideTileSwitch(
        g, rows, shapeOf(op->getOperand(1))[0], ownMin,
        [&](GK &tg, Value ring, int64_t warpgroups, int64_t stages) {
          linearTileKernel(tg, op, rows, ring, warpgroups, stages);
        },
        [] {});
    return;
  }
  // Below ownMin with an own part: the f16 rows' paths only.
  const bool ownBelow = wgmma && ownPart >= 0;
  // The tensor-core indexer's CTAs (0: indexScoreKernel on `threads`).
  int64_t indexBlock = 0;
  bool indexOnWgmma = false;
  if (auto score = dyn_cast<msa::IndexScoreOp>(op)) {
    indexOnWgmma =
        wgmma && threads == wgmma::kThreads && indexScoreWgmmaFits(score);
    indexBlock =
        indexOnWgmma ? wgmma::kThreads : indexThreadsFor(score, threads);
  }
  GK g(k, globals, kernelName,
       wide         ? wgmma::kWideThreads
       : f16Rows    ? kF16RowsThreads
       : indexBlock ? indexBlock
                    : threads);
  g.e2m1 = e2m1;
  if (f16Rows) {
    const int64_t bytes = f16RowsSharedBytes();
    g.declareLaunch(kF16RowsThreads, bytes, kF16RowsCtasPerSM);
    g.scratch = g.dynamicShared();
    g.scratchBytes = bytes;
  }
  // Every kernel lets the next one start at once and waits for the one
  // before it (its inputs) before it reads or writes global memory: the
  // next kernel's launch and CTA start overlap this one's run. The
  // prologue's part 1 waits later (prologueRowEpilogue).
  if (programmaticLaunches) {
    g.launchDependents();
    g.declareProgrammatic();
    if (!(prologueProgrammatic && part == 1 &&
          isa<msa::AttentionPrologueOp>(op)))
      g.gridDependencyWait();
  }
  TypeSwitch<Operation *>(op)
      .Case([&](msa::IndexScoreOp o) {
        if (indexOnWgmma)
          indexScoreWgmmaKernel(g, o);
        else if (indexBlock)
          indexScoreMmaKernel(g, o);
        else
          indexScoreKernel(g, o);
      })
      .Case([&](msa::BlockTopKOp o) { blockTopKKernel(g, o); })
      .Case<msa::SparseAttentionOp, msa::DenseAttentionOp>([&](Operation *o) {
        if (part == 0)
          attentionKernel(g, o);
        else
          attentionCombineKernel(g, o);
      })
      .Case<msa::LinearOp, msa::LogitsOp>([&](Operation *o) {
        // Below its own part's threshold the tile GEMM stays on the f16
        // rows' launch from packedTileMinTokens.
        if (ownBelow)
          g.declareTokens(1, ownMin - 1);
        if (wgmma && f16Rows && linearTilePacked(o, threads, k.packed)) {
          Value rows = k.scalar(0);
          packedTileSwitch(
              g, rows, packedTileMinTokens(),
              [&](GK &tg, Value ring, int64_t warpgroups, int64_t stages) {
                linearTileKernel(tg, o, rows, ring, warpgroups, stages);
              },
              [&] { rowsDotKernel(g, o); });
          return;
        }
        if (!wgmma || !linearTileFits(o, threads)) {
          rowsDotKernel(g, o);
          return;
        }
        // Chosen per step: the launch and grid stay the same.
        const bool logits = isa<msa::LogitsOp>(o);
        Value rows = k.scalar(logits ? 1 : 0);
        const int64_t n = shapeOf(o->getOperand(logits ? 2 : 1))[0];
        if (wide) {
          wideTileSwitch(
              g, rows, n, linearTileMinTokens(n),
              [&](GK &tg, Value ring, int64_t warpgroups, int64_t stages) {
                linearTileKernel(tg, o, rows, ring, warpgroups, stages);
              },
              [&] { rowsDotKernel(g, o); });
          return;
        }
        g.ifElse(
            k.icmp(CmpI::sge, rows, k.c(linearTileMinTokens(n))), {},
            [&]() -> SmallVector<Value> {
              linearTileKernel(g, o, rows);
              return {};
            },
            [&]() -> SmallVector<Value> {
              rowsDotKernel(g, o);
              return {};
            });
      })
      .Case([&](msa::MoEExpertsOp o) {
        if (!wgmma || !moeExpertsTileFits(o, threads, k.packed)) {
          moeExpertsKernel(g, o, part);
          return;
        }
        // Chosen per step, as for msa.linear.
        Value T = k.scalar(0);
        g.ifElse(
            k.icmp(CmpI::sge, T, k.c(moeTileMinTokens(o))), {},
            [&]() -> SmallVector<Value> {
              moeTileKernel(g, o, part, T);
              return {};
            },
            [&]() -> SmallVector<Value> {
              moeExpertsKernel(g, o, part);
              return {};
            });
      })
      .Case([&](msa::MoERouterOp o) { moeRouterKernel(g, o, part); })
      .Case([&](msa::AttentionPrologueOp o) {
        const PrologueShape s(o);
        Value T = k.scalar(0);
        // Where the cluster kernels exist (sm_90a), part 2 runs the steps
        // of one token, part 3 (prologueClusterMma) those of 2 to 16 (1 to
        // 16 with --gpu-prologue-cluster-mma-min-tokens=1, and part 2
        // none), part 4 (the same kernel in passes of 16 tokens) those of
        // 17 to --gpu-prologue-cluster-max-tokens, and parts 0 and 1 the
        // others; on other targets parts 2-4 never launch.
        const bool clustered = wgmma && prologueClustered(s, k.packed);
        const bool clusteredMma = clustered && prologueClusterMma(s, k.packed);
        if (part >= 2) {
          if (part == 2 && clustered &&
              !(clusteredMma && clusterMmaMinTokens(k.packed) == 1))
            prologueClusterKernel(g, s, T);
          else if (part == 3 && clusteredMma)
            prologueClusterMmaKernel(g, s, T, /*passes=*/false);
          else if (part == 4 && clusteredMma && clusterMmaPasses() > 1)
            prologueClusterMmaKernel(g, s, T, /*passes=*/true);
          else
            g.declareTokens(2, 1);
          return;
        }
        // Where the own part starts where the cluster kernels end, parts 0
        // and 1 have no steps: left empty.
        if (ownBelow && firstUnclustered >= ownMin) {
          g.declareTokens(2, 1);
          return;
        }
        if (clustered || ownBelow)
          g.declareTokens(firstUnclustered, ownBelow ? ownMin - 1 : 0);
        // Part 0 starts while the RMSNorm of its input runs (the norm lets
        // it, rmsNormKernel) and waits for it before anything else: its
        // launch and CTA start overlap the norm. Part 1 starts while part
        // 0's last CTAs run (its first loads do not need part 0's sums;
        // prologueRowEpilogue waits before those). With programmatic
        // launches of every kernel, emitGpuKernel has done this already.
        if (prologueProgrammatic && !programmaticLaunches) {
          g.declareProgrammatic();
          if (part == 0) {
            g.launchDependents();
            g.gridDependencyWait();
          }
        }
        if (ownBelow) {
          prologueWarpKernel(g, s, part, T);
          return;
        }
        if (wgmma && !prologueTiled(s) && prologuePackedTiled(s, k.packed)) {
          // Part 0 on the f16 rows' launch; part 1 has no work on the tile
          // path.
          if (part == 0) {
            packedTileSwitch(
                g, T, packedPrologueTileMinTokens(),
                [&](GK &tg, Value ring, int64_t warpgroups, int64_t stages) {
                  prologueTileKernel(tg, s, T, ring, warpgroups, stages);
                },
                [&] { prologueWarpKernel(g, s, part, T); });
            return;
          }
          g.ifElse(
              k.icmp(CmpI::sge, T, k.c(packedPrologueTileMinTokens())), {},
              [&]() -> SmallVector<Value> {
                if (g.programmatic)
                  g.gridDependencyWait(); // as prologueWarpKernel's part 1
                return {};
              },
              [&]() -> SmallVector<Value> {
                prologueWarpKernel(g, s, part, T);
                return {};
              });
          return;
        }
        if (!wgmma || !prologueTiled(s)) {
          prologueWarpKernel(g, s, part, T);
          return;
        }
        // Chosen per step, as for msa.linear; part 1 has no work on the
        // tile path.
        if (wide) {
          wideTileSwitch(
              g, T, s.totalHeads * kTileN, prologueTileMinTokens(s),
              [&](GK &tg, Value ring, int64_t warpgroups, int64_t stages) {
                prologueTileKernel(tg, s, T, ring, warpgroups, stages);
              },
              [&] { prologueWarpKernel(g, s, part, T); });
          return;
        }
        g.ifElse(
            k.icmp(CmpI::sge, T, k.c(prologueTileMinTokens(s))), {},
            [&]() -> SmallVector<Value> {
              if (part == 0)
                prologueTileKernel(g, s, T);
              else if (g.programmatic)
                g.gridDependencyWait(); // as prologueWarpKernel's part 1
              return {};
            },
            [&]() -> SmallVector<Value> {
              prologueWarpKernel(g, s, part, T);
              return {};
            });
      })
      .Case([&](msa::RMSNormOp o) {
        // The fused prologue's part 0 may start at once (it waits before it
        // reads the norm's output); the other kernels after a norm are not
        // programmatic launches.
        if (prologueProgrammatic && !programmaticLaunches)
          g.launchDependents();
        rmsNormKernel(g, o);
      })
      .Case([&](msa::EmbeddingOp o) { embeddingKernel(g, o); })
      .Case([&](msa::KVCacheInsertOp o) { kvInsertKernel(g, o); })
      .Case([&](msa::RoPEOp o) { ropeKernel(g, o); });
}
