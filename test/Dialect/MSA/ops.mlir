// RUN: msac-opt %s | msac-opt | FileCheck %s
// RUN: msac-opt %s --mlir-print-op-generic | msac-opt | FileCheck %s

// Round trip of every msa op and type, written as one MiniMax-M3-shaped MSA
// decoder layer at a small scale (hidden 256, 8 query heads and 2 KV heads of
// 128 channels, 2 index heads, 4 experts of which 2 are active).

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!idx = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
!table = !msa.block_table<page_size = 128, max_blocks = 64>

// CHECK-LABEL: func.func @msa_layer
// CHECK-SAME: !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
// CHECK-SAME: !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
// CHECK-SAME: !msa.block_table<page_size = 128, max_blocks = 64>
func.func @msa_layer(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>,
                     %kc: !kv, %vc: !kv, %ic: !idx, %bt: !table)
    -> (tensor<?x256xbf16>, !kv, !kv, !idx) {
  // CHECK: %[[EMB_W:.*]] = msa.weight "model.embed_tokens.weight" : tensor<1000x256xbf16>
  %emb_w = msa.weight "model.embed_tokens.weight" : tensor<1000x256xbf16>
  // CHECK: %[[X:.*]] = msa.embedding %{{.*}}, %[[EMB_W]] : tensor<?xi32>, tensor<1000x256xbf16> -> tensor<?x256xbf16>
  %x = msa.embedding %ids, %emb_w : tensor<?xi32>, tensor<1000x256xbf16> -> tensor<?x256xbf16>
  %ln_w = msa.weight "model.layers.3.input_layernorm.weight" : tensor<256xbf16>
  // CHECK: msa.rms_norm %[[X]], %{{.*}} {eps = 9.99999997E-7 : f32} : tensor<?x256xbf16>, tensor<256xbf16>
  %h = msa.rms_norm %x, %ln_w {eps = 1.0e-6 : f32} : tensor<?x256xbf16>, tensor<256xbf16>
  // CHECK: msa.rms_norm %{{.*}}, %{{.*}} {eps = 9.99999997E-7 : f32, unit_offset = false}
  %plain = msa.rms_norm %x, %ln_w {eps = 1.0e-6 : f32, unit_offset = false} : tensor<?x256xbf16>, tensor<256xbf16>

  %wq = msa.weight "model.layers.3.self_attn.q_proj.weight" : tensor<1024x256xbf16>
  %wk = msa.weight "model.layers.3.self_attn.k_proj.weight" : tensor<256x256xbf16>
  %wv = msa.weight "model.layers.3.self_attn.v_proj.weight" : tensor<256x256xbf16>
  // CHECK: msa.linear %{{.*}}, %{{.*}} : tensor<?x256xbf16>, tensor<1024x256xbf16> -> tensor<?x1024xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x256xbf16>, tensor<1024x256xbf16> -> tensor<?x1024xbf16>
  %k2 = msa.linear %h, %wk : tensor<?x256xbf16>, tensor<256x256xbf16> -> tensor<?x256xbf16>
  %v2 = msa.linear %h, %wv : tensor<?x256xbf16>, tensor<256x256xbf16> -> tensor<?x256xbf16>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x256xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 8, 128] : tensor<?x1024xbf16> into tensor<?x8x128xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 128] : tensor<?x256xbf16> into tensor<?x2x128xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 128] : tensor<?x256xbf16> into tensor<?x2x128xbf16>
  %qn_w = msa.weight "model.layers.3.self_attn.q_norm.weight" : tensor<128xbf16>
  // CHECK: msa.rms_norm %{{.*}}, %{{.*}} {eps = 9.99999997E-7 : f32} : tensor<?x8x128xbf16>, tensor<128xbf16>
  %qn = msa.rms_norm %q3, %qn_w {eps = 1.0e-6 : f32} : tensor<?x8x128xbf16>, tensor<128xbf16>
  // CHECK: msa.rope %{{.*}}, %{{.*}} {rotary_dim = 64 : i64, theta = 5.000000e+06 : f64} : tensor<?x8x128xbf16>, tensor<?xi32>
  %qr = msa.rope %qn, %pos {rotary_dim = 64 : i64, theta = 5.0e6 : f64} : tensor<?x8x128xbf16>, tensor<?xi32>
  // CHECK: msa.rope %{{.*}}, %{{.*}} {interleaved, rotary_dim = 64 : i64, theta = 1.000000e+04 : f64}
  %kr = msa.rope %k3, %pos {interleaved, rotary_dim = 64 : i64, theta = 1.0e4 : f64} : tensor<?x2x128xbf16>, tensor<?xi32>

  // CHECK: %[[KC:.*]] = msa.kv_cache_insert %{{.*}} into %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : tensor<?x2x128xbf16> into !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>, !msa.block_table<page_size = 128, max_blocks = 64>, tensor<?xi32>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x128xbf16> into !kv, !table, tensor<?xi32>, tensor<?xi32>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x128xbf16> into !kv, !table, tensor<?xi32>, tensor<?xi32>

  // Index branch: 2 index heads (one per KV group), one shared index key.
  %wiq = msa.weight "model.layers.3.self_attn.index_q_proj.weight" : tensor<256x256xbf16>
  %wik = msa.weight "model.layers.3.self_attn.index_k_proj.weight" : tensor<128x256xbf16>
  %iq2 = msa.linear %h, %wiq : tensor<?x256xbf16>, tensor<256x256xbf16> -> tensor<?x256xbf16>
  %ik2 = msa.linear %h, %wik : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
  %iq = tensor.expand_shape %iq2 [[0], [1, 2]] output_shape [%t, 2, 128] : tensor<?x256xbf16> into tensor<?x2x128xbf16>
  %ik = tensor.expand_shape %ik2 [[0], [1, 2]] output_shape [%t, 1, 128] : tensor<?x128xbf16> into tensor<?x1x128xbf16>
  %ic2 = msa.kv_cache_insert %ik into %ic[%bt, %seq, %pos] : tensor<?x1x128xbf16> into !idx, !table, tensor<?xi32>, tensor<?xi32>
  // CHECK: %[[SCORES:.*]] = msa.index_score %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : (tensor<?x2x128xbf16>, !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>, !msa.block_table<page_size = 128, max_blocks = 64>, tensor<?xi32>, tensor<?xi32>) -> tensor<2x?x64xf32>
  %scores = msa.index_score %iq, %ic2[%bt, %seq, %pos] : (tensor<?x2x128xbf16>, !idx, !table, tensor<?xi32>, tensor<?xi32>) -> tensor<2x?x64xf32>
  // CHECK: msa.index_score {{.*}} {scale = 0.0883883461 : f32}
  %scaled = msa.index_score %iq, %ic2[%bt, %seq, %pos] {scale = 0.0883883461 : f32} : (tensor<?x2x128xbf16>, !idx, !table, tensor<?xi32>, tensor<?xi32>) -> tensor<2x?x64xf32>
  // CHECK: %[[TOPK:.*]] = msa.block_topk %[[SCORES]], %{{.*}} {block_size = 128 : i64, k = 16 : i64} : tensor<2x?x64xf32>, tensor<?xi32> -> tensor<2x?x16xi32>
  %topk = msa.block_topk %scores, %pos {k = 16 : i64, block_size = 128 : i64} : tensor<2x?x64xf32>, tensor<?xi32> -> tensor<2x?x16xi32>
  // CHECK: msa.block_topk {{.*}} {block_size = 128 : i64, init_blocks = 1 : i64, k = 16 : i64, local_blocks = 2 : i64}
  %topk2 = msa.block_topk %scores, %pos {k = 16 : i64, block_size = 128 : i64, local_blocks = 2 : i64, init_blocks = 1 : i64} : tensor<2x?x64xf32>, tensor<?xi32> -> tensor<2x?x16xi32>

  // CHECK: msa.sparse_attention %{{.*}}, %[[KC]], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] blocks(%[[TOPK]]) {scale = 0.0883883461 : f32} : ({{.*}}) -> tensor<?x8x128xbf16>
  %attn = msa.sparse_attention %qr, %kc2, %vc2[%bt, %seq, %pos] blocks(%topk) {scale = 0.0883883461 : f32}
      : (tensor<?x8x128xbf16>, !kv, !kv, !table, tensor<?xi32>, tensor<?xi32>, tensor<2x?x16xi32>) -> tensor<?x8x128xbf16>
  // CHECK: msa.sparse_attention {{.*}} -> (tensor<?x8x128xbf16>, tensor<?x8xf32>)
  %attn2, %lse = msa.sparse_attention %qr, %kc2, %vc2[%bt, %seq, %pos] blocks(%topk) {scale = 0.0883883461 : f32}
      : (tensor<?x8x128xbf16>, !kv, !kv, !table, tensor<?xi32>, tensor<?xi32>, tensor<2x?x16xi32>) -> (tensor<?x8x128xbf16>, tensor<?x8xf32>)
  // CHECK: msa.dense_attention %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] {scale = 0.0883883461 : f32} : ({{.*}}) -> tensor<?x8x128xbf16>
  %dense = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.0883883461 : f32}
      : (tensor<?x8x128xbf16>, !kv, !kv, !table, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x128xbf16>
  // CHECK: msa.dense_attention {{.*}} -> (tensor<?x8x128xbf16>, tensor<?x8xf32>)
  %dense2, %dlse = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.0883883461 : f32}
      : (tensor<?x8x128xbf16>, !kv, !kv, !table, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x8x128xbf16>, tensor<?x8xf32>)

  %a2 = tensor.collapse_shape %attn [[0], [1, 2]] : tensor<?x8x128xbf16> into tensor<?x1024xbf16>
  %wo = msa.weight "model.layers.3.self_attn.o_proj.weight" : tensor<256x1024xbf16>
  %o = msa.linear %a2, %wo : tensor<?x1024xbf16>, tensor<256x1024xbf16> -> tensor<?x256xbf16>
  %res = arith.addf %x, %o : tensor<?x256xbf16>

  // MoE: sigmoid router with correction bias, 2 of 4 experts, shared expert.
  %gate_w = msa.weight "model.layers.3.block_sparse_moe.gate.weight" : tensor<4x256xf32>
  %bias = msa.weight "model.layers.3.block_sparse_moe.e_score_correction_bias" : tensor<4xf32>
  // CHECK: %[[RW:.*]], %[[RI:.*]] = msa.moe_router %{{.*}}, %{{.*}} bias %{{.*}} {routed_scaling_factor = 2.000000e+00 : f32, top_k = 2 : i64} : (tensor<?x256xbf16>, tensor<4x256xf32>, tensor<4xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %rw, %ri = msa.moe_router %res, %gate_w bias %bias {top_k = 2 : i64, routed_scaling_factor = 2.0 : f32}
      : (tensor<?x256xbf16>, tensor<4x256xf32>, tensor<4xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // CHECK: msa.moe_router %{{.*}}, %{{.*}} {renormalize = false, top_k = 2 : i64} : (tensor<?x256xbf16>, tensor<4x256xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %rw2, %ri2 = msa.moe_router %res, %gate_w {top_k = 2 : i64, renormalize = false}
      : (tensor<?x256xbf16>, tensor<4x256xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // CHECK: msa.weight "model.layers.3.block_sparse_moe.experts.{}.w1.weight" {num_stacked = 4 : i64} : tensor<4x64x256xbf16>
  %w1 = msa.weight "model.layers.3.block_sparse_moe.experts.{}.w1.weight" {num_stacked = 4 : i64} : tensor<4x64x256xbf16>
  %w3 = msa.weight "model.layers.3.block_sparse_moe.experts.{}.w3.weight" {num_stacked = 4 : i64} : tensor<4x64x256xbf16>
  %w2 = msa.weight "model.layers.3.block_sparse_moe.experts.{}.w2.weight" {num_stacked = 4 : i64} : tensor<4x256x64xbf16>
  // CHECK: msa.moe_experts %{{.*}}, %[[RW]], %[[RI]] experts(%{{.*}}, %{{.*}}, %{{.*}}) {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32} : (tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x64x256xbf16>, tensor<4x64x256xbf16>, tensor<4x256x64xbf16>) -> tensor<?x256xbf16>
  %routed = msa.moe_experts %res, %rw, %ri experts(%w1, %w3, %w2) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x64x256xbf16>, tensor<4x64x256xbf16>, tensor<4x256x64xbf16>) -> tensor<?x256xbf16>
  %sg_w = msa.weight "model.layers.3.block_sparse_moe.shared_experts.gate_proj.weight" : tensor<64x256xbf16>
  %su_w = msa.weight "model.layers.3.block_sparse_moe.shared_experts.up_proj.weight" : tensor<64x256xbf16>
  %sd_w = msa.weight "model.layers.3.block_sparse_moe.shared_experts.down_proj.weight" : tensor<256x64xbf16>
  %sg = msa.linear %res, %sg_w : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
  %su = msa.linear %res, %su_w : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
  // CHECK: msa.swiglu %{{.*}}, %{{.*}} {alpha = 1.702000e+00 : f32, limit = 7.000000e+00 : f32} : tensor<?x64xbf16>
  %act = msa.swiglu %sg, %su {alpha = 1.702 : f32, limit = 7.0 : f32} : tensor<?x64xbf16>
  %shared = msa.linear %act, %sd_w : tensor<?x64xbf16>, tensor<256x64xbf16> -> tensor<?x256xbf16>
  %ffn = arith.addf %routed, %shared : tensor<?x256xbf16>
  %out = arith.addf %res, %ffn : tensor<?x256xbf16>
  return %out, %kc2, %vc2, %ic2 : tensor<?x256xbf16>, !kv, !kv, !idx
}

// CHECK-LABEL: func.func @logits
// CHECK: msa.logits %{{.*}}[%{{.*}}], %{{.*}} : (tensor<?x256xbf16>, tensor<3xi32>, tensor<1000x256xbf16>) -> tensor<3x1000xf32>
func.func @logits(%h: tensor<?x256xbf16>, %last: tensor<3xi32>) -> tensor<3x1000xf32> {
  %head = msa.weight "lm_head.weight" : tensor<1000x256xbf16>
  %l = msa.logits %h[%last], %head : (tensor<?x256xbf16>, tensor<3xi32>, tensor<1000x256xbf16>) -> tensor<3x1000xf32>
  return %l : tensor<3x1000xf32>
}

// Every cache element format the type accepts, and a block table of
// unbounded length.
// CHECK-LABEL: func.func @cache_formats
// CHECK-SAME: !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, !bsq.nvfp4>
// CHECK-SAME: !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, f8E5M2>
// CHECK-SAME: !msa.paged_cache<heads = 4, page_size = 64, head_dim = 64, f16>
// CHECK-SAME: !msa.paged_cache<heads = 1, page_size = 16, head_dim = 32, f32>
// CHECK-SAME: !msa.block_table<page_size = 128, max_blocks = ?>
func.func @cache_formats(
    %a: !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, !bsq.nvfp4>,
    %b: !msa.paged_cache<heads = 4, page_size = 128, head_dim = 128, f8E5M2>,
    %c: !msa.paged_cache<heads = 4, page_size = 64, head_dim = 64, f16>,
    %d: !msa.paged_cache<heads = 1, page_size = 16, head_dim = 32, f32>,
    %e: !msa.block_table<page_size = 128, max_blocks = ?>) {
  return
}

// Quantized weights flow through msa.linear and msa.moe_experts.
// CHECK-LABEL: func.func @quantized_weights
// CHECK: msa.linear %{{.*}}, %{{.*}} : tensor<?x256xbf16>, tensor<64x256x!bsq.mx<f8E4M3FN>> -> tensor<?x64xbf16>
// CHECK: msa.moe_experts {{.*}} tensor<4x64x256x!bsq.nvfp4<global_scale>>, tensor<4x64x256x!bsq.nvfp4<global_scale>>, tensor<4x256x64x!bsq.nvfp4<global_scale>>) -> tensor<?x256xbf16>
func.func @quantized_weights(%x: tensor<?x256xbf16>, %w: tensor<64x256x!bsq.mx<f8E4M3FN>>,
                             %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>,
                             %w1: tensor<4x64x256x!bsq.nvfp4<global_scale>>,
                             %w2: tensor<4x256x64x!bsq.nvfp4<global_scale>>) -> tensor<?x256xbf16> {
  %y = msa.linear %x, %w : tensor<?x256xbf16>, tensor<64x256x!bsq.mx<f8E4M3FN>> -> tensor<?x64xbf16>
  %r = msa.moe_experts %x, %rw, %ri experts(%w1, %w1, %w2) {alpha = 1.702 : f32, limit = 7.0 : f32}
      : (tensor<?x256xbf16>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x64x256x!bsq.nvfp4<global_scale>>,
         tensor<4x64x256x!bsq.nvfp4<global_scale>>, tensor<4x256x64x!bsq.nvfp4<global_scale>>) -> tensor<?x256xbf16>
  return %r : tensor<?x256xbf16>
}

// The fused attention prologue of a dense layer (no index branch) and of an
// MSA layer (index_q returned, index key inserted into the FP8 index cache).
!pkv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>
!pidx = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
!ptable = !msa.block_table<page_size = 128, max_blocks = ?>
// CHECK-LABEL: func.func @attention_prologue
// CHECK: %[[Q:.*]], %[[KC:.*]], %[[VC:.*]] = msa.attention_prologue %{{.*}} proj(%{{.*}}, %{{.*}}, %{{.*}}) norms(%{{.*}}, %{{.*}}) into %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] {eps = 9.99999997E-7 : f32, rotary_dim = 64 : i64, theta = 5.000000e+06 : f64} : tensor<?x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>) norms(tensor<128xbf16>, tensor<128xbf16>) into !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, bf16>, !msa.block_table<page_size = 128, max_blocks = ?>, tensor<?xi32> -> tensor<?x8x128xbf16>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[IQ:.*]], %[[IC:.*]] = msa.attention_prologue %{{.*}} proj(%{{.*}}, %{{.*}}, %{{.*}}) norms(%{{.*}}, %{{.*}}) into %[[KC]], %[[VC]][%{{.*}}, %{{.*}}, %{{.*}}] index(%{{.*}}, %{{.*}} norms %{{.*}}, %{{.*}} into %{{.*}}) {eps = 9.99999997E-7 : f32, rotary_dim = 64 : i64, theta = 5.000000e+06 : f64, unit_offset = false}
// CHECK-SAME: index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>) -> tensor<?x8x128xbf16>, tensor<?x2x128xbf16>, !msa.paged_cache<heads = 1, page_size = 128, head_dim = 128, f8E4M3FN>
func.func @attention_prologue(%h: tensor<?x256xbf16>, %seq: tensor<?xi32>, %pos: tensor<?xi32>,
                              %kc: !pkv, %vc: !pkv, %ic: !pidx, %bt: !ptable)
    -> (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?x2x128xbf16>, !pkv, !pkv, !pidx) {
  %wq = msa.weight "model.layers.3.self_attn.q_proj.weight" : tensor<1024x256xbf16>
  %wk = msa.weight "model.layers.3.self_attn.k_proj.weight" : tensor<256x256xbf16>
  %wv = msa.weight "model.layers.3.self_attn.v_proj.weight" : tensor<256x256xbf16>
  %nq = msa.weight "model.layers.3.self_attn.q_norm.weight" : tensor<128xbf16>
  %nk = msa.weight "model.layers.3.self_attn.k_norm.weight" : tensor<128xbf16>
  %wiq = msa.weight "model.layers.3.self_attn.index_q_proj.weight" : tensor<256x256xbf16>
  %wik = msa.weight "model.layers.3.self_attn.index_k_proj.weight" : tensor<128x256xbf16>
  %niq = msa.weight "model.layers.3.self_attn.index_q_norm.weight" : tensor<128xbf16>
  %nik = msa.weight "model.layers.3.self_attn.index_k_norm.weight" : tensor<128xbf16>
  %q, %kc2, %vc2 = msa.attention_prologue %h proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc, %vc[%bt, %seq, %pos] {eps = 1.0e-6 : f32, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<?x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>)
        norms(tensor<128xbf16>, tensor<128xbf16>) into !pkv, !ptable, tensor<?xi32> -> tensor<?x8x128xbf16>
  %q2, %kc3, %vc3, %iq, %ic2 = msa.attention_prologue %h proj(%wq, %wk, %wv) norms(%nq, %nk)
      into %kc2, %vc2[%bt, %seq, %pos] index(%wiq, %wik norms %niq, %nik into %ic)
      {eps = 1.0e-6 : f32, unit_offset = false, rotary_dim = 64 : i64, theta = 5.0e6 : f64}
      : tensor<?x256xbf16> proj(tensor<1024x256xbf16>, tensor<256x256xbf16>, tensor<256x256xbf16>)
        norms(tensor<128xbf16>, tensor<128xbf16>) into !pkv, !ptable, tensor<?xi32>
        index(tensor<256x256xbf16>, tensor<128x256xbf16> norms tensor<128xbf16>, tensor<128xbf16> into !pidx)
      -> tensor<?x8x128xbf16>, tensor<?x2x128xbf16>, !pidx
  return %q, %q2, %iq, %kc3, %vc3, %ic2 : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?x2x128xbf16>, !pkv, !pkv, !pidx
}

// The q8 precision contract (MSA's FP8 decode products, §3.2) on E4M3 and
// NVFP4 caches; `exact`, the default, is not printed.
!kv8 = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, f8E4M3FN>
!kv4 = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 128, !bsq.nvfp4>
!bt8 = !msa.block_table<page_size = 128, max_blocks = ?>
// CHECK-LABEL: func.func @attention_q8
func.func @attention_q8(%q: tensor<?x8x128xbf16>, %k: !kv8, %v: !kv8, %k4: !kv4, %v4: !kv4, %bt: !bt8, %s: tensor<?xi32>, %p: tensor<?xi32>, %ids: tensor<2x?x16xi32>) -> (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>) {
  // CHECK: msa.dense_attention {{.*}} {precision = #msa.attention_precision<q8>, scale = 0.0883883461 : f32}
  %d = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.0883883461 : f32, precision = #msa.attention_precision<q8>} : (tensor<?x8x128xbf16>, !kv8, !kv8, !bt8, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x128xbf16>
  // CHECK: msa.sparse_attention {{.*}} blocks(%{{.*}}) {precision = #msa.attention_precision<q8>, scale = 0.0883883461 : f32}
  %sp = msa.sparse_attention %q, %k4, %v4[%bt, %s, %p] blocks(%ids) {scale = 0.0883883461 : f32, precision = #msa.attention_precision<q8>} : (tensor<?x8x128xbf16>, !kv4, !kv4, !bt8, tensor<?xi32>, tensor<?xi32>, tensor<2x?x16xi32>) -> tensor<?x8x128xbf16>
  // CHECK: msa.dense_attention {{.*}} {scale = 0.0883883461 : f32} :
  %e = msa.dense_attention %q, %k, %v[%bt, %s, %p] {scale = 0.0883883461 : f32, precision = #msa.attention_precision<exact>} : (tensor<?x8x128xbf16>, !kv8, !kv8, !bt8, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x128xbf16>
  return %d, %sp, %e : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>
}
