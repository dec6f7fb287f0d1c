// One MSA decoder layer of MiniMax-M3 (layer 3) at its real shapes
// (msa-m3-spec.md §1.2-§1.5): hidden 6144, 64 query heads and 4 KV heads of
// 128 channels, 4 index heads of 128, partial NeoX RoPE (64 of 128, theta
// 5e6), top-16 blocks of 128 tokens, 128 routed experts (top 4, sigmoid
// router with correction bias, scaling 2.0) plus one shared expert,
// SwiGLU-OAI (alpha 1.702, limit 7). As in MiniMax-M3.1-Flash, the routed
// experts are NVFP4 and the shared expert is MXFP8; the attention
// projections are bf16. The KV cache is FP8 and the index-key cache NVFP4.
//
// Run: msac-opt m3-msa-layer.mlir -msac-reference-pipeline

!kv = !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, f8E4M3FN>
!idx = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, !bsq.nvfp4>
!table = !msa.block_table<page_size = 128, max_blocks = 8192>
!act = tensor<?x6144xbf16>
!tok = tensor<?xi32>
!nvfp4_up = tensor<128x3072x6144x!bsq.nvfp4<global_scale>>
!nvfp4_down = tensor<128x6144x3072x!bsq.nvfp4<global_scale>>

func.func @layer3(%x: !act, %seq: !tok, %pos: !tok, %kc: !kv, %vc: !kv, %ic: !idx,
                  %bt: !table, %w1: !nvfp4_up, %w3: !nvfp4_up, %w2: !nvfp4_down)
    -> (!act, !kv, !kv, !idx) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : !act

  // Attention: pre-norm, projections, per-head Gemma norm, partial RoPE.
  %ln = msa.weight "model.layers.3.input_layernorm.weight" : tensor<6144xbf16>
  %h = msa.rms_norm %x, %ln {eps = 1.0e-6 : f32} : !act, tensor<6144xbf16>
  %wq = msa.weight "model.layers.3.self_attn.q_proj.weight" : tensor<8192x6144xbf16>
  %wk = msa.weight "model.layers.3.self_attn.k_proj.weight" : tensor<512x6144xbf16>
  %wv = msa.weight "model.layers.3.self_attn.v_proj.weight" : tensor<512x6144xbf16>
  %q2 = msa.linear %h, %wq : !act, tensor<8192x6144xbf16> -> tensor<?x8192xbf16>
  %k2 = msa.linear %h, %wk : !act, tensor<512x6144xbf16> -> tensor<?x512xbf16>
  %v2 = msa.linear %h, %wv : !act, tensor<512x6144xbf16> -> tensor<?x512xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 64, 128] : tensor<?x8192xbf16> into tensor<?x64x128xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 4, 128] : tensor<?x512xbf16> into tensor<?x4x128xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 4, 128] : tensor<?x512xbf16> into tensor<?x4x128xbf16>
  %qnw = msa.weight "model.layers.3.self_attn.q_norm.weight" : tensor<128xbf16>
  %knw = msa.weight "model.layers.3.self_attn.k_norm.weight" : tensor<128xbf16>
  %qn = msa.rms_norm %q3, %qnw {eps = 1.0e-6 : f32} : tensor<?x64x128xbf16>, tensor<128xbf16>
  %kn = msa.rms_norm %k3, %knw {eps = 1.0e-6 : f32} : tensor<?x4x128xbf16>, tensor<128xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 64 : i64, theta = 5.0e6 : f64} : tensor<?x64x128xbf16>, !tok
  %kr = msa.rope %kn, %pos {rotary_dim = 64 : i64, theta = 5.0e6 : f64} : tensor<?x4x128xbf16>, !tok
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x4x128xbf16> into !kv, !table, !tok, !tok
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x4x128xbf16> into !kv, !table, !tok, !tok

  // Index branch: one index query head per KV group, one shared index key.
  %wiq = msa.weight "model.layers.3.self_attn.index_q_proj.weight" : tensor<512x6144xbf16>
  %wik = msa.weight "model.layers.3.self_attn.index_k_proj.weight" : tensor<128x6144xbf16>
  %iq2 = msa.linear %h, %wiq : !act, tensor<512x6144xbf16> -> tensor<?x512xbf16>
  %ik2 = msa.linear %h, %wik : !act, tensor<128x6144xbf16> -> tensor<?x128xbf16>
  %iq3 = tensor.expand_shape %iq2 [[0], [1, 2]] output_shape [%t, 4, 128] : tensor<?x512xbf16> into tensor<?x4x128xbf16>
  %ik3 = tensor.expand_shape %ik2 [[0], [1, 2]] output_shape [%t, 1, 128] : tensor<?x128xbf16> into tensor<?x1x128xbf16>
  %iqnw = msa.weight "model.layers.3.self_attn.index_q_norm.weight" : tensor<128xbf16>
  %iknw = msa.weight "model.layers.3.self_attn.index_k_norm.weight" : tensor<128xbf16>
  %iqn = msa.rms_norm %iq3, %iqnw {eps = 1.0e-6 : f32} : tensor<?x4x128xbf16>, tensor<128xbf16>
  %ikn = msa.rms_norm %ik3, %iknw {eps = 1.0e-6 : f32} : tensor<?x1x128xbf16>, tensor<128xbf16>
  %iqr = msa.rope %iqn, %pos {rotary_dim = 64 : i64, theta = 5.0e6 : f64} : tensor<?x4x128xbf16>, !tok
  %ikr = msa.rope %ikn, %pos {rotary_dim = 64 : i64, theta = 5.0e6 : f64} : tensor<?x1x128xbf16>, !tok
  %ic2 = msa.kv_cache_insert %ikr into %ic[%bt, %seq, %pos] : tensor<?x1x128xbf16> into !idx, !table, !tok, !tok
  %scores = msa.index_score %iqr, %ic2[%bt, %seq, %pos] : (tensor<?x4x128xbf16>, !idx, !table, !tok, !tok) -> tensor<4x?x8192xf32>
  %blocks = msa.block_topk %scores, %pos {k = 16 : i64, block_size = 128 : i64} : tensor<4x?x8192xf32>, !tok -> tensor<4x?x16xi32>

  // Main branch: exact attention over the 16 selected blocks per group.
  %attn = msa.sparse_attention %qr, %kc2, %vc2[%bt, %seq, %pos] blocks(%blocks) {scale = 0.0883883461 : f32}
      : (tensor<?x64x128xbf16>, !kv, !kv, !table, !tok, !tok, tensor<4x?x16xi32>) -> tensor<?x64x128xbf16>
  %a2 = tensor.collapse_shape %attn [[0], [1, 2]] : tensor<?x64x128xbf16> into tensor<?x8192xbf16>
  %wo = msa.weight "model.layers.3.self_attn.o_proj.weight" : tensor<6144x8192xbf16>
  %o = msa.linear %a2, %wo : tensor<?x8192xbf16>, tensor<6144x8192xbf16> -> !act
  %res = arith.addf %x, %o : !act

  // MoE: sigmoid router, NVFP4 routed experts, MXFP8 shared expert.
  %pln = msa.weight "model.layers.3.post_attention_layernorm.weight" : tensor<6144xbf16>
  %h2 = msa.rms_norm %res, %pln {eps = 1.0e-6 : f32} : !act, tensor<6144xbf16>
  %gw = msa.weight "model.layers.3.block_sparse_moe.gate.weight" : tensor<128x6144xf32>
  %gb = msa.weight "model.layers.3.block_sparse_moe.e_score_correction_bias" : tensor<128xf32>
  %rw, %ri = msa.moe_router %h2, %gw bias %gb {top_k = 4 : i64, routed_scaling_factor = 2.0 : f32}
      : (!act, tensor<128x6144xf32>, tensor<128xf32>) -> (tensor<?x4xf32>, tensor<?x4xi32>)
  %routed = msa.moe_experts %h2, %rw, %ri experts(%w1, %w3, %w2) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (!act, tensor<?x4xf32>, tensor<?x4xi32>, !nvfp4_up, !nvfp4_up, !nvfp4_down) -> !act
  %sgd = msa.weight "model.layers.3.block_sparse_moe.shared_experts.gate_proj.weight" : tensor<3072x6144xf8E4M3FN>
  %sgs = msa.weight "model.layers.3.block_sparse_moe.shared_experts.gate_proj.weight_scale" : tensor<3072x192xui8>
  %sg_w = bsq.pack %sgd, %sgs : tensor<3072x6144xf8E4M3FN>, tensor<3072x192xui8> -> tensor<3072x6144x!bsq.mx<f8E4M3FN>>
  %sud = msa.weight "model.layers.3.block_sparse_moe.shared_experts.up_proj.weight" : tensor<3072x6144xf8E4M3FN>
  %sus = msa.weight "model.layers.3.block_sparse_moe.shared_experts.up_proj.weight_scale" : tensor<3072x192xui8>
  %su_w = bsq.pack %sud, %sus : tensor<3072x6144xf8E4M3FN>, tensor<3072x192xui8> -> tensor<3072x6144x!bsq.mx<f8E4M3FN>>
  %sdd = msa.weight "model.layers.3.block_sparse_moe.shared_experts.down_proj.weight" : tensor<6144x3072xf8E4M3FN>
  %sds = msa.weight "model.layers.3.block_sparse_moe.shared_experts.down_proj.weight_scale" : tensor<6144x96xui8>
  %sd_w = bsq.pack %sdd, %sds : tensor<6144x3072xf8E4M3FN>, tensor<6144x96xui8> -> tensor<6144x3072x!bsq.mx<f8E4M3FN>>
  %sg = msa.linear %h2, %sg_w : !act, tensor<3072x6144x!bsq.mx<f8E4M3FN>> -> tensor<?x3072xbf16>
  %su = msa.linear %h2, %su_w : !act, tensor<3072x6144x!bsq.mx<f8E4M3FN>> -> tensor<?x3072xbf16>
  %act = msa.swiglu %sg, %su {alpha = 1.702 : f32, limit = 7.0 : f32} : tensor<?x3072xbf16>
  %shared = msa.linear %act, %sd_w : tensor<?x3072xbf16>, tensor<6144x3072x!bsq.mx<f8E4M3FN>> -> !act
  %ffn = arith.addf %routed, %shared : !act
  %out = arith.addf %res, %ffn : !act
  return %out, %kc2, %vc2, %ic2 : !act, !kv, !kv, !idx
}
