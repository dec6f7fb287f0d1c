//===- ExpandScaledMatmul.cpp - Reference lowering of bsq.scaled_matmul ---===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/BSQ/IR/BSQOps.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"
#include "msac/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace msac {
#define GEN_PASS_DEF_BSQEXPANDSCALEDMATMUL
#include "msac/Transforms/Passes.h.inc"
} // namespace msac

using namespace mlir;
using namespace msac;

namespace {

struct ExpandScaledMatmul : OpRewritePattern<bsq::ScaledMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(bsq::ScaledMatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto dequantize = [&](Value operand) -> Value {
      auto type = cast<RankedTensorType>(operand.getType());
      if (!isa<bsq::QuantizedTypeInterface>(type.getElementType()))
        return operand;
      auto f32Type = type.clone(rewriter.getF32Type());
      return bsq::DequantizeOp::create(rewriter, op.getLoc(), f32Type,
                                       operand);
    };
    Value lhs = dequantize(op.getLhs());
    Value rhs = dequantize(op.getRhs());
    rewriter.replaceOpWithNewOp<msa::LinearOp>(op, op.getType(), lhs, rhs);
    return success();
  }
};

struct BSQExpandScaledMatmulPass
    : msac::impl::BSQExpandScaledMatmulBase<BSQExpandScaledMatmulPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandScaledMatmul>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
