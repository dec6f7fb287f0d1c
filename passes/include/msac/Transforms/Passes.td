//===- Passes.td - msac transformation passes --------------*- tablegen -*-===//
//
// Part of msac. Every pass is declared here; MLIR generates its base class,
// options struct, `create...Pass()` and registration.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_TRANSFORMS_PASSES_TD
#define MSAC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def BSQExpandScaledMatmul : Pass<"bsq-expand-scaled-matmul"> {
  let summary = "Rewrite bsq.scaled_matmul as FP32 dequantization plus msa.linear";
  let description = [{
    The reference lowering of block-scaled products for targets without
    block-scaled matrix instructions (the host, sm_90a for NVFP4): every
    quantized operand of `bsq.scaled_matmul` becomes a
    `bsq.dequantize` to `f32`, which is exact for every `bsq` format
    (an E2M1 or FP8 value times an E4M3, E8M0 or FP32 scale needs at most
    24 significant bits when no FP32 global scale is present, and is the
    defined FP32 product otherwise), followed by `msa.linear`, whose FP32
    accumulation matches the op's contract.

    ```mlir
    %y = bsq.scaled_matmul %x, %w : tensor<?x64xbf16>, tensor<32x64x!bsq.nvfp4> -> tensor<?x32xbf16>
    // becomes
    %d = bsq.dequantize %w : tensor<32x64x!bsq.nvfp4> -> tensor<32x64xf32>
    %y = msa.linear %x, %d : tensor<?x64xbf16>, tensor<32x64xf32> -> tensor<?x32xbf16>
    ```
  }];
  let dependentDialects = ["::msac::msa::MSADialect"];
}

def MSAFuseAttentionPrologue : Pass<"msa-fuse-attention-prologue"> {
  let summary = "Fuse each layer's QKV projections, Q/K norms, RoPE and cache inserts";
  let description = [{
    Starting from every `msa.dense_attention` and `msa.sparse_attention`,
    matches the attention prologue the importer emits and replaces it with
    one `msa.attention_prologue`:

    * q: `msa.linear` -> `tensor.expand_shape` -> `msa.rms_norm` ->
      `msa.rope`, used only by the attention op;
    * k: the same chain into the `msa.kv_cache_insert` giving the
      attention's key cache; v: `msa.linear` -> `tensor.expand_shape` into
      the insert giving its value cache;
    * MSA layers: index_q (used only by the `msa.index_score` behind the
      attention's `msa.block_topk`) and index_k (inserted into that
      op's index cache) like q and k.

    The pass leaves a layer untouched unless: every projection reads the
    same input and has a floating-point weight (run it after
    `msac-reference-pipeline`); every intermediate value has exactly one
    use, in the chain; every activation has the input's element type,
    `bf16` or `f32`; the four norms share `eps` and `unit_offset`; the
    four RoPEs are NeoX (not `interleaved`) with the same positions,
    `rotary_dim` and `theta`; the three inserts use one block table, one
    sequence-id vector and the RoPE positions; every cache is `bf16`,
    `f32`, `f8E4M3FN` or `!bsq.nvfp4` without global scale (the formats
    the host and GPU kernels write, quantized as `msa.kv_cache_insert`
    does); and all ops are in one block, with no user of a replaced value
    before the last op of the chain.

    Not part of `msac-reference-pipeline`: `msac compile` runs it after
    that pipeline by default (`--fuse-attention-prologue=false` leaves it
    out).
  }];
  let dependentDialects = ["::msac::msa::MSADialect"];
}

def MSALowerQuantizedLinear : Pass<"msa-lower-quantized-linear"> {
  let summary = "Turn msa.linear with a block-scaled weight into bsq.scaled_matmul";
  let description = [{
    The importer emits every projection as `msa.linear`, whatever format
    the checkpoint stores its weight in. This pass gives projections whose
    weight has a `bsq` element type (NVFP4 experts, MXFP8 attention,
    block-FP8) to the quantization dialect, whose lowerings pick the
    per-target dequantization or block-scaled MMA. Projections with
    floating-point weights are left alone.
  }];
  let dependentDialects = ["::msac::bsq::BSQDialect"];
}

#endif // MSAC_TRANSFORMS_PASSES_TD
