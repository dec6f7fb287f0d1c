//===- BSQDialect.td - Block-scaled quantization dialect ---*- tablegen -*-===//
//
// Part of msac. The `bsq` dialect definition and its base op class.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQDIALECT_TD
#define MSAC_DIALECT_BSQ_IR_BSQDIALECT_TD

include "mlir/IR/OpBase.td"

def BSQ_Dialect : Dialect {
  let name = "bsq";
  let cppNamespace = "::msac::bsq";
  let summary = "Block-scaled quantized formats: NVFP4, MXFP8, MXFP4 and FP8";
  let description = [{
    The `bsq` (block-scaled quantization) dialect models tensors whose values
    are stored in a narrow element type and multiplied by one scale factor per
    block of consecutive elements. It is named `bsq` so that it never collides
    with upstream MLIR's `quant` dialect, which models affine (zero-point)
    integer quantization.

    A quantized tensor is an ordinary builtin `tensor` whose element type is
    one of this dialect's types, for example `tensor<3072x6144x!bsq.nvfp4>`.
    The shape is always the *logical* shape (one entry per real-valued
    element). How the payload and the scales are laid out in memory is fixed
    by `bsq.pack`, which assembles a quantized tensor from the arrays stored
    in a checkpoint:

    | Type | Storage | Scale | Block | Second level |
    |---|---|---|---|---|
    | `!bsq.nvfp4` | `f4E2M1FN`, two per byte, low nibble first | `f8E4M3FN` | 16 along the last dim | optional FP32 per-tensor scale |
    | `!bsq.mx<f8E4M3FN>` / `!bsq.mx<f8E5M2>` (MXFP8) | one byte each | `f8E8M0FNU` | 32 along the last dim | none |
    | `!bsq.mx<f4E2M1FN>` (MXFP4) | two per byte, low nibble first | `f8E8M0FNU` | 32 along the last dim | none |
    | `!bsq.fp8<f8E4M3FN>` | one byte each | `f32` | whole tensor | none |
    | `!bsq.fp8<f8E4M3FN, block = [128, 128]>` | one byte each | `f32` | 2-D tiles of the last two dims | none |

    The real value of an element is `storage * scale [* global_scale]`,
    computed in FP32 (msa-m3-spec.md §4.2; OCP Microscaling Formats v1.0 for
    the MX types). Element types reuse MLIR's builtin `f4E2M1FN`, `f8E4M3FN`,
    `f8E5M2` and `f8E8M0FNU`.
  }];
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Registers the dialect's types; defined next to the type storage.
    void registerTypes();
  }];
}

class BSQ_Op<string mnemonic, list<Trait> traits = []>
    : Op<BSQ_Dialect, mnemonic, traits>;

#endif // MSAC_DIALECT_BSQ_IR_BSQDIALECT_TD
