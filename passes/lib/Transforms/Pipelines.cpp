//===- Pipelines.cpp - Named pass pipelines of msac -----------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void msac::buildReferencePipeline(OpPassManager &pm) {
  pm.addPass(createMSALowerQuantizedLinear());
  pm.addPass(createBSQExpandScaledMatmul());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void msac::registerPipelines() {
  PassPipelineRegistration<>(
      "msac-reference-pipeline",
      "Lower block-scaled projections to FP32 dequantization plus "
      "msa.linear, then canonicalize and CSE (the host reference path)",
      buildReferencePipeline);
}
