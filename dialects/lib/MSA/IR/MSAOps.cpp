//===- MSAOps.cpp - MiniMax-M3 text model ops -----------------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/MSA/IR/MSAOps.h"
#include "msac/Dialect/BSQ/IR/BSQTypes.h"
#include "msac/Support/ShapeDiagnostics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace msac;
using namespace msac::msa;

//===----------------------------------------------------------------------===//
// Verifier helpers
//===----------------------------------------------------------------------===//

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<ShapedType>(value.getType()).getShape();
}

/// Emits "<what> is <actual>, expected <expected>" when two static extents
/// differ.
static LogicalResult checkExtent(Operation *op, int64_t actual,
                                 int64_t expected, const Twine &what,
                                 const Twine &expectedWhat) {
  if (!extentsConflict(actual, expected))
    return success();
  return op->emitOpError() << what << " is " << actual << " but "
                           << expectedWhat << " is " << expected;
}

/// Checks that every named token dimension has the same static extent.
static LogicalResult
checkTokenCounts(Operation *op,
                 ArrayRef<std::pair<StringRef, int64_t>> tokenDims) {
  const std::pair<StringRef, int64_t> *reference = nullptr;
  for (const auto &entry : tokenDims) {
    if (ShapedType::isDynamic(entry.second))
      continue;
    if (!reference) {
      reference = &entry;
      continue;
    }
    if (entry.second != reference->second)
      return op->emitOpError()
             << "token counts differ: " << entry.first << " has "
             << entry.second << " tokens but " << reference->first << " has "
             << reference->second;
  }
  return success();
}

static bool isWeightElement(Type type) {
  return isa<FloatType, bsq::QuantizedTypeInterface>(type);
}

/// A weight is floating point, or block-scaled with a shape its blocks tile.
static LogicalResult checkWeightElement(Operation *op, Value weight,
                                        StringRef name) {
  auto type = cast<ShapedType>(weight.getType());
  Type element = type.getElementType();
  if (!isWeightElement(element))
    return op->emitOpError() << name
                             << " element type must be a float or a bsq "
                                "block-scaled type, got "
                             << element;
  if (auto quantized = dyn_cast<bsq::QuantizedTypeInterface>(element))
    if (std::optional<std::string> problem =
            bsq::checkQuantizedShape(quantized, type.getShape()))
      return op->emitOpError() << name << " " << *problem;
  return success();
}

static LogicalResult checkPositive(Operation *op, double value,
                                   StringRef name) {
  if (value > 0)
    return success();
  return op->emitOpError() << "attribute '" << name
                           << "' must be positive, got "
                           << formatNumber(value);
}

static LogicalResult checkPageSizes(Operation *op, PagedCacheType cache,
                                    BlockTableType table) {
  if (cache.getPageSize() == table.getPageSize())
    return success();
  return op->emitOpError() << "block table page_size "
                           << table.getPageSize()
                           << " differs from the cache page_size "
                           << cache.getPageSize();
}

//===----------------------------------------------------------------------===//
// WeightOp
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  StringRef name = getName();
  if (name.empty())
    return emitOpError() << "weight name must not be empty";
  size_t placeholders = name.count("{}");
  std::optional<uint64_t> stacked = getNumStacked();
  if (!stacked) {
    if (placeholders != 0)
      return emitOpError() << "weight name '" << name
                           << "' has a {} placeholder but no num_stacked";
    return success();
  }
  if (static_cast<int64_t>(*stacked) <= 0)
    return emitOpError() << "num_stacked must be positive, got "
                         << static_cast<int64_t>(*stacked);
  if (placeholders != 1)
    return emitOpError() << "a stacked weight name needs exactly one {} "
                            "placeholder, '"
                         << name << "' has " << placeholders;
  ArrayRef<int64_t> shape = getResult().getType().getShape();
  if (shape.empty())
    return emitOpError() << "a stacked weight must have rank >= 1";
  return checkExtent(*this, shape[0], *stacked, "result dimension 0",
                     "num_stacked");
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  ArrayRef<int64_t> ids = shapeOf(getTokenIds());
  ArrayRef<int64_t> table = shapeOf(getTable());
  ArrayRef<int64_t> result = shapeOf(getResult());
  if (failed(checkTokenCounts(*this, {{"token_ids", ids[0]},
                                      {"result", result[0]}})) ||
      failed(checkExtent(*this, result[1], table[1], "result hidden size",
                         "the table hidden size")))
    return failure();
  if (getResult().getType().getElementType() !=
      getTable().getType().getElementType())
    return emitOpError() << "result element type "
                         << getResult().getType().getElementType()
                         << " differs from the table element type "
                         << getTable().getType().getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// RMSNormOp
//===----------------------------------------------------------------------===//

LogicalResult RMSNormOp::verify() {
  if (failed(checkPositive(*this, getEps().convertToDouble(), "eps")))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  if (input.empty())
    return emitOpError() << "input must have rank >= 1";
  return checkExtent(*this, shapeOf(getWeight())[0], input.back(),
                     "weight size", "the normalized (last) dimension");
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  if (failed(checkWeightElement(*this, getWeight(), "weight")))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> weight = shapeOf(getWeight());
  ArrayRef<int64_t> result = shapeOf(getResult());
  if (failed(checkExtent(*this, weight[1], input[1],
                         "weight in_features (dimension 1)",
                         "the input feature size")) ||
      failed(checkExtent(*this, result[1], weight[0], "result feature size",
                         "weight out_features (dimension 0)")))
    return failure();
  return checkTokenCounts(*this, {{"input", input[0]}, {"result", result[0]}});
}

//===----------------------------------------------------------------------===//
// RoPEOp
//===----------------------------------------------------------------------===//

LogicalResult RoPEOp::verify() {
  int64_t rotaryDim = getRotaryDim();
  int64_t headDim = shapeOf(getInput())[2];
  if (rotaryDim <= 0 || rotaryDim % 2 != 0)
    return emitOpError() << "rotary_dim must be positive and even, got "
                         << rotaryDim;
  if (!ShapedType::isDynamic(headDim) && rotaryDim > headDim)
    return emitOpError() << "rotary_dim " << rotaryDim
                         << " exceeds head_dim " << headDim;
  if (failed(checkPositive(*this, getTheta().convertToDouble(), "theta")))
    return failure();
  return checkTokenCounts(*this, {{"input", shapeOf(getInput())[0]},
                                  {"positions", shapeOf(getPositions())[0]}});
}

//===----------------------------------------------------------------------===//
// KVCacheInsertOp
//===----------------------------------------------------------------------===//

LogicalResult KVCacheInsertOp::verify() {
  PagedCacheType cache = getCache().getType();
  if (failed(checkPageSizes(*this, cache, getBlockTable().getType())))
    return failure();
  ArrayRef<int64_t> values = shapeOf(getValues());
  if (failed(checkExtent(*this, values[1], cache.getHeads(),
                         "values head count", "the cache head count")) ||
      failed(checkExtent(*this, values[2], cache.getHeadDim(),
                         "values head_dim", "the cache head_dim")))
    return failure();
  return checkTokenCounts(*this, {{"values", values[0]},
                                  {"seq_ids", shapeOf(getSeqIds())[0]},
                                  {"positions", shapeOf(getPositions())[0]}});
}

//===----------------------------------------------------------------------===//
// AttentionPrologueOp
//===----------------------------------------------------------------------===//

/// Checks one branch of the prologue: a `[heads * headDim, hidden]`
/// projection and, unless `norm` is null, a `[headDim]` norm
/// weight.
static LogicalResult checkPrologueBranch(Operation *op, Value weight,
                                         StringRef weightName, Value norm,
                                         StringRef normName, int64_t hidden,
                                         int64_t heads, int64_t headDim,
                                         StringRef headsWhat) {
  ArrayRef<int64_t> shape = shapeOf(weight);
  int64_t features =
      ShapedType::isDynamic(heads) || ShapedType::isDynamic(headDim)
          ? ShapedType::kDynamic
          : heads * headDim;
  if (failed(checkExtent(op, shape[1], hidden,
                         Twine(weightName) + " in_features (dimension 1)",
                         "the input feature size")) ||
      failed(checkExtent(op, shape[0], features,
                         Twine(weightName) + " out_features (dimension 0)",
                         headsWhat)) ||
      (norm && failed(checkExtent(op, shapeOf(norm)[0], headDim,
                                  Twine(normName) + " size", "the head_dim"))))
    return failure();
  return success();
}

LogicalResult AttentionPrologueOp::verify() {
  Value indexOperands[] = {getIndexQWeight(),     getIndexKWeight(),
                           getIndexQNormWeight(), getIndexKNormWeight(),
                           getIndexCache(),       getIndexQ(),
                           getNewIndexCache()};
  bool hasIndex = static_cast<bool>(getIndexQWeight());
  if (llvm::any_of(indexOperands,
                   [&](Value v) { return static_cast<bool>(v) != hasIndex; }))
    return emitOpError() << "the index branch needs index_q_weight, "
                            "index_k_weight, both index norm weights, "
                            "index_cache and the index_q and new_index_cache "
                            "results together, or none of them";
  if (failed(checkPositive(*this, getEps().convertToDouble(), "eps")) ||
      failed(checkPositive(*this, getTheta().convertToDouble(), "theta")))
    return failure();
  PagedCacheType cache = getKeyCache().getType();
  if (failed(checkPageSizes(*this, cache, getBlockTable().getType())))
    return failure();

  Type act = getInput().getType().getElementType();
  auto checkActivation = [&](Value v, StringRef name) -> LogicalResult {
    Type element = cast<ShapedType>(v.getType()).getElementType();
    if (element == act)
      return success();
    return emitOpError() << name << " element type " << element
                         << " differs from the input element type " << act;
  };
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> q = shapeOf(getQ());
  int64_t rotaryDim = getRotaryDim();
  auto checkRotary = [&](int64_t headDim, StringRef what) -> LogicalResult {
    if (rotaryDim <= 0 || rotaryDim % 2 != 0)
      return emitOpError() << "rotary_dim must be positive and even, got "
                           << rotaryDim;
    if (!ShapedType::isDynamic(headDim) && rotaryDim > headDim)
      return emitOpError() << "rotary_dim " << rotaryDim << " exceeds the "
                           << what << " head_dim " << headDim;
    return success();
  };
  if (failed(checkActivation(getQ(), "q")) ||
      failed(checkExtent(*this, q[2], cache.getHeadDim(), "q head_dim",
                         "the cache head_dim")) ||
      failed(checkRotary(q[2], "q")) ||
      failed(checkPrologueBranch(*this, getQWeight(), "q_weight",
                                 getQNormWeight(), "q_norm_weight", input[1],
                                 q[1], q[2], "q heads * head_dim")) ||
      failed(checkPrologueBranch(*this, getKWeight(), "k_weight",
                                 getKNormWeight(), "k_norm_weight", input[1],
                                 cache.getHeads(), cache.getHeadDim(),
                                 "the cache heads * head_dim")) ||
      failed(checkPrologueBranch(*this, getVWeight(), "v_weight", Value(), "",
                                 input[1], cache.getHeads(), cache.getHeadDim(),
                                 "the cache heads * head_dim")))
    return failure();
  SmallVector<std::pair<StringRef, int64_t>> tokens = {
      {"input", input[0]},
      {"q", q[0]},
      {"seq_ids", shapeOf(getSeqIds())[0]},
      {"positions", shapeOf(getPositions())[0]}};
  if (!hasIndex)
    return checkTokenCounts(*this, tokens);

  PagedCacheType index = getIndexCache().getType();
  if (getNewIndexCache().getType() != index)
    return emitOpError() << "new_index_cache type "
                         << getNewIndexCache().getType()
                         << " differs from the index_cache type " << index;
  if (failed(checkPageSizes(*this, index, getBlockTable().getType())))
    return failure();
  if (index.getHeads() != 1)
    return emitOpError() << "the index-key cache must have one head, got "
                         << index.getHeads();
  ArrayRef<int64_t> iq = shapeOf(getIndexQ());
  if (failed(checkActivation(getIndexQ(), "index_q")) ||
      failed(checkExtent(*this, iq[2], index.getHeadDim(), "index_q head_dim",
                         "the index cache head_dim")) ||
      failed(checkRotary(iq[2], "index_q")) ||
      failed(checkPrologueBranch(*this, getIndexQWeight(), "index_q_weight",
                                 getIndexQNormWeight(), "index_q_norm_weight",
                                 input[1], iq[1], iq[2],
                                 "index_q heads * head_dim")) ||
      failed(checkPrologueBranch(*this, getIndexKWeight(), "index_k_weight",
                                 getIndexKNormWeight(), "index_k_norm_weight",
                                 input[1], 1, index.getHeadDim(),
                                 "the index cache head_dim")))
    return failure();
  tokens.push_back({"index_q", iq[0]});
  return checkTokenCounts(*this, tokens);
}

//===----------------------------------------------------------------------===//
// IndexScoreOp
//===----------------------------------------------------------------------===//

LogicalResult IndexScoreOp::verify() {
  PagedCacheType cache = getIndexCache().getType();
  BlockTableType table = getBlockTable().getType();
  if (failed(checkPageSizes(*this, cache, table)))
    return failure();
  if (cache.getHeads() != 1)
    return emitOpError() << "the index-key cache must have one head (one "
                            "index key shared by all groups), got "
                         << cache.getHeads();
  if (failed(checkPositive(*this, getScale().convertToDouble(), "scale")))
    return failure();
  ArrayRef<int64_t> queries = shapeOf(getIndexQueries());
  ArrayRef<int64_t> scores = shapeOf(getBlockScores());
  if (failed(checkExtent(*this, queries[2], cache.getHeadDim(),
                         "index query head_dim",
                         "the index cache head_dim")) ||
      failed(checkExtent(*this, scores[0], queries[1],
                         "block_scores dimension 0 (groups)",
                         "the index head count")) ||
      failed(checkExtent(*this, scores[2], table.getMaxBlocks(),
                         "block_scores dimension 2 (blocks)",
                         "the block table max_blocks")))
    return failure();
  return checkTokenCounts(*this, {{"index_queries", queries[0]},
                                  {"seq_ids", shapeOf(getSeqIds())[0]},
                                  {"positions", shapeOf(getPositions())[0]},
                                  {"block_scores", scores[1]}});
}

//===----------------------------------------------------------------------===//
// BlockTopKOp
//===----------------------------------------------------------------------===//

LogicalResult BlockTopKOp::verify() {
  int64_t k = getK(), local = getLocalBlocks(), init = getInitBlocks();
  if (k <= 0)
    return emitOpError() << "k must be positive, got " << k;
  if (getBlockSize() <= 0)
    return emitOpError() << "block_size must be positive, got "
                         << getBlockSize();
  if (local < 0 || init < 0)
    return emitOpError() << "local_blocks and init_blocks must be "
                            "non-negative, got "
                         << local << " and " << init;
  if (local + init > k)
    return emitOpError() << "local_blocks + init_blocks = " << local + init
                         << " exceeds k = " << k;
  ArrayRef<int64_t> scores = shapeOf(getBlockScores());
  ArrayRef<int64_t> ids = shapeOf(getBlockIds());
  if (failed(checkExtent(*this, ids[0], scores[0],
                         "block_ids dimension 0 (groups)",
                         "block_scores dimension 0")) ||
      failed(checkExtent(*this, ids[2], k, "block_ids dimension 2", "k")))
    return failure();
  return checkTokenCounts(*this, {{"block_scores", scores[1]},
                                  {"positions", shapeOf(getPositions())[0]},
                                  {"block_ids", ids[1]}});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Checks what sparse and dense attention share: matching K/V caches, GQA
/// head counts, token counts, output and LSE shapes, positive scale.
template <typename OpTy>
static LogicalResult verifyAttention(OpTy op) {
  Operation *operation = op.getOperation();
  PagedCacheType keys = op.getKeyCache().getType();
  if (op.getValueCache().getType() != keys)
    return op.emitOpError() << "key and value caches must have the same "
                               "type, got "
                            << keys << " and " << op.getValueCache().getType();
  if (op.getPrecision() == AttentionPrecision::Q8 &&
      !isa<Float8E4M3FNType, bsq::NVFP4Type>(keys.getElementType()))
    return op.emitOpError()
           << "precision q8 needs E4M3 or NVFP4 key and value caches (the "
              "Q8KV8 / Q8KV4 contracts, msa-m3-spec §3.2), got element type "
           << keys.getElementType();
  if (failed(checkPageSizes(operation, keys, op.getBlockTable().getType())) ||
      failed(checkPositive(operation, op.getScale().convertToDouble(),
                           "scale")))
    return failure();
  ArrayRef<int64_t> queries = shapeOf(op.getQueries());
  int64_t queryHeads = queries[1];
  if (failed(checkExtent(operation, queries[2], keys.getHeadDim(),
                         "query head_dim", "the cache head_dim")))
    return failure();
  if (!ShapedType::isDynamic(queryHeads) &&
      queryHeads % keys.getHeads() != 0)
    return op.emitOpError() << "query head count " << queryHeads
                            << " is not a multiple of the KV head count "
                            << keys.getHeads();
  if (op.getOutput().getType() != op.getQueries().getType() &&
      !shapesCompatible(shapeOf(op.getOutput()), queries))
    return op.emitOpError() << "output shape "
                            << formatShape(shapeOf(op.getOutput()))
                            << " differs from the query shape "
                            << formatShape(queries);
  if (op.getOutput().getType().getElementType() !=
      op.getQueries().getType().getElementType())
    return op.emitOpError() << "output element type must equal the query "
                               "element type";
  SmallVector<std::pair<StringRef, int64_t>> tokens = {
      {"queries", queries[0]},
      {"seq_ids", shapeOf(op.getSeqIds())[0]},
      {"positions", shapeOf(op.getPositions())[0]}};
  if (Value lse = op.getLse()) {
    ArrayRef<int64_t> lseShape = shapeOf(lse);
    tokens.push_back({"lse", lseShape[0]});
    if (failed(checkExtent(operation, lseShape[1], queryHeads,
                           "lse dimension 1", "the query head count")))
      return failure();
  }
  return checkTokenCounts(operation, tokens);
}

LogicalResult SparseAttentionOp::verify() {
  if (failed(verifyAttention(*this)))
    return failure();
  ArrayRef<int64_t> ids = shapeOf(getBlockIds());
  if (failed(checkExtent(*this, ids[0], getKeyCache().getType().getHeads(),
                         "block_ids dimension 0 (groups)",
                         "the KV head count")))
    return failure();
  return checkTokenCounts(*this, {{"queries", shapeOf(getQueries())[0]},
                                  {"block_ids", ids[1]}});
}

LogicalResult DenseAttentionOp::verify() { return verifyAttention(*this); }

//===----------------------------------------------------------------------===//
// SwiGLUOp
//===----------------------------------------------------------------------===//

LogicalResult SwiGLUOp::verify() {
  if (failed(checkPositive(*this, getAlpha().convertToDouble(), "alpha")))
    return failure();
  return checkPositive(*this, getLimit().convertToDouble(), "limit");
}

//===----------------------------------------------------------------------===//
// MoERouterOp
//===----------------------------------------------------------------------===//

LogicalResult MoERouterOp::verify() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> gate = shapeOf(getGateWeight());
  int64_t numExperts = gate[0];
  int64_t topK = getTopK();
  if (failed(checkExtent(*this, gate[1], input[1],
                         "gate_weight dimension 1", "the hidden size")))
    return failure();
  if (Value bias = getCorrectionBias())
    if (failed(checkExtent(*this, shapeOf(bias)[0], numExperts,
                           "correction_bias size", "the expert count")))
      return failure();
  if (topK <= 0 ||
      (!ShapedType::isDynamic(numExperts) && topK > numExperts))
    return emitOpError() << "top_k must be in [1, " << numExperts
                         << "], got " << topK;
  if (failed(checkPositive(*this,
                           getRoutedScalingFactor().convertToDouble(),
                           "routed_scaling_factor")))
    return failure();
  for (Value result : getResults())
    if (failed(checkExtent(*this, shapeOf(result)[1], topK,
                           "result dimension 1", "top_k")))
      return failure();
  return checkTokenCounts(*this,
                          {{"input", input[0]},
                           {"weights", shapeOf(getWeights())[0]},
                           {"expert_ids", shapeOf(getExpertIds())[0]}});
}

//===----------------------------------------------------------------------===//
// MoEExpertsOp
//===----------------------------------------------------------------------===//

LogicalResult MoEExpertsOp::verify() {
  for (auto [value, name] :
       {std::pair{getGateWeights(), "gate_weights"},
        std::pair{getUpWeights(), "up_weights"},
        std::pair{getDownWeights(), "down_weights"}})
    if (failed(checkWeightElement(*this, value, name)))
      return failure();
  if (failed(checkPositive(*this, getAlpha().convertToDouble(), "alpha")) ||
      failed(checkPositive(*this, getLimit().convertToDouble(), "limit")))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> gate = shapeOf(getGateWeights());
  ArrayRef<int64_t> up = shapeOf(getUpWeights());
  ArrayRef<int64_t> down = shapeOf(getDownWeights());
  if (!shapesCompatible(gate, up))
    return emitOpError() << "gate_weights " << formatShape(gate)
                         << " and up_weights " << formatShape(up)
                         << " must have the same shape [E, I, H]";
  if (failed(checkExtent(*this, gate[2], input[1],
                         "gate_weights dimension 2", "the hidden size")) ||
      failed(checkExtent(*this, down[0], gate[0],
                         "down_weights dimension 0 (experts)",
                         "the gate_weights expert count")) ||
      failed(checkExtent(*this, down[1], input[1],
                         "down_weights dimension 1", "the hidden size")) ||
      failed(checkExtent(*this, down[2], gate[1],
                         "down_weights dimension 2",
                         "the intermediate size")))
    return failure();
  ArrayRef<int64_t> weights = shapeOf(getRoutingWeights());
  ArrayRef<int64_t> ids = shapeOf(getExpertIds());
  if (failed(checkExtent(*this, ids[1], weights[1],
                         "expert_ids dimension 1",
                         "routing_weights dimension 1")))
    return failure();
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the input type "
                         << getInput().getType();
  return checkTokenCounts(*this, {{"input", input[0]},
                                  {"routing_weights", weights[0]},
                                  {"expert_ids", ids[0]}});
}

//===----------------------------------------------------------------------===//
// LogitsOp
//===----------------------------------------------------------------------===//

LogicalResult LogitsOp::verify() {
  if (failed(checkWeightElement(*this, getLmHead(), "lm_head")))
    return failure();
  ArrayRef<int64_t> hidden = shapeOf(getHidden());
  ArrayRef<int64_t> head = shapeOf(getLmHead());
  ArrayRef<int64_t> logits = shapeOf(getLogits());
  if (failed(checkExtent(*this, head[1], hidden[1], "lm_head dimension 1",
                         "the hidden size")) ||
      failed(checkExtent(*this, logits[1], head[0], "logits dimension 1",
                         "the vocabulary size (lm_head dimension 0)")))
    return failure();
  return checkTokenCounts(*this,
                          {{"token_indices", shapeOf(getTokenIndices())[0]},
                           {"logits", logits[0]}});
}

#define GET_OP_CLASSES
#include "msac/Dialect/MSA/IR/MSAOps.cpp.inc"
