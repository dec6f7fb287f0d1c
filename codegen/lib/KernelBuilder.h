//===- KernelBuilder.h - Emitting kernel bodies as MLIR ---------*- C++ -*-===//
//
// Part of msac.
//
// Private to the codegen library: the helpers the host and GPU kernel
// builders share to emit loops, loads and stores of a kernel body in the
// scf/arith/math/llvm dialects.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_CODEGEN_LIB_KERNELBUILDER_H
#define MSAC_CODEGEN_LIB_KERNELBUILDER_H

#include "msac/Codegen/HostProgram.h"
#include "msac/Dialect/BSQ/IR/BSQOps.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"
#include "msac/Numerics/LowPrecision.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <cassert>
#include <cmath>
#include <functional>

namespace msac::kernels {

using namespace mlir;

//===----------------------------------------------------------------------===//
// Kernel body builder
//===----------------------------------------------------------------------===//

struct PackedWeight;
/// Launch slots of a kernel whose weight operands are read in place.
using PackedOperands = llvm::SmallDenseMap<int, PackedWeight>;

/// Emits loops and memory accesses inside one kernel function
/// `(ptr buffers, ptr scalars)`.
class KB {
public:
  KB(OpBuilder &b, Location loc, Value buffers, Value scalars)
      : b(b), loc(loc), bufs(buffers), scal(scalars) {
    MLIRContext *ctx = b.getContext();
    f32 = b.getF32Type();
    i32 = b.getI32Type();
    i16 = b.getI16Type();
    i64 = b.getI64Type();
    ptrT = LLVM::LLVMPointerType::get(ctx);
  }

  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value cf(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value toI64(Value index) {
    return arith::IndexCastOp::create(b, loc, i64, index);
  }
  Value gep(Value base, Value index, Type elem) {
    return LLVM::GEPOp::create(b, loc, ptrT, elem, base,
                               ValueRange{toI64(index)});
  }
  /// Buffer `i` of the launch.
  Value ptr(int i) {
    Value slot = gep(bufs, c(i), ptrT);
    return LLVM::LoadOp::create(b, loc, ptrT, slot);
  }
  /// Scalar `i` (0 = T, 1 = N, 2 = MB) as an index.
  Value scalar(int i) {
    Value v = LLVM::LoadOp::create(b, loc, i64, gep(scal, c(i), i64));
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }

  Value ci(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value loadF(Value base, Value index, Type storage) {
    if (storage.isF32())
      return LLVM::LoadOp::create(b, loc, f32, gep(base, index, f32));
    if (llvm::isa<Float8E4M3FNType>(storage))
      return decodeE4M3(LLVM::LoadOp::create(b, loc, b.getI8Type(),
                                             gep(base, index, b.getI8Type())));
    assert(storage.isBF16() && "host kernels load bf16, f32 or f8E4M3FN");
    Value h = LLVM::LoadOp::create(b, loc, i16, gep(base, index, i16));
    Value w = arith::ExtUIOp::create(b, loc, i32, h);
    Value shifted = arith::ShLIOp::create(
        b, loc, w, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(16)));
    return arith::BitcastOp::create(b, loc, f32, shifted);
  }
  /// FP8 E4M3FN byte -> FP32 (bias 7, subnormals, 0x7F/0xFF NaN).
  Value decodeE4M3(Value byte) {
    Value v = arith::ExtUIOp::create(b, loc, i32, byte);
    auto andI = [&](Value x, int64_t m) {
      return arith::AndIOp::create(b, loc, x, ci(m)).getResult();
    };
    auto shr = [&](Value x, int64_t n) {
      return arith::ShRUIOp::create(b, loc, x, ci(n)).getResult();
    };
    auto shl = [&](Value x, int64_t n) {
      return arith::ShLIOp::create(b, loc, x, ci(n)).getResult();
    };
    Value e = andI(shr(v, 3), 15), m = andI(v, 7);
    // Normal: 2^(e-7) * (1 + m/8) = bits ((e + 120) << 23) | (m << 20).
    Value normal = arith::BitcastOp::create(
        b, loc, f32,
        arith::OrIOp::create(b, loc,
                             shl(arith::AddIOp::create(b, loc, e, ci(120)), 23),
                             shl(m, 20)));
    // Subnormal: m * 2^-9.
    Value sub = arith::MulFOp::create(
        b, loc, arith::UIToFPOp::create(b, loc, f32, m), cf(1.0 / 512));
    Value isSub =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, e, ci(0));
    Value mag = arith::SelectOp::create(b, loc, isSub, sub, normal);
    Value isNan = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        andI(v, 0x7F), ci(0x7F));
    mag = arith::SelectOp::create(b, loc, isNan, cf(NAN), mag);
    Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                      andI(v, 0x80), ci(0));
    return arith::SelectOp::create(b, loc, neg,
                                   arith::NegFOp::create(b, loc, mag), mag);
  }
  /// FP32 -> FP8 E4M3FN byte (as i8): |x| >= 448 (and infinities) saturate
  /// to 448, otherwise round to nearest even (subnormals in units of
  /// 2^-9); NaN stays NaN (0x7F). Matches floatToE4M3 in LowPrecision.h.
  Value encodeE4M3(Value x) {
    Value bits = arith::BitcastOp::create(b, loc, i32, x);
    Value sign = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, bits, ci(24)), ci(0x80));
    Value a = math::AbsFOp::create(b, loc, x);
    Value abits = arith::BitcastOp::create(b, loc, i32, a);
    // Normal range: round the FP32 mantissa to 3 bits (nearest even).
    Value lsb = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, abits, ci(20)), ci(1));
    Value rounded = arith::AddIOp::create(
        b, loc, abits, arith::AddIOp::create(b, loc, lsb, ci(0x7FFFF)));
    Value normal = arith::SubIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, rounded, ci(20)), ci(120 << 3));
    // Subnormal range (|x| < 2^-6): q = round-half-even(|x| * 512), 0..8.
    Value scaled = arith::MulFOp::create(b, loc, a, cf(512.0));
    Value q = arith::FPToUIOp::create(b, loc, i32, scaled);
    Value frac = arith::SubFOp::create(b, loc, scaled,
                                       arith::UIToFPOp::create(b, loc, f32, q));
    Value up = arith::OrIOp::create(
        b, loc,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, frac, cf(0.5)),
        arith::AndIOp::create(
            b, loc,
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, frac,
                                  cf(0.5)),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                  arith::AndIOp::create(b, loc, q, ci(1)),
                                  ci(0))));
    Value subnormal = arith::AddIOp::create(
        b, loc, q, arith::ExtUIOp::create(b, loc, i32, up));
    Value isSub = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, a,
                                        cf(1.0 / 64));
    Value code = arith::SelectOp::create(b, loc, isSub, subnormal, normal);
    Value big =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, a, cf(448.0));
    code = arith::SelectOp::create(b, loc, big, ci(0x7E), code);
    Value isNan =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
    code = arith::SelectOp::create(b, loc, isNan, ci(0x7F), code);
    code = arith::OrIOp::create(b, loc, code, sign);
    return arith::TruncIOp::create(b, loc, b.getI8Type(), code);
  }

  /// Stores an FP32 value; BF16 rounds to nearest even (NaN stays NaN),
  /// FP8 E4M3FN as encodeE4M3.
  void storeF(Value base, Value index, Value value, Type storage) {
    if (storage.isF32()) {
      LLVM::StoreOp::create(b, loc, value, gep(base, index, f32));
      return;
    }
    if (llvm::isa<Float8E4M3FNType>(storage)) {
      LLVM::StoreOp::create(b, loc, encodeE4M3(value),
                            gep(base, index, b.getI8Type()));
      return;
    }
    auto ci = [&](int64_t v) {
      return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
    };
    Value bits = arith::BitcastOp::create(b, loc, i32, value);
    Value lsb = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, bits, ci(16)), ci(1));
    Value rounded = arith::AddIOp::create(
        b, loc, bits, arith::AddIOp::create(b, loc, lsb, ci(0x7FFF)));
    Value high = arith::ShRUIOp::create(b, loc, rounded, ci(16));
    Value isNan =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, value, value);
    Value result = arith::SelectOp::create(b, loc, isNan, ci(0x7FC0), high);
    Value h = arith::TruncIOp::create(b, loc, i16, result);
    LLVM::StoreOp::create(b, loc, h, gep(base, index, i16));
  }
  Value loadIndex(Value base, Value index) {
    Value v = LLVM::LoadOp::create(b, loc, i32, gep(base, index, i32));
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  void storeIndex(Value base, Value index, Value value) {
    Value v = arith::IndexCastOp::create(b, loc, i32, value);
    LLVM::StoreOp::create(b, loc, v, gep(base, index, i32));
  }
  /// Rounds an FP32 value to `storage` (through the one-float slot `tmp`),
  /// as storing and reloading would.
  Value roundTo(Value value, Type storage, Value tmp) {
    if (storage.isF32())
      return value;
    storeF(tmp, c(0), value, storage);
    return loadF(tmp, c(0), storage);
  }
  /// A stack array of `n` floats, allocated at the kernel's entry.
  Value scratch(int64_t n) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    Value count = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(n));
    return LLVM::AllocaOp::create(b, loc, ptrT, f32, count);
  }

  void loop(Value lb, Value ub, const std::function<void(Value)> &body) {
    auto forOp = scf::ForOp::create(b, loc, lb, ub, c(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forOp.getBody()->getTerminator());
    body(forOp.getInductionVar());
  }
  /// `acc = init; for iv in [lb, ub): acc = body(iv, acc)`.
  Value reduce(Value lb, Value ub, Value init,
               const std::function<Value(Value, Value)> &body) {
    auto forOp = scf::ForOp::create(b, loc, lb, ub, c(1), ValueRange{init});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(forOp.getBody());
    Value next = body(forOp.getInductionVar(), forOp.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, loc, next);
    return forOp.getResult(0);
  }
  /// Several loop-carried values.
  SmallVector<Value>
  reduceN(Value lb, Value ub, ValueRange init,
          const std::function<SmallVector<Value>(Value, ValueRange)> &body) {
    auto forOp = scf::ForOp::create(b, loc, lb, ub, c(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(forOp.getBody());
    SmallVector<Value> next =
        body(forOp.getInductionVar(), forOp.getRegionIterArgs());
    scf::YieldOp::create(b, loc, next);
    return SmallVector<Value>(forOp.getResults());
  }
  void ifThen(Value cond, const std::function<void()> &then) {
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    then();
  }
  Value select(Value cond, Value a, Value bb) {
    return arith::SelectOp::create(b, loc, cond, a, bb);
  }

  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  /// x y + z with one rounding (math.fma).
  Value fma(Value x, Value y, Value z) {
    return math::FmaOp::create(b, loc, x, y, z);
  }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value maxf(Value x, Value y) {
    return arith::MaximumFOp::create(b, loc, x, y);
  }
  Value minf(Value x, Value y) {
    return arith::MinimumFOp::create(b, loc, x, y);
  }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value iadd(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value imul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value idiv(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value irem(Value x, Value y) { return arith::RemUIOp::create(b, loc, x, y); }
  Value icmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value fcmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value sigmoid(Value x) {
    return div(cf(1.0), add(cf(1.0), exp(sub(cf(0.0), x))));
  }
  /// sum_{k < n} a[aOff + k] * w[wOff + k], FP32.
  Value dot(Value a, Value aOff, Type aType, Value w, Value wOff, Type wType,
            int64_t n) {
    return reduce(c(0), c(n), cf(0.0), [&](Value k, Value acc) {
      Value x = loadF(a, iadd(aOff, k), aType);
      Value y = loadF(w, iadd(wOff, k), wType);
      return add(acc, mul(x, y));
    });
  }

  OpBuilder &b;
  Location loc;
  Value bufs, scal;
  Block *entry = nullptr;
  Type f32, i32, i16, i64, ptrT;
  /// The weight operands this kernel reads in place (weightOperand).
  const PackedOperands *packed = nullptr;
};

/// Creates kernel function `name` `(ptr buffers, ptr scalars)` at `b`'s
/// insertion point and fills it with `body` (given a KB on its entry block),
/// then the return.
inline func::FuncOp emitKernelFunction(OpBuilder &b, Location loc,
                                       StringRef name,
                                       llvm::function_ref<void(KB &)> body) {
  auto ptrT = LLVM::LLVMPointerType::get(b.getContext());
  auto fn =
      func::FuncOp::create(b, loc, name, b.getFunctionType({ptrT, ptrT}, {}));
  Block *entry = fn.addEntryBlock();
  OpBuilder at(entry, entry->end());
  KB k(at, loc, entry->getArgument(0), entry->getArgument(1));
  k.entry = entry;
  body(k);
  func::ReturnOp::create(at, loc);
  return fn;
}

/// Element type of the buffer that holds `v`: a block-scaled value is
/// dequantized to an FP32 buffer once, when the model is loaded.
inline Type elementOf(Value v) {
  Type element = cast<ShapedType>(v.getType()).getElementType();
  if (isa<bsq::QuantizedTypeInterface>(element))
    return Float32Type::get(v.getContext());
  return element;
}
inline ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}
/// Product of the static dims after the first.
inline int64_t innerElements(Value v) {
  int64_t n = 1;
  for (int64_t d : shapeOf(v).drop_front())
    n *= d;
  return n;
}

/// The NeoX RoPE inverse frequencies theta^(-2i / r) for i < r / 2 (spec
/// §1.4), rounded to FP32: folded at compile time by every RoPE kernel
/// (msa.rope and the attention prologue, host and GPU), so all agree.
inline SmallVector<float> ropeInverseFrequencies(double theta,
                                                 int64_t rotaryDim) {
  SmallVector<float> inv;
  for (int64_t i = 0; i < rotaryDim / 2; ++i)
    inv.push_back(static_cast<float>(std::pow(theta, -2.0 * i / rotaryDim)));
  return inv;
}

/// RMS norm (msa.rms_norm): 1 / sqrt(sumSquares / n + eps), then
/// x * inv * (weight [+ 1 with the Gemma unit offset]). Shared by the host
/// and GPU kernels so that both round alike.
inline Value rmsInverse(KB &k, Value sumSquares, int64_t n, float eps) {
  Value mean =
      k.add(k.div(sumSquares, k.cf(static_cast<double>(n))), k.cf(eps));
  return math::RsqrtOp::create(k.b, k.loc, mean);
}
inline Value rmsNormValue(KB &k, Value x, Value inv, Value weight,
                          bool unitOffset) {
  if (unitOffset)
    weight = k.add(weight, k.cf(1.0));
  return k.mul(k.mul(x, inv), weight);
}

/// msa.rms_norm's rows as its host and GPU kernels read them: input
/// [T, ..., n] normalized over rows of n (per-head norms have several rows
/// per token), weight [n], epsilon and Gemma's unit offset (w + 1).
struct RMSNormShape {
  explicit RMSNormShape(msa::RMSNormOp op)
      : n(shapeOf(op.getInput()).back()),
        rowsPerToken(innerElements(op.getInput()) / n),
        ie(elementOf(op.getInput())), we(elementOf(op.getWeight())),
        eps(op.getEps().convertToFloat()), offset(op.getUnitOffset()) {}
  int64_t n, rowsPerToken;
  Type ie, we; ///< input/output, weight
  float eps;
  bool offset;
};

/// SwiGLU-OAI of one (gate, up) pair in FP32 (msa.swiglu, MiniMax's
/// swigluoai): g = min(gate, limit), u = clamp(up, -limit, limit),
/// (u + 1) * g * sigmoid(alpha * g). Shared by the swiglu and MoE kernels
/// of every target.
inline Value swigluOAI(KB &k, Value gate, Value up, float alpha, float limit) {
  Value g = k.minf(gate, k.cf(limit));
  Value u = k.maxf(k.minf(up, k.cf(limit)), k.cf(-limit));
  return k.mul(k.mul(k.add(u, k.cf(1)), g), k.sigmoid(k.mul(k.cf(alpha), g)));
}

/// The shapes and element types of an msa.moe_experts op (input [T, H],
/// routing weights and ids [T, topK], w1/w3 [E, inner, H], w2 [E, H,
/// inner]) and its SwiGLU constants, as its host and GPU kernels read them.
struct MoEExpertsShape {
  explicit MoEExpertsShape(msa::MoEExpertsOp op)
      : inner(shapeOf(op.getGateWeights())[1]),
        h(shapeOf(op.getGateWeights())[2]),
        topK(shapeOf(op.getRoutingWeights())[1]), ie(elementOf(op.getInput())),
        we(elementOf(op.getGateWeights())), de(elementOf(op.getDownWeights())),
        alpha(op.getAlpha().convertToFloat()),
        limit(op.getLimit().convertToFloat()) {}
  int64_t inner, h, topK;
  Type ie, we, de; ///< input, gate/up weights, down weights
  float alpha, limit;
};

/// msa.moe_router's selection for token `t`, given FP32 arrays score[E]
/// (sigmoid scores) and biased[E] (score + correction bias; overwritten):
/// the top-k experts by biased score (higher first, lower id on ties; a
/// NaN never wins but a pick is always made) into ids[t, :], their
/// unbiased scores times routed_scaling_factor (divided by their sum with
/// renormalization) into weights[t, :]. Shared by the host and GPU
/// kernels.
inline void routerTopK(KB &k, Value score, Value biased, Value weights,
                       Value ids, Value t, int64_t experts, int64_t topK,
                       float scaling, bool renormalize) {
  Value sum = k.cf(0);
  for (int64_t slot = 0; slot < topK; ++slot) {
    SmallVector<Value> best = k.reduceN(
        k.c(0), k.c(experts), {k.c(0), k.cf(-INFINITY), k.c(-1)},
        [&](Value x, ValueRange acc) -> SmallVector<Value> {
          Value s = k.loadF(biased, x, k.f32);
          Value none = k.icmp(arith::CmpIPredicate::eq, acc[2], k.c(-1));
          Value better = arith::OrIOp::create(
              k.b, k.loc, none, k.fcmp(arith::CmpFPredicate::OGT, s, acc[1]));
          return {k.select(better, x, acc[0]), k.select(better, s, acc[1]),
                  k.c(0)};
        });
    Value at = k.iadd(k.imul(t, k.c(topK)), k.c(slot));
    k.storeIndex(ids, at, best[0]);
    k.storeF(biased, best[0], k.cf(-INFINITY), k.f32);
    Value s = k.loadF(score, best[0], k.f32);
    k.storeF(weights, at, s, k.f32);
    sum = k.add(sum, s);
  }
  Value factor = renormalize ? k.div(k.cf(scaling), sum) : k.cf(scaling);
  k.loop(k.c(0), k.c(topK), [&](Value slot) {
    Value at = k.iadd(k.imul(t, k.c(topK)), slot);
    k.storeF(weights, at, k.mul(k.loadF(weights, at, k.f32), factor), k.f32);
  });
}

/// Offset of (page, head, slot, 0) in a paged cache.
inline Value cacheOffset(KB &k, Value page, Value head, Value slot,
                         msa::PagedCacheType type) {
  Value ph = k.iadd(k.imul(page, k.c(type.getHeads())), head);
  Value phs = k.iadd(k.imul(ph, k.c(type.getPageSize())), slot);
  return k.imul(phs, k.c(type.getHeadDim()));
}

/// Physical page of logical block `block` of sequence `seq`.
inline Value pageOf(KB &k, Value table, Value seq, Value block) {
  return k.loadIndex(table, k.iadd(k.imul(seq, k.scalar(2)), block));
}

/// Decodes an FP4 E2M1 code (low 4 bits of `code`, an i32) to FP32.
inline Value decodeE2M1(KB &k, Value code) {
  auto ci = [&](int64_t v) {
    return arith::ConstantOp::create(k.b, k.loc, k.b.getI32IntegerAttr(v));
  };
  Value m = arith::AndIOp::create(k.b, k.loc, code, ci(7));
  static const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  Value v = k.cf(0);
  for (int i = 1; i < 8; ++i)
    v = k.select(k.icmp(arith::CmpIPredicate::eq, m, ci(i)), k.cf(values[i]),
                 v);
  Value negative =
      k.icmp(arith::CmpIPredicate::ne,
             arith::AndIOp::create(k.b, k.loc, code, ci(8)), ci(0));
  // negf, not 0 - v: code 8 is -0.
  return k.select(negative, arith::NegFOp::create(k.b, k.loc, v), v);
}

/// Decodes an 8-bit float (`byte` as i32) of `type` to FP32: E4M3FN (bias
/// 7, 0x7F NaN), E5M2 (bias 15), E8M0 (2^(byte-127), 0xFF NaN).
inline Value decodeByteFloat(KB &k, Value byte, Type type) {
  auto ci = [&](int64_t v) {
    return arith::ConstantOp::create(k.b, k.loc, k.b.getI32IntegerAttr(v));
  };
  auto shl = [&](Value x, int64_t n) {
    return arith::ShLIOp::create(k.b, k.loc, x, ci(n));
  };
  auto bits = [&](Value i) {
    return arith::BitcastOp::create(k.b, k.loc, k.f32, i);
  };
  if (isa<Float8E8M0FNUType>(type) || type.isUnsignedInteger(8) ||
      type.isSignlessInteger(8)) {
    Value normal = bits(shl(byte, 23));
    Value v = k.select(k.icmp(arith::CmpIPredicate::eq, byte, ci(0)),
                       bits(ci(0x00400000)), normal);
    return k.select(k.icmp(arith::CmpIPredicate::eq, byte, ci(255)), k.cf(NAN),
                    v);
  }
  const bool e5m2 = isa<Float8E5M2Type>(type);
  const int mant = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  Value sign = shl(arith::ShRUIOp::create(k.b, k.loc, byte, ci(7)), 31);
  Value exponent = arith::AndIOp::create(
      k.b, k.loc, arith::ShRUIOp::create(k.b, k.loc, byte, ci(mant)),
      ci(e5m2 ? 31 : 15));
  Value m = arith::AndIOp::create(k.b, k.loc, byte, ci((1 << mant) - 1));
  Value normal = bits(arith::OrIOp::create(
      k.b, k.loc, sign,
      arith::OrIOp::create(
          k.b, k.loc,
          shl(arith::AddIOp::create(k.b, k.loc, exponent, ci(127 - bias)), 23),
          shl(m, 23 - mant))));
  Value sub = k.mul(arith::UIToFPOp::create(k.b, k.loc, k.f32, m),
                    k.cf(std::ldexp(1.0, 1 - bias - mant)));
  sub = k.select(k.icmp(arith::CmpIPredicate::ne, sign, ci(0)),
                 arith::NegFOp::create(k.b, k.loc, sub), sub); // 0x80 is -0
  Value v =
      k.select(k.icmp(arith::CmpIPredicate::eq, exponent, ci(0)), sub, normal);
  Value isNan =
      e5m2 ? k.icmp(arith::CmpIPredicate::eq, exponent, ci(31))
           : arith::AndIOp::create(
                 k.b, k.loc, k.icmp(arith::CmpIPredicate::eq, exponent, ci(15)),
                 k.icmp(arith::CmpIPredicate::eq, m, ci(7)));
  return k.select(isNan, k.cf(NAN), v);
}

//===----------------------------------------------------------------------===//
// Block-scaled weights read in place
//===----------------------------------------------------------------------===//

/// A `bsq.pack`ed weight that a kernel reads in place (msac compile
/// --packed-weights): its user's `bsq.dequantize` operand is not
/// materialized; the launch passes the packed payload in the operand's
/// slot and the block scales (and the FP32 global scale, if any) after all
/// other buffers. Element i of the logical weight (row-major, flat index)
/// is `storage[i] * scale[block(i)] [* g]`, FP32, exactly as the load-time
/// `bsq.dequantize` kernel computes it (dequantizeKernel), so a kernel
/// reading in place sums the same FP32 values in the same order.
struct PackedWeight {
  bsq::QuantizedTypeInterface format;
  SmallVector<int64_t> shape; // logical shape
  Type dataType, scaleType;   // element types of the pack's operands
  bool hasGlobal = false;
  /// compressed-tensors: the stored global scale is 1 / g.
  bool invertGlobal = false;
  /// Per-tensor formats over a stack of matrices ([E, N, K]): one scale
  /// per matrix; likewise one global scale per matrix.
  bool scalePerMatrix = false, globalPerMatrix = false;
  int scalesSlot = -1, globalSlot = -1; // launch buffer slots
  /// The payload's order in memory: 0 for row-major, else N > 0 for the
  /// chunk-major tile order of the fused attention prologue's cluster
  /// kernels on sm_90a (8-bit storage of a [rows, cols] matrix, rows a
  /// multiple of kOrderTile, cols of N kOrderTile): the matrix cut into
  /// tiles of kOrderTile rows x kOrderTile bytes, each row-major (16 KB);
  /// tile (h, j) (rows [128 h, 128 h + 128), columns [128 j, 128 j + 128))
  /// at tile index (j mod C) H N + h N + j / C, C = cols / (128 N),
  /// H = rows / 128. With N CTAs per head each over C consecutive column
  /// tiles, the CTAs of all heads reading their c-th tile read neighbouring
  /// bytes (docs/perf.md, forty-seventh and forty-eighth sessions;
  /// orderedByteIndex, msac::permuteChunkMajor).
  int64_t orderRanks = 0;
  /// The head-major variant of that order: each head's 128 rows where
  /// row-major has them, inside them tile (h, j) at (j mod C) N + j / C
  /// (the chunk-major order within the head; tile index h C N + (j mod C)
  /// N + j / C), so that the chunk stride (N tiles) is the same for every
  /// matrix.
  bool orderHeadMajor = false;

  int64_t cols() const { return shape.back(); }
  int64_t rows() const {
    return shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  }
  bool fourBit() const { return format.getStorageType().getWidth() == 4; }
};

/// Rows and bytes of a tile of PackedWeight::orderRanks' chunk-major order.
constexpr int64_t kOrderTile = kWeightOrderTile;

/// A weight operand: a plain array of `type` (bf16, f32, f8E4M3FN) at
/// `base`, or a packed one (`packed` set; `base` is its payload).
struct WeightRef {
  Value base;
  Type type;
  const PackedWeight *packed = nullptr;
  Value scales, global;
  /// A chunk-major payload (PackedWeight::orderRanks): tiles from one
  /// column tile of a rank's slice to the next, H N for this matrix's H
  /// (index; the matrices of a layout may differ in rows), or N in the
  /// head-major variant.
  Value chunkTiles;
};

/// A plain weight array.
inline WeightRef plainWeight(Value base, Type type) {
  return WeightRef{base, type, nullptr, Value(), Value(), Value()};
}

/// The weight operand in launch slot `slot` whose IR type has element
/// type `type` (f32 for a folded `bsq.dequantize`).
inline WeightRef weightOperand(KB &k, int slot, Type type) {
  WeightRef w = plainWeight(k.ptr(slot), type);
  if (!k.packed)
    return w;
  auto it = k.packed->find(slot);
  if (it == k.packed->end())
    return w;
  w.packed = &it->second;
  w.scales = k.ptr(it->second.scalesSlot);
  if (it->second.hasGlobal)
    w.global = k.ptr(it->second.globalSlot);
  if (const int64_t n = it->second.orderRanks)
    w.chunkTiles =
        k.c(it->second.orderHeadMajor ? n : it->second.rows() / kOrderTile * n);
  return w;
}

/// orderedByteIndex in two terms for a chunk-major payload
/// (PackedWeight::orderRanks): the byte of column 0 of the row whose first
/// element is flat element `rowStart` (a multiple of the columns), and the
/// bytes from a row's column 0 to its column `col`, which are the same for
/// every row; a loop over a row's columns computes the first once.
inline Value orderedRowByte(KB &k, const WeightRef &w, Value rowStart) {
  const PackedWeight &p = *w.packed;
  const int64_t n = p.orderRanks, chunks = p.cols() / kOrderTile / n;
  Value row = k.idiv(rowStart, k.c(p.cols()));
  return k.iadd(k.imul(k.idiv(row, k.c(kOrderTile)),
                       k.c((p.orderHeadMajor ? chunks * n : n) * kOrderTile *
                           kOrderTile)),
                k.imul(k.irem(row, k.c(kOrderTile)), k.c(kOrderTile)));
}
inline Value orderedColumnBytes(KB &k, const WeightRef &w, Value col) {
  const PackedWeight &p = *w.packed;
  const int64_t n = p.orderRanks, chunks = p.cols() / kOrderTile / n;
  Value j = k.idiv(col, k.c(kOrderTile));
  Value tile = k.iadd(k.imul(k.irem(j, k.c(chunks)), w.chunkTiles),
                      k.idiv(j, k.c(chunks)));
  return k.iadd(k.imul(tile, k.c(kOrderTile * kOrderTile)),
                k.irem(col, k.c(kOrderTile)));
}

/// The byte of the payload of an 8-bit packed weight that holds element
/// `i` (flat, row-major): `i` itself, or its place in the chunk-major
/// order (PackedWeight::orderRanks; orderedRowByte + orderedColumnBytes).
/// A run of 8-element pieces of one row within a 128-column tile stays
/// contiguous.
inline Value orderedByteIndex(KB &k, const WeightRef &w, Value i) {
  if (!w.packed || !w.packed->orderRanks)
    return i;
  Value col = k.irem(i, k.c(w.packed->cols()));
  return k.iadd(orderedRowByte(k, w, arith::SubIOp::create(k.b, k.loc, i, col)),
                orderedColumnBytes(k, w, col));
}

/// Index into the scale array of element `i` (flat) of a packed weight.
inline Value packedScaleIndex(KB &k, const PackedWeight &p, Value i) {
  SmallVector<int64_t> block = p.format.getBlockShape();
  const int64_t cols = p.cols(), rows2 = p.rows();
  if (block.empty())
    return p.scalePerMatrix ? k.idiv(i, k.c(rows2 * cols)) : k.c(0);
  if (block.size() == 1) // runs of the last dimension, which they divide
    return k.idiv(i, k.c(block[0]));
  const int64_t rb = (rows2 + block[0] - 1) / block[0];
  const int64_t cb = (cols + block[1] - 1) / block[1];
  Value mat = k.idiv(i, k.c(rows2 * cols));
  Value r = k.irem(k.idiv(i, k.c(cols)), k.c(rows2));
  Value c = k.irem(i, k.c(cols));
  return k.iadd(k.imul(mat, k.c(rb * cb)),
                k.iadd(k.imul(k.idiv(r, k.c(block[0])), k.c(cb)),
                       k.idiv(c, k.c(block[1]))));
}

/// The unsigned byte at `base[index]` as an i32.
inline Value loadByteU32(KB &k, Value base, Value index) {
  Type i8 = k.b.getI8Type();
  Value b = LLVM::LoadOp::create(k.b, k.loc, i8, k.gep(base, index, i8));
  return arith::ExtUIOp::create(k.b, k.loc, k.i32, b);
}

/// The FP32 block scale of element `i` (flat) of a packed weight.
inline Value packedScale(KB &k, const WeightRef &w, Value i) {
  const PackedWeight &p = *w.packed;
  Value index = packedScaleIndex(k, p, i);
  if (p.scaleType.isF32())
    return k.loadF(w.scales, index, k.f32);
  return decodeByteFloat(k, loadByteU32(k, w.scales, index),
                         isa<bsq::NVFP4Type>(p.format)
                             ? Type(Float8E4M3FNType::get(k.b.getContext()))
                             : p.scaleType);
}

/// The factor after the block scale of element `i` (flat): the global
/// scale g (1 / stored for compressed-tensors), or a null value.
inline Value packedGlobal(KB &k, const WeightRef &w, Value i) {
  const PackedWeight &p = *w.packed;
  if (!p.hasGlobal)
    return Value();
  Value g = k.loadF(
      w.global,
      p.globalPerMatrix ? k.idiv(i, k.c(p.rows() * p.cols())) : k.c(0), k.f32);
  return p.invertGlobal ? k.div(k.cf(1.0), g) : g;
}

/// The storage code of element `i` (flat) of a packed weight, as an i32:
/// its byte, or for 4-bit formats the byte holding it shifted so that the
/// code is in bits 0-3 (low nibble first; the bits above are not cleared).
inline Value loadPackedCode(KB &k, const WeightRef &w, Value i) {
  if (!w.packed->fourBit())
    return loadByteU32(k, w.base, orderedByteIndex(k, w, i));
  Value byte = loadByteU32(k, w.base, k.idiv(i, k.c(2)));
  Value odd = k.icmp(arith::CmpIPredicate::ne, k.irem(i, k.c(2)), k.c(0));
  return k.select(
      odd,
      arith::ShRUIOp::create(
          k.b, k.loc, byte,
          arith::ConstantOp::create(k.b, k.loc, k.b.getI32IntegerAttr(4))),
      byte);
}

/// Element `i` (flat) of a weight as FP32: storage * scale [* g] for a
/// packed one (the `bsq.dequantize` semantics; one FP32 rounding per
/// product).
inline Value loadWeight(KB &k, const WeightRef &w, Value i) {
  if (!w.packed)
    return k.loadF(w.base, i, w.type);
  const PackedWeight &p = *w.packed;
  Value value;
  if (p.fourBit()) {
    value = decodeE2M1(k, loadPackedCode(k, w, i));
  } else {
    value =
        decodeByteFloat(k, loadByteU32(k, w.base, orderedByteIndex(k, w, i)),
                        p.format.getStorageType());
  }
  Value v = k.mul(value, packedScale(k, w, i));
  if (Value g = packedGlobal(k, w, i))
    v = k.mul(v, g);
  return v;
}

/// Storage codes of packed weights.
enum class WeightCode { E2M1, E4M3, E5M2 };

/// The FP32 value of code `code` (E2M1: 0-15, else a byte) exactly as
/// loadWeight decodes it (decodeE2M1, decodeByteFloat): LowPrecision.h's
/// decoders, but for E5M2's exponent 31, which decodeByteFloat reads as
/// NaN (infinities included).
inline float weightCodeValue(WeightCode kind, int code) {
  const auto byte = static_cast<uint8_t>(code);
  switch (kind) {
  case WeightCode::E2M1:
    return numerics::e2m1ToFloat(byte);
  case WeightCode::E4M3:
    return numerics::e4m3ToFloat(byte);
  case WeightCode::E5M2:
    return ((byte >> 2) & 31) == 31 ? NAN : numerics::e5m2ToFloat(byte);
  }
  return NAN;
}

/// The FP32 value of every code of a packed weight's storage type
/// (weightCodeValue), in a constant global of the host kernel's module
/// (one per storage type), as a pointer.
inline Value hostDecodeTable(KB &k, Type storage) {
  WeightCode kind = WeightCode::E4M3;
  if (storage.getIntOrFloatBitWidth() == 4)
    kind = WeightCode::E2M1;
  else if (isa<Float8E5M2Type>(storage))
    kind = WeightCode::E5M2;
  assert((kind != WeightCode::E4M3 || isa<Float8E4M3FNType>(storage)) &&
         "packed weights store E2M1, E4M3FN or E5M2 codes");
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "msac_decode_table_" << storage;
  auto module = k.entry->getParentOp()->getParentOfType<ModuleOp>();
  auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
  if (!global) {
    SmallVector<float> values;
    for (int code = 0; code < (kind == WeightCode::E2M1 ? 16 : 256); ++code)
      values.push_back(weightCodeValue(kind, code));
    OpBuilder gb = OpBuilder::atBlockBegin(module.getBody());
    auto type = RankedTensorType::get({int64_t(values.size())}, k.f32);
    global = LLVM::GlobalOp::create(
        gb, k.loc, LLVM::LLVMArrayType::get(k.f32, values.size()),
        /*isConstant=*/true, LLVM::Linkage::Internal, name,
        DenseElementsAttr::get(type, ArrayRef<float>(values)),
        /*alignment=*/64);
  }
  return LLVM::AddressOfOp::create(k.b, k.loc, global);
}

/// sum_{j < n} a[aOff + j] * w[wOff + j], FP32, in KB::dot's order. A
/// packed weight's run must be one whole row (wOff a multiple of its last
/// dimension, n that dimension): its values are those of loadWeight,
/// decoded by table (hostDecodeTable) with the block scale and global
/// scale loaded once per block of the row.
inline Value dotWeight(KB &k, Value a, Value aOff, Type aType,
                       const WeightRef &w, Value wOff, int64_t n) {
  if (!w.packed)
    return k.dot(a, aOff, aType, w.base, wOff, w.type, n);
  const PackedWeight &p = *w.packed;
  assert(n == p.cols() && "packed weights are read a whole row at a time");
  SmallVector<int64_t> blockShape = p.format.getBlockShape();
  const int64_t block = blockShape.empty() ? n : blockShape.back();
  const int64_t blocks = (n + block - 1) / block;
  Value table = hostDecodeTable(k, p.format.getStorageType());
  return k.reduce(k.c(0), k.c(blocks), k.cf(0.0), [&](Value bi, Value acc) {
    Value j0 = k.imul(bi, k.c(block));
    Value first = k.iadd(wOff, j0);
    Value scale = packedScale(k, w, first);
    Value g = packedGlobal(k, w, first);
    Value end = k.iadd(j0, k.c(block));
    if (n % block != 0)
      end = arith::MinSIOp::create(k.b, k.loc, end, k.c(n));
    return k.reduce(j0, end, acc, [&](Value j, Value acc) {
      Value x = k.loadF(a, k.iadd(aOff, j), aType);
      Value code = loadPackedCode(k, w, k.iadd(wOff, j));
      if (p.fourBit())
        code = arith::AndIOp::create(k.b, k.loc, code, k.ci(15));
      Value value = k.loadF(
          table,
          arith::IndexCastUIOp::create(k.b, k.loc, k.b.getIndexType(), code),
          k.f32);
      Value y = k.mul(value, scale);
      if (g)
        y = k.mul(y, g);
      return k.add(acc, k.mul(x, y));
    });
  });
}

//===----------------------------------------------------------------------===//
// Cache rows: bf16 / f32 / FP8 and NVFP4 caches
//===----------------------------------------------------------------------===//

/// True for a paged cache of `!bsq.nvfp4` values.
inline bool isNVFP4Cache(msa::PagedCacheType type) {
  return isa<bsq::NVFP4Type>(type.getElementType());
}

/// True when msa.index_score over `indexCache` takes E4M3 x E4M3 products:
/// an FP8 or NVFP4 index-key cache (the MSA Q8KV8 / Q8KV4 indexers,
/// msa-m3-spec.md §3.2, §4.3, §5.4), whose queries are rounded to E4M3 first
/// (indexQueryE4M3).
inline bool indexQueriesE4M3(msa::PagedCacheType indexCache) {
  return isa<Float8E4M3FNType>(indexCache.getElementType()) ||
         isNVFP4Cache(indexCache);
}

/// An index-query value as msa.index_score multiplies it when
/// indexQueriesE4M3: FP32 rounded to E4M3 (nearest even, saturating at
/// +-448, encodeE4M3) and back.
inline Value indexQueryE4M3(KB &k, Value x) {
  return k.decodeE4M3(k.encodeE4M3(x));
}

/// One cache row: the `head_dim` values of one (page, head, slot).
///
/// A bf16 / f32 / f8E4M3FN cache is `[pages, heads, page_size, head_dim]`
/// elements. An NVFP4 cache (msa-m3-spec.md §4.1, §4.2, global scale 1)
/// stores each page as its packed E2M1 codes `[heads, page_size, head_dim /
/// 2]` bytes (byte i: element 2i in the low nibble, 2i + 1 in the high one)
/// followed by its E4M3 block scales `[heads, page_size, head_dim / 16]`
/// (scale j covers elements 16j .. 16j + 15): the spec's two tensors
/// interleaved page by page, so a kernel finds both from the page id alone
/// (the page count is the runtime's).
struct CacheRow {
  msa::PagedCacheType type;
  Value cache;
  /// Elements (NVFP4: bytes) from the cache's start to value 0 of the row.
  Value data;
  /// NVFP4 only: bytes from the cache's start to the row's first scale.
  Value scales;
};

/// Bytes of one NVFP4 cache page (codes and scales of every head and slot).
inline int64_t nvfp4PageBytes(msa::PagedCacheType type) {
  const int64_t d = type.getHeadDim();
  return type.getHeads() * type.getPageSize() * (d / 2 + d / 16);
}

inline CacheRow cacheRow(KB &k, Value cache, msa::PagedCacheType type,
                         Value page, Value head, Value slot) {
  if (!isNVFP4Cache(type))
    return {type, cache, cacheOffset(k, page, head, slot, type), Value()};
  const int64_t d = type.getHeadDim();
  Value row = k.iadd(k.imul(head, k.c(type.getPageSize())), slot);
  Value pageStart = k.imul(page, k.c(nvfp4PageBytes(type)));
  Value scaleRegion =
      k.iadd(pageStart, k.c(type.getHeads() * type.getPageSize() * (d / 2)));
  return {type, cache, k.iadd(pageStart, k.imul(row, k.c(d / 2))),
          k.iadd(scaleRegion, k.imul(row, k.c(d / 16)))};
}

/// FP32 -> FP4 E2M1 code (an i32 in 0..15): round to nearest, ties to the
/// even code (0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0 at the midpoints 0.25, 0.75,
/// 1.25, 1.75, 2.5, 3.5, 5), saturating at 6 (infinities too); the sign
/// bit is kept (-0.1 -> code 8, -0); NaN -> code 0. Matches floatToE2M1 in
/// LowPrecision.h.
inline Value encodeE2M1(KB &k, Value x) {
  Value a = math::AbsFOp::create(k.b, k.loc, x);
  Value mag = k.ci(0);
  // Strict > at a midpoint below an even code rounds down to it, >= at one
  // below an odd code rounds up past it.
  const std::pair<double, bool> steps[7] = {
      {0.25, false}, {0.75, true}, {1.25, false}, {1.75, true},
      {2.5, false},  {3.5, true},  {5.0, false}};
  for (auto [bound, inclusive] : steps) {
    Value above = k.fcmp(inclusive ? arith::CmpFPredicate::OGE
                                   : arith::CmpFPredicate::OGT,
                         a, k.cf(bound));
    mag = arith::AddIOp::create(
        k.b, k.loc, mag, arith::ExtUIOp::create(k.b, k.loc, k.i32, above));
  }
  Value bits = arith::BitcastOp::create(k.b, k.loc, k.i32, x);
  Value sign = arith::AndIOp::create(
      k.b, k.loc, arith::ShRUIOp::create(k.b, k.loc, bits, k.ci(28)), k.ci(8));
  Value code = arith::OrIOp::create(k.b, k.loc, mag, sign);
  return k.select(k.fcmp(arith::CmpFPredicate::UNO, x, x), k.ci(0), code);
}

/// An NVFP4 cache value as the attention and indexer kernels read it
/// (msa-m3-spec.md §4.2, `inference.dequant`): E2M1 `code` (i32) times the
/// FP32 value of the E4M3 `scale`, in FP32, rounded to E4M3 with
/// saturation at ±448, returned as FP32.
inline Value nvfp4ToFP8Value(KB &k, Value code, Value scale) {
  return k.decodeE4M3(k.encodeE4M3(k.mul(decodeE2M1(k, code), scale)));
}

/// `acc = init; for i in [0, head_dim): acc = body(i, value_i, acc)`, the
/// row's values in channel order as FP32 (NVFP4: dequantized to FP8 first,
/// nvfp4ToFP8Value).
inline Value
reduceCacheRow(KB &k, const CacheRow &row, Value init,
               const std::function<Value(Value, Value, Value)> &body) {
  const int64_t d = row.type.getHeadDim();
  if (!isNVFP4Cache(row.type))
    return k.reduce(k.c(0), k.c(d), init, [&](Value i, Value acc) {
      Value x =
          k.loadF(row.cache, k.iadd(row.data, i), row.type.getElementType());
      return body(i, x, acc);
    });
  Type i8 = k.b.getI8Type();
  auto loadByte = [&](Value offset) -> Value {
    return arith::ExtUIOp::create(
        k.b, k.loc, k.i32,
        LLVM::LoadOp::create(k.b, k.loc, i8, k.gep(row.cache, offset, i8)));
  };
  return k.reduce(k.c(0), k.c(d / 16), init, [&](Value j, Value acc) {
    Value scale = k.decodeE4M3(arith::TruncIOp::create(
        k.b, k.loc, i8, loadByte(k.iadd(row.scales, j))));
    return k.reduce(k.c(0), k.c(8), acc, [&](Value pair, Value acc2) {
      Value byteIndex = k.iadd(k.imul(j, k.c(8)), pair);
      Value byte = loadByte(k.iadd(row.data, byteIndex));
      Value i = k.imul(byteIndex, k.c(2));
      Value lo = nvfp4ToFP8Value(k, byte, scale);
      Value hi = nvfp4ToFP8Value(
          k, arith::ShRUIOp::create(k.b, k.loc, byte, k.ci(4)), scale);
      Value next = body(i, lo, acc2);
      return body(k.iadd(i, k.c(1)), hi, next);
    });
  });
}

/// Calls `body(i, value_i)` for the row's values in channel order, as
/// reduceCacheRow.
inline void forEachCacheValue(KB &k, const CacheRow &row,
                              const std::function<void(Value, Value)> &body) {
  if (!isNVFP4Cache(row.type)) {
    k.loop(k.c(0), k.c(row.type.getHeadDim()), [&](Value i) {
      body(i,
           k.loadF(row.cache, k.iadd(row.data, i), row.type.getElementType()));
    });
    return;
  }
  Value none = arith::ConstantOp::create(k.b, k.loc, k.b.getI32IntegerAttr(0));
  reduceCacheRow(k, row, none, [&](Value i, Value x, Value acc) {
    body(i, x);
    return acc;
  });
}

/// sum_{i < head_dim} a[aOff + i] * row[i] in FP32, in channel order (for
/// bf16 / f32 / FP8 rows exactly KB::dot).
inline Value dotCacheRow(KB &k, Value a, Value aOff, Type aType,
                         const CacheRow &row) {
  const int64_t d = row.type.getHeadDim();
  if (!isNVFP4Cache(row.type))
    return k.dot(a, aOff, aType, row.cache, row.data, row.type.getElementType(),
                 d);
  return reduceCacheRow(k, row, k.cf(0), [&](Value i, Value x, Value acc) {
    return k.add(acc, k.mul(k.loadF(a, k.iadd(aOff, i), aType), x));
  });
}

/// The block scale of the NVFP4 quantizer (storeCacheRow): `byte`, the
/// E4M3 byte (i8) of amax / 6 (nvfp4ScaleByte); `value`, its FP32 value;
/// `zero`, whether that value is zero.
struct NVFP4Scale {
  Value byte, value, zero;
};
inline Value nvfp4ScaleByte(KB &k, Value amax) {
  return k.encodeE4M3(k.div(amax, k.cf(6.0)));
}
inline NVFP4Scale nvfp4Scale(KB &k, Value byte) {
  Value value = k.decodeE4M3(byte);
  return {byte, value, k.fcmp(arith::CmpFPredicate::OEQ, value, k.cf(0))};
}

/// The E2M1 code (i32) of `x` (FP32) in a block of scale `scale`: 0 when
/// the scale is zero.
inline Value nvfp4Code(KB &k, const NVFP4Scale &scale, Value x) {
  return k.select(scale.zero, k.ci(0), encodeE2M1(k, k.div(x, scale.value)));
}

/// The codes `lo` (channel 2 i, low nibble) and `hi` (2 i + 1) packed in
/// one byte (an i32 below 256).
inline Value nvfp4PackCodes(KB &k, Value lo, Value hi) {
  return arith::OrIOp::create(k.b, k.loc, lo,
                              arith::ShLIOp::create(k.b, k.loc, hi, k.ci(4)));
}

/// Stores `value(first + e)` (FP32), e < 16, as NVFP4 block `j` (channels
/// first = 16 j .. 16 j + 15) of the NVFP4 cache row `row`: its E4M3 scale
/// byte and its 8 code bytes, quantized as storeCacheRow describes. `value`
/// may be called several times per channel.
inline void storeNVFP4Block(KB &k, const CacheRow &row, Value j,
                            const std::function<Value(Value)> &value) {
  Type i8 = k.b.getI8Type();
  Value first = k.imul(j, k.c(16));
  Value amax = k.reduce(k.c(0), k.c(16), k.cf(0), [&](Value e, Value acc) {
    return k.maxf(acc,
                  math::AbsFOp::create(k.b, k.loc, value(k.iadd(first, e))));
  });
  Value scaleByte = nvfp4ScaleByte(k, amax);
  LLVM::StoreOp::create(k.b, k.loc, scaleByte,
                        k.gep(row.cache, k.iadd(row.scales, j), i8));
  NVFP4Scale scale = nvfp4Scale(k, scaleByte);
  k.loop(k.c(0), k.c(8), [&](Value pair) {
    Value i = k.iadd(first, k.imul(pair, k.c(2)));
    Value lo = nvfp4Code(k, scale, value(i));
    Value hi = nvfp4Code(k, scale, value(k.iadd(i, k.c(1))));
    Value byte = nvfp4PackCodes(k, lo, hi);
    Value at = k.iadd(row.data, k.iadd(k.imul(j, k.c(8)), pair));
    LLVM::StoreOp::create(k.b, k.loc,
                          arith::TruncIOp::create(k.b, k.loc, i8, byte),
                          k.gep(row.cache, at, i8));
  });
}

/// Stores `value(i)` (FP32) as channel i of the row, converted to the cache
/// element type: a rounding (bf16) or saturating (FP8, scale 1) cast, or
/// for NVFP4 the block quantization of msa.kv_cache_insert, per 16
/// channels (msa-m3-spec.md §4.2 with global scale 1; TensorRT-LLM's NVFP4
/// quantization kernel, cvt_warp_fp16_to_fp4, with exact FP32 divisions
/// in place of its approximate reciprocals; see docs/architecture.md):
///   amax = max |x| (FP32; a NaN makes it NaN),
///   scale = E4M3(amax / 6) (FP32 division, round to nearest even,
///           saturating at 448; NaN -> 0x7F),
///   code_i = E2M1(x_i / FP32(scale)) (encodeE2M1), or 0 when the scale
///           is zero.
/// `value` may be called several times per channel.
inline void storeCacheRow(KB &k, const CacheRow &row,
                          const std::function<Value(Value)> &value) {
  if (!isNVFP4Cache(row.type)) {
    k.loop(k.c(0), k.c(row.type.getHeadDim()), [&](Value i) {
      k.storeF(row.cache, k.iadd(row.data, i), value(i),
               row.type.getElementType());
    });
    return;
  }
  k.loop(k.c(0), k.c(row.type.getHeadDim() / 16),
         [&](Value j) { storeNVFP4Block(k, row, j, value); });
}

} // namespace msac::kernels

#endif // MSAC_CODEGEN_LIB_KERNELBUILDER_H
