//===- M3Importer.h - MiniMax-M3 checkpoint -> msa IR -----------*- C++ -*-===//
//
// Part of msac.
//
// Builds the whole MiniMax-M3 text model of a resolved checkpoint as one
// `func.func @forward` in the `msa` and `bsq` dialects. Weights are
// `msa.weight` references to checkpoint tensors, never embedded; quantized
// weights are `bsq.pack`s of their payload and scale tensors (a
// compressed-tensors global scale, a divisor, is inverted explicitly).
//
// Signature (T tokens of a step, L layers, S MSA layers):
//
//   func.func @forward(%token_ids: tensor<?xi32>, %seq_ids: tensor<?xi32>,
//                      %positions: tensor<?xi32>, %logits_indices: tensor<?xi32>,
//                      %block_table: !msa.block_table<...>,
//                      %k_cache_0, %v_cache_0, [%index_cache_0], ...)
//       -> (tensor<?xVxf32>, updated caches in the same order)
//
// Each argument carries an `msa.name` attribute naming it.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_IMPORT_M3IMPORTER_H
#define MSAC_IMPORT_M3IMPORTER_H

#include "msac/Checkpoint/MemoryPlan.h"
#include "msac/Checkpoint/ModelConfig.h"
#include "msac/Checkpoint/ModelWeights.h"
#include "msac/Dialect/MSA/IR/MSAAttributes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace msac {

struct ImportOptions {
  ckpt::CacheDType kvCacheDType = ckpt::CacheDType::BF16;
  ckpt::CacheDType indexCacheDType = ckpt::CacheDType::BF16;
  /// The attention ops' precision contract (`--attention-precision`);
  /// `Q8` needs an FP8 or NVFP4 KV cache (the caller checks it).
  msa::AttentionPrecision attentionPrecision = msa::AttentionPrecision::Exact;
};

/// Registers the dialects the importer emits.
void registerImportDialects(mlir::MLIRContext &context);

/// Builds the module. The result always verifies (an importer bug fails
/// verification and returns null after emitting diagnostics).
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &context,
                                              const ckpt::ModelConfig &config,
                                              const ckpt::ModelWeights &weights,
                                              const ImportOptions &options);

} // namespace msac

#endif // MSAC_IMPORT_M3IMPORTER_H
