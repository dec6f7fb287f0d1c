//===- MSAOpsTest.cpp - Building and verifying msa IR from C++ ------------===//
//
// Part of msac. The importer builds IR through these C++ builders, so they
// are tested directly: a well-formed attention prologue verifies, a
// malformed op is rejected with a diagnostic that names the problem, and the
// reference pipeline removes every block-scaled product.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/BSQ/IR/BSQOps.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"
#include "msac/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "gtest/gtest.h"

#include <string>

using namespace mlir;
using namespace msac;

namespace {

class MSAOpsTest : public ::testing::Test {
protected:
  MSAOpsTest() : builder(&context) {
    context.loadDialect<msa::MSADialect, bsq::BSQDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// Verifies the module and returns the first error message, or "" when it
  /// verifies.
  std::string verifyAndGetError() {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    if (succeeded(verify(*module)))
      return "";
    return message.empty() ? "<no message>" : message;
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(MSAOpsTest, BuildsAnIndexBranch) {
  Location loc = builder.getUnknownLoc();
  Type bf16 = builder.getBF16Type();
  auto cache = msa::PagedCacheType::get(&context, /*heads=*/1,
                                        /*pageSize=*/128, /*headDim=*/128,
                                        bf16);
  auto table = msa::BlockTableType::get(&context, 128, 64);
  auto tokens = RankedTensorType::get({5}, builder.getI32Type());
  auto queries = RankedTensorType::get({5, 4, 128}, bf16);
  auto fn = func::FuncOp::create(
      builder, loc, "index",
      builder.getFunctionType({queries, cache, table, tokens, tokens}, {}));
  Block *body = fn.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(body);
  auto scoresType = RankedTensorType::get({4, 5, 64}, b.getF32Type());
  auto scores = msa::IndexScoreOp::create(
      b, loc, scoresType, body->getArgument(0), body->getArgument(1),
      body->getArgument(2), body->getArgument(3), body->getArgument(4),
      b.getF32FloatAttr(1.0f));
  auto idsType = RankedTensorType::get({4, 5, 16}, b.getI32Type());
  msa::BlockTopKOp::create(b, loc, idsType, scores, body->getArgument(4),
                           /*k=*/16, /*block_size=*/128, /*local_blocks=*/1,
                           /*init_blocks=*/0);
  func::ReturnOp::create(b, loc);
  EXPECT_EQ(verifyAndGetError(), "");
}

TEST_F(MSAOpsTest, RejectsMismatchedIndexCache) {
  Location loc = builder.getUnknownLoc();
  Type bf16 = builder.getBF16Type();
  // Four heads: the index cache must have exactly one.
  auto cache = msa::PagedCacheType::get(&context, 4, 128, 128, bf16);
  auto table = msa::BlockTableType::get(&context, 128, ShapedType::kDynamic);
  auto tokens = RankedTensorType::get({5}, builder.getI32Type());
  auto queries = RankedTensorType::get({5, 4, 128}, bf16);
  auto fn = func::FuncOp::create(
      builder, loc, "index",
      builder.getFunctionType({queries, cache, table, tokens, tokens}, {}));
  Block *body = fn.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(body);
  auto scoresType =
      RankedTensorType::get({4, 5, ShapedType::kDynamic}, b.getF32Type());
  msa::IndexScoreOp::create(b, loc, scoresType, body->getArgument(0),
                            body->getArgument(1), body->getArgument(2),
                            body->getArgument(3), body->getArgument(4),
                            b.getF32FloatAttr(1.0f));
  func::ReturnOp::create(b, loc);
  EXPECT_NE(verifyAndGetError().find("must have one head"), std::string::npos);
}

TEST_F(MSAOpsTest, ReferencePipelineExpandsQuantizedProjections) {
  const char *source = R"mlir(
    func.func @proj(%x: tensor<?x64xbf16>) -> tensor<?x32xbf16> {
      %data = msa.weight "w.weight" : tensor<32x32xui8>
      %scales = msa.weight "w.weight_scale" : tensor<32x4xf8E4M3FN>
      %w = bsq.pack %data, %scales : tensor<32x32xui8>, tensor<32x4xf8E4M3FN> -> tensor<32x64x!bsq.nvfp4>
      %y = msa.linear %x, %w : tensor<?x64xbf16>, tensor<32x64x!bsq.nvfp4> -> tensor<?x32xbf16>
      return %y : tensor<?x32xbf16>
    }
  )mlir";
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(parsed);
  PassManager pm(&context);
  buildReferencePipeline(pm);
  ASSERT_TRUE(succeeded(pm.run(*parsed)));
  int scaledMatmuls = 0, dequantizes = 0, linears = 0;
  parsed->walk([&](Operation *op) {
    scaledMatmuls += isa<bsq::ScaledMatmulOp>(op);
    dequantizes += isa<bsq::DequantizeOp>(op);
    if (auto linear = dyn_cast<msa::LinearOp>(op)) {
      ++linears;
      EXPECT_TRUE(linear.getWeight().getType().getElementType().isF32());
    }
  });
  EXPECT_EQ(scaledMatmuls, 0);
  EXPECT_EQ(dequantizes, 1);
  EXPECT_EQ(linears, 1);
}

} // namespace
