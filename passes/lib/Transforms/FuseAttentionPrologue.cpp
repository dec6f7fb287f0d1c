//===- FuseAttentionPrologue.cpp - QKV + norm + RoPE + cache insert -------===//
//
// Part of msac.
//
// Matches, from each attention op, the unfused prologue the importer emits
// (one projection per q, k, v, index_q, index_k of the same normed input,
// per-head Gemma norms, partial NeoX RoPE, inserts into the K/V and
// index-key caches) and replaces it with one msa.attention_prologue. Every
// precondition is checked before the IR is touched.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/BSQ/IR/BSQTypes.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"
#include "msac/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

namespace msac {
#define GEN_PASS_DEF_MSAFUSEATTENTIONPROLOGUE
#include "msac/Transforms/Passes.h.inc"
} // namespace msac

using namespace mlir;
using namespace msac;

namespace {

/// One projection of the prologue: linear -> expand_shape [-> rms_norm ->
/// rope] [-> kv_cache_insert].
struct Branch {
  msa::LinearOp linear;
  tensor::ExpandShapeOp split;
  msa::RMSNormOp norm;         // null for v
  msa::RoPEOp rope;            // null for v
  msa::KVCacheInsertOp insert; // null for q and index_q
};

/// The matched prologue of one layer.
struct Prologue {
  Branch q, k, v, indexQ, indexK;
  bool hasIndex = false;
  Operation *consumer = nullptr; // the attention op
};

bool isHostActivation(Type t) { return t.isBF16() || t.isF32(); }

/// The cache formats msa.kv_cache_insert and msa.attention_prologue write
/// on every target: bf16, f32, FP8 E4M3 and NVFP4 with global scale 1.
bool isHostCacheElement(Type t) {
  if (auto nvfp4 = dyn_cast<bsq::NVFP4Type>(t))
    return !nvfp4.getGlobalScale();
  return t.isBF16() || t.isF32() || isa<Float8E4M3FNType>(t);
}

/// `v` is used once, by `user`.
bool onlyUsedBy(Value v, Operation *user) {
  return v.hasOneUse() && *v.getUsers().begin() == user;
}

/// Matches `split(linear(x, w))` ending in `value` (the split result), with
/// a norm and RoPE in between when `normed`.
std::optional<Branch> matchActivation(Value value, bool normed) {
  Branch branch;
  if (normed) {
    branch.rope = value.getDefiningOp<msa::RoPEOp>();
    if (!branch.rope)
      return std::nullopt;
    branch.norm = branch.rope.getInput().getDefiningOp<msa::RMSNormOp>();
    if (!branch.norm || !onlyUsedBy(branch.norm.getResult(), branch.rope))
      return std::nullopt;
    value = branch.norm.getInput();
    if (!onlyUsedBy(value, branch.norm))
      return std::nullopt;
  }
  branch.split = value.getDefiningOp<tensor::ExpandShapeOp>();
  if (!branch.split)
    return std::nullopt;
  // [T, heads * d] -> [T, heads, d]
  SmallVector<ReassociationIndices> groups =
      branch.split.getReassociationIndices();
  if (groups.size() != 2 || groups[0] != ReassociationIndices{0} ||
      groups[1] != ReassociationIndices{1, 2})
    return std::nullopt;
  branch.linear = branch.split.getSrc().getDefiningOp<msa::LinearOp>();
  if (!branch.linear ||
      !onlyUsedBy(branch.linear.getResult(), branch.split.getOperation()))
    return std::nullopt;
  return branch;
}

/// Matches a branch whose result is inserted into a cache: `cache` is the
/// insert's result.
std::optional<Branch> matchInserted(Value cache, bool normed) {
  auto insert = cache.getDefiningOp<msa::KVCacheInsertOp>();
  if (!insert || !onlyUsedBy(insert.getValues(), insert))
    return std::nullopt;
  std::optional<Branch> branch = matchActivation(insert.getValues(), normed);
  if (branch)
    branch->insert = insert;
  return branch;
}

/// Matches a query branch (its RoPE result used only by `consumer`).
std::optional<Branch> matchQuery(Value queries, Operation *consumer) {
  if (!onlyUsedBy(queries, consumer))
    return std::nullopt;
  return matchActivation(queries, /*normed=*/true);
}

std::optional<Prologue> matchPrologue(Operation *attention) {
  Prologue p;
  p.consumer = attention;
  Value queries = attention->getOperand(0), keys = attention->getOperand(1),
        values = attention->getOperand(2);
  std::optional<Branch> q = matchQuery(queries, attention);
  std::optional<Branch> k = matchInserted(keys, /*normed=*/true);
  std::optional<Branch> v = matchInserted(values, /*normed=*/false);
  if (!q || !k || !v)
    return std::nullopt;
  p.q = *q;
  p.k = *k;
  p.v = *v;
  if (auto sparse = dyn_cast<msa::SparseAttentionOp>(attention)) {
    auto topk = sparse.getBlockIds().getDefiningOp<msa::BlockTopKOp>();
    auto score = topk ? topk.getBlockScores().getDefiningOp<msa::IndexScoreOp>()
                      : msa::IndexScoreOp();
    if (!score)
      return std::nullopt;
    std::optional<Branch> iq = matchQuery(score.getIndexQueries(), score);
    std::optional<Branch> ik =
        matchInserted(score.getIndexCache(), /*normed=*/true);
    if (!iq || !ik)
      return std::nullopt;
    p.indexQ = *iq;
    p.indexK = *ik;
    p.hasIndex = true;
  }
  return p;
}

/// The preconditions beyond the chain's structure: one input, equal norm
/// and RoPE parameters, one set of positions, sequence ids and block
/// table, float weights and element types the host kernel supports.
bool checkPreconditions(Prologue &p) {
  SmallVector<Branch *> branches = {&p.q, &p.k, &p.v};
  if (p.hasIndex)
    branches.append({&p.indexQ, &p.indexK});
  Value input = p.q.linear.getInput();
  Type act = cast<ShapedType>(input.getType()).getElementType();
  if (!isHostActivation(act))
    return false;
  msa::RMSNormOp norm = p.q.norm;
  msa::RoPEOp rope = p.q.rope;
  Value positions = rope.getPositions();
  msa::KVCacheInsertOp insert = p.k.insert;
  Block *block = p.consumer->getBlock();
  for (Branch *b : branches) {
    // The same normed input; float weights; one activation type throughout.
    if (b->linear.getInput() != input ||
        !isa<FloatType>(b->linear.getWeight().getType().getElementType()))
      return false;
    for (Value v : {Value(b->linear.getResult()), Value(b->split.getResult())})
      if (cast<ShapedType>(v.getType()).getElementType() != act)
        return false;
    if (b->norm) {
      // Per-head norms with the eps and offset of q's norm.
      if (b->norm.getEps() != norm.getEps() ||
          b->norm.getUnitOffset() != norm.getUnitOffset())
        return false;
      // NeoX RoPE with q's positions, rotary_dim and theta.
      if (b->rope.getInterleaved() || b->rope.getPositions() != positions ||
          b->rope.getRotaryDim() != rope.getRotaryDim() ||
          b->rope.getTheta() != rope.getTheta())
        return false;
    }
    if (b->insert) {
      // One block table, sequence ids and the RoPE positions for every
      // insert; a cache format the host kernel writes.
      if (b->insert.getBlockTable() != insert.getBlockTable() ||
          b->insert.getSeqIds() != insert.getSeqIds() ||
          b->insert.getPositions() != positions ||
          !isHostCacheElement(b->insert.getCache().getType().getElementType()))
        return false;
    }
    for (Operation *op : {b->linear.getOperation(), b->split.getOperation(),
                          b->norm.getOperation(), b->rope.getOperation(),
                          b->insert.getOperation()})
      if (op && op->getBlock() != block)
        return false;
  }
  return true;
}

/// Replaces the matched prologue by one msa.attention_prologue, placed
/// after the last op of the chain. Returns false (leaving the IR as it
/// was) when a user of a replaced value would come before it.
bool rewrite(Prologue &p) {
  SmallVector<Branch *> branches = {&p.q, &p.k, &p.v};
  if (p.hasIndex)
    branches.append({&p.indexQ, &p.indexK});
  SmallVector<Operation *> chain;
  for (Branch *b : branches)
    for (Operation *op : {b->linear.getOperation(), b->split.getOperation(),
                          b->norm.getOperation(), b->rope.getOperation(),
                          b->insert.getOperation()})
      if (op)
        chain.push_back(op);
  Operation *last = chain.front();
  for (Operation *op : chain)
    if (last->isBeforeInBlock(op))
      last = op;
  SmallVector<Value> replaced = {p.q.rope.getResult(), p.k.insert.getResult(),
                                 p.v.insert.getResult()};
  if (p.hasIndex)
    replaced.append({p.indexQ.rope.getResult(), p.indexK.insert.getResult()});
  for (Value v : replaced)
    for (Operation *user : v.getUsers())
      if (user->getBlock() != last->getBlock() || !last->isBeforeInBlock(user))
        return false;

  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  auto weightOf = [](Branch &br) -> Value { return br.linear.getWeight(); };
  auto normOf = [](Branch &br) -> Value { return br.norm.getWeight(); };
  Value none;
  auto fused = msa::AttentionPrologueOp::create(
      b, p.consumer->getLoc(), p.q.rope.getType(), p.k.insert.getType(),
      p.v.insert.getType(), p.hasIndex ? p.indexQ.rope.getType() : Type(),
      p.hasIndex ? p.indexK.insert.getType() : Type(), p.q.linear.getInput(),
      weightOf(p.q), weightOf(p.k), weightOf(p.v), normOf(p.q), normOf(p.k),
      p.k.insert.getCache(), p.v.insert.getCache(), p.k.insert.getBlockTable(),
      p.k.insert.getSeqIds(), p.k.insert.getPositions(),
      p.hasIndex ? weightOf(p.indexQ) : none,
      p.hasIndex ? weightOf(p.indexK) : none,
      p.hasIndex ? normOf(p.indexQ) : none,
      p.hasIndex ? normOf(p.indexK) : none,
      p.hasIndex ? p.indexK.insert.getCache() : none, p.q.norm.getEpsAttr(),
      p.q.norm.getUnitOffsetAttr(), p.q.rope.getRotaryDimAttr(),
      p.q.rope.getThetaAttr());
  p.q.rope.getResult().replaceAllUsesWith(fused.getQ());
  p.k.insert.getResult().replaceAllUsesWith(fused.getNewKeyCache());
  p.v.insert.getResult().replaceAllUsesWith(fused.getNewValueCache());
  if (p.hasIndex) {
    p.indexQ.rope.getResult().replaceAllUsesWith(fused.getIndexQ());
    p.indexK.insert.getResult().replaceAllUsesWith(fused.getNewIndexCache());
  }
  // Erase each branch from its end: insert, rope, norm, split, linear.
  for (Branch *br : branches)
    for (Operation *op : {br->insert.getOperation(), br->rope.getOperation(),
                          br->norm.getOperation(), br->split.getOperation(),
                          br->linear.getOperation()})
      if (op)
        op->erase();
  return true;
}

struct MSAFuseAttentionProloguePass
    : msac::impl::MSAFuseAttentionPrologueBase<MSAFuseAttentionProloguePass> {
  void runOnOperation() override {
    SmallVector<Operation *> attentions;
    getOperation()->walk([&](Operation *op) {
      if (isa<msa::DenseAttentionOp, msa::SparseAttentionOp>(op))
        attentions.push_back(op);
    });
    for (Operation *attention : attentions) {
      std::optional<Prologue> prologue = matchPrologue(attention);
      if (prologue && checkPreconditions(*prologue))
        rewrite(*prologue);
    }
  }
};

} // namespace
