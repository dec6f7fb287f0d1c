//===- BSQOps.td - Block-scaled quantization ops -----------*- tablegen -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQOPS_TD
#define MSAC_DIALECT_BSQ_IR_BSQOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "msac/Dialect/BSQ/IR/BSQDialect.td"
include "msac/Dialect/BSQ/IR/BSQTypes.td"

def BSQ_QuantizedElement
    : Type<CPred<"::llvm::isa<::msac::bsq::QuantizedTypeInterface>($_self)">,
           "block-scaled quantized element type">;
def BSQ_QuantizedTensor : RankedTensorOf<[BSQ_QuantizedElement]>;
def BSQ_GlobalScale : RankedTensorOf<[F32]>;

def BSQ_PackOp : BSQ_Op<"pack", [Pure]> {
  let summary = "Assemble a quantized tensor from its payload and scale arrays";
  let description = [{
    Builds a quantized tensor of logical shape `[d0, ..., dn]` from the
    arrays a checkpoint stores.

    * `data`: the payload. Either the storage type itself with the logical
      shape, or 8-bit integers (`i8`/`ui8`) holding the raw bytes. For the
      4-bit formats the bytes hold two values each, element `2i` in the low
      nibble of byte `i`, so the last dimension is `dn / 2`
      (msa-m3-spec.md §4.2).
    * `scales`: the scale type of the format (or `i8`/`ui8` raw bytes for
      8-bit scale types). For 1-D blocks of size `b` its shape is
      `[d0, ..., dn / b]` (`dn` must be a multiple of `b`); for 2-D blocks
      `[bm, bn]` it is `[d0, ..., ceil(dn-1 / bm), ceil(dn / bn)]`; for a
      per-tensor scale it is `tensor<f32>` or `tensor<1xf32>`, or one scale
      per matrix of a stack, `[d0, ..., dn-2]` (stacked routed experts of a
      per-tensor FP8 checkpoint, each expert keeping its own scale).
    * `global_scale`: FP32, present exactly when the type has a global
      scale (`!bsq.nvfp4<global_scale>`), used as a multiplier. Either a
      scalar for the whole tensor, or one value per matrix of a stack of
      matrices: shape `[d0, ..., dn-2]` (for example `[E]` for the stacked
      routed experts of a MoE layer, each expert keeping its own scale).

    Example (one NVFP4 expert weight of a ModelOpt checkpoint):

    ```mlir
    %w = bsq.pack %data, %scales, %g
        : tensor<3072x3072xui8>, tensor<3072x384xf8E4M3FN>, tensor<f32>
        -> tensor<3072x6144x!bsq.nvfp4<global_scale>>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$data, AnyRankedTensor:$scales,
                       Optional<BSQ_GlobalScale>:$global_scale);
  let results = (outs BSQ_QuantizedTensor:$result);
  let assemblyFormat = [{
    $data `,` $scales (`,` $global_scale^)? attr-dict `:` type($data) `,`
    type($scales) (`,` type($global_scale)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def BSQ_QuantizeOp : BSQ_Op<"quantize", [Pure]> {
  let summary = "Quantize a floating-point tensor to a block-scaled format";
  let description = [{
    Converts `input` to the block-scaled format of the result element type,
    with the same logical shape. Per block, the scale is chosen from the
    block's absolute maximum `amax` (computed in FP32):

    * NVFP4: `scale = E4M3(amax / 6 / g)` (`g` = `global_scale` of the
      block's matrix, or 1), each
      value `E2M1(x / (scale * g))` rounded to nearest even, saturating at
      ±6 (NVIDIA ModelOpt / TensorRT-LLM recipe).
    * MX: `scale = 2^(floor(log2(amax)) - emax)` with `emax` = 8 (E4M3),
      15 (E5M2) or 2 (E2M1), values rounded to nearest even and saturated
      (OCP MX v1.0 §6.3).
    * FP8: `scale = amax / fmax` per tensor or tile (`fmax` = 448 for E4M3,
      57344 for E5M2), values saturated; an all-zero block gets scale 1.

    The last logical dimension must be a multiple of the 1-D block size.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                       Optional<BSQ_GlobalScale>:$global_scale);
  let results = (outs BSQ_QuantizedTensor:$result);
  let assemblyFormat = [{
    $input (`,` $global_scale^)? attr-dict `:` type($input)
    (`,` type($global_scale)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def BSQ_DequantizeOp : BSQ_Op<"dequantize", [Pure]> {
  let summary = "Expand a quantized tensor to a floating-point tensor";
  let description = [{
    Computes `storage * scale [* global_scale]` for every element in FP32
    and rounds the product to the result element type (round to nearest
    even). A narrower result saturates: for an `f8E4M3FN` result the FP32
    product is clamped to ±448 first, so overflow never becomes NaN. This is
    exactly the NVFP4 → FP8 dequantization of the MSA kernels
    (msa-m3-spec.md §4.2, `inference.dequant`). The shapes are equal.
  }];
  let arguments = (ins BSQ_QuantizedTensor:$input);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def BSQ_ScaledMatmulOp : BSQ_Op<"scaled_matmul", [Pure]> {
  let summary = "Matrix product with block-scaled operands, B transposed";
  let description = [{
    `result[m, n] = sum_k lhs[m, k] * rhs[n, k]`, where a quantized operand
    contributes its dequantized values and the sum is accumulated in FP32,
    then rounded to the result element type. `lhs` is `[M, K]` and `rhs` is
    `[N, K]` (the Hugging Face `[out_features, in_features]` weight layout),
    the result `[M, N]`. At least one operand is quantized; a quantized
    operand with 1-D blocks is blocked along K. When both are quantized
    their K block sizes must agree, as the hardware block-scaled MMA
    (`tcgen05.mma ... block_scale`, MFMA scaled) requires.
  }];
  let arguments = (ins TensorRankOf<[AnyType], [2]>:$lhs,
                       TensorRankOf<[AnyType], [2]>:$rhs);
  let results = (outs TensorRankOf<[AnyFloat], [2]>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // MSAC_DIALECT_BSQ_IR_BSQOPS_TD
