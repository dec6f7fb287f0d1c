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
