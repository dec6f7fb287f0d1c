//===- MSADialect.td - MiniMax sparse attention dialect ----*- tablegen -*-===//
//
// Part of msac. The `msa` dialect definition and its base op class.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSADIALECT_TD
#define MSAC_DIALECT_MSA_IR_MSADIALECT_TD

include "mlir/IR/OpBase.td"

def MSA_Dialect : Dialect {
  let name = "msa";
  let cppNamespace = "::msac::msa";
  let summary = "The MiniMax-M3 text model: MiniMax Sparse Attention, paged KV caches, MoE";
  let description = [{
    The `msa` dialect expresses one forward step (prefill, chunked prefill or
    decode) of a MiniMax-M3-family text model at the granularity that
    fusion passes and code generation work on: embedding, Gemma RMSNorm,
    projections, per-head Q/K norm, partial NeoX RoPE, paged KV-cache
    inserts, the MSA index branch (index scores with block max-pooling and
    block top-k), sparse and dense attention, the MoE router and experts with
    SwiGLU-OAI, and logits. Semantics follow
    `shared/reference/msa-m3-spec.md`; each op names the section it
    implements.

    Conventions shared by all ops:

    * A step processes `T` tokens laid out token-major (the flattened batch
      of vLLM). Token `t` belongs to sequence `seq_ids[t]` and sits at
      absolute position `positions[t]` (both `i32`, shape `[T]`).
    * Activations are floating-point tensors (normally `bf16`) with value
      semantics; reductions accumulate in FP32.
    * KV caches are values of type `!msa.paged_cache`. Ops that write a
      cache return the updated cache. A sequence's pages are found through a
      `!msa.block_table` value: row `s`, column `b` holds the physical page
      of logical block `b` of sequence `s`.
    * Weights are `msa.weight` values that name a checkpoint tensor; they
      may carry a block-scaled element type from the `bsq` dialect.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Registers the dialect's types; defined next to the type storage.
    void registerTypes();
    /// Registers the dialect's attributes (MSAAttributes.td).
    void registerAttributes();
  }];
  let dependentDialects = ["::msac::bsq::BSQDialect"];
}

class MSA_Op<string mnemonic, list<Trait> traits = []>
    : Op<MSA_Dialect, mnemonic, traits>;

#endif // MSAC_DIALECT_MSA_IR_MSADIALECT_TD
