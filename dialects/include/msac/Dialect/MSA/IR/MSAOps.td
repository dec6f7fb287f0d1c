//===- MSAOps.td - MiniMax-M3 text model ops ---------------*- tablegen -*-===//
//
// Part of msac. Section numbers (§) refer to
// shared/reference/msa-m3-spec.md.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSAOPS_TD
#define MSAC_DIALECT_MSA_IR_MSAOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "msac/Dialect/MSA/IR/MSADialect.td"
include "msac/Dialect/MSA/IR/MSATypes.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def MSA_PagedCache : Type<CPred<"::llvm::isa<::msac::msa::PagedCacheType>($_self)">,
                          "paged cache", "::msac::msa::PagedCacheType">;
def MSA_BlockTable : Type<CPred<"::llvm::isa<::msac::msa::BlockTableType>($_self)">,
                          "block table", "::msac::msa::BlockTableType">;

def MSA_TokenVector : 1DTensorOf<[I32]>;
def MSA_FloatMatrix : TensorRankOf<[AnyFloat], [2]>;
def MSA_FloatHeads : TensorRankOf<[AnyFloat], [3]>;
// A weight: floating point, or a `bsq` block-scaled element type (checked by
// the verifier).
def MSA_Weight2D : TensorRankOf<[AnyType], [2]>;
def MSA_Weight3D : TensorRankOf<[AnyType], [3]>;

//===----------------------------------------------------------------------===//
// Weights and embedding
//===----------------------------------------------------------------------===//

def MSA_WeightOp : MSA_Op<"weight", [Pure]> {
  let summary = "A checkpoint tensor, referenced by name";
  let description = [{
    The value of tensor `name` of the model checkpoint (after stripping the
    multimodal `language_model.` prefix, §1.5). The data is not embedded in
    the IR; the artifact writer resolves the name against the checkpoint's
    safetensors index.

    With `num_stacked = n`, `name` contains one `{}` placeholder and the
    result stacks the `n` tensors obtained by replacing it with `0 .. n-1`
    along a new leading dimension, which is how the `E` routed experts of a
    MoE layer become one `[E, ...]` operand.

    ```mlir
    %wq = msa.weight "model.layers.0.self_attn.q_proj.weight" : tensor<8192x6144xbf16>
    %w1 = msa.weight "model.layers.3.block_sparse_moe.experts.{}.w1.weight"
        {num_stacked = 128 : i64} : tensor<128x3072x6144xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<I64Attr>:$num_stacked);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MSA_EmbeddingOp : MSA_Op<"embedding", [Pure]> {
  let summary = "Token embedding lookup";
  let description = [{
    `result[t, :] = table[token_ids[t], :]` (§1.4). `token_ids` is `[T]`
    (`i32` or `i64`), `table` is `[vocab_size, hidden]`, the result
    `[T, hidden]` with the table's element type. An id outside
    `[0, vocab_size)` is a runtime error, never a silent read.
  }];
  let arguments = (ins 1DTensorOf<[I32, I64]>:$token_ids, MSA_FloatMatrix:$table);
  let results = (outs MSA_FloatMatrix:$result);
  let assemblyFormat = [{
    $token_ids `,` $table attr-dict `:` type($token_ids) `,` type($table)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Norms, projections, RoPE
//===----------------------------------------------------------------------===//

def MSA_RMSNormOp : MSA_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over the last dimension (Gemma style by default)";
  let description = [{
    For every vector `x` along the last dimension (size `N`), in FP32:
    `y = x / sqrt(mean(x^2) + eps) * (1 + w)` when `unit_offset` is true
    (Gemma RMSNorm, weights stored zero-centred, §1.4), or `* w` otherwise;
    then rounded to the input element type. `weight` is `[N]`.

    Applied to a `[T, hidden]` tensor this is the layer norm of the residual
    stream; applied to a `[T, heads, head_dim]` tensor with a `[head_dim]`
    weight it is the per-head Q/K norm of the main and index branches
    (`q_norm`, `k_norm`, `index_q_norm`, `index_k_norm`; §1.4, §2.2), one
    weight shared by all heads.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                       1DTensorOf<[AnyFloat]>:$weight, F32Attr:$eps,
                       DefaultValuedAttr<BoolAttr, "true">:$unit_offset);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def MSA_LinearOp : MSA_Op<"linear", [Pure]> {
  let summary = "Linear projection without bias, weight in [out, in] layout";
  let description = [{
    `result[t, n] = sum_k input[t, k] * weight[n, k]`, accumulated in FP32
    and rounded to the result element type (§1.4: q/k/v/o projections,
    index_q/index_k projections, MLP and expert projections; the router uses
    an FP32 result). `input` is `[T, K]`, `weight` `[N, K]` (Hugging Face
    `[out_features, in_features]`), the result `[T, N]`.

    `weight` may have a `bsq` block-scaled element type; the
    `msa-lower-quantized-linear` pass turns such a projection into
    `bsq.scaled_matmul`.
  }];
  let arguments = (ins MSA_FloatMatrix:$input, MSA_Weight2D:$weight);
  let results = (outs MSA_FloatMatrix:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def MSA_RoPEOp : MSA_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Partial rotary position embedding (NeoX pairing by default)";
  let description = [{
    Rotates the first `rotary_dim` channels of every head of
    `input[T, heads, head_dim]` by the angle `positions[t] * inv_freq[i]`,
    `inv_freq[i] = theta^(-2i / rotary_dim)`, `i = 0 .. rotary_dim/2 - 1`;
    channels `rotary_dim ..` pass through unchanged (§1.4, §2.2). With NeoX
    ("rotate half") pairing, channel `i` pairs with `i + rotary_dim/2`:
    `y[i] = x[i] cos - x[i + r/2] sin`, `y[i + r/2] = x[i + r/2] cos + x[i] sin`.
    With `interleaved` (GPT-J pairing) channel `2i` pairs with `2i + 1`.
    Angles and products are computed in FP32. MiniMax-M3: `rotary_dim = 64`,
    `theta = 5e6`, NeoX, for q, k, index_q and index_k alike.
  }];
  let arguments = (ins MSA_FloatHeads:$input, MSA_TokenVector:$positions,
                       I64Attr:$rotary_dim, F64Attr:$theta,
                       UnitAttr:$interleaved);
  let results = (outs MSA_FloatHeads:$result);
  let assemblyFormat = [{
    $input `,` $positions attr-dict `:` type($input) `,` type($positions)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Paged KV cache
//===----------------------------------------------------------------------===//

def MSA_KVCacheInsertOp : MSA_Op<"kv_cache_insert", [Pure,
    AllTypesMatch<["cache", "result"]>]> {
  let summary = "Write per-token key, value or index-key vectors into a paged cache";
  let description = [{
    For each token `t`, stores `values[t]` (`[heads, head_dim]`) at slot
    `positions[t] % page_size` of page
    `block_table[seq_ids[t], positions[t] / page_size]`, and returns the
    updated cache (§4.1). Used for the main K and V caches (`heads = Hkv`)
    and for the index-key cache of MSA layers (`heads = 1`).

    The values are converted to the cache element type: a plain rounding
    cast for `bf16`/`f16`/`f32`; a saturating cast with scale 1 for FP8
    (the MSA Q8KV8 kernels take no K scale, §4.1); for `!bsq.nvfp4` (global
    scale 1, §4.2), per 16 channels `x` the NVFP4 block quantization of
    `bsq.quantize` (TensorRT-LLM's kernel recipe): `scale = E4M3(amax / 6)`
    with `amax = max |x|` (FP32 division, round to nearest even, saturating
    at 448; a NaN gives the NaN scale), codes `E2M1(x / scale)` (FP32
    division, nearest with ties to the even code, saturating at ±6, the
    sign kept), all codes 0 when the scale is 0.

    `values` is `[T, heads, head_dim]`, `seq_ids` and `positions` `[T]`.
    The block table's page size must equal the cache's.
  }];
  let arguments = (ins MSA_PagedCache:$cache, MSA_BlockTable:$block_table,
                       MSA_TokenVector:$seq_ids, MSA_TokenVector:$positions,
                       MSA_FloatHeads:$values);
  let results = (outs MSA_PagedCache:$result);
  let assemblyFormat = [{
    $values `into` $cache `[` $block_table `,` $seq_ids `,` $positions `]`
    attr-dict `:` type($values) `into` qualified(type($cache)) `,`
    qualified(type($block_table)) `,` type($seq_ids) `,` type($positions)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused attention prologue
//===----------------------------------------------------------------------===//

def MSA_AttentionPrologueOp : MSA_Op<"attention_prologue", [Pure,
    AttrSizedOperandSegments, AttrSizedResultSegments,
    AllTypesMatch<["key_cache", "value_cache", "new_key_cache",
                   "new_value_cache"]>,
    AllTypesMatch<["seq_ids", "positions"]>]> {
  let summary = "QKV projection, per-head norms, RoPE and cache inserts of one layer";
  let description = [{
    The attention prologue of one layer as one op, produced by
    `msa-fuse-attention-prologue` from the unfused chain the importer
    emits (§1.4, §2.2, §4.1). With `x = input[t]` (`[T, H]`, the normed
    hidden state) and the activation type `A` (the element type of
    `input` and `q`):

    * `q = rope(rms_norm(split(linear(x, q_weight)), q_norm_weight))`,
      returned as `q [T, Hq, D]`;
    * `k = rope(rms_norm(split(linear(x, k_weight)), k_norm_weight))` and
      `v = split(linear(x, v_weight))`, inserted into `key_cache` and
      `value_cache` (`Hkv` heads of `D` channels) at
      `block_table[seq_ids[t], positions[t] / page_size]`, slot
      `positions[t] % page_size`, converted to the cache element type;
    * with the index branch (MSA layers): `index_q` likewise from
      `index_q_weight` and `index_q_norm_weight`, returned as
      `index_q [T, Hi, dI]`, and the index key from `index_k_weight`
      and `index_k_norm_weight` inserted into `index_cache` (one head of
      `dI` channels).

    Each step rounds as its unfused op does: every projection is
    accumulated in FP32 and rounded to `A`; the per-head RMSNorm (`eps`,
    Gemma `1 + w` when `unit_offset`) and the partial NeoX RoPE
    (`rotary_dim`, `theta`, channel `i` paired with `i + rotary_dim / 2`)
    compute in FP32 from the rounded values and round to `A`; the cache
    conversion is that of `msa.kv_cache_insert`. The K, V and index-key
    activations are never materialized. Weights are floating point
    (block-scaled projections are dequantized first).

    The updated caches are returned as `new_key_cache`, `new_value_cache`
    and `new_index_cache`; the index operands and results are present
    together or not at all.
  }];
  let arguments = (ins MSA_FloatMatrix:$input, MSA_FloatMatrix:$q_weight,
                       MSA_FloatMatrix:$k_weight, MSA_FloatMatrix:$v_weight,
                       1DTensorOf<[AnyFloat]>:$q_norm_weight,
                       1DTensorOf<[AnyFloat]>:$k_norm_weight,
                       MSA_PagedCache:$key_cache, MSA_PagedCache:$value_cache,
                       MSA_BlockTable:$block_table, MSA_TokenVector:$seq_ids,
                       MSA_TokenVector:$positions,
                       Optional<MSA_FloatMatrix>:$index_q_weight,
                       Optional<MSA_FloatMatrix>:$index_k_weight,
                       Optional<1DTensorOf<[AnyFloat]>>:$index_q_norm_weight,
                       Optional<1DTensorOf<[AnyFloat]>>:$index_k_norm_weight,
                       Optional<MSA_PagedCache>:$index_cache, F32Attr:$eps,
                       DefaultValuedAttr<BoolAttr, "true">:$unit_offset,
                       I64Attr:$rotary_dim, F64Attr:$theta);
  let results = (outs MSA_FloatHeads:$q, MSA_PagedCache:$new_key_cache,
                      MSA_PagedCache:$new_value_cache,
                      Optional<MSA_FloatHeads>:$index_q,
                      Optional<MSA_PagedCache>:$new_index_cache);
  let assemblyFormat = [{
    $input `proj` `(` $q_weight `,` $k_weight `,` $v_weight `)` `norms` `(`
    $q_norm_weight `,` $k_norm_weight `)` `into` $key_cache `,` $value_cache
    `[` $block_table `,` $seq_ids `,` $positions `]`
    (`index` `(` $index_q_weight^ `,` $index_k_weight `norms`
     $index_q_norm_weight `,` $index_k_norm_weight `into` $index_cache `)`)?
    attr-dict `:` type($input) `proj` `(` type($q_weight) `,` type($k_weight)
    `,` type($v_weight) `)` `norms` `(` type($q_norm_weight) `,`
    type($k_norm_weight) `)` `into` qualified(type($key_cache)) `,`
    qualified(type($block_table)) `,` type($positions)
    (`index` `(` type($index_q_weight)^ `,` type($index_k_weight) `norms`
     type($index_q_norm_weight) `,` type($index_k_norm_weight) `into`
     qualified(type($index_cache)) `)`)?
    `->` type($q) (`,` type($index_q)^ `,`
    qualified(type($new_index_cache)))?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// MSA index branch
//===----------------------------------------------------------------------===//

def MSA_IndexScoreOp : MSA_Op<"index_score", [Pure]> {
  let summary = "Index-branch token scores max-pooled to per-block scores";
  let description = [{
    For token `t` at position `p = positions[t]` of sequence
    `s = seq_ids[t]`, index head `g` and logical block `b`:

    `block_scores[g, t, b] = scale * max { <index_queries[t, g], k_j> :
    j in block b, j <= p }`

    where `k_j` is the key of token `j` of sequence `s` in `index_cache`
    (read through `block_table`), dot products accumulated in FP32
    (§2.3, score type "max"). Blocks with no key `j <= p` (every `b > p /
    page_size`) get `-inf`. The index branch has no softmax and no ReLU; the
    MSA kernels use `scale = 1` (any positive scale preserves the ranking).

    With an FP8 E4M3 or NVFP4 `index_cache` the products are E4M3 x E4M3,
    the MSA Q8KV8 / Q8KV4 indexer contract (§3.2, §4.3, §5.4): each query
    value is rounded to E4M3 first (nearest even, saturating at +-448), and
    the keys are the E4M3 values the cache holds (NVFP4: code x scale
    rounded to E4M3, §4.2). With a bf16 or f32 cache the queries are used
    as given.

    `index_queries` is `[T, G, d_I]` (one index head per GQA group, §2.4);
    `index_cache` has one head of `d_I` channels; the result is `f32`
    `[G, T, num_blocks]`, `num_blocks` being the block table's
    `max_blocks`.
  }];
  let arguments = (ins MSA_FloatHeads:$index_queries,
                       MSA_PagedCache:$index_cache, MSA_BlockTable:$block_table,
                       MSA_TokenVector:$seq_ids, MSA_TokenVector:$positions,
                       DefaultValuedAttr<F32Attr, "1.0">:$scale);
  let results = (outs TensorRankOf<[F32], [3]>:$block_scores);
  let assemblyFormat = [{
    $index_queries `,` $index_cache `[` $block_table `,` $seq_ids `,`
    $positions `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MSA_BlockTopKOp : MSA_Op<"block_topk", [Pure]> {
  let summary = "Select the blocks each query attends to (MSA top-k rule)";
  let description = [{
    Per index head `g` and token `t` at position `p = positions[t]`, with
    local block `L = p / block_size` and `n = L + 1` causal blocks
    (§2.5, §2.7):

    * If `n <= k`: the result row is `0, 1, ..., L` followed by `-1`
      padding (the local block is the last valid entry).
    * Otherwise: the first `init_blocks` blocks (`0 ..`) are forced and
      written first in ascending order; the last `local_blocks` blocks
      (`.. L`) are forced and written last in ascending order; the
      remaining `k - init_blocks - local_blocks` slots take the best of the
      other blocks, ordered by score descending, ties broken by the lower
      block id. NaN scores rank below every number.

    MiniMax-M3: `k = 16`, `block_size = 128`, `local_blocks = 1`,
    `init_blocks = 0`, so at most `16 * 128 = 2048` keys per query.
    `block_scores` is `f32 [G, T, num_blocks]` (from `msa.index_score`);
    the result is `i32 [G, T, k]` of logical block ids. Consumers must not
    rely on the order of the valid entries (the contract is a set, §2.5.3).
  }];
  let arguments = (ins TensorRankOf<[F32], [3]>:$block_scores,
                       MSA_TokenVector:$positions, I64Attr:$k,
                       I64Attr:$block_size,
                       DefaultValuedAttr<I64Attr, "1">:$local_blocks,
                       DefaultValuedAttr<I64Attr, "0">:$init_blocks);
  let results = (outs TensorRankOf<[I32], [3]>:$block_ids);
  let assemblyFormat = [{
    $block_scores `,` $positions attr-dict `:` type($block_scores) `,`
    type($positions) `->` type($block_ids)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def MSA_SparseAttentionOp : MSA_Op<"sparse_attention", [Pure]> {
  let summary = "Exact attention over the blocks selected per GQA group (MSA main branch)";
  let description = [{
    For token `t` at position `p`, query head `h` in group
    `g = h / (Hq / Hkv)`, keys `j` range over the tokens of the blocks
    `block_ids[g, t, :]` (entries `-1` are skipped) with `j <= p`
    (§3.1, §3.4):

    `z_j = scale * <queries[t, h], K[g, j]>`,
    `output[t, h] = sum_j softmax(z)_j * V[g, j]`

    with FP32 accumulation and softmax, the output rounded to the query
    element type. `lse[t, h] = log(sum_j exp(z_j))` (natural log, FP32) is
    returned when requested. A row with no valid key gives output 0 and
    `lse = -inf`. The selection is per GQA group: all `Hq / Hkv` query heads
    of group `g` read the same blocks.

    `queries` is `[T, Hq, D]`, the caches have `Hkv` heads of `D` channels
    and identical types, `block_ids` is `i32 [Hkv, T, k]`, `output` is
    `[T, Hq, D]` and `lse` `f32 [T, Hq]`. MiniMax-M3: `scale = 1/sqrt(128)`.

    `precision` (default `exact`) is the products' contract
    (`#msa.attention_precision`): `exact` multiplies the cached values as
    stored with FP32 probabilities; `q8` is MSA's FP8 decode contract
    (E4M3 queries, `E4M3(448 P)` in `P V`, §3.2), which needs E4M3 or
    NVFP4 caches. The LSE is the same in both (FP32 scores of the operands
    the contract multiplies).
  }];
  let arguments = (ins MSA_FloatHeads:$queries, MSA_PagedCache:$key_cache,
                       MSA_PagedCache:$value_cache,
                       MSA_BlockTable:$block_table, MSA_TokenVector:$seq_ids,
                       MSA_TokenVector:$positions,
                       TensorRankOf<[I32], [3]>:$block_ids, F32Attr:$scale,
                       DefaultValuedAttr<MSA_AttentionPrecisionAttr,
                           "::msac::msa::AttentionPrecision::Exact">:$precision);
  let results = (outs MSA_FloatHeads:$output,
                      Optional<TensorRankOf<[F32], [2]>>:$lse);
  let assemblyFormat = [{
    $queries `,` $key_cache `,` $value_cache `[` $block_table `,` $seq_ids
    `,` $positions `]` `blocks` `(` $block_ids `)` attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MSA_DenseAttentionOp : MSA_Op<"dense_attention", [Pure]> {
  let summary = "Causal GQA attention over the whole paged context";
  let description = [{
    As `msa.sparse_attention`, with keys `j = 0 .. p` of the token's
    sequence (every block up to the local one): ordinary causal
    grouped-query attention, used by the dense layers of MiniMax-M3
    (layers 0-2, §1.4). Chunked prefill follows from the positions
    (bottom-right causal alignment, §3.1).

    `queries` is `[T, Hq, D]`, the caches have `Hkv` heads of `D` channels
    (`Hq` a multiple of `Hkv`), `output` is `[T, Hq, D]`, `lse` `f32
    [T, Hq]`. `precision` as for `msa.sparse_attention`; under `q8` the
    blocks are taken in order 0, 1, ... up to the local one.
  }];
  let arguments = (ins MSA_FloatHeads:$queries, MSA_PagedCache:$key_cache,
                       MSA_PagedCache:$value_cache,
                       MSA_BlockTable:$block_table, MSA_TokenVector:$seq_ids,
                       MSA_TokenVector:$positions, F32Attr:$scale,
                       DefaultValuedAttr<MSA_AttentionPrecisionAttr,
                           "::msac::msa::AttentionPrecision::Exact">:$precision);
  let results = (outs MSA_FloatHeads:$output,
                      Optional<TensorRankOf<[F32], [2]>>:$lse);
  let assemblyFormat = [{
    $queries `,` $key_cache `,` $value_cache `[` $block_table `,` $seq_ids
    `,` $positions `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Feed-forward and MoE
//===----------------------------------------------------------------------===//

def MSA_SwiGLUOp : MSA_Op<"swiglu", [Pure, Elementwise,
    AllTypesMatch<["gate", "up", "result"]>]> {
  let summary = "SwiGLU-OAI activation";
  let description = [{
    Elementwise, in FP32 (§1.4):
    `g = min(gate, limit)`, `u = clamp(up, -limit, limit)`,
    `result = (u + 1) * g * sigmoid(alpha * g)`,
    rounded to the operand type. MiniMax-M3: `alpha = 1.702`,
    `limit = 7.0` (`swiglu_alpha`, `swiglu_limit`). Used by the dense MLP,
    the shared expert and (inside `msa.moe_experts`) the routed experts.
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$gate,
                       RankedTensorOf<[AnyFloat]>:$up, F32Attr:$alpha,
                       F32Attr:$limit);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MSA_MoERouterOp : MSA_Op<"moe_router", [Pure]> {
  let summary = "Sigmoid MoE router with correction bias, top-k and renormalization";
  let description = [{
    `logits = input . gate_weight^T` in FP32 (`input` cast to FP32),
    `s = sigmoid(logits)`. The `top_k` experts are those with the largest
    `s + correction_bias` (ties: lower expert id). The routing weights are
    the *unbiased* `s` of the winners, divided by their sum when
    `renormalize` is set, then multiplied by `routed_scaling_factor`
    (§1.4; MiniMax-M3: top 4 of 128, one group, factor 2.0).

    `input` is `[T, H]`, `gate_weight` `[E, H]` (FP32 in the checkpoint),
    `correction_bias` `f32 [E]`; results are `weights f32 [T, top_k]` and
    `expert_ids i32 [T, top_k]` in descending order of the biased score.
  }];
  let arguments = (ins MSA_FloatMatrix:$input, MSA_FloatMatrix:$gate_weight,
                       Optional<1DTensorOf<[F32]>>:$correction_bias,
                       I64Attr:$top_k,
                       DefaultValuedAttr<F32Attr, "1.0">:$routed_scaling_factor,
                       DefaultValuedAttr<BoolAttr, "true">:$renormalize);
  let results = (outs TensorRankOf<[F32], [2]>:$weights,
                      TensorRankOf<[I32], [2]>:$expert_ids);
  let assemblyFormat = [{
    $input `,` $gate_weight (`bias` $correction_bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MSA_MoEExpertsOp : MSA_Op<"moe_experts", [Pure]> {
  let summary = "Weighted sum of the routed SwiGLU-OAI experts";
  let description = [{
    `result[t] = sum_i routing_weights[t, i] * E_{expert_ids[t, i]}(input[t])`
    with `E_e(x) = down_e . swiglu(gate_e . x, up_e . x)` (SwiGLU-OAI with
    `alpha`, `limit`; see `msa.swiglu`), accumulated in FP32 and rounded to
    the input element type (§1.4). The shared expert is not part of this
    op; it is an ordinary `msa.linear`/`msa.swiglu` chain added to the
    result, unscaled.

    `input` is `[T, H]`; `routing_weights` `f32 [T, K]` and `expert_ids`
    `i32 [T, K]` (from `msa.moe_router`); `gate_weights` and `up_weights`
    `[E, I, H]` (checkpoint `w1`, `w3`), `down_weights` `[E, H, I]`
    (`w2`). Weight element types may be `bsq` block-scaled types (NVFP4
    routed experts of MiniMax-M3.1-Flash). The result is `[T, H]`.
  }];
  let arguments = (ins MSA_FloatMatrix:$input,
                       TensorRankOf<[F32], [2]>:$routing_weights,
                       TensorRankOf<[I32], [2]>:$expert_ids,
                       MSA_Weight3D:$gate_weights, MSA_Weight3D:$up_weights,
                       MSA_Weight3D:$down_weights, F32Attr:$alpha,
                       F32Attr:$limit);
  let results = (outs MSA_FloatMatrix:$result);
  let assemblyFormat = [{
    $input `,` $routing_weights `,` $expert_ids `experts` `(` $gate_weights
    `,` $up_weights `,` $down_weights `)` attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Logits
//===----------------------------------------------------------------------===//

def MSA_LogitsOp : MSA_Op<"logits", [Pure]> {
  let summary = "Vocabulary logits for selected tokens (untied LM head)";
  let description = [{
    `logits[i, v] = sum_k hidden[token_indices[i], k] * lm_head[v, k]` in
    FP32 (§1.4: final norm, then the untied `lm_head`). Only the rows named
    by `token_indices` are computed: in prefill, the last token of each
    sequence (vLLM's logits indices); in decode, every token.

    `hidden` is `[T, H]` (already normalised), `token_indices` `i32 [N]`,
    `lm_head` `[vocab_size, H]`, the result `f32 [N, vocab_size]`.
  }];
  let arguments = (ins MSA_FloatMatrix:$hidden,
                       MSA_TokenVector:$token_indices, MSA_Weight2D:$lm_head);
  let results = (outs TensorRankOf<[F32], [2]>:$logits);
  let assemblyFormat = [{
    $hidden `[` $token_indices `]` `,` $lm_head attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MSAC_DIALECT_MSA_IR_MSAOPS_TD
