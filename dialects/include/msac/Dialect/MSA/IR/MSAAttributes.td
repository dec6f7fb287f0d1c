//===- MSAAttributes.td - msa dialect attributes -----------*- tablegen -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSAATTRIBUTES_TD
#define MSAC_DIALECT_MSA_IR_MSAATTRIBUTES_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "msac/Dialect/MSA/IR/MSADialect.td"

def MSA_AttentionPrecisionExact : I32EnumAttrCase<"Exact", 0, "exact">;
def MSA_AttentionPrecisionQ8 : I32EnumAttrCase<"Q8", 1, "q8">;

def MSA_AttentionPrecision : I32EnumAttr<"AttentionPrecision",
    "precision contract of an attention op's products (msa-m3-spec §3.2)",
    [MSA_AttentionPrecisionExact, MSA_AttentionPrecisionQ8]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::msac::msa";
}

def MSA_AttentionPrecisionAttr : EnumAttr<MSA_Dialect, MSA_AttentionPrecision,
                                          "attention_precision"> {
  let summary = "Precision contract of msa.dense_attention / msa.sparse_attention";
  let description = [{
    * `exact`: the keys and values as the cache stores them (BF16, E4M3, or
      NVFP4 dequantized to E4M3 values), the queries as given, FP32 scores,
      softmax and accumulation; the probabilities multiply V at FP32
      precision.
    * `q8`: MSA's FP8 decode contract (Q8KV8 with E4M3 caches, Q8KV4 with
      NVFP4 caches; msa-m3-spec §3.2, decode reference [S14]): the queries
      are rounded to E4M3 (round to nearest even, saturating at ±448) before
      the scores; per selected block, in slot order, the running maximum `m`
      takes the block's scores first, then each key's `P = 448 exp(z - m)`
      enters `P V` as `E4M3(P)` while the denominator sums `P` unrounded;
      `output = acc / denominator`. Needs E4M3 or NVFP4 key and value
      caches.
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // MSAC_DIALECT_MSA_IR_MSAATTRIBUTES_TD
