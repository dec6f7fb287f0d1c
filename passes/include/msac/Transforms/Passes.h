//===- Passes.h - msac transformation passes --------------------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_TRANSFORMS_PASSES_H
#define MSAC_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include "msac/Dialect/BSQ/IR/BSQDialect.h"
#include "msac/Dialect/MSA/IR/MSADialect.h"

namespace msac {

#define GEN_PASS_DECL
#include "msac/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "msac/Transforms/Passes.h.inc"

/// Registers the named pass pipelines of msac (see Pipelines.cpp) with the
/// global pipeline registry, so that `msac-opt --<name>` runs them.
void registerPipelines();

/// Builds the reference lowering pipeline: quantized projections are
/// expanded to FP32 dequantization plus `msa.linear`, then canonicalized.
/// Registered as `msac-reference-pipeline`.
void buildReferencePipeline(mlir::OpPassManager &pm);

} // namespace msac

#endif // MSAC_TRANSFORMS_PASSES_H
