//===- LowerQuantizedLinear.cpp - msa.linear with bsq weights -------------===//
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
#define GEN_PASS_DEF_MSALOWERQUANTIZEDLINEAR
#include "msac/Transforms/Passes.h.inc"
} // namespace msac

using namespace mlir;
using namespace msac;

namespace {

struct LowerQuantizedLinear : OpRewritePattern<msa::LinearOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(msa::LinearOp op,
                                PatternRewriter &rewriter) const override {
    Type weightElement = op.getWeight().getType().getElementType();
    if (!isa<bsq::QuantizedTypeInterface>(weightElement))
      return rewriter.notifyMatchFailure(op, "weight is not block-scaled");
    rewriter.replaceOpWithNewOp<bsq::ScaledMatmulOp>(
        op, op.getType(), op.getInput(), op.getWeight());
    return success();
  }
};

struct MSALowerQuantizedLinearPass
    : msac::impl::MSALowerQuantizedLinearBase<MSALowerQuantizedLinearPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerQuantizedLinear>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
