//===- BSQTypes.td - Block-scaled quantized element types --*- tablegen -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQTYPES_TD
#define MSAC_DIALECT_BSQ_IR_BSQTYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "msac/Dialect/BSQ/IR/BSQDialect.td"
include "msac/Dialect/BSQ/IR/BSQTypeInterfaces.td"

class BSQ_Type<string name, string typeMnemonic>
    : TypeDef<BSQ_Dialect, name,
              [DeclareTypeInterfaceMethods<BSQ_QuantizedTypeInterface>]> {
  let mnemonic = typeMnemonic;
}

def BSQ_NVFP4Type : BSQ_Type<"NVFP4", "nvfp4"> {
  let summary = "NVFP4: E2M1 values, one E4M3 scale per 16, optional FP32 global scale";
  let description = [{
    NVIDIA's NVFP4 format (msa-m3-spec.md §4.2). Values are `f4E2M1FN`
    codes (0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6) packed two per byte along the
    last dimension, element `2i` in the low nibble of byte `i`. Each run of
    16 consecutive elements of the last dimension shares one `f8E4M3FN`
    scale. With `global_scale`, an FP32 per-tensor scale `g` multiplies every
    block scale: `value = e2m1 * e4m3 * g`. ModelOpt checkpoints store `g` as
    `weight_scale_2`; compressed-tensors checkpoints store its reciprocal
    (`weight_global_scale`), which the importer inverts. The MSA kernels use
    no global scale (equivalently `g = 1`).

    Syntax: `!bsq.nvfp4` or `!bsq.nvfp4<global_scale>`.
  }];
  let parameters = (ins "bool":$globalScale);
  let hasCustomAssemblyFormat = 1;
  let builders = [
    TypeBuilder<(ins CArg<"bool", "false">:$globalScale), [{
      return $_get($_ctxt, globalScale);
    }]>
  ];
  let skipDefaultBuilders = 1;
}

def BSQ_MXType : BSQ_Type<"MX", "mx"> {
  let summary = "OCP microscaling (MXFP8 / MXFP4): one E8M0 scale per 32 values";
  let description = [{
    OCP Microscaling Formats v1.0. The payload type is `f8E4M3FN` or
    `f8E5M2` (MXFP8, one byte per value) or `f4E2M1FN` (MXFP4, two values
    per byte, low nibble first). Each run of 32 consecutive elements of the
    last dimension shares one `f8E8M0FNU` scale, a pure power of two
    `2^(byte - 127)`; checkpoints store it as raw bytes and the importer
    copies them unchanged.

    Syntax: `!bsq.mx<f8E4M3FN>`, `!bsq.mx<f8E5M2>`, `!bsq.mx<f4E2M1FN>`.
  }];
  let parameters = (ins "::mlir::FloatType":$elementType);
  let assemblyFormat = "`<` $elementType `>`";
  let genVerifyDecl = 1;
}

def BSQ_FP8Type : BSQ_Type<"FP8", "fp8"> {
  let summary = "FP8 with an FP32 scale per tensor or per 2-D block";
  let description = [{
    FP8 values (`f8E4M3FN` or `f8E5M2`) with FP32 scales. Without `block`
    one scale covers the whole tensor (or, for a stack of matrices packed
    with a scale per matrix, each matrix); with `block = [bm, bn]` each tile of
    `bm x bn` elements of the last two dimensions has its own scale (the
    DeepSeek-V3-style block-FP8 weights, `weight_scale_inv` of shape
    `[ceil(N/bm), ceil(K/bn)]`). A 1-D `block = [b]` scales runs of `b`
    elements of the last dimension (per-token-group activations).

    Syntax: `!bsq.fp8<f8E4M3FN>`, `!bsq.fp8<f8E4M3FN, block = [128, 128]>`.
  }];
  let parameters = (ins "::mlir::FloatType":$elementType,
                        ArrayRefParameter<"int64_t">:$block);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::FloatType":$elementType,
        CArg<"::llvm::ArrayRef<int64_t>", "{}">:$block), [{
      return $_get(elementType.getContext(), elementType, block);
    }]>
  ];
}

#endif // MSAC_DIALECT_BSQ_IR_BSQTYPES_TD
