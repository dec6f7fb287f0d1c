//===- HostProgram.cpp - Kernels and launch schedule for the host ---------===//
//
// Part of msac.
//
// Every kernel body below is emitted as MLIR (scf loops, arith, math and
// llvm pointer ops) from the semantics of the msa op it implements
// (msa-m3-spec.md; the ops' descriptions). Arithmetic is FP32; BF16 storage
// is widened on load and rounded to nearest even on store.
//
//===----------------------------------------------------------------------===//

#include "msac/Codegen/HostProgram.h"
#include "GpuKernels.h"
#include "KernelBuilder.h"
#include "msac/Dialect/BSQ/IR/BSQOps.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace msac;
using namespace msac::kernels;

namespace {

//===----------------------------------------------------------------------===//
// Kernel bodies, one per op kind. `T`, `N`, `MB` are the step's scalars.
//===----------------------------------------------------------------------===//

void embeddingKernel(KB &k, msa::EmbeddingOp op) {
  // buffers: ids, table, out
  Value ids = k.ptr(0), table = k.ptr(1), out = k.ptr(2);
  const int64_t h = shapeOf(op.getTable())[1];
  Type te = elementOf(op.getTable()), oe = elementOf(op.getResult());
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    Value row = k.loadIndex(ids, t);
    k.loop(k.c(0), k.c(h), [&](Value col) {
      Value v = k.loadF(table, k.iadd(k.imul(row, k.c(h)), col), te);
      k.storeF(out, k.iadd(k.imul(t, k.c(h)), col), v, oe);
    });
  });
}

void rmsNormKernel(KB &k, msa::RMSNormOp op) {
  // buffers: in, weight, out; rows = T * inner / n
  Value in = k.ptr(0), w = k.ptr(1), out = k.ptr(2);
  const RMSNormShape s(op);
  const int64_t n = s.n, rowsPerToken = s.rowsPerToken;
  Type ie = s.ie, we = s.we;
  const float eps = s.eps;
  const bool offset = s.offset;
  Value rows = k.imul(k.scalar(0), k.c(rowsPerToken));
  k.loop(k.c(0), rows, [&](Value r) {
    Value base = k.imul(r, k.c(n));
    Value ss = k.reduce(k.c(0), k.c(n), k.cf(0), [&](Value i, Value acc) {
      Value x = k.loadF(in, k.iadd(base, i), ie);
      return k.add(acc, k.mul(x, x));
    });
    Value inv = rmsInverse(k, ss, n, eps);
    k.loop(k.c(0), k.c(n), [&](Value i) {
      Value x = k.loadF(in, k.iadd(base, i), ie);
      k.storeF(out, k.iadd(base, i),
               rmsNormValue(k, x, inv, k.loadF(w, i, we), offset), ie);
    });
  });
}

void linearKernel(KB &k, msa::LinearOp op) {
  // buffers: in [T, K], weight [N, K] (or packed), out [T, N]
  Value in = k.ptr(0), out = k.ptr(2);
  const int64_t kk = shapeOf(op.getInput())[1], n = shapeOf(op.getWeight())[0];
  Type ie = elementOf(op.getInput()), oe = elementOf(op.getResult());
  WeightRef w = weightOperand(k, 1, elementOf(op.getWeight()));
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    Value row = k.imul(t, k.c(kk));
    k.loop(k.c(0), k.c(n), [&](Value j) {
      Value acc = dotWeight(k, in, row, ie, w, k.imul(j, k.c(kk)), kk);
      k.storeF(out, k.iadd(k.imul(t, k.c(n)), j), acc, oe);
    });
  });
}

void ropeKernel(KB &k, msa::RoPEOp op) {
  // buffers: in [T, H, D], positions [T], out
  Value in = k.ptr(0), pos = k.ptr(1), out = k.ptr(2);
  ArrayRef<int64_t> s = shapeOf(op.getInput());
  const int64_t heads = s[1], d = s[2], r = op.getRotaryDim(), half = r / 2;
  const bool interleaved = op.getInterleaved();
  // inv_freq = theta^(-2i/r), folded at compile time.
  const SmallVector<float> invFreq =
      ropeInverseFrequencies(op.getTheta().convertToDouble(), r);
  Type e = elementOf(op.getInput());
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    Value p = arith::SIToFPOp::create(
        k.b, k.loc, k.f32,
        arith::IndexCastOp::create(k.b, k.loc, k.i64, k.loadIndex(pos, t)));
    k.loop(k.c(0), k.c(heads), [&](Value h) {
      Value base = k.imul(k.iadd(k.imul(t, k.c(heads)), h), k.c(d));
      // Channels beyond rotary_dim pass through.
      k.loop(k.c(r), k.c(d), [&](Value i) {
        k.storeF(out, k.iadd(base, i), k.loadF(in, k.iadd(base, i), e), e);
      });
      for (int64_t i = 0; i < half; ++i) {
        Value angle = k.mul(p, k.cf(invFreq[i]));
        Value cs = math::CosOp::create(k.b, k.loc, angle);
        Value sn = math::SinOp::create(k.b, k.loc, angle);
        int64_t ia = interleaved ? 2 * i : i;
        int64_t ib = interleaved ? 2 * i + 1 : i + half;
        Value a = k.loadF(in, k.iadd(base, k.c(ia)), e);
        Value bb = k.loadF(in, k.iadd(base, k.c(ib)), e);
        k.storeF(out, k.iadd(base, k.c(ia)), k.sub(k.mul(a, cs), k.mul(bb, sn)),
                 e);
        k.storeF(out, k.iadd(base, k.c(ib)), k.add(k.mul(bb, cs), k.mul(a, sn)),
                 e);
      }
    });
  });
}

void kvInsertKernel(KB &k, msa::KVCacheInsertOp op) {
  // buffers: cache (updated in place), table, seq_ids, positions, values
  Value cache = k.ptr(0), table = k.ptr(1), seqs = k.ptr(2), pos = k.ptr(3),
        values = k.ptr(4);
  msa::PagedCacheType type = op.getCache().getType();
  const int64_t heads = type.getHeads(), d = type.getHeadDim(),
                page = type.getPageSize();
  Type ve = elementOf(op.getValues());
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    Value p = k.loadIndex(pos, t);
    Value phys = pageOf(k, table, k.loadIndex(seqs, t), k.idiv(p, k.c(page)));
    Value slot = k.irem(p, k.c(page));
    k.loop(k.c(0), k.c(heads), [&](Value h) {
      CacheRow dst = cacheRow(k, cache, type, phys, h, slot);
      Value src = k.imul(k.iadd(k.imul(t, k.c(heads)), h), k.c(d));
      storeCacheRow(
          k, dst, [&](Value i) { return k.loadF(values, k.iadd(src, i), ve); });
    });
  });
}

/// msa.attention_prologue for one token `t`: one projection branch of
/// `heads` heads of `d` channels. Each head's projection goes to the
/// scratch `x` rounded to `act`, then (when `norm` is set) the per-head
/// norm and the NeoX RoPE round it again in place, as the unfused
/// linear / rms_norm / rope kernels do (same FP32 sums in the same
/// order); `store(h, value)` writes head `h`, whose channel `i` is
/// `value(i)` (the scratch, FP32).
void prologueBranch(
    KB &k, Value in, Value t, int64_t hidden, Type ie, const WeightRef &w,
    int64_t heads, int64_t d, Value norm, Type ne, msa::AttentionPrologueOp op,
    Value pos, Type act, Value x, Value tmp,
    const std::function<void(Value, const std::function<Value(Value)> &)>
        &store) {
  const float eps = op.getEps().convertToFloat();
  const bool offset = op.getUnitOffset();
  const int64_t r = op.getRotaryDim(), half = r / 2;
  // inv_freq = theta^(-2i/r), folded at compile time.
  const SmallVector<float> invFreq =
      ropeInverseFrequencies(op.getTheta().convertToDouble(), r);
  Value row = k.imul(t, k.c(hidden));
  k.loop(k.c(0), k.c(heads), [&](Value h) {
    k.loop(k.c(0), k.c(d), [&](Value i) {
      Value feature = k.iadd(k.imul(h, k.c(d)), i);
      Value acc =
          dotWeight(k, in, row, ie, w, k.imul(feature, k.c(hidden)), hidden);
      k.storeF(x, i, k.roundTo(acc, act, tmp), k.f32);
    });
    if (norm) {
      Value ss = k.reduce(k.c(0), k.c(d), k.cf(0), [&](Value i, Value acc) {
        Value v = k.loadF(x, i, k.f32);
        return k.add(acc, k.mul(v, v));
      });
      Value inv = rmsInverse(k, ss, d, eps);
      k.loop(k.c(0), k.c(d), [&](Value i) {
        Value v = rmsNormValue(k, k.loadF(x, i, k.f32), inv,
                               k.loadF(norm, i, ne), offset);
        k.storeF(x, i, k.roundTo(v, act, tmp), k.f32);
      });
      Value p = arith::SIToFPOp::create(
          k.b, k.loc, k.f32,
          arith::IndexCastOp::create(k.b, k.loc, k.i64, k.loadIndex(pos, t)));
      for (int64_t i = 0; i < half; ++i) {
        Value angle = k.mul(p, k.cf(invFreq[i]));
        Value cs = math::CosOp::create(k.b, k.loc, angle);
        Value sn = math::SinOp::create(k.b, k.loc, angle);
        Value a = k.loadF(x, k.c(i), k.f32);
        Value bb = k.loadF(x, k.c(i + half), k.f32);
        k.storeF(x, k.c(i),
                 k.roundTo(k.sub(k.mul(a, cs), k.mul(bb, sn)), act, tmp),
                 k.f32);
        k.storeF(x, k.c(i + half),
                 k.roundTo(k.add(k.mul(bb, cs), k.mul(a, sn)), act, tmp),
                 k.f32);
      }
    }
    store(h, [&](Value i) { return k.loadF(x, i, k.f32); });
  });
}

void attentionPrologueKernel(KB &k, msa::AttentionPrologueOp op) {
  // buffers: input [T, H], q/k/v weights, q/k norm weights, key cache,
  // value cache (both updated in place), table, seq_ids, positions,
  // [index_q/index_k weights, their norm weights, index cache], q [T, Hq,
  // D], [index_q [T, Hi, dI]]
  const bool hasIndex = static_cast<bool>(op.getIndexQWeight());
  // (the weights, slots 1-3, 11 and 12, are read through weightOperand)
  Value in = k.ptr(0), nq = k.ptr(4), nk = k.ptr(5), kc = k.ptr(6),
        vc = k.ptr(7), table = k.ptr(8), seqs = k.ptr(9), pos = k.ptr(10);
  Value niq, nik, ic, iqOut;
  Value qOut = k.ptr(hasIndex ? 16 : 11);
  if (hasIndex) {
    niq = k.ptr(13);
    nik = k.ptr(14);
    ic = k.ptr(15);
    iqOut = k.ptr(17);
  }
  const int64_t hidden = shapeOf(op.getInput())[1];
  ArrayRef<int64_t> qs = shapeOf(op.getQ());
  msa::PagedCacheType kvType = op.getKeyCache().getType();
  Type act = elementOf(op.getInput());
  int64_t widest = std::max(qs[2], kvType.getHeadDim());
  if (hasIndex)
    widest = std::max(widest, shapeOf(op.getIndexQ())[2]);
  Value x = k.scratch(widest), tmp = k.scratch(1);
  using RowValue = std::function<Value(Value)>;
  using RowStore = std::function<void(Value, const RowValue &)>;
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    Value p = k.loadIndex(pos, t);
    Value seq = k.loadIndex(seqs, t);
    // The cache row of head h, converted as msa.kv_cache_insert does
    // (storeCacheRow: bf16 / f32 / FP8 casts, NVFP4 block quantization).
    auto cacheStore = [&](Value cache, msa::PagedCacheType type) -> RowStore {
      Value phys = pageOf(k, table, seq, k.idiv(p, k.c(type.getPageSize())));
      Value slot = k.irem(p, k.c(type.getPageSize()));
      return [&k, cache, type, phys, slot](Value h, const RowValue &value) {
        storeCacheRow(k, cacheRow(k, cache, type, phys, h, slot), value);
      };
    };
    auto activationStore = [&](Value out, int64_t heads,
                               int64_t d) -> RowStore {
      return [&k, out, heads, d, t, act](Value h, const RowValue &value) {
        Value base = k.imul(k.iadd(k.imul(t, k.c(heads)), h), k.c(d));
        k.loop(k.c(0), k.c(d),
               [&](Value i) { k.storeF(out, k.iadd(base, i), value(i), act); });
      };
    };
    // The weights may be packed (read in place, weightOperand).
    auto branch = [&](int slot, Value operand, int64_t heads, int64_t d,
                      Value norm, Value normOperand, const RowStore &store) {
      prologueBranch(k, in, t, hidden, act,
                     weightOperand(k, slot, elementOf(operand)), heads, d, norm,
                     normOperand ? elementOf(normOperand) : Type(), op, pos,
                     act, x, tmp, store);
    };
    const int64_t hkv = kvType.getHeads(), d = kvType.getHeadDim();
    branch(1, op.getQWeight(), qs[1], qs[2], nq, op.getQNormWeight(),
           activationStore(qOut, qs[1], qs[2]));
    branch(2, op.getKWeight(), hkv, d, nk, op.getKNormWeight(),
           cacheStore(kc, kvType));
    branch(3, op.getVWeight(), hkv, d, Value(), Value(),
           cacheStore(vc, kvType));
    if (hasIndex) {
      ArrayRef<int64_t> iqs = shapeOf(op.getIndexQ());
      msa::PagedCacheType indexType = op.getIndexCache().getType();
      branch(11, op.getIndexQWeight(), iqs[1], iqs[2], niq,
             op.getIndexQNormWeight(), activationStore(iqOut, iqs[1], iqs[2]));
      branch(12, op.getIndexKWeight(), 1, indexType.getHeadDim(), nik,
             op.getIndexKNormWeight(), cacheStore(ic, indexType));
    }
  });
}

void indexScoreKernel(KB &k, msa::IndexScoreOp op) {
  // buffers: queries [T, G, dI], cache, table, seq_ids, positions, out [G, T,
  // MB]
  Value q = k.ptr(0), cache = k.ptr(1), table = k.ptr(2), seqs = k.ptr(3),
        pos = k.ptr(4), out = k.ptr(5);
  msa::PagedCacheType type = op.getIndexCache().getType();
  const int64_t groups = shapeOf(op.getIndexQueries())[1],
                d = type.getHeadDim(), page = type.getPageSize();
  Type qe = elementOf(op.getIndexQueries());
  const float scale = op.getScale().convertToFloat();
  Value T = k.scalar(0), MB = k.scalar(2);
  Value negInf = k.cf(-INFINITY);
  k.loop(k.c(0), T, [&](Value t) {
    Value p = k.loadIndex(pos, t);
    Value seq = k.loadIndex(seqs, t);
    k.loop(k.c(0), k.c(groups), [&](Value g) {
      Value row = k.imul(k.iadd(k.imul(g, T), t), MB);
      k.loop(k.c(0), MB, [&](Value blk) {
        k.storeF(out, k.iadd(row, blk), negInf, k.f32);
      });
      Value qOff = k.imul(k.iadd(k.imul(t, k.c(groups)), g), k.c(d));
      k.loop(k.c(0), k.iadd(p, k.c(1)), [&](Value j) {
        Value blk = k.idiv(j, k.c(page));
        Value phys = pageOf(k, table, seq, blk);
        CacheRow key =
            cacheRow(k, cache, type, phys, k.c(0), k.irem(j, k.c(page)));
        Value dot =
            indexQueriesE4M3(type)
                ? reduceCacheRow(k, key, k.cf(0),
                                 [&](Value i, Value x, Value acc) {
                                   Value qi = indexQueryE4M3(
                                       k, k.loadF(q, k.iadd(qOff, i), qe));
                                   return k.add(acc, k.mul(qi, x));
                                 })
                : dotCacheRow(k, q, qOff, qe, key);
        Value s = k.mul(dot, k.cf(scale));
        Value slot = k.iadd(row, blk);
        Value best = k.loadF(out, slot, k.f32);
        // A NaN score never wins the max-pool.
        Value better = k.fcmp(arith::CmpFPredicate::OGT, s, best);
        k.storeF(out, slot, k.select(better, s, best), k.f32);
      });
    });
  });
}

void blockTopKKernel(KB &k, msa::BlockTopKOp op) {
  // buffers: scores [G, T, MB], positions [T], out [G, T, K]
  Value scores = k.ptr(0), pos = k.ptr(1), out = k.ptr(2);
  const int64_t groups = shapeOf(op.getBlockScores())[0], kk = op.getK(),
                bs = op.getBlockSize(), local = op.getLocalBlocks(),
                init = op.getInitBlocks();
  Value T = k.scalar(0), MB = k.scalar(2);
  k.loop(k.c(0), T, [&](Value t) {
    Value L = k.idiv(k.loadIndex(pos, t), k.c(bs));
    Value n = k.iadd(L, k.c(1));
    k.loop(k.c(0), k.c(groups), [&](Value g) {
      Value orow = k.imul(k.iadd(k.imul(g, T), t), k.c(kk));
      Value srow = k.imul(k.iadd(k.imul(g, T), t), MB);
      // Default: blocks 0..L in order, then -1 (the n <= k rule).
      k.loop(k.c(0), k.c(kk), [&](Value s) {
        Value valid = k.icmp(arith::CmpIPredicate::ult, s, n);
        k.storeIndex(out, k.iadd(orow, s), k.select(valid, s, k.c(-1)));
      });
      Value many = k.icmp(arith::CmpIPredicate::ugt, n, k.c(kk));
      k.ifThen(many, [&] {
        // Forced blocks: init first, local last.
        for (int64_t i = 0; i < init; ++i)
          k.storeIndex(out, k.iadd(orow, k.c(i)), k.c(i));
        for (int64_t i = 0; i < local; ++i)
          k.storeIndex(
              out, k.iadd(orow, k.c(kk - local + i)),
              k.iadd(k.idiv(k.iadd(L, k.c(0)), k.c(1)), k.c(i - local + 1)));
        // The rest: repeated arg-max over blocks init .. L-local, skipping
        // blocks already taken; strict > keeps the lower id on ties and
        // never prefers a NaN.
        Value first = k.c(init),
              last = k.iadd(k.idiv(L, k.c(1)), k.c(1 - local));
        for (int64_t slot = init; slot < kk - local; ++slot) {
          SmallVector<Value> best = k.reduceN(
              first, last, {k.c(-1), k.cf(-INFINITY)},
              [&](Value blk, ValueRange acc) -> SmallVector<Value> {
                // taken = blk appears in slots init .. slot-1
                Value taken = arith::ConstantOp::create(k.b, k.loc,
                                                        k.b.getBoolAttr(false));
                for (int64_t prev = init; prev < slot; ++prev) {
                  Value id = k.loadIndex(out, k.iadd(orow, k.c(prev)));
                  taken = arith::OrIOp::create(
                      k.b, k.loc, taken,
                      k.icmp(arith::CmpIPredicate::eq, id, blk));
                }
                Value s = k.loadF(scores, k.iadd(srow, blk), k.f32);
                Value none = k.icmp(arith::CmpIPredicate::eq, acc[0], k.c(-1));
                Value better = arith::OrIOp::create(
                    k.b, k.loc, none,
                    k.fcmp(arith::CmpFPredicate::OGT, s, acc[1]));
                Value take = arith::AndIOp::create(
                    k.b, k.loc, better,
                    arith::XOrIOp::create(
                        k.b, k.loc, taken,
                        arith::ConstantOp::create(k.b, k.loc,
                                                  k.b.getBoolAttr(true))));
                Value sKey = k.select(k.fcmp(arith::CmpFPredicate::UNO, s, s),
                                      k.cf(-INFINITY), s);
                return {k.select(take, blk, acc[0]),
                        k.select(take, sKey, acc[1])};
              });
          k.storeIndex(out, k.iadd(orow, k.c(slot)), best[0]);
        }
      });
    });
  });
}

/// Online-softmax attention of every (token, head) over the keys of the
/// blocks `blockAt(t, g, s)` for slot s < numSlots (negative ids skipped),
/// keys j <= position, under the op's precision contract
/// (#msa.attention_precision). `exact`: one online-softmax update per key,
/// P in FP32. `q8` (MSA's FP8 decode reference, msa-m3-spec §3.2 [S14]):
/// the queries rounded to E4M3; per block, the running maximum takes the
/// block's scores first (so P <= 448), then each key adds E4M3(P) * v to
/// the accumulator and P to the denominator, P = 448 exp(z - max).
template <typename BlockFn, typename SlotsFn>
void attentionBody(KB &k, Operation *op, Value q, Value kc, Value vc,
                   Value table, Value seqs, Value pos, Value out,
                   msa::PagedCacheType type, float scale,
                   msa::AttentionPrecision precision, SlotsFn numSlots,
                   BlockFn blockAt) {
  const bool q8 = precision == msa::AttentionPrecision::Q8;
  ArrayRef<int64_t> qs = shapeOf(op->getOperand(0));
  const int64_t hq = qs[1], d = qs[2], hkv = type.getHeads(),
                page = type.getPageSize(), group = hq / hkv;
  Type qe = elementOf(op->getOperand(0)), oe = elementOf(op->getResult(0));
  Value acc = k.scratch(d);
  // q8: the query rounded to E4M3 once per (token, head), and the scores
  // of a block (its first pass takes the maximum, the second reads them).
  Value q8Query = q8 ? k.scratch(d) : Value();
  Value scores = q8 ? k.scratch(page) : Value();
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    Value p = k.loadIndex(pos, t);
    Value seq = k.loadIndex(seqs, t);
    k.loop(k.c(0), k.c(hq), [&](Value h) {
      Value g = k.idiv(h, k.c(group));
      Value qOff = k.imul(k.iadd(k.imul(t, k.c(hq)), h), k.c(d));
      k.loop(k.c(0), k.c(d),
             [&](Value i) { k.storeF(acc, i, k.cf(0), k.f32); });
      if (q8)
        k.loop(k.c(0), k.c(d), [&](Value i) {
          k.storeF(q8Query, i,
                   indexQueryE4M3(k, k.loadF(q, k.iadd(qOff, i), qe)), k.f32);
        });
      SmallVector<Value> state = k.reduceN(
          k.c(0), numSlots(t, g, p), {k.cf(-INFINITY), k.cf(0)},
          [&](Value s, ValueRange st) -> SmallVector<Value> {
            Value blk = blockAt(t, g, s);
            Value validBlock = k.icmp(arith::CmpIPredicate::sge, blk, k.c(0));
            auto ifOp = scf::IfOp::create(k.b, k.loc, TypeRange{k.f32, k.f32},
                                          validBlock, /*withElse=*/true);
            {
              OpBuilder::InsertionGuard guard(k.b);
              k.b.setInsertionPointToStart(ifOp.thenBlock());
              Value phys = pageOf(k, table, seq, blk);
              Value start = k.imul(blk, k.c(page));
              // Keys j = start .. min(start + page, p + 1).
              Value end = arith::MinUIOp::create(
                  k.b, k.loc, k.iadd(start, k.c(page)), k.iadd(p, k.c(1)));
              Value count = arith::MaxSIOp::create(
                  k.b, k.loc, arith::SubIOp::create(k.b, k.loc, end, start),
                  k.c(0));
              // z_j = scale * <q, k_j> (FP32 sum of the products).
              auto score = [&](Value jj) {
                CacheRow key = cacheRow(k, kc, type, phys, g, jj);
                Value dot =
                    q8 ? reduceCacheRow(
                             k, key, k.cf(0),
                             [&](Value i, Value x, Value sum) {
                               return k.add(
                                   sum, k.mul(k.loadF(q8Query, i, k.f32), x));
                             })
                       : dotCacheRow(k, q, qOff, qe, key);
                return k.mul(dot, k.cf(scale));
              };
              if (q8) {
                Value m = k.reduceN(
                    k.c(0), count, {st[0]},
                    [&](Value jj, ValueRange mm) -> SmallVector<Value> {
                      Value z = score(jj);
                      k.storeF(scores, jj, z, k.f32);
                      return {k.maxf(mm[0], z)};
                    })[0];
                // No visible key so far: nothing to rescale (0 * alpha).
                Value alpha = k.select(
                    k.fcmp(arith::CmpFPredicate::OEQ, m, k.cf(-INFINITY)),
                    k.cf(1), k.exp(k.sub(st[0], m)));
                k.loop(k.c(0), k.c(d), [&](Value i) {
                  k.storeF(acc, i, k.mul(k.loadF(acc, i, k.f32), alpha), k.f32);
                });
                SmallVector<Value> sum = k.reduceN(
                    k.c(0), count, {k.mul(st[1], alpha)},
                    [&](Value jj, ValueRange l) -> SmallVector<Value> {
                      CacheRow value = cacheRow(k, vc, type, phys, g, jj);
                      Value w =
                          k.mul(k.cf(448),
                                k.exp(k.sub(k.loadF(scores, jj, k.f32), m)));
                      Value w8 = k.decodeE4M3(k.encodeE4M3(w));
                      forEachCacheValue(k, value, [&](Value i, Value v) {
                        Value a = k.loadF(acc, i, k.f32);
                        k.storeF(acc, i, k.add(a, k.mul(w8, v)), k.f32);
                      });
                      return {k.add(l[0], w)};
                    });
                scf::YieldOp::create(k.b, k.loc, ValueRange{m, sum[0]});
              } else {
                SmallVector<Value> inner = k.reduceN(
                    k.c(0), count, {st[0], st[1]},
                    [&](Value jj, ValueRange ml) -> SmallVector<Value> {
                      CacheRow value = cacheRow(k, vc, type, phys, g, jj);
                      Value z = score(jj);
                      Value m = k.maxf(ml[0], z);
                      Value alpha = k.exp(k.sub(ml[0], m));
                      Value w = k.exp(k.sub(z, m));
                      forEachCacheValue(k, value, [&](Value i, Value v) {
                        Value a = k.loadF(acc, i, k.f32);
                        k.storeF(acc, i, k.add(k.mul(a, alpha), k.mul(w, v)),
                                 k.f32);
                      });
                      return {m, k.add(k.mul(ml[1], alpha), w)};
                    });
                scf::YieldOp::create(k.b, k.loc, inner);
              }
            }
            {
              OpBuilder::InsertionGuard guard(k.b);
              k.b.setInsertionPointToStart(ifOp.elseBlock());
              scf::YieldOp::create(k.b, k.loc, ValueRange{st[0], st[1]});
            }
            return {ifOp.getResult(0), ifOp.getResult(1)};
          });
      // No visible key: output 0.
      Value denom =
          k.select(k.fcmp(arith::CmpFPredicate::OGT, state[1], k.cf(0)),
                   state[1], k.cf(1));
      Value oOff = k.imul(k.iadd(k.imul(t, k.c(hq)), h), k.c(d));
      k.loop(k.c(0), k.c(d), [&](Value i) {
        k.storeF(out, k.iadd(oOff, i), k.div(k.loadF(acc, i, k.f32), denom),
                 oe);
      });
    });
  });
}

void sparseAttentionKernel(KB &k, msa::SparseAttentionOp op) {
  // buffers: q, kc, vc, table, seq_ids, positions, block_ids [Hkv, T, K], out
  Value ids = k.ptr(6);
  const int64_t kk = shapeOf(op.getBlockIds())[2];
  Value T = k.scalar(0);
  attentionBody(
      k, op, k.ptr(0), k.ptr(1), k.ptr(2), k.ptr(3), k.ptr(4), k.ptr(5),
      k.ptr(7), op.getKeyCache().getType(), op.getScale().convertToFloat(),
      op.getPrecision(), [&](Value, Value, Value) { return k.c(kk); },
      [&](Value t, Value g, Value s) {
        return k.loadIndex(ids,
                           k.iadd(k.imul(k.iadd(k.imul(g, T), t), k.c(kk)), s));
      });
}

void denseAttentionKernel(KB &k, msa::DenseAttentionOp op) {
  // buffers: q, kc, vc, table, seq_ids, positions, out
  const int64_t page = op.getKeyCache().getType().getPageSize();
  attentionBody(
      k, op, k.ptr(0), k.ptr(1), k.ptr(2), k.ptr(3), k.ptr(4), k.ptr(5),
      k.ptr(6), op.getKeyCache().getType(), op.getScale().convertToFloat(),
      op.getPrecision(),
      [&](Value, Value, Value p) {
        return k.iadd(k.idiv(p, k.c(page)), k.c(1));
      },
      [&](Value, Value, Value s) { return s; });
}

void swigluKernel(KB &k, msa::SwiGLUOp op) {
  // buffers: gate, up, out (T * inner elements)
  Value gate = k.ptr(0), up = k.ptr(1), out = k.ptr(2);
  Type e = elementOf(op.getGate());
  const float alpha = op.getAlpha().convertToFloat(),
              limit = op.getLimit().convertToFloat();
  Value n = k.imul(k.scalar(0), k.c(innerElements(op.getGate())));
  k.loop(k.c(0), n, [&](Value i) {
    k.storeF(out, i,
             swigluOAI(k, k.loadF(gate, i, e), k.loadF(up, i, e), alpha, limit),
             e);
  });
}

void addKernel(KB &k, arith::AddFOp op) {
  Value a = k.ptr(0), bb = k.ptr(1), out = k.ptr(2);
  Type e = elementOf(op.getResult());
  Value n = k.imul(k.scalar(0), k.c(innerElements(op.getResult())));
  k.loop(k.c(0), n, [&](Value i) {
    k.storeF(out, i, k.add(k.loadF(a, i, e), k.loadF(bb, i, e)), e);
  });
}

void moeRouterKernel(KB &k, msa::MoERouterOp op) {
  // buffers: input [T, H], gate [E, H], (bias [E]), weights [T, K], ids [T, K]
  const bool hasBias = static_cast<bool>(op.getCorrectionBias());
  Value in = k.ptr(0), gate = k.ptr(1);
  Value bias = hasBias ? k.ptr(2) : Value();
  Value weights = k.ptr(hasBias ? 3 : 2), ids = k.ptr(hasBias ? 4 : 3);
  const int64_t h = shapeOf(op.getInput())[1],
                e = shapeOf(op.getGateWeight())[0], topK = op.getTopK();
  Type ie = elementOf(op.getInput()), ge = elementOf(op.getGateWeight());
  const float rsf = op.getRoutedScalingFactor().convertToFloat();
  const bool renorm = op.getRenormalize();
  Value score = k.scratch(e), biased = k.scratch(e);
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    k.loop(k.c(0), k.c(e), [&](Value x) {
      Value logit =
          k.dot(in, k.imul(t, k.c(h)), ie, gate, k.imul(x, k.c(h)), ge, h);
      Value s = k.sigmoid(logit);
      k.storeF(score, x, s, k.f32);
      k.storeF(biased, x, hasBias ? k.add(s, k.loadF(bias, x, k.f32)) : s,
               k.f32);
    });
    routerTopK(k, score, biased, weights, ids, t, e, topK, rsf, renorm);
  });
}

void moeExpertsKernel(KB &k, msa::MoEExpertsOp op) {
  // buffers: input [T, H], weights [T, K], ids [T, K], w1 [E, I, H],
  // w3 [E, I, H], w2 [E, H, I], out [T, H]
  // (the weights may be packed)
  Value in = k.ptr(0), rw = k.ptr(1), ri = k.ptr(2), out = k.ptr(6);
  const MoEExpertsShape s(op);
  const int64_t inner = s.inner, h = s.h, topK = s.topK;
  Type ie = s.ie;
  WeightRef w1 = weightOperand(k, 3, s.we), w3 = weightOperand(k, 4, s.we),
            w2 = weightOperand(k, 5, s.de);
  Value act = k.scratch(inner), acc = k.scratch(h), tmp = k.scratch(1);
  k.loop(k.c(0), k.scalar(0), [&](Value t) {
    k.loop(k.c(0), k.c(h), [&](Value c) { k.storeF(acc, c, k.cf(0), k.f32); });
    Value xOff = k.imul(t, k.c(h));
    k.loop(k.c(0), k.c(topK), [&](Value slot) {
      Value at = k.iadd(k.imul(t, k.c(topK)), slot);
      Value e = k.loadIndex(ri, at);
      Value w = k.loadF(rw, at, k.f32);
      k.loop(k.c(0), k.c(inner), [&](Value n) {
        Value row = k.imul(k.iadd(k.imul(e, k.c(inner)), n), k.c(h));
        // Gate and up projections round to the activation type, as separate
        // projections would; so does the activation.
        Value g = k.roundTo(dotWeight(k, in, xOff, ie, w1, row, h), ie, tmp);
        Value u = k.roundTo(dotWeight(k, in, xOff, ie, w3, row, h), ie, tmp);
        Value a = swigluOAI(k, g, u, s.alpha, s.limit);
        k.storeF(act, n, k.roundTo(a, ie, tmp), k.f32);
      });
      k.loop(k.c(0), k.c(h), [&](Value c) {
        Value row = k.imul(k.iadd(k.imul(e, k.c(h)), c), k.c(inner));
        Value d = dotWeight(k, act, k.c(0), k.f32, w2, row, inner);
        k.storeF(acc, c, k.add(k.loadF(acc, c, k.f32), k.mul(w, d)), k.f32);
      });
    });
    k.loop(k.c(0), k.c(h), [&](Value c) {
      k.storeF(out, k.iadd(xOff, c), k.loadF(acc, c, k.f32), ie);
    });
  });
}

void logitsKernel(KB &k, msa::LogitsOp op) {
  // buffers: hidden [T, H], indices [N], lm_head [V, H], out [N, V]
  Value hid = k.ptr(0), idx = k.ptr(1), head = k.ptr(2), out = k.ptr(3);
  const int64_t h = shapeOf(op.getHidden())[1], v = shapeOf(op.getLmHead())[0];
  Type he = elementOf(op.getHidden()), we = elementOf(op.getLmHead());
  k.loop(k.c(0), k.scalar(1), [&](Value i) {
    Value row = k.imul(k.loadIndex(idx, i), k.c(h));
    k.loop(k.c(0), k.c(v), [&](Value j) {
      Value acc = k.dot(hid, row, he, head, k.imul(j, k.c(h)), we, h);
      k.storeF(out, k.iadd(k.imul(i, k.c(v)), j), acc, k.f32);
    });
  });
}

/// `bsq.dequantize` of a packed weight at load time: buffers data, scales,
/// [global], out (f32, logical shape); out[i] = loadWeight(i) = storage *
/// scale [* global], FP32.
void dequantizeKernel(KB &k, const PackedWeight &p) {
  WeightRef w{k.ptr(0), Type(), &p, k.ptr(1), Value(), Value()};
  if (p.hasGlobal)
    w.global = k.ptr(2);
  Value out = k.ptr(p.hasGlobal ? 3 : 2);
  int64_t numel = 1;
  for (int64_t d : p.shape)
    numel *= d;
  k.loop(k.c(0), k.c(numel),
         [&](Value i) { k.storeF(out, i, loadWeight(k, w, i), k.f32); });
}

//===----------------------------------------------------------------------===//
// Program builder
//===----------------------------------------------------------------------===//

std::string dtypeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

class ProgramBuilder {
public:
  ProgramBuilder(ModuleOp module, const std::vector<std::string> &generic,
                 bool wideTiles, bool packedWeights)
      : module(module), genericGpuOps(generic), wideTiles(wideTiles),
        packedWeights(packedWeights) {}
  FailureOr<HostProgram> run();

private:
  /// Buffer holding `v` (creating an activation buffer for op results).
  int64_t bufferFor(Value v);
  int64_t newBuffer(BufferDesc desc) {
    program.buffers.push_back(std::move(desc));
    return static_cast<int64_t>(program.buffers.size()) - 1;
  }
  std::vector<Extent> symbolicShape(Value v);
  /// A [T, perToken] scratch buffer of `dtype` (with `perStep` false, a
  /// [perToken] one), shared by every launch asking for that shape.
  int64_t scratchBuffer(const std::string &dtype, int64_t perToken,
                        bool perStep = true) {
    std::string key =
        dtype + (perStep ? "x" : "fixed") + std::to_string(perToken);
    auto it = scratchByShape.find(key);
    if (it != scratchByShape.end())
      return it->second;
    BufferDesc desc;
    desc.kind = BufferDesc::Kind::Activation;
    desc.name = "t" + std::to_string(program.buffers.size());
    desc.dtype = dtype;
    desc.shape = {{0, "T"}, {perToken, ""}};
    if (!perStep)
      desc.shape = {{perToken, ""}};
    int64_t id = newBuffer(desc);
    scratchByShape[key] = id;
    return id;
  }
  LogicalResult emitKernel(Operation *op, ArrayRef<Value> operands,
                           ArrayRef<Value> results);
  bool isSupportedElement(Type t) {
    return t.isBF16() || t.isF32() || t.isInteger(32);
  }

  /// A `bsq.pack` of checkpoint tensors.
  struct Packed {
    Value data, scales, global;
    bool invertGlobal = false;
    int64_t dequantized = -1; // FP32 buffer, once created
  };
  /// The FP32 buffer holding packed value `v`, dequantized at load time.
  int64_t dequantized(Value v);
  /// The layout of packed value `v` (no launch slots yet).
  PackedWeight packedLayout(Value v);
  /// True when every user of `dq` reads it as a weight that kernels can
  /// take packed (isPackedWeightOperand).
  static bool readableInPlace(bsq::DequantizeOp dq);

  ModuleOp module;
  std::vector<std::string> genericGpuOps;
  bool wideTiles, packedWeights;
  HostProgram program;
  /// `bsq.dequantize` results read in place, to their packed inputs.
  llvm::DenseMap<Value, Value> inPlace;
  llvm::DenseMap<Value, int64_t> buffers;
  llvm::DenseMap<Value, Packed> packed;
  llvm::StringMap<std::string> kernelByKey;
  llvm::StringMap<int64_t> scratchByShape;
  OpBuilder *kb = nullptr;
};

std::vector<Extent> ProgramBuilder::symbolicShape(Value v) {
  std::vector<Extent> shape;
  ArrayRef<int64_t> dims = shapeOf(v);
  Operation *def = v.getDefiningOp();
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (!ShapedType::isDynamic(d)) {
      shape.push_back({d, ""});
      continue;
    }
    std::string symbol = "T";
    if (def && isa<msa::LogitsOp>(def))
      symbol = "N";
    else if (def && isa<msa::IndexScoreOp>(def) && i == 2)
      symbol = "MB";
    shape.push_back({0, symbol});
  }
  return shape;
}

PackedWeight ProgramBuilder::packedLayout(Value v) {
  const Packed &p = packed[v];
  auto type = cast<RankedTensorType>(v.getType());
  PackedWeight layout;
  layout.format = cast<bsq::QuantizedTypeInterface>(type.getElementType());
  layout.shape.assign(type.getShape().begin(), type.getShape().end());
  layout.dataType = cast<ShapedType>(p.data.getType()).getElementType();
  layout.scaleType = cast<ShapedType>(p.scales.getType()).getElementType();
  auto perMatrix = [&](Value scale) {
    return scale && type.getRank() > 2 &&
           cast<ShapedType>(scale.getType()).getNumElements() > 1;
  };
  layout.hasGlobal = static_cast<bool>(p.global);
  layout.invertGlobal = p.invertGlobal;
  layout.scalePerMatrix =
      layout.format.getBlockShape().empty() && perMatrix(p.scales);
  layout.globalPerMatrix = perMatrix(p.global);
  return layout;
}

/// True when `use` is a weight operand that kernels can read packed (the
/// weight of msa.linear, an expert stack of msa.moe_experts, a projection
/// of msa.attention_prologue).
bool isPackedWeightOperand(OpOperand &use) {
  Operation *user = use.getOwner();
  auto is = [&](OpOperand &operand) { return &use == &operand; };
  auto isOptional = [&](MutableOperandRange operand) {
    return !operand.empty() && &use == &operand[0];
  };
  if (auto linear = dyn_cast<msa::LinearOp>(user))
    return is(linear.getWeightMutable());
  if (auto moe = dyn_cast<msa::MoEExpertsOp>(user))
    return is(moe.getGateWeightsMutable()) || is(moe.getUpWeightsMutable()) ||
           is(moe.getDownWeightsMutable());
  if (auto prologue = dyn_cast<msa::AttentionPrologueOp>(user))
    return is(prologue.getQWeightMutable()) ||
           is(prologue.getKWeightMutable()) ||
           is(prologue.getVWeightMutable()) ||
           isOptional(prologue.getIndexQWeightMutable()) ||
           isOptional(prologue.getIndexKWeightMutable());
  return false;
}

bool ProgramBuilder::readableInPlace(bsq::DequantizeOp dq) {
  Value v = dq.getResult();
  return !v.use_empty() && llvm::all_of(v.getUses(), isPackedWeightOperand);
}

std::string packedKey(const PackedWeight &p) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << "packed<" << p.format << ",";
  for (int64_t d : p.shape)
    os << d << "x";
  os << p.dataType << "," << p.scaleType << (p.hasGlobal ? ",g" : "")
     << (p.invertGlobal ? "i" : "") << (p.scalePerMatrix ? ",s" : "")
     << (p.globalPerMatrix ? ",m" : "") << "@" << p.scalesSlot << ","
     << p.globalSlot
     << (p.orderRanks ? ",o" + std::to_string(p.orderRanks) +
                            (p.orderHeadMajor ? "h" : "")
                      : std::string())
     << ">";
  return key;
}

int64_t ProgramBuilder::dequantized(Value v) {
  Packed &p = packed[v];
  if (p.dequantized >= 0)
    return p.dequantized;
  auto type = cast<RankedTensorType>(v.getType());
  BufferDesc out;
  out.kind = BufferDesc::Kind::Activation;
  out.name = "dequantized" + std::to_string(program.buffers.size());
  out.dtype = "f32";
  for (int64_t d : type.getShape())
    out.shape.push_back({d, ""});
  p.dequantized = newBuffer(out);

  PackedWeight layout = packedLayout(v);
  std::string key;
  {
    llvm::raw_string_ostream os(key);
    os << "dequantize" << packedKey(layout);
  }
  Launch launch;
  launch.op = "bsq.dequantize";
  launch.buffers = {bufferFor(p.data), bufferFor(p.scales)};
  if (p.global)
    launch.buffers.push_back(bufferFor(p.global));
  launch.buffers.push_back(p.dequantized);
  auto found = kernelByKey.find(key);
  if (found != kernelByKey.end()) {
    launch.kernel = found->second;
  } else {
    launch.kernel =
        "msac_k" + std::to_string(program.kernelNames.size()) + "_dequantize";
    kernelByKey[key] = launch.kernel;
    program.kernelNames.push_back(launch.kernel);
    emitKernelFunction(*kb, v.getLoc(), launch.kernel,
                       [&](KB &k) { dequantizeKernel(k, layout); });
  }
  program.init.push_back(launch);
  return p.dequantized;
}

int64_t ProgramBuilder::bufferFor(Value v) {
  auto it = buffers.find(v);
  if (it != buffers.end())
    return it->second;
  if (packed.count(v))
    return dequantized(v);
  BufferDesc desc;
  desc.kind = BufferDesc::Kind::Activation;
  desc.name = "t" + std::to_string(program.buffers.size());
  desc.dtype = dtypeName(elementOf(v));
  desc.shape = symbolicShape(v);
  int64_t id = newBuffer(desc);
  buffers[v] = id;
  return id;
}

LogicalResult ProgramBuilder::emitKernel(Operation *op,
                                         ArrayRef<Value> operands,
                                         ArrayRef<Value> results) {
  SmallVector<Value> all(operands.begin(), operands.end());
  all.append(results.begin(), results.end());
  for (Value v : all)
    if (auto shaped = dyn_cast<ShapedType>(v.getType()))
      if (!isSupportedElement(shaped.getElementType()) && !packed.count(v))
        return op->emitError("the host backend does not support element type ")
               << shaped.getElementType() << " yet";
  // Weights read in place: the payload takes the operand's slot, the
  // scales (and global scale) follow every other buffer of the launch.
  // msa.moe_experts takes its packed expert stacks directly.
  llvm::SmallDenseMap<int, Value> packedSource;
  for (auto [slot, v] : llvm::enumerate(operands)) {
    if (auto it = inPlace.find(v); it != inPlace.end())
      packedSource[static_cast<int>(slot)] = it->second;
    else if (packedWeights && packed.count(v) && slot < op->getNumOperands() &&
             op->getOperand(slot) == v &&
             isPackedWeightOperand(op->getOpOperand(slot)))
      packedSource[static_cast<int>(slot)] = v;
  }
  PackedOperands packedOps;
  for (auto &[slot, v] : packedSource)
    packedOps[slot] = packedLayout(v);
  // Payloads the op's kernels read best in another order
  // (prologueWeightOrder): the artifact stores them so, and every body of
  // the op reads them so. A payload has one order.
  const bool headMajor = prologueWeightOrderHeadMajor();
  if (int64_t order = prologueWeightOrder(op, &packedOps)) {
    for (auto &[slot, v] : packedSource) {
      packedOps[slot].orderRanks = order;
      packedOps[slot].orderHeadMajor = headMajor;
      BufferDesc &desc = program.buffers[bufferFor(packed[v].data)];
      if (desc.kind != BufferDesc::Kind::Weight || desc.stacked ||
          (desc.orderRanks &&
           (desc.orderRanks != order || desc.orderHeadMajor != headMajor)))
        return op->emitError("weight operand ")
               << slot << " cannot take the chunk-major order of " << order
               << " ranks (its payload '" << desc.name
               << "' is not one checkpoint tensor, or has another order)";
      desc.orderRanks = order;
      desc.orderHeadMajor = headMajor;
    }
  }
  // Kernels are shared by ops that print identically apart from SSA names.
  std::string key;
  {
    llvm::raw_string_ostream os(key);
    os << op->getName() << op->getAttrDictionary()
       << op->getPropertiesAsAttribute();
    for (Type t : op->getOperandTypes())
      os << "," << t;
    for (Type t : op->getResultTypes())
      os << ";" << t;
  }
  Launch launch;
  launch.op = op->getName().getStringRef().str();
  for (auto [slot, v] : llvm::enumerate(all)) {
    auto it = packedSource.find(static_cast<int>(slot));
    launch.buffers.push_back(
        bufferFor(it != packedSource.end() ? packed[it->second].data : v));
  }
  const bool gpu =
      hasGpuKernel(op, kGpuThreads) &&
      !llvm::is_contained(genericGpuOps, op->getName().getStringRef().str());
  if (gpu) {
    // The GPU kernel's workspace and counters follow the op's buffers (the
    // host kernel ignores them); launches run in order, so all share them.
    GpuWorkspace ws = gpuWorkspace(op, &packedOps);
    if (ws.floatsPerToken)
      launch.buffers.push_back(scratchBuffer("f32", ws.floatsPerToken));
    if (ws.countersPerToken)
      launch.buffers.push_back(scratchBuffer("i32", ws.countersPerToken));
    if (ws.fixedFloats)
      launch.buffers.push_back(scratchBuffer("f32", ws.fixedFloats, false));
  }
  SmallVector<int> packedSlots;
  for (auto &entry : packedOps)
    packedSlots.push_back(entry.first);
  llvm::sort(packedSlots);
  for (int slot : packedSlots) {
    PackedWeight &layout = packedOps[slot];
    const Packed &p = packed[packedSource[slot]];
    layout.scalesSlot = static_cast<int>(launch.buffers.size());
    launch.buffers.push_back(bufferFor(p.scales));
    if (p.global) {
      layout.globalSlot = static_cast<int>(launch.buffers.size());
      launch.buffers.push_back(bufferFor(p.global));
    }
  }
  {
    llvm::raw_string_ostream os(key);
    for (int slot : packedSlots)
      os << ",in-place " << slot << ":" << packedKey(packedOps[slot]);
  }
  // A GPU kernel in several parts runs as consecutive launches over the same
  // buffers; on the host the first part does the whole op and the others
  // are empty.
  const int64_t parts = gpu ? gpuKernelParts(op, &packedOps) : 1;
  auto partName = [](const std::string &name, int64_t part) {
    return part == 0 ? name : name + "_part" + std::to_string(part);
  };
  auto found = kernelByKey.find(key);
  if (found != kernelByKey.end()) {
    for (int64_t part = 0; part < parts; ++part) {
      launch.kernel = partName(found->second, part);
      program.schedule.push_back(launch);
    }
    return success();
  }
  std::string name = "msac_k" + std::to_string(program.kernelNames.size()) +
                     "_" + op->getName().stripDialect().str();
  kernelByKey[key] = name;
  for (int64_t part = 0; part < parts; ++part) {
    program.kernelNames.push_back(partName(name, part));
    launch.kernel = partName(name, part);
    program.schedule.push_back(launch);
  }

  OpBuilder &b = *kb;
  Location loc = op->getLoc();
  emitKernelFunction(b, loc, name, [&](KB &k) {
    k.packed = &packedOps;
    TypeSwitch<Operation *>(op)
        .Case([&](msa::EmbeddingOp o) { embeddingKernel(k, o); })
        .Case([&](msa::RMSNormOp o) { rmsNormKernel(k, o); })
        .Case([&](msa::LinearOp o) { linearKernel(k, o); })
        .Case([&](msa::RoPEOp o) { ropeKernel(k, o); })
        .Case([&](msa::KVCacheInsertOp o) { kvInsertKernel(k, o); })
        .Case(
            [&](msa::AttentionPrologueOp o) { attentionPrologueKernel(k, o); })
        .Case([&](msa::IndexScoreOp o) { indexScoreKernel(k, o); })
        .Case([&](msa::BlockTopKOp o) { blockTopKKernel(k, o); })
        .Case([&](msa::SparseAttentionOp o) { sparseAttentionKernel(k, o); })
        .Case([&](msa::DenseAttentionOp o) { denseAttentionKernel(k, o); })
        .Case([&](msa::SwiGLUOp o) { swigluKernel(k, o); })
        .Case([&](msa::MoERouterOp o) { moeRouterKernel(k, o); })
        .Case([&](msa::MoEExpertsOp o) { moeExpertsKernel(k, o); })
        .Case([&](msa::LogitsOp o) { logitsKernel(k, o); })
        .Case([&](arith::AddFOp o) { addKernel(k, o); });
  });
  // The host runs every part in part 0; the other parts are empty.
  for (int64_t part = 1; part < parts; ++part)
    emitKernelFunction(b, loc, partName(name, part), [](KB &) {});

  // The GPU bodies; another one for targets with warpgroup MMA, and one
  // for targets with hardware E2M1 conversions, where it differs (their
  // shared arrays get distinct names).
  auto emitGpuBody = [&](ModuleOp into, int64_t part, bool wgmma, bool e2m1) {
    OpBuilder gb = OpBuilder::atBlockEnd(into.getBody());
    std::string prefix = partName(name, part);
    if (wgmma)
      prefix += "_wgmma";
    else if (e2m1)
      prefix += "_e2m1";
    emitKernelFunction(gb, loc, partName(name, part), [&](KB &gk) {
      gk.packed = &packedOps;
      emitGpuKernel(gk, op, into, prefix, kGpuThreads, part, wgmma,
                    wgmma && wideTiles, e2m1);
    });
  };
  for (int64_t part = 0; gpu && part < parts; ++part)
    emitGpuBody(*program.gpuKernels, part, /*wgmma=*/false, /*e2m1=*/false);
  if (gpu && hasWgmmaKernel(op, kGpuThreads, &packedOps))
    for (int64_t part = 0; part < parts; ++part)
      emitGpuBody(*program.wgmmaKernels, part, /*wgmma=*/true,
                  /*e2m1=*/false);
  for (int64_t part = 0; gpu && part < parts; ++part)
    if (hasE2M1Kernel(op, kGpuThreads, part))
      emitGpuBody(*program.e2m1Kernels, part, /*wgmma=*/false,
                  /*e2m1=*/true);
  return success();
}

FailureOr<HostProgram> ProgramBuilder::run() {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError("no func.func @forward to compile"), failure();
  program.kernels = ModuleOp::create(module.getLoc());
  program.gpuKernels = ModuleOp::create(module.getLoc());
  program.wgmmaKernels = ModuleOp::create(module.getLoc());
  program.e2m1Kernels = ModuleOp::create(module.getLoc());
  OpBuilder builder(program.kernels->getBodyRegion());
  kb = &builder;

  Block &body = forward.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    BufferDesc desc;
    desc.argument = arg.getArgNumber();
    auto nameAttr =
        forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "msa.name");
    desc.name =
        nameAttr ? nameAttr.str() : "arg" + std::to_string(desc.argument);
    if (auto cache = dyn_cast<msa::PagedCacheType>(arg.getType())) {
      Type element = cache.getElementType();
      auto nvfp4 = dyn_cast<bsq::NVFP4Type>(element);
      if (!isSupportedElement(element) && !isa<Float8E4M3FNType>(element) &&
          !(nvfp4 && !nvfp4.getGlobalScale()))
        return forward.emitError("the host backend supports bf16, f32, fp8 "
                                 "(E4M3) and nvfp4 (global scale 1) caches; "
                                 "got ")
                   << element
                   << " (use --kv-cache-dtype bf16|fp8|nvfp4 "
                      "--index-cache-dtype bf16|fp8|nvfp4)",
               failure();
      desc.kind = BufferDesc::Kind::Cache;
      // The manifest names the NVFP4 layout (codes, then scales, per page;
      // KernelBuilder.h, CacheRow) "nvfp4".
      desc.dtype = nvfp4 ? "nvfp4" : dtypeName(element);
      desc.heads = cache.getHeads();
      desc.pageSize = cache.getPageSize();
      desc.headDim = cache.getHeadDim();
      desc.bytesPerToken = cache.getBytesPerToken();
    } else if (isa<msa::BlockTableType>(arg.getType())) {
      desc.kind = BufferDesc::Kind::Input;
      desc.dtype = "i32";
      desc.shape = {{0, "S"}, {0, "MB"}};
    } else {
      desc.kind = BufferDesc::Kind::Input;
      desc.dtype = "i32";
      desc.shape = {{0, desc.name == "logits_indices" ? "N" : "T"}};
    }
    buffers[arg] = newBuffer(desc);
  }

  for (Operation &op : body.without_terminator()) {
    if (isa<arith::ConstantOp, tensor::DimOp>(op))
      continue; // scalars (T comes with the step) and pack's constant 1
    if (auto weight = dyn_cast<msa::WeightOp>(op)) {
      BufferDesc desc;
      desc.kind = BufferDesc::Kind::Weight;
      desc.name = weight.getName().str();
      desc.dtype = dtypeName(elementOf(weight.getResult()));
      for (int64_t d : shapeOf(weight.getResult()))
        desc.shape.push_back({d, ""});
      desc.stacked = weight.getNumStacked().value_or(0);
      buffers[weight.getResult()] = newBuffer(desc);
      continue;
    }
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op)) {
      buffers[op.getResult(0)] = bufferFor(op.getOperand(0)); // a view
      continue;
    }
    if (auto insert = dyn_cast<msa::KVCacheInsertOp>(op)) {
      // Updates the cache in place: the old value must have no other use.
      if (!insert.getCache().hasOneUse())
        return insert.emitError("the host backend updates caches in place; "
                                "the cache operand has other uses"),
               failure();
      SmallVector<Value> operands(op.getOperands());
      if (failed(emitKernel(&op, operands, {})))
        return failure();
      buffers[insert.getResult()] = bufferFor(insert.getCache());
      continue;
    }
    if (auto prologue = dyn_cast<msa::AttentionPrologueOp>(op)) {
      // Updates the caches in place, like msa.kv_cache_insert; only q and
      // index_q are activations.
      SmallVector<Value> caches = {prologue.getKeyCache(),
                                   prologue.getValueCache()};
      if (Value index = prologue.getIndexCache())
        caches.push_back(index);
      if (llvm::any_of(caches, [](Value c) { return !c.hasOneUse(); }))
        return prologue.emitError("the host backend updates caches in "
                                  "place; a cache operand has other uses"),
               failure();
      SmallVector<Value> operands(op.getOperands());
      SmallVector<Value> results = {prologue.getQ()};
      if (Value indexQ = prologue.getIndexQ())
        results.push_back(indexQ);
      if (failed(emitKernel(&op, operands, results)))
        return failure();
      buffers[prologue.getNewKeyCache()] = bufferFor(prologue.getKeyCache());
      buffers[prologue.getNewValueCache()] =
          bufferFor(prologue.getValueCache());
      if (Value index = prologue.getNewIndexCache())
        buffers[index] = bufferFor(prologue.getIndexCache());
      continue;
    }
    if (auto pack = dyn_cast<bsq::PackOp>(op)) {
      Packed p;
      p.data = pack.getData();
      p.scales = pack.getScales();
      if (Value g = pack.getGlobalScale()) {
        // compressed-tensors: the importer wrote 1 / weight_global_scale.
        if (auto div = g.getDefiningOp<arith::DivFOp>()) {
          p.invertGlobal = true;
          g = div.getRhs();
        }
        p.global = g;
      }
      packed[pack.getResult()] = p;
      continue;
    }
    if (auto dq = dyn_cast<bsq::DequantizeOp>(op)) {
      if (!packed.count(dq.getInput()) || !elementOf(dq.getResult()).isF32())
        return dq.emitError("the host backend dequantizes packed weights to "
                            "f32 only"),
               failure();
      if (packedWeights && readableInPlace(dq))
        inPlace[dq.getResult()] = dq.getInput();
      else
        buffers[dq.getResult()] = dequantized(dq.getInput());
      continue;
    }
    if (isa<arith::DivFOp>(op) && llvm::all_of(op.getUsers(), [](Operation *u) {
          return isa<bsq::PackOp>(u);
        }))
      continue; // the inverted global scale of a pack, handled there
    if (isa<bsq::BSQDialect>(op.getDialect()))
      return op.emitError("the host backend has no kernel for this op; run "
                          "-msac-reference-pipeline first"),
             failure();
    if (!isa<msa::EmbeddingOp, msa::RMSNormOp, msa::LinearOp, msa::RoPEOp,
             msa::IndexScoreOp, msa::BlockTopKOp, msa::SparseAttentionOp,
             msa::DenseAttentionOp, msa::SwiGLUOp, msa::MoERouterOp,
             msa::MoEExpertsOp, msa::LogitsOp, arith::AddFOp>(op))
      return op.emitError("the host backend has no kernel for this op"),
             failure();
    // Only the attention output is used; an LSE result is not computed.
    SmallVector<Value> results;
    for (Value r : op.getResults())
      if (!r.use_empty() || op.getNumResults() == 1 ||
          isa<msa::MoERouterOp>(op))
        results.push_back(r);
    if (isa<msa::SparseAttentionOp, msa::DenseAttentionOp>(op) &&
        op.getNumResults() == 2 && !op.getResult(1).use_empty())
      return op.emitError("the host backend does not return the LSE yet"),
             failure();
    if (auto a = dyn_cast<msa::SparseAttentionOp>(op))
      program.attentionPrecision.push_back(a.getPrecision());
    if (auto a = dyn_cast<msa::DenseAttentionOp>(op))
      program.attentionPrecision.push_back(a.getPrecision());
    SmallVector<Value> operands(op.getOperands());
    if (failed(emitKernel(&op, operands, results)))
      return failure();
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (Value v : ret.getOperands())
    program.outputs.push_back(bufferFor(v));
  return std::move(program);
}

} // namespace

FailureOr<HostProgram>
msac::buildHostProgram(ModuleOp module,
                       const std::vector<std::string> &genericGpuOps,
                       bool wideTiles, bool packedWeights, bool sm90a) {
  kernels::setPrologueWeightOrderTargets(sm90a);
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<LLVM::LLVMDialect, scf::SCFDialect, math::MathDialect,
                   arith::ArithDialect, func::FuncDialect, gpu::GPUDialect,
                   NVVM::NVVMDialect>();
  return ProgramBuilder(module, genericGpuOps, wideTiles, packedWeights).run();
}

bool msac::hasSpecificGpuKernel(Operation *op) {
  return kernels::hasGpuKernel(op, kGpuThreads);
}
