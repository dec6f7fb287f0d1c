//===- M3Importer.cpp - MiniMax-M3 checkpoint -> msa IR -------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Import/M3Importer.h"
#include "msac/Dialect/BSQ/IR/BSQOps.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"

#include <cmath>

using namespace mlir;
using namespace msac;
using ckpt::DType;
using ckpt::ResolvedWeight;
using ckpt::WeightFormat;

void msac::registerImportDialects(MLIRContext &context) {
  context.loadDialect<msa::MSADialect, bsq::BSQDialect, func::FuncDialect,
                      arith::ArithDialect, tensor::TensorDialect>();
}

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

class Importer {
public:
  Importer(MLIRContext &context, const ckpt::ModelConfig &config,
           const ckpt::ModelWeights &weights, const ImportOptions &options)
      : ctx(context), config(config), weights(weights), options(options),
        b(&context), loc(UnknownLoc::get(&context)) {}

  OwningOpRef<ModuleOp> run();

private:
  Type elementOf(DType dtype);
  Type cacheElement(ckpt::CacheDType dtype);
  Type quantizedElement(const ResolvedWeight &w);
  RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  }
  /// A checkpoint weight (stacked over `stack` experts when non-zero, the
  /// expert index in each tensor name replaced by `{}`).
  Value weight(const ResolvedWeight &w, int64_t stack = 0);
  Value weight(const std::string &name) {
    const ResolvedWeight *w = weights.get(name);
    assert(w && "resolveWeights guarantees every tensor");
    return weight(*w);
  }
  Value linear(Value input, const std::string &name, int64_t outFeatures);
  Value rmsNorm(Value input, const std::string &weightName);
  Value splitHeads(Value x, int64_t heads, int64_t dim);
  Value rope(Value x);
  Value swigluMlp(Value x, const std::string &gate, const std::string &up,
                  const std::string &down, int64_t inner);

  MLIRContext &ctx;
  const ckpt::ModelConfig &config;
  const ckpt::ModelWeights &weights;
  const ImportOptions &options;
  OpBuilder b;
  Location loc;
  Type act;          // activation element type
  Value tokenCount;  // index value T
  Value positions;
};

Type Importer::elementOf(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return b.getBF16Type();
  case DType::F16:
    return b.getF16Type();
  case DType::F32:
    return b.getF32Type();
  case DType::U8:
    return IntegerType::get(&ctx, 8, IntegerType::Unsigned);
  case DType::I8:
    return b.getI8Type();
  case DType::F8_E4M3:
    return Float8E4M3FNType::get(&ctx);
  case DType::F8_E5M2:
    return Float8E5M2Type::get(&ctx);
  case DType::F8_E8M0:
    return Float8E8M0FNUType::get(&ctx);
  case DType::F4:
    return Float4E2M1FNType::get(&ctx);
  default:
    llvm_unreachable("resolveWeights admits no other dtype");
  }
}

Type Importer::cacheElement(ckpt::CacheDType dtype) {
  switch (dtype) {
  case ckpt::CacheDType::BF16:
    return b.getBF16Type();
  case ckpt::CacheDType::FP8:
    return Float8E4M3FNType::get(&ctx);
  case ckpt::CacheDType::NVFP4:
    return bsq::NVFP4Type::get(&ctx, /*globalScale=*/false);
  }
  llvm_unreachable("unknown cache dtype");
}

Type Importer::quantizedElement(const ResolvedWeight &w) {
  switch (w.format) {
  case WeightFormat::NVFP4:
    return bsq::NVFP4Type::get(&ctx, !w.globalScale.empty());
  case WeightFormat::MXFP8:
    return bsq::MXType::get(&ctx, cast<FloatType>(elementOf(w.dtype)));
  case WeightFormat::MXFP4:
    return bsq::MXType::get(&ctx, Float4E2M1FNType::get(&ctx));
  case WeightFormat::FP8Block: {
    const std::vector<int64_t> &tile = config.quantization.weightBlockSize;
    SmallVector<int64_t> block = tile.size() == 2
                                     ? SmallVector<int64_t>{tile[0], tile[1]}
                                     : SmallVector<int64_t>{128, 128};
    return bsq::FP8Type::get(cast<FloatType>(elementOf(w.dtype)), block);
  }
  case WeightFormat::FP8Tensor:
    return bsq::FP8Type::get(cast<FloatType>(elementOf(w.dtype)));
  case WeightFormat::Float:
    break;
  }
  llvm_unreachable("not a quantized format");
}

/// Replaces the first `.experts.<digits>.` with `.experts.{}.`.
static std::string stackedName(const std::string &name) {
  size_t at = name.find(".experts.");
  if (at == std::string::npos)
    return name;
  size_t digits = at + 9;
  size_t end = name.find('.', digits);
  return name.substr(0, digits) + "{}" + name.substr(end);
}

Value Importer::weight(const ResolvedWeight &w, int64_t stack) {
  auto read = [&](const std::string &name, ArrayRef<int64_t> shape,
                  Type element) -> Value {
    SmallVector<int64_t> fullShape;
    if (stack)
      fullShape.push_back(stack);
    fullShape.append(shape.begin(), shape.end());
    auto op = msa::WeightOp::create(
        b, loc, tensorOf(fullShape, element),
        b.getStringAttr(stack ? stackedName(name) : name),
        stack ? b.getI64IntegerAttr(stack) : IntegerAttr());
    return op.getResult();
  };
  if (w.format == WeightFormat::Float)
    return read(w.data, w.dataShape, elementOf(w.dtype));

  Value data = read(w.data, w.dataShape, elementOf(w.dtype));
  Value scales = read(w.scale, w.scaleShape, elementOf(w.scaleDType));
  if (w.format == WeightFormat::FP8Tensor && stack && !w.scaleShape.empty()) {
    // Per-expert scales stored as [1]: one scale per matrix of the stack.
    scales = tensor::CollapseShapeOp::create(
        b, loc, tensorOf({stack}, elementOf(w.scaleDType)), scales,
        SmallVector<ReassociationIndices>{{0, 1}});
  }
  Value global;
  if (!w.globalScale.empty()) {
    // Stored as [] (ModelOpt) or [1] (compressed-tensors); pack takes []
    // (or [E] for stacked experts).
    SmallVector<int64_t> scalar = stack ? SmallVector<int64_t>{stack}
                                        : SmallVector<int64_t>{};
    Value g = read(w.globalScale, w.globalScaleShape, b.getF32Type());
    if (!w.globalScaleShape.empty()) {
      SmallVector<ReassociationIndices> groups;
      if (stack)
        groups.push_back({0, 1});
      g = tensor::CollapseShapeOp::create(
          b, loc, tensorOf(scalar, b.getF32Type()), g, groups);
    }
    if (w.globalScaleIsDivisor) {
      // compressed-tensors stores 1/g: pack takes the multiplier.
      auto type = tensorOf(scalar, b.getF32Type());
      Value one = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(1.0f)));
      g = arith::DivFOp::create(b, loc, one, g);
    }
    global = g;
  }
  SmallVector<int64_t> logical;
  if (stack)
    logical.push_back(stack);
  logical.append(w.shape.begin(), w.shape.end());
  return bsq::PackOp::create(b, loc, tensorOf(logical, quantizedElement(w)),
                             data, scales, global);
}

Value Importer::linear(Value input, const std::string &name,
                       int64_t outFeatures) {
  Value w = weight(name);
  return msa::LinearOp::create(b, loc, tensorOf({kDyn, outFeatures}, act),
                               input, w);
}

Value Importer::rmsNorm(Value input, const std::string &weightName) {
  Value w = weight(weightName);
  return msa::RMSNormOp::create(
      b, loc, input.getType(), input, w,
      b.getF32FloatAttr(static_cast<float>(config.rmsNormEps)),
      b.getBoolAttr(config.gemmaNorm));
}

Value Importer::splitHeads(Value x, int64_t heads, int64_t dim) {
  Value h = arith::ConstantIndexOp::create(b, loc, heads);
  Value d = arith::ConstantIndexOp::create(b, loc, dim);
  SmallVector<ReassociationIndices> groups = {{0}, {1, 2}};
  return tensor::ExpandShapeOp::create(
      b, loc, tensorOf({kDyn, heads, dim}, act), x, groups,
      ArrayRef<OpFoldResult>{tokenCount, h, d});
}

Value Importer::rope(Value x) {
  return msa::RoPEOp::create(b, loc, x.getType(), x, positions,
                             b.getI64IntegerAttr(config.rotaryDim),
                             b.getF64FloatAttr(config.ropeTheta), UnitAttr());
}

Value Importer::swigluMlp(Value x, const std::string &gate,
                          const std::string &up, const std::string &down,
                          int64_t inner) {
  Value g = linear(x, gate, inner);
  Value u = linear(x, up, inner);
  Value a = msa::SwiGLUOp::create(
      b, loc, g.getType(), g, u,
      b.getF32FloatAttr(static_cast<float>(config.swigluAlpha)),
      b.getF32FloatAttr(static_cast<float>(config.swigluLimit)));
  return linear(a, down, config.hiddenSize);
}

OwningOpRef<ModuleOp> Importer::run() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  module->getOperation()->setAttr(
      "msa.model_type", b.getStringAttr(config.modelType.empty()
                                             ? "minimax_m3"
                                             : config.modelType));

  const ResolvedWeight *embedding = weights.get("model.embed_tokens.weight");
  act = elementOf(embedding->dtype);
  const int64_t h = config.hiddenSize, hq = config.numHeads,
                hkv = config.numKVHeads, d = config.headDim;
  const int64_t pageSize =
      config.sparse.blockSize > 0 ? config.sparse.blockSize : 128;
  auto tokens = tensorOf({kDyn}, b.getI32Type());
  auto table = msa::BlockTableType::get(&ctx, pageSize, kDyn);
  auto kvCache = msa::PagedCacheType::get(&ctx, hkv, pageSize, d,
                                          cacheElement(options.kvCacheDType));
  auto indexCache =
      msa::PagedCacheType::get(&ctx, 1, pageSize, config.sparse.indexDim,
                               cacheElement(options.indexCacheDType));

  SmallVector<Type> inputs = {tokens, tokens, tokens, tokens, table};
  SmallVector<std::string> names = {"token_ids", "seq_ids", "positions",
                                    "logits_indices", "block_table"};
  for (int64_t l = 0; l < config.numLayers; ++l) {
    inputs.append({kvCache, kvCache});
    names.push_back("k_cache." + std::to_string(l));
    names.push_back("v_cache." + std::to_string(l));
    if (config.layers[l].attention == ckpt::AttentionKind::Sparse) {
      inputs.push_back(indexCache);
      names.push_back("index_cache." + std::to_string(l));
    }
  }
  SmallVector<Type> results = {
      tensorOf({kDyn, config.vocabSize}, b.getF32Type())};
  results.append(inputs.begin() + 5, inputs.end());
  auto fn = func::FuncOp::create(b, loc, "forward",
                                 b.getFunctionType(inputs, results));
  for (auto [i, name] : llvm::enumerate(names))
    fn.setArgAttr(i, "msa.name", b.getStringAttr(name));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);

  Value tokenIds = body->getArgument(0), seqIds = body->getArgument(1);
  positions = body->getArgument(2);
  Value logitsIndices = body->getArgument(3), blockTable = body->getArgument(4);
  tokenCount = tensor::DimOp::create(b, loc, tokenIds, 0);

  Value x = msa::EmbeddingOp::create(b, loc, tensorOf({kDyn, h}, act),
                                     tokenIds, weight(*embedding));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  auto precision =
      msa::AttentionPrecisionAttr::get(&ctx, options.attentionPrecision);
  SmallVector<Value> newCaches;
  unsigned cacheArg = 5;
  for (int64_t l = 0; l < config.numLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const ckpt::LayerSpec &layer = config.layers[l];
    Value kc = body->getArgument(cacheArg++);
    Value vc = body->getArgument(cacheArg++);

    Value hn = rmsNorm(x, p + "input_layernorm.weight");
    Value q = splitHeads(linear(hn, p + "self_attn.q_proj.weight", hq * d),
                         hq, d);
    Value k = splitHeads(linear(hn, p + "self_attn.k_proj.weight", hkv * d),
                         hkv, d);
    Value v = splitHeads(linear(hn, p + "self_attn.v_proj.weight", hkv * d),
                         hkv, d);
    q = rope(rmsNorm(q, p + "self_attn.q_norm.weight"));
    k = rope(rmsNorm(k, p + "self_attn.k_norm.weight"));
    kc = msa::KVCacheInsertOp::create(b, loc, kvCache, kc, blockTable, seqIds,
                                      positions, k);
    vc = msa::KVCacheInsertOp::create(b, loc, kvCache, vc, blockTable, seqIds,
                                      positions, v);
    newCaches.append({kc, vc});

    Value attention;
    auto out = tensorOf({kDyn, hq, d}, act);
    if (layer.attention == ckpt::AttentionKind::Sparse) {
      const ckpt::SparseAttentionConfig &s = config.sparse;
      Value ic = body->getArgument(cacheArg++);
      Value iq = splitHeads(
          linear(hn, p + "self_attn.index_q_proj.weight", s.indexHeads * s.indexDim),
          s.indexHeads, s.indexDim);
      Value ik = splitHeads(
          linear(hn, p + "self_attn.index_k_proj.weight", s.indexDim), 1,
          s.indexDim);
      iq = rope(rmsNorm(iq, p + "self_attn.index_q_norm.weight"));
      ik = rope(rmsNorm(ik, p + "self_attn.index_k_norm.weight"));
      ic = msa::KVCacheInsertOp::create(b, loc, indexCache, ic, blockTable,
                                        seqIds, positions, ik);
      newCaches.push_back(ic);
      Value scores = msa::IndexScoreOp::create(
          b, loc, tensorOf({s.indexHeads, kDyn, kDyn}, b.getF32Type()), iq,
          ic, blockTable, seqIds, positions, b.getF32FloatAttr(1.0f));
      Value blocks = msa::BlockTopKOp::create(
          b, loc, tensorOf({s.indexHeads, kDyn, s.topkBlocks}, b.getI32Type()),
          scores, positions, b.getI64IntegerAttr(s.topkBlocks),
          b.getI64IntegerAttr(pageSize), b.getI64IntegerAttr(s.localBlocks),
          b.getI64IntegerAttr(s.initBlocks));
      attention = msa::SparseAttentionOp::create(
                      b, loc, out, Type(), q, kc, vc, blockTable, seqIds,
                      positions, blocks, b.getF32FloatAttr(scale), precision)
                      .getOutput();
    } else {
      attention = msa::DenseAttentionOp::create(
                      b, loc, out, Type(), q, kc, vc, blockTable, seqIds,
                      positions, b.getF32FloatAttr(scale), precision)
                      .getOutput();
    }
    SmallVector<ReassociationIndices> merge = {{0}, {1, 2}};
    Value flat = tensor::CollapseShapeOp::create(
        b, loc, tensorOf({kDyn, hq * d}, act), attention, merge);
    Value residual = arith::AddFOp::create(
        b, loc, x, linear(flat, p + "self_attn.o_proj.weight", h));

    Value h2 = rmsNorm(residual, p + "post_attention_layernorm.weight");
    Value ffn;
    if (layer.mlp == ckpt::MlpKind::Dense) {
      ffn = swigluMlp(h2, p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight",
                      p + "mlp.down_proj.weight", config.denseIntermediateSize);
    } else {
      const std::string m = p + "block_sparse_moe.";
      Value bias = config.routingBias
                       ? weight(m + "e_score_correction_bias")
                       : Value();
      auto router = msa::MoERouterOp::create(
          b, loc, tensorOf({kDyn, config.expertsPerToken}, b.getF32Type()),
          tensorOf({kDyn, config.expertsPerToken}, b.getI32Type()), h2,
          weight(m + "gate.weight"), bias,
          b.getI64IntegerAttr(config.expertsPerToken),
          b.getF32FloatAttr(static_cast<float>(config.routedScalingFactor)),
          b.getBoolAttr(config.renormalize));
      auto expert = [&](const char *which) {
        return weight(*weights.get(m + "experts.0." + which + ".weight"),
                      config.numExperts);
      };
      Value w1 = expert("w1"), w3 = expert("w3"), w2 = expert("w2");
      ffn = msa::MoEExpertsOp::create(
          b, loc, h2.getType(), h2, router.getWeights(),
          router.getExpertIds(), w1, w3, w2,
          b.getF32FloatAttr(static_cast<float>(config.swigluAlpha)),
          b.getF32FloatAttr(static_cast<float>(config.swigluLimit)));
      if (config.numSharedExperts > 0) {
        Value shared = swigluMlp(h2, m + "shared_experts.gate_proj.weight",
                                 m + "shared_experts.up_proj.weight",
                                 m + "shared_experts.down_proj.weight",
                                 config.sharedIntermediateSize);
        ffn = arith::AddFOp::create(b, loc, ffn, shared);
      }
    }
    x = arith::AddFOp::create(b, loc, residual, ffn);
  }
  Value normed = rmsNorm(x, "model.norm.weight");
  Value logits = msa::LogitsOp::create(
      b, loc, results[0], normed, logitsIndices, weight("lm_head.weight"));
  SmallVector<Value> returned = {logits};
  returned.append(newCaches.begin(), newCaches.end());
  func::ReturnOp::create(b, loc, returned);

  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace

OwningOpRef<ModuleOp> msac::importModel(MLIRContext &context,
                                        const ckpt::ModelConfig &config,
                                        const ckpt::ModelWeights &weights,
                                        const ImportOptions &options) {
  registerImportDialects(context);
  return Importer(context, config, weights, options).run();
}
