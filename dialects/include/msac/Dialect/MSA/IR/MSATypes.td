//===- MSATypes.td - Paged KV cache and block table types --*- tablegen -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSATYPES_TD
#define MSAC_DIALECT_MSA_IR_MSATYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "msac/Dialect/MSA/IR/MSADialect.td"

class MSA_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<MSA_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def MSA_PagedCacheType : MSA_Type<"PagedCache", "paged_cache"> {
  let summary = "A paged cache of per-token key or value vectors";
  let description = [{
    Physical storage for the keys (or values) of one layer, split into pages
    of `page_size` consecutive tokens. A page holds `[heads, page_size,
    head_dim]` elements, so the whole cache is `[num_pages, heads,
    page_size, head_dim]`, the MSA kernel layout (msa-m3-spec.md §4.1). The
    number of pages is chosen by the runtime and is not part of the type.

    * The main K and V caches of a layer are two values of the same type
      with `heads = num_key_value_heads` (4 for MiniMax-M3).
    * The index-key cache of an MSA layer has `heads = 1` and
      `head_dim = sparse_index_dim`.
    * The element type is `bf16`, `f16`, `f32`, `f8E4M3FN`, `f8E5M2` or
      `!bsq.nvfp4` (payload `[.., head_dim / 2]` bytes plus one E4M3 scale
      per 16 values, §4.2).
    * `page_size` equals the sparse block size (128) wherever MSA reads the
      cache: one selected block is exactly one page.

    Storage: a `bf16`, `f16`, `f32` or FP8 cache holds `[num_pages, heads,
    page_size, head_dim]` elements. An NVFP4 cache stores each page as its
    packed E2M1 codes `[heads, page_size, head_dim / 2]` bytes (byte `i`:
    element `2i` in the low nibble, `2i + 1` in the high nibble) followed
    by its E4M3 scales `[heads, page_size, head_dim / 16]` (scale `j`
    covers elements `16j .. 16j + 15`): the spec's separate code and scale
    tensors (§4.1) with a page stride of `heads * page_size * (head_dim / 2
    + head_dim / 16)` bytes, so that a kernel finds both from the page id.
    `getBytesPerToken` counts the scales.

    Reading: the ops that read a cache see its values widened exactly to
    FP32, except NVFP4 values, which are first dequantized to FP8 E4M3 as
    the Q8KV4 kernels do (§4.2 `inference.dequant`: the E2M1 value times
    the scale in FP32, clamped to ±448, rounded to nearest even E4M3; global
    scale 1).

    Syntax: `!msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>`.
  }];
  let parameters = (ins "int64_t":$heads, "int64_t":$pageSize,
                        "int64_t":$headDim, "::mlir::Type":$elementType);
  let assemblyFormat = [{
    `<` `heads` `=` $heads `,` `page_size` `=` $pageSize `,`
    `head_dim` `=` $headDim `,` $elementType `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes one token occupies in this cache (all heads), including the
    /// block scales of a block-scaled element type.
    int64_t getBytesPerToken() const;
  }];
}

def MSA_BlockTableType : MSA_Type<"BlockTable", "block_table"> {
  let summary = "Per-sequence map from logical blocks to physical cache pages";
  let description = [{
    An `i32` table of shape `[num_seqs, max_blocks]` (vLLM's block table):
    entry `[s, b]` is the physical page that holds tokens `b * page_size`
    to `(b + 1) * page_size - 1` of sequence `s`. All caches read through
    the table must have the same `page_size`. `max_blocks` bounds the
    context length of a sequence (`max_blocks * page_size` tokens); `?`
    leaves it to the runtime.

    Syntax: `!msa.block_table<page_size = 128, max_blocks = ?>`.
  }];
  let parameters = (ins "int64_t":$pageSize, "int64_t":$maxBlocks);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // MSAC_DIALECT_MSA_IR_MSATYPES_TD
