// RUN: msac-opt %s -split-input-file -verify-diagnostics

// Every verifier error of the msa dialect, one case per block.

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// expected-error @+1 {{paged cache extents must be positive, got heads = 0, page_size = 128, head_dim = 128}}
func.func private @cache_zero_heads(!msa.paged_cache<heads = 0, page_size = 128, head_dim = 128, bf16>)

// -----

// expected-error @+1 {{an NVFP4 paged cache needs head_dim to be a multiple of 16 (one E4M3 scale per 16 values), got 72}}
func.func private @cache_nvfp4_head_dim(!msa.paged_cache<heads = 1, page_size = 128, head_dim = 72, !bsq.nvfp4>)

// -----

// expected-error @+1 {{paged cache element type must be bf16, f16, f32, f8E4M3FN, f8E5M2 or !bsq.nvfp4, got 'i8'}}
func.func private @cache_element(!msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, i8>)

// -----

// expected-error @+1 {{paged cache element type must be bf16, f16, f32, f8E4M3FN, f8E5M2 or !bsq.nvfp4, got '!bsq.mx<f8E4M3FN>'}}
func.func private @cache_mx(!msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, !bsq.mx<f8E4M3FN>>)

// -----

// expected-error @+1 {{block table page_size must be positive, got -128}}
func.func private @table_page(!msa.block_table<page_size = -128, max_blocks = ?>)

// -----

// expected-error @+1 {{block table max_blocks must be positive or ?, got 0}}
func.func private @table_blocks(!msa.block_table<page_size = 128, max_blocks = 0>)

//===----------------------------------------------------------------------===//
// msa.weight
//===----------------------------------------------------------------------===//

// -----

func.func @weight_empty() {
  // expected-error @+1 {{weight name must not be empty}}
  %w = msa.weight "" : tensor<4xbf16>
  return
}

// -----

func.func @weight_placeholder_unstacked() {
  // expected-error @+1 {{weight name 'experts.{}.w1.weight' has a {} placeholder but no num_stacked}}
  %w = msa.weight "experts.{}.w1.weight" : tensor<4x8xbf16>
  return
}

// -----

func.func @weight_stack_zero() {
  // expected-error @+1 {{num_stacked must be positive, got 0}}
  %w = msa.weight "experts.{}.w1.weight" {num_stacked = 0 : i64} : tensor<4x8xbf16>
  return
}

// -----

func.func @weight_stack_no_placeholder() {
  // expected-error @+1 {{a stacked weight name needs exactly one {} placeholder, 'experts.w1.weight' has 0}}
  %w = msa.weight "experts.w1.weight" {num_stacked = 4 : i64} : tensor<4x8xbf16>
  return
}

// -----

func.func @weight_stack_rank0() {
  // expected-error @+1 {{a stacked weight must have rank >= 1}}
  %w = msa.weight "experts.{}.bias" {num_stacked = 4 : i64} : tensor<f32>
  return
}

// -----

func.func @weight_stack_count() {
  // expected-error @+1 {{result dimension 0 is 3 but num_stacked is 4}}
  %w = msa.weight "experts.{}.w1.weight" {num_stacked = 4 : i64} : tensor<3x8xbf16>
  return
}

//===----------------------------------------------------------------------===//
// msa.embedding
//===----------------------------------------------------------------------===//

// -----

func.func @embedding_tokens(%ids: tensor<5xi32>, %table: tensor<100x16xbf16>) {
  // expected-error @+1 {{token counts differ: result has 6 tokens but token_ids has 5}}
  %x = msa.embedding %ids, %table : tensor<5xi32>, tensor<100x16xbf16> -> tensor<6x16xbf16>
  return
}

// -----

func.func @embedding_hidden(%ids: tensor<5xi32>, %table: tensor<100x16xbf16>) {
  // expected-error @+1 {{result hidden size is 32 but the table hidden size is 16}}
  %x = msa.embedding %ids, %table : tensor<5xi32>, tensor<100x16xbf16> -> tensor<5x32xbf16>
  return
}

// -----

func.func @embedding_element(%ids: tensor<5xi32>, %table: tensor<100x16xbf16>) {
  // expected-error @+1 {{result element type 'f32' differs from the table element type 'bf16'}}
  %x = msa.embedding %ids, %table : tensor<5xi32>, tensor<100x16xbf16> -> tensor<5x16xf32>
  return
}

// -----

func.func @embedding_ids_type(%ids: tensor<5xf32>, %table: tensor<100x16xbf16>) {
  // expected-error @+1 {{operand #0 must be 1D tensor of 32-bit signless integer or 64-bit signless integer values}}
  %x = msa.embedding %ids, %table : tensor<5xf32>, tensor<100x16xbf16> -> tensor<5x16xbf16>
  return
}

//===----------------------------------------------------------------------===//
// msa.rms_norm
//===----------------------------------------------------------------------===//

// -----

func.func @rms_norm_eps(%x: tensor<4x16xbf16>, %w: tensor<16xbf16>) {
  // expected-error @+1 {{attribute 'eps' must be positive, got 0}}
  %y = msa.rms_norm %x, %w {eps = 0.0 : f32} : tensor<4x16xbf16>, tensor<16xbf16>
  return
}

// -----

func.func @rms_norm_rank(%x: tensor<bf16>, %w: tensor<1xbf16>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %y = msa.rms_norm %x, %w {eps = 1.0e-6 : f32} : tensor<bf16>, tensor<1xbf16>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<4x8x128xbf16>, %w: tensor<64xbf16>) {
  // expected-error @+1 {{weight size is 64 but the normalized (last) dimension is 128}}
  %y = msa.rms_norm %x, %w {eps = 1.0e-6 : f32} : tensor<4x8x128xbf16>, tensor<64xbf16>
  return
}

//===----------------------------------------------------------------------===//
// msa.linear
//===----------------------------------------------------------------------===//

// -----

func.func @linear_weight_element(%x: tensor<4x16xbf16>, %w: tensor<8x16xi8>) {
  // expected-error @+1 {{weight element type must be a float or a bsq block-scaled type, got 'i8'}}
  %y = msa.linear %x, %w : tensor<4x16xbf16>, tensor<8x16xi8> -> tensor<4x8xbf16>
  return
}

// -----

func.func @linear_in_features(%x: tensor<4x16xbf16>, %w: tensor<8x32xbf16>) {
  // expected-error @+1 {{weight in_features (dimension 1) is 32 but the input feature size is 16}}
  %y = msa.linear %x, %w : tensor<4x16xbf16>, tensor<8x32xbf16> -> tensor<4x8xbf16>
  return
}

// -----

func.func @linear_out_features(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>) {
  // expected-error @+1 {{result feature size is 9 but weight out_features (dimension 0) is 8}}
  %y = msa.linear %x, %w : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<4x9xbf16>
  return
}

// -----

func.func @linear_tokens(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>) {
  // expected-error @+1 {{token counts differ: result has 5 tokens but input has 4}}
  %y = msa.linear %x, %w : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<5x8xbf16>
  return
}

//===----------------------------------------------------------------------===//
// msa.rope
//===----------------------------------------------------------------------===//

// -----

func.func @rope_odd(%x: tensor<4x8x128xbf16>, %p: tensor<4xi32>) {
  // expected-error @+1 {{rotary_dim must be positive and even, got 63}}
  %y = msa.rope %x, %p {rotary_dim = 63 : i64, theta = 5.0e6 : f64} : tensor<4x8x128xbf16>, tensor<4xi32>
  return
}

// -----

func.func @rope_too_wide(%x: tensor<4x8x128xbf16>, %p: tensor<4xi32>) {
  // expected-error @+1 {{rotary_dim 256 exceeds head_dim 128}}
  %y = msa.rope %x, %p {rotary_dim = 256 : i64, theta = 5.0e6 : f64} : tensor<4x8x128xbf16>, tensor<4xi32>
  return
}

// -----

func.func @rope_theta(%x: tensor<4x8x128xbf16>, %p: tensor<4xi32>) {
  // expected-error @+1 {{attribute 'theta' must be positive, got -1}}
  %y = msa.rope %x, %p {rotary_dim = 64 : i64, theta = -1.0 : f64} : tensor<4x8x128xbf16>, tensor<4xi32>
  return
}

// -----

func.func @rope_tokens(%x: tensor<4x8x128xbf16>, %p: tensor<3xi32>) {
  // expected-error @+1 {{token counts differ: positions has 3 tokens but input has 4}}
  %y = msa.rope %x, %p {rotary_dim = 64 : i64, theta = 5.0e6 : f64} : tensor<4x8x128xbf16>, tensor<3xi32>
  return
}

//===----------------------------------------------------------------------===//
// msa.kv_cache_insert
//===----------------------------------------------------------------------===//

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
func.func @insert_page_size(%c: !kv, %bt: !msa.block_table<page_size = 64, max_blocks = ?>,
                            %s: tensor<4xi32>, %p: tensor<4xi32>, %v: tensor<4x4x128xbf16>) {
  // expected-error @+1 {{block table page_size 64 differs from the cache page_size 128}}
  %c2 = msa.kv_cache_insert %v into %c[%bt, %s, %p] : tensor<4x4x128xbf16> into !kv, !msa.block_table<page_size = 64, max_blocks = ?>, tensor<4xi32>, tensor<4xi32>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @insert_heads(%c: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>, %v: tensor<4x2x128xbf16>) {
  // expected-error @+1 {{values head count is 2 but the cache head count is 4}}
  %c2 = msa.kv_cache_insert %v into %c[%bt, %s, %p] : tensor<4x2x128xbf16> into !kv, !bt, tensor<4xi32>, tensor<4xi32>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @insert_head_dim(%c: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>, %v: tensor<4x4x64xbf16>) {
  // expected-error @+1 {{values head_dim is 64 but the cache head_dim is 128}}
  %c2 = msa.kv_cache_insert %v into %c[%bt, %s, %p] : tensor<4x4x64xbf16> into !kv, !bt, tensor<4xi32>, tensor<4xi32>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @insert_tokens(%c: !kv, %bt: !bt, %s: tensor<5xi32>, %p: tensor<4xi32>, %v: tensor<4x4x128xbf16>) {
  // expected-error @+1 {{token counts differ: seq_ids has 5 tokens but values has 4}}
  %c2 = msa.kv_cache_insert %v into %c[%bt, %s, %p] : tensor<4x4x128xbf16> into !kv, !bt, tensor<5xi32>, tensor<4xi32>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @insert_positions_type(%c: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi64>, %v: tensor<4x4x128xbf16>) {
  // expected-error @+1 {{operand #3 must be 1D tensor of 32-bit signless integer values}}
  %c2 = msa.kv_cache_insert %v into %c[%bt, %s, %p] : tensor<4x4x128xbf16> into !kv, !bt, tensor<4xi32>, tensor<4xi64>
  return
}

//===----------------------------------------------------------------------===//
// msa.index_score
//===----------------------------------------------------------------------===//

// -----

!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 64, max_blocks = ?>
func.func @score_page_size(%q: tensor<4x2x128xbf16>, %c: !ic, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{block table page_size 64 differs from the cache page_size 128}}
  %r = msa.index_score %q, %c[%bt, %s, %p] : (tensor<4x2x128xbf16>, !ic, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x?xf32>
  return
}

// -----

!ic = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @score_heads(%q: tensor<4x2x128xbf16>, %c: !ic, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{the index-key cache must have one head (one index key shared by all groups), got 2}}
  %r = msa.index_score %q, %c[%bt, %s, %p] : (tensor<4x2x128xbf16>, !ic, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x?xf32>
  return
}

// -----

!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @score_scale(%q: tensor<4x2x128xbf16>, %c: !ic, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{attribute 'scale' must be positive, got -0.5}}
  %r = msa.index_score %q, %c[%bt, %s, %p] {scale = -0.5 : f32} : (tensor<4x2x128xbf16>, !ic, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x?xf32>
  return
}

// -----

!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @score_head_dim(%q: tensor<4x2x64xbf16>, %c: !ic, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{index query head_dim is 64 but the index cache head_dim is 128}}
  %r = msa.index_score %q, %c[%bt, %s, %p] : (tensor<4x2x64xbf16>, !ic, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x?xf32>
  return
}

// -----

!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @score_groups(%q: tensor<4x2x128xbf16>, %c: !ic, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{block_scores dimension 0 (groups) is 4 but the index head count is 2}}
  %r = msa.index_score %q, %c[%bt, %s, %p] : (tensor<4x2x128xbf16>, !ic, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x4x?xf32>
  return
}

// -----

!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = 32>
func.func @score_blocks(%q: tensor<4x2x128xbf16>, %c: !ic, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{block_scores dimension 2 (blocks) is 16 but the block table max_blocks is 32}}
  %r = msa.index_score %q, %c[%bt, %s, %p] : (tensor<4x2x128xbf16>, !ic, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x16xf32>
  return
}

// -----

!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @score_tokens(%q: tensor<4x2x128xbf16>, %c: !ic, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{token counts differ: block_scores has 3 tokens but index_queries has 4}}
  %r = msa.index_score %q, %c[%bt, %s, %p] : (tensor<4x2x128xbf16>, !ic, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<2x3x?xf32>
  return
}

//===----------------------------------------------------------------------===//
// msa.block_topk
//===----------------------------------------------------------------------===//

// -----

func.func @topk_k(%s: tensor<4x8x64xf32>, %p: tensor<8xi32>) {
  // expected-error @+1 {{k must be positive, got 0}}
  %r = msa.block_topk %s, %p {k = 0 : i64, block_size = 128 : i64, local_blocks = 0 : i64} : tensor<4x8x64xf32>, tensor<8xi32> -> tensor<4x8x0xi32>
  return
}

// -----

func.func @topk_block_size(%s: tensor<4x8x64xf32>, %p: tensor<8xi32>) {
  // expected-error @+1 {{block_size must be positive, got 0}}
  %r = msa.block_topk %s, %p {k = 16 : i64, block_size = 0 : i64} : tensor<4x8x64xf32>, tensor<8xi32> -> tensor<4x8x16xi32>
  return
}

// -----

func.func @topk_negative(%s: tensor<4x8x64xf32>, %p: tensor<8xi32>) {
  // expected-error @+1 {{local_blocks and init_blocks must be non-negative, got -1 and 0}}
  %r = msa.block_topk %s, %p {k = 16 : i64, block_size = 128 : i64, local_blocks = -1 : i64} : tensor<4x8x64xf32>, tensor<8xi32> -> tensor<4x8x16xi32>
  return
}

// -----

func.func @topk_forced(%s: tensor<4x8x64xf32>, %p: tensor<8xi32>) {
  // expected-error @+1 {{local_blocks + init_blocks = 5 exceeds k = 4}}
  %r = msa.block_topk %s, %p {k = 4 : i64, block_size = 128 : i64, local_blocks = 2 : i64, init_blocks = 3 : i64} : tensor<4x8x64xf32>, tensor<8xi32> -> tensor<4x8x4xi32>
  return
}

// -----

func.func @topk_groups(%s: tensor<4x8x64xf32>, %p: tensor<8xi32>) {
  // expected-error @+1 {{block_ids dimension 0 (groups) is 2 but block_scores dimension 0 is 4}}
  %r = msa.block_topk %s, %p {k = 16 : i64, block_size = 128 : i64} : tensor<4x8x64xf32>, tensor<8xi32> -> tensor<2x8x16xi32>
  return
}

// -----

func.func @topk_width(%s: tensor<4x8x64xf32>, %p: tensor<8xi32>) {
  // expected-error @+1 {{block_ids dimension 2 is 8 but k is 16}}
  %r = msa.block_topk %s, %p {k = 16 : i64, block_size = 128 : i64} : tensor<4x8x64xf32>, tensor<8xi32> -> tensor<4x8x8xi32>
  return
}

// -----

func.func @topk_tokens(%s: tensor<4x8x64xf32>, %p: tensor<7xi32>) {
  // expected-error @+1 {{token counts differ: positions has 7 tokens but block_scores has 8}}
  %r = msa.block_topk %s, %p {k = 16 : i64, block_size = 128 : i64} : tensor<4x8x64xf32>, tensor<7xi32> -> tensor<4x8x16xi32>
  return
}

// -----

func.func @topk_scores_type(%s: tensor<4x8x64xbf16>, %p: tensor<8xi32>) {
  // expected-error @+1 {{operand #0 must be 3D tensor of 32-bit float values}}
  %r = msa.block_topk %s, %p {k = 16 : i64, block_size = 128 : i64} : tensor<4x8x64xbf16>, tensor<8xi32> -> tensor<4x8x16xi32>
  return
}

//===----------------------------------------------------------------------===//
// msa.sparse_attention and msa.dense_attention
//===----------------------------------------------------------------------===//

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!kv8 = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, f8E4M3FN>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_kv_types(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv8, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{key and value caches must have the same type}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv8, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_q8_bf16(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{precision q8 needs E4M3 or NVFP4 key and value caches (the Q8KV8 / Q8KV4 contracts, msa-m3-spec §3.2), got element type 'bf16'}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32, precision = #msa.attention_precision<q8>} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_q8_sparse_bf16(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>, %ids: tensor<4x4x16xi32>) {
  // expected-error @+1 {{precision q8 needs E4M3 or NVFP4 key and value caches}}
  %o = msa.sparse_attention %q, %k, %v[%bt, %s, %p] blocks(%ids) {scale = 0.088 : f32, precision = #msa.attention_precision<q8>} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>, tensor<4x4x16xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv8 = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, f8E4M3FN>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_precision_unknown(%q: tensor<4x16x128xbf16>, %k: !kv8, %v: !kv8, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+2 {{expected ::msac::msa::AttentionPrecision to be one of: exact, q8}}
  // expected-error @+1 {{failed to parse MSA_AttentionPrecisionAttr parameter 'value'}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32, precision = #msa.attention_precision<q4>} : (tensor<4x16x128xbf16>, !kv8, !kv8, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 16, max_blocks = ?>
func.func @attn_page_size(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{block table page_size 16 differs from the cache page_size 128}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_scale(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{attribute 'scale' must be positive, got 0}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.0 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_head_dim(%q: tensor<4x16x64xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{query head_dim is 64 but the cache head_dim is 128}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x16x64xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x16x64xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_gqa(%q: tensor<4x18x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{query head count 18 is not a multiple of the KV head count 4}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x18x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x18x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_output_shape(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{output shape 4x8x128 differs from the query shape 4x16x128}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_output_element(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{output element type must equal the query element type}}
  %o = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> tensor<4x16x128xf32>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_lse_heads(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{lse dimension 1 is 4 but the query head count is 16}}
  %o, %l = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> (tensor<4x16x128xbf16>, tensor<4x4xf32>)
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @attn_lse_tokens(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{token counts differ: lse has 2 tokens but queries has 4}}
  %o, %l = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>) -> (tensor<4x16x128xbf16>, tensor<2x16xf32>)
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @sparse_groups(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>, %ids: tensor<1x4x16xi32>) {
  // expected-error @+1 {{block_ids dimension 0 (groups) is 1 but the KV head count is 4}}
  %o = msa.sparse_attention %q, %k, %v[%bt, %s, %p] blocks(%ids) {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>, tensor<1x4x16xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @sparse_tokens(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<4xi32>, %p: tensor<4xi32>, %ids: tensor<4x3x16xi32>) {
  // expected-error @+1 {{token counts differ: block_ids has 3 tokens but queries has 4}}
  %o = msa.sparse_attention %q, %k, %v[%bt, %s, %p] blocks(%ids) {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<4xi32>, tensor<4xi32>, tensor<4x3x16xi32>) -> tensor<4x16x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @sparse_shared_checks(%q: tensor<4x16x128xbf16>, %k: !kv, %v: !kv, %bt: !bt, %s: tensor<5xi32>, %p: tensor<4xi32>, %ids: tensor<4x4x16xi32>) {
  // expected-error @+1 {{token counts differ: seq_ids has 5 tokens but queries has 4}}
  %o = msa.sparse_attention %q, %k, %v[%bt, %s, %p] blocks(%ids) {scale = 0.088 : f32} : (tensor<4x16x128xbf16>, !kv, !kv, !bt, tensor<5xi32>, tensor<4xi32>, tensor<4x4x16xi32>) -> tensor<4x16x128xbf16>
  return
}

//===----------------------------------------------------------------------===//
// msa.swiglu
//===----------------------------------------------------------------------===//

// -----

func.func @swiglu_alpha(%g: tensor<4x8xbf16>, %u: tensor<4x8xbf16>) {
  // expected-error @+1 {{attribute 'alpha' must be positive, got 0}}
  %r = msa.swiglu %g, %u {alpha = 0.0 : f32, limit = 7.0 : f32} : tensor<4x8xbf16>
  return
}

// -----

func.func @swiglu_limit(%g: tensor<4x8xbf16>, %u: tensor<4x8xbf16>) {
  // expected-error @+1 {{attribute 'limit' must be positive, got -7}}
  %r = msa.swiglu %g, %u {alpha = 1.702 : f32, limit = -7.0 : f32} : tensor<4x8xbf16>
  return
}

//===----------------------------------------------------------------------===//
// msa.moe_router
//===----------------------------------------------------------------------===//

// -----

func.func @router_hidden(%x: tensor<4x64xbf16>, %w: tensor<8x32xf32>) {
  // expected-error @+1 {{gate_weight dimension 1 is 32 but the hidden size is 64}}
  %a, %b = msa.moe_router %x, %w {top_k = 2 : i64} : (tensor<4x64xbf16>, tensor<8x32xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @router_bias(%x: tensor<4x64xbf16>, %w: tensor<8x64xf32>, %bias: tensor<4xf32>) {
  // expected-error @+1 {{correction_bias size is 4 but the expert count is 8}}
  %a, %b = msa.moe_router %x, %w bias %bias {top_k = 2 : i64} : (tensor<4x64xbf16>, tensor<8x64xf32>, tensor<4xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @router_top_k(%x: tensor<4x64xbf16>, %w: tensor<8x64xf32>) {
  // expected-error @+1 {{top_k must be in [1, 8], got 9}}
  %a, %b = msa.moe_router %x, %w {top_k = 9 : i64} : (tensor<4x64xbf16>, tensor<8x64xf32>) -> (tensor<4x9xf32>, tensor<4x9xi32>)
  return
}

// -----

func.func @router_scaling(%x: tensor<4x64xbf16>, %w: tensor<8x64xf32>) {
  // expected-error @+1 {{attribute 'routed_scaling_factor' must be positive, got -2}}
  %a, %b = msa.moe_router %x, %w {top_k = 2 : i64, routed_scaling_factor = -2.0 : f32} : (tensor<4x64xbf16>, tensor<8x64xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @router_result_width(%x: tensor<4x64xbf16>, %w: tensor<8x64xf32>) {
  // expected-error @+1 {{result dimension 1 is 3 but top_k is 2}}
  %a, %b = msa.moe_router %x, %w {top_k = 2 : i64} : (tensor<4x64xbf16>, tensor<8x64xf32>) -> (tensor<4x2xf32>, tensor<4x3xi32>)
  return
}

// -----

func.func @router_tokens(%x: tensor<4x64xbf16>, %w: tensor<8x64xf32>) {
  // expected-error @+1 {{token counts differ: weights has 5 tokens but input has 4}}
  %a, %b = msa.moe_router %x, %w {top_k = 2 : i64} : (tensor<4x64xbf16>, tensor<8x64xf32>) -> (tensor<5x2xf32>, tensor<4x2xi32>)
  return
}

//===----------------------------------------------------------------------===//
// msa.moe_experts
//===----------------------------------------------------------------------===//

// -----

func.func @experts_element(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                           %g: tensor<8x32x64xi4>, %u: tensor<8x32x64xbf16>, %d: tensor<8x64x32xbf16>) {
  // expected-error @+1 {{gate_weights element type must be a float or a bsq block-scaled type, got 'i4'}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %u, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x64xi4>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_limit(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                         %g: tensor<8x32x64xbf16>, %d: tensor<8x64x32xbf16>) {
  // expected-error @+1 {{attribute 'limit' must be positive, got 0}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 0.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_gate_up(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                           %g: tensor<8x32x64xbf16>, %u: tensor<8x16x64xbf16>, %d: tensor<8x64x32xbf16>) {
  // expected-error @+1 {{gate_weights 8x32x64 and up_weights 8x16x64 must have the same shape [E, I, H]}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %u, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x64xbf16>, tensor<8x16x64xbf16>, tensor<8x64x32xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_hidden(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                          %g: tensor<8x32x48xbf16>, %d: tensor<8x64x32xbf16>) {
  // expected-error @+1 {{gate_weights dimension 2 is 48 but the hidden size is 64}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x48xbf16>, tensor<8x32x48xbf16>, tensor<8x64x32xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_down_count(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                              %g: tensor<8x32x64xbf16>, %d: tensor<7x64x32xbf16>) {
  // expected-error @+1 {{down_weights dimension 0 (experts) is 7 but the gate_weights expert count is 8}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<7x64x32xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_down_hidden(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                               %g: tensor<8x32x64xbf16>, %d: tensor<8x32x32xbf16>) {
  // expected-error @+1 {{down_weights dimension 1 is 32 but the hidden size is 64}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x32xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_down_inner(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                              %g: tensor<8x32x64xbf16>, %d: tensor<8x64x16xbf16>) {
  // expected-error @+1 {{down_weights dimension 2 is 16 but the intermediate size is 32}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x16xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_ids_width(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x4xi32>,
                             %g: tensor<8x32x64xbf16>, %d: tensor<8x64x32xbf16>) {
  // expected-error @+1 {{expert_ids dimension 1 is 4 but routing_weights dimension 1 is 2}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x4xi32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_result(%x: tensor<4x64xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                          %g: tensor<8x32x64xbf16>, %d: tensor<8x64x32xbf16>) {
  // expected-error @+1 {{result type 'tensor<4x64xf32>' must equal the input type 'tensor<4x64xbf16>'}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>) -> tensor<4x64xf32>
  return
}

// -----

func.func @experts_tokens(%x: tensor<4x64xbf16>, %rw: tensor<3x2xf32>, %ri: tensor<3x2xi32>,
                          %g: tensor<8x32x64xbf16>, %d: tensor<8x64x32xbf16>) {
  // expected-error @+1 {{token counts differ: routing_weights has 3 tokens but input has 4}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x64xbf16>, tensor<3x2xf32>, tensor<3x2xi32>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16>) -> tensor<4x64xbf16>
  return
}

//===----------------------------------------------------------------------===//
// msa.logits
//===----------------------------------------------------------------------===//

// -----

func.func @logits_element(%h: tensor<4x64xbf16>, %i: tensor<2xi32>, %w: tensor<100x64xi8>) {
  // expected-error @+1 {{lm_head element type must be a float or a bsq block-scaled type, got 'i8'}}
  %l = msa.logits %h[%i], %w : (tensor<4x64xbf16>, tensor<2xi32>, tensor<100x64xi8>) -> tensor<2x100xf32>
  return
}

// -----

func.func @logits_hidden(%h: tensor<4x64xbf16>, %i: tensor<2xi32>, %w: tensor<100x32xbf16>) {
  // expected-error @+1 {{lm_head dimension 1 is 32 but the hidden size is 64}}
  %l = msa.logits %h[%i], %w : (tensor<4x64xbf16>, tensor<2xi32>, tensor<100x32xbf16>) -> tensor<2x100xf32>
  return
}

// -----

func.func @logits_vocab(%h: tensor<4x64xbf16>, %i: tensor<2xi32>, %w: tensor<100x64xbf16>) {
  // expected-error @+1 {{logits dimension 1 is 101 but the vocabulary size (lm_head dimension 0) is 100}}
  %l = msa.logits %h[%i], %w : (tensor<4x64xbf16>, tensor<2xi32>, tensor<100x64xbf16>) -> tensor<2x101xf32>
  return
}

// -----

func.func @logits_rows(%h: tensor<4x64xbf16>, %i: tensor<2xi32>, %w: tensor<100x64xbf16>) {
  // expected-error @+1 {{token counts differ: logits has 3 tokens but token_indices has 2}}
  %l = msa.logits %h[%i], %w : (tensor<4x64xbf16>, tensor<2xi32>, tensor<100x64xbf16>) -> tensor<3x100xf32>
  return
}

//===----------------------------------------------------------------------===//
// Block-scaled weights must be tiled by their blocks
//===----------------------------------------------------------------------===//

// -----

func.func @linear_weight_blocking(%x: tensor<4x15xbf16>, %w: tensor<64x15x!bsq.nvfp4>) {
  // expected-error @+1 {{weight last dimension 15 is not a multiple of the block size 16 of '!bsq.nvfp4'}}
  %y = msa.linear %x, %w : tensor<4x15xbf16>, tensor<64x15x!bsq.nvfp4> -> tensor<4x64xbf16>
  return
}

// -----

func.func @experts_weight_blocking(%x: tensor<4x48xbf16>, %rw: tensor<4x2xf32>, %ri: tensor<4x2xi32>,
                                   %g: tensor<8x32x48x!bsq.mx<f8E4M3FN>>, %d: tensor<8x48x32xbf16>) {
  // expected-error @+1 {{gate_weights last dimension 48 is not a multiple of the block size 32 of '!bsq.mx<f8E4M3FN>'}}
  %r = msa.moe_experts %x, %rw, %ri experts(%g, %g, %d) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<4x48xbf16>, tensor<4x2xf32>, tensor<4x2xi32>, tensor<8x32x48x!bsq.mx<f8E4M3FN>>, tensor<8x32x48x!bsq.mx<f8E4M3FN>>, tensor<8x48x32xbf16>) -> tensor<4x48xbf16>
  return
}

// -----

func.func @logits_head_blocking(%h: tensor<4x100xbf16>, %i: tensor<2xi32>, %w: tensor<10x100x!bsq.nvfp4>) {
  // expected-error @+1 {{lm_head last dimension 100 is not a multiple of the block size 16 of '!bsq.nvfp4'}}
  %l = msa.logits %h[%i], %w : (tensor<4x100xbf16>, tensor<2xi32>, tensor<10x100x!bsq.nvfp4>) -> tensor<2x10xf32>
  return
}

//===----------------------------------------------------------------------===//
// msa.attention_prologue
//===----------------------------------------------------------------------===//

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_partial(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{the index branch needs index_q_weight, index_k_weight, both index norm weights, index_cache and the index_q and new_index_cache results together, or none of them}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_eps(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{attribute 'eps' must be positive, got 0}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 0.0 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_theta(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{attribute 'theta' must be positive, got -1}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = -1.0 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 64, max_blocks = ?>
func.func @prologue_page_size(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{block table page_size 64 differs from the cache page_size 128}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_q_element(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{q element type 'f32' differs from the input element type 'bf16'}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xf32>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_q_head_dim(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{q head_dim is 64 but the cache head_dim is 128}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x64xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_rotary_odd(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{rotary_dim must be positive and even, got 63}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 63 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_rotary_large(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{rotary_dim 256 exceeds the q head_dim 128}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 256 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_q_in_features(%x: tensor<4x256xbf16>, %wq: tensor<1024x128xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{q_weight in_features (dimension 1) is 128 but the input feature size is 256}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x128xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_q_out_features(%x: tensor<4x256xbf16>, %wq: tensor<512x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{q_weight out_features (dimension 0) is 512 but q heads * head_dim is 1024}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<512x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_q_norm(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<64xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{q_norm_weight size is 64 but the head_dim is 128}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<64xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_k_out_features(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<128x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{k_weight out_features (dimension 0) is 128 but the cache heads * head_dim is 256}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<128x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_k_norm(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<64xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{k_norm_weight size is 64 but the head_dim is 128}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<64xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_v_in_features(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x128xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{v_weight in_features (dimension 1) is 128 but the input feature size is 256}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x128xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<4x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @prologue_tokens(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>) {
  // expected-error @+1 {{token counts differ: q has 5 tokens but input has 4}}
  %q, %kc2, %vc2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s]
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> -> tensor<5x8x128xbf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_new_index_cache(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{new_index_cache type '!msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>' differs from the index_cache type '!msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>'}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x128xbf16>, !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, bf16>
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 64, head_dim = 128, f8E4M3FN>
func.func @prologue_index_page_size(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{block table page_size 128 differs from the cache page_size 64}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x128xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 64, f8E4M3FN>
func.func @prologue_index_heads(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{the index-key cache must have one head, got 2}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x64xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_q_element(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{index_q element type 'f32' differs from the input element type 'bf16'}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x128xf32>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_q_head_dim(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{index_q head_dim is 64 but the index cache head_dim is 128}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x64xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 32, f8E4M3FN>
func.func @prologue_index_rotary(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{rotary_dim 64 exceeds the index_q head_dim 32}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x32xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_q_out_features(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<128x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{index_q_weight out_features (dimension 0) is 128 but index_q heads * head_dim is 256}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<128x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x128xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_k_out_features(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<256x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{index_k_weight out_features (dimension 0) is 256 but the index cache head_dim is 128}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<256x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x128xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_q_norm(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<64xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{index_q_norm_weight size is 64 but the head_dim is 128}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<64xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x128xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_k_norm(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<64xbf16>, %ic: !ic) {
  // expected-error @+1 {{index_k_norm_weight size is 64 but the head_dim is 128}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<64xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<4x2x128xbf16>, !ic
  return
}

// -----

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @prologue_index_tokens(%x: tensor<4x256xbf16>, %wq: tensor<1024x256xbf16>, %wk: tensor<256x256xbf16>, %wv: tensor<256x256xbf16>, %nq: tensor<128xbf16>, %nk: tensor<128xbf16>, %kc: !kv, %vc: !kv, %bt: !bt, %s: tensor<4xi32>, %wiq: tensor<256x256xbf16>, %wik: tensor<128x256xbf16>, %niq: tensor<128xbf16>, %nik: tensor<128xbf16>, %ic: !ic) {
  // expected-error @+1 {{token counts differ: index_q has 5 tokens but input has 4}}
  %q, %kc2, %vc2, %iq, %ic2 = msa.attention_prologue %x
      proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %s, %s] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<4x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !kv, !bt, tensor<4xi32> index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !ic) -> tensor<4x8x128xbf16>, tensor<5x2x128xbf16>, !ic
  return
}
