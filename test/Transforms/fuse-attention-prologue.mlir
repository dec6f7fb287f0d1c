// RUN: msac-opt %s -split-input-file -msa-fuse-attention-prologue | FileCheck %s

// msa-fuse-attention-prologue: the rewrite of a dense and an MSA layer and
// of layers with FP8 and NVFP4 caches, then one non-rewrite per
// precondition (the IR is left as it was). The layers
// have the tiny synthetic checkpoint's shapes: hidden 128, 4 query heads
// and 2 KV heads of 32 channels, 2 index heads, rotary_dim 16.

// A dense layer: q is returned, k and v are inserted in place; none of the
// unfused ops is left.
// CHECK-LABEL: func.func @dense_layer
// CHECK-SAME: (%[[H:[^:]*]]: tensor<?x128xbf16>, %{{[^:]*}}: tensor<?x128xbf16>, %[[SEQ:[^:]*]]: tensor<?xi32>, %{{[^:]*}}: tensor<?xi32>, %[[POS:[^:]*]]: tensor<?xi32>, %{{[^:]*}}: tensor<?xi32>,
// CHECK-SAME: %[[KC:[^:]*]]: !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>, %[[VC:[^:]*]]: !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>, %[[BT:[^:]*]]: !msa.block_table<page_size = 128, max_blocks = ?>, %{{[^:]*}}: !msa.block_table
// CHECK-DAG: %[[WQ:.*]] = msa.weight "q_proj"
// CHECK-DAG: %[[WK:.*]] = msa.weight "k_proj"
// CHECK-DAG: %[[WV:.*]] = msa.weight "v_proj"
// CHECK-DAG: %[[NQ:.*]] = msa.weight "q_norm"
// CHECK-DAG: %[[NK:.*]] = msa.weight "k_norm"
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.rms_norm
// CHECK-NOT: msa.rope
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[Q:.*]], %[[NKC:.*]], %[[NVC:.*]] = msa.attention_prologue %[[H]] proj(%[[WQ]], %[[WK]], %[[WV]]) norms(%[[NQ]], %[[NK]]) into %[[KC]], %[[VC]][%[[BT]], %[[SEQ]], %[[POS]]] {eps = 9.99999997E-7 : f32, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<?x128xbf16> proj(tensor<128x128xbf16>, tensor<64x128xbf16>, tensor<64x128xbf16>) norms(tensor<32xbf16>, tensor<32xbf16>) into !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>, !msa.block_table<page_size = 128, max_blocks = ?>, tensor<?xi32> -> tensor<?x4x32xbf16>
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[O:.*]] = msa.dense_attention %[[Q]], %[[NKC]], %[[NVC]][%[[BT]], %[[SEQ]], %[[POS]]]
// CHECK: return %[[O]], %[[NKC]], %[[NVC]]
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @dense_layer(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}
// -----

// An MSA layer (FP8 index cache): index_q feeds msa.index_score, the index
// key goes into the index cache; q, k and v as in a dense layer.
// CHECK-LABEL: func.func @msa_layer
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.rms_norm
// CHECK-NOT: msa.rope
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[Q:.*]], %[[NKC:.*]], %[[NVC:.*]], %[[IQ:.*]], %[[NIC:.*]] = msa.attention_prologue %{{.*}} proj(%{{.*}}, %{{.*}}, %{{.*}}) norms(%{{.*}}, %{{.*}}) into %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] index(%{{.*}}, %{{.*}} norms %{{.*}}, %{{.*}} into %{{.*}}) {eps = 9.99999997E-7 : f32, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64}
// CHECK-SAME: -> tensor<?x4x32xbf16>, tensor<?x2x32xbf16>, !msa.paged_cache<heads = 1, page_size = 128, head_dim = 32, f8E4M3FN>
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[S:.*]] = msa.index_score %[[IQ]], %[[NIC]]
// CHECK: %[[B:.*]] = msa.block_topk %[[S]]
// CHECK: %[[O:.*]] = msa.sparse_attention %[[Q]], %[[NKC]], %[[NVC]][{{.*}}] blocks(%[[B]])
// CHECK: return %[[O]], %[[NKC]], %[[NVC]], %[[NIC]]

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 32, f8E4M3FN>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @msa_layer(%h: tensor<?x128xbf16>, %seq: tensor<?xi32>, %pos: tensor<?xi32>,
    %kc: !kv, %vc: !kv, %ic: !ic, %bt: !bt) -> (tensor<?x4x32xbf16>, !kv, !kv, !ic) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %wiq = msa.weight "index_q_proj" : tensor<64x128xbf16>
  %wik = msa.weight "index_k_proj" : tensor<32x128xbf16>
  %niq = msa.weight "index_q_norm" : tensor<32xbf16>
  %nik = msa.weight "index_k_norm" : tensor<32xbf16>
  %iq2 = msa.linear %h, %wiq : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %iq3 = tensor.expand_shape %iq2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %iqn = msa.rms_norm %iq3, %niq {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %iqr = msa.rope %iqn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %ik2 = msa.linear %h, %wik : tensor<?x128xbf16>, tensor<32x128xbf16> -> tensor<?x32xbf16>
  %ik3 = tensor.expand_shape %ik2 [[0], [1, 2]] output_shape [%t, 1, 32] : tensor<?x32xbf16> into tensor<?x1x32xbf16>
  %ikn = msa.rms_norm %ik3, %nik {eps = 1.0e-6 : f32} : tensor<?x1x32xbf16>, tensor<32xbf16>
  %ikr = msa.rope %ikn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x1x32xbf16>, tensor<?xi32>
  %ic2 = msa.kv_cache_insert %ikr into %ic[%bt, %seq, %pos] : tensor<?x1x32xbf16> into !ic, !bt, tensor<?xi32>, tensor<?xi32>
  %s = msa.index_score %iqr, %ic2[%bt, %seq, %pos] : (tensor<?x2x32xbf16>, !ic, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<2x?x?xf32>
  %b = msa.block_topk %s, %pos {block_size = 128 : i64, k = 16 : i64} : tensor<2x?x?xf32>, tensor<?xi32> -> tensor<2x?x16xi32>
  %o = msa.sparse_attention %qr, %kc2, %vc2[%bt, %seq, %pos] blocks(%b) {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>, tensor<2x?x16xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2, %ic2 : tensor<?x4x32xbf16>, !kv, !kv, !ic
}

// -----

// FP8 (E4M3) K/V caches in a dense layer: the rewrite.
// CHECK-LABEL: func.func @fp8_kv_cache
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.rms_norm
// CHECK-NOT: msa.rope
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[Q:.*]], %[[NKC:.*]], %[[NVC:.*]] = msa.attention_prologue
// CHECK-SAME: into !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, f8E4M3FN>,
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[O:.*]] = msa.dense_attention %[[Q]], %[[NKC]], %[[NVC]]
// CHECK: return %[[O]], %[[NKC]], %[[NVC]]
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, f8E4M3FN>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @fp8_kv_cache(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}
// -----

// NVFP4 K/V and index caches (global scale 1): the rewrite, quantized as
// msa.kv_cache_insert does by the host and GPU kernels.
// CHECK-LABEL: func.func @nvfp4_caches
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.rms_norm
// CHECK-NOT: msa.rope
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[Q:.*]], %[[NKC:.*]], %[[NVC:.*]], %[[IQ:.*]], %[[NIC:.*]] = msa.attention_prologue
// CHECK-SAME: into !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, !bsq.nvfp4>,
// CHECK-SAME: -> tensor<?x4x32xbf16>, tensor<?x2x32xbf16>, !msa.paged_cache<heads = 1, page_size = 128, head_dim = 32, !bsq.nvfp4>
// CHECK-NOT: msa.linear
// CHECK-NOT: msa.kv_cache_insert
// CHECK: %[[S:.*]] = msa.index_score %[[IQ]], %[[NIC]]
// CHECK: %[[B:.*]] = msa.block_topk %[[S]]
// CHECK: %[[O:.*]] = msa.sparse_attention %[[Q]], %[[NKC]], %[[NVC]][{{.*}}] blocks(%[[B]])
// CHECK: return %[[O]], %[[NKC]], %[[NVC]], %[[NIC]]

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, !bsq.nvfp4>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 32, !bsq.nvfp4>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @nvfp4_caches(%h: tensor<?x128xbf16>, %seq: tensor<?xi32>, %pos: tensor<?xi32>,
    %kc: !kv, %vc: !kv, %ic: !ic, %bt: !bt) -> (tensor<?x4x32xbf16>, !kv, !kv, !ic) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %wiq = msa.weight "index_q_proj" : tensor<64x128xbf16>
  %wik = msa.weight "index_k_proj" : tensor<32x128xbf16>
  %niq = msa.weight "index_q_norm" : tensor<32xbf16>
  %nik = msa.weight "index_k_norm" : tensor<32xbf16>
  %iq2 = msa.linear %h, %wiq : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %iq3 = tensor.expand_shape %iq2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %iqn = msa.rms_norm %iq3, %niq {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %iqr = msa.rope %iqn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %ik2 = msa.linear %h, %wik : tensor<?x128xbf16>, tensor<32x128xbf16> -> tensor<?x32xbf16>
  %ik3 = tensor.expand_shape %ik2 [[0], [1, 2]] output_shape [%t, 1, 32] : tensor<?x32xbf16> into tensor<?x1x32xbf16>
  %ikn = msa.rms_norm %ik3, %nik {eps = 1.0e-6 : f32} : tensor<?x1x32xbf16>, tensor<32xbf16>
  %ikr = msa.rope %ikn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x1x32xbf16>, tensor<?xi32>
  %ic2 = msa.kv_cache_insert %ikr into %ic[%bt, %seq, %pos] : tensor<?x1x32xbf16> into !ic, !bt, tensor<?xi32>, tensor<?xi32>
  %s = msa.index_score %iqr, %ic2[%bt, %seq, %pos] : (tensor<?x2x32xbf16>, !ic, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<2x?x?xf32>
  %b = msa.block_topk %s, %pos {block_size = 128 : i64, k = 16 : i64} : tensor<2x?x?xf32>, tensor<?xi32> -> tensor<2x?x16xi32>
  %o = msa.sparse_attention %qr, %kc2, %vc2[%bt, %seq, %pos] blocks(%b) {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>, tensor<2x?x16xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2, %ic2 : tensor<?x4x32xbf16>, !kv, !kv, !ic
}

// -----

// Non-rewrite: the v projection reads another input than q and k.
// CHECK-LABEL: func.func @different_inputs
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @different_inputs(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h2, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k projection is also used outside the chain.
// CHECK-LABEL: func.func @extra_use
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @extra_use(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  %kx = arith.addf %k2, %k2 : tensor<?x64xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k norm has another eps than the q norm.
// CHECK-LABEL: func.func @norm_eps
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @norm_eps(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-5 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k norm has no Gemma unit offset, the q norm has.
// CHECK-LABEL: func.func @norm_offset
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @norm_offset(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32, unit_offset = false} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k RoPE has another theta.
// CHECK-LABEL: func.func @rope_theta
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @rope_theta(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 5.0e6 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k RoPE has another rotary_dim.
// CHECK-LABEL: func.func @rope_rotary_dim
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @rope_rotary_dim(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 32 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k RoPE is interleaved (GPT-J pairing), not NeoX.
// CHECK-LABEL: func.func @rope_interleaved
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @rope_interleaved(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {interleaved, rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k RoPE uses other positions than the q RoPE.
// CHECK-LABEL: func.func @rope_positions
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @rope_positions(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos2 {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the v insert uses other positions than the RoPEs.
// CHECK-LABEL: func.func @insert_positions
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @insert_positions(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos2] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the v insert uses other sequence ids than the k insert.
// CHECK-LABEL: func.func @insert_seq_ids
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @insert_seq_ids(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq2, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the v insert uses another block table than the k insert.
// CHECK-LABEL: func.func @insert_block_table
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @insert_block_table(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt2, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: an f16 KV cache, which the host kernel does not write.
// CHECK-LABEL: func.func @cache_element
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, f16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @cache_element(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: an NVFP4 index cache with a global scale, which the kernels
// do not write (they quantize with global scale 1).
// CHECK-LABEL: func.func @index_cache_element
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.sparse_attention
// CHECK-NOT: msa.attention_prologue

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 32, !bsq.nvfp4<global_scale>>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @index_cache_element(%h: tensor<?x128xbf16>, %seq: tensor<?xi32>, %pos: tensor<?xi32>,
    %kc: !kv, %vc: !kv, %ic: !ic, %bt: !bt) -> (tensor<?x4x32xbf16>, !kv, !kv, !ic) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %wiq = msa.weight "index_q_proj" : tensor<64x128xbf16>
  %wik = msa.weight "index_k_proj" : tensor<32x128xbf16>
  %niq = msa.weight "index_q_norm" : tensor<32xbf16>
  %nik = msa.weight "index_k_norm" : tensor<32xbf16>
  %iq2 = msa.linear %h, %wiq : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %iq3 = tensor.expand_shape %iq2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %iqn = msa.rms_norm %iq3, %niq {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %iqr = msa.rope %iqn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %ik2 = msa.linear %h, %wik : tensor<?x128xbf16>, tensor<32x128xbf16> -> tensor<?x32xbf16>
  %ik3 = tensor.expand_shape %ik2 [[0], [1, 2]] output_shape [%t, 1, 32] : tensor<?x32xbf16> into tensor<?x1x32xbf16>
  %ikn = msa.rms_norm %ik3, %nik {eps = 1.0e-6 : f32} : tensor<?x1x32xbf16>, tensor<32xbf16>
  %ikr = msa.rope %ikn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x1x32xbf16>, tensor<?xi32>
  %ic2 = msa.kv_cache_insert %ikr into %ic[%bt, %seq, %pos] : tensor<?x1x32xbf16> into !ic, !bt, tensor<?xi32>, tensor<?xi32>
  %s = msa.index_score %iqr, %ic2[%bt, %seq, %pos] : (tensor<?x2x32xbf16>, !ic, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<2x?x?xf32>
  %b = msa.block_topk %s, %pos {block_size = 128 : i64, k = 16 : i64} : tensor<2x?x?xf32>, tensor<?xi32> -> tensor<2x?x16xi32>
  %o = msa.sparse_attention %qr, %kc2, %vc2[%bt, %seq, %pos] blocks(%b) {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>, tensor<2x?x16xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2, %ic2 : tensor<?x4x32xbf16>, !kv, !kv, !ic
}

// -----

// Non-rewrite: the index_q RoPE has another theta than the q RoPE.
// CHECK-LABEL: func.func @index_rope
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.sparse_attention
// CHECK-NOT: msa.attention_prologue

!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!ic = !msa.paged_cache<heads = 1, page_size = 128, head_dim = 32, f8E4M3FN>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @index_rope(%h: tensor<?x128xbf16>, %seq: tensor<?xi32>, %pos: tensor<?xi32>,
    %kc: !kv, %vc: !kv, %ic: !ic, %bt: !bt) -> (tensor<?x4x32xbf16>, !kv, !kv, !ic) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %wiq = msa.weight "index_q_proj" : tensor<64x128xbf16>
  %wik = msa.weight "index_k_proj" : tensor<32x128xbf16>
  %niq = msa.weight "index_q_norm" : tensor<32xbf16>
  %nik = msa.weight "index_k_norm" : tensor<32xbf16>
  %iq2 = msa.linear %h, %wiq : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %iq3 = tensor.expand_shape %iq2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %iqn = msa.rms_norm %iq3, %niq {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %iqr = msa.rope %iqn, %pos {rotary_dim = 16 : i64, theta = 5.0e6 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %ik2 = msa.linear %h, %wik : tensor<?x128xbf16>, tensor<32x128xbf16> -> tensor<?x32xbf16>
  %ik3 = tensor.expand_shape %ik2 [[0], [1, 2]] output_shape [%t, 1, 32] : tensor<?x32xbf16> into tensor<?x1x32xbf16>
  %ikn = msa.rms_norm %ik3, %nik {eps = 1.0e-6 : f32} : tensor<?x1x32xbf16>, tensor<32xbf16>
  %ikr = msa.rope %ikn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x1x32xbf16>, tensor<?xi32>
  %ic2 = msa.kv_cache_insert %ikr into %ic[%bt, %seq, %pos] : tensor<?x1x32xbf16> into !ic, !bt, tensor<?xi32>, tensor<?xi32>
  %s = msa.index_score %iqr, %ic2[%bt, %seq, %pos] : (tensor<?x2x32xbf16>, !ic, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<2x?x?xf32>
  %b = msa.block_topk %s, %pos {block_size = 128 : i64, k = 16 : i64} : tensor<2x?x?xf32>, tensor<?xi32> -> tensor<2x?x16xi32>
  %o = msa.sparse_attention %qr, %kc2, %vc2[%bt, %seq, %pos] blocks(%b) {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>, tensor<2x?x16xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2, %ic2 : tensor<?x4x32xbf16>, !kv, !kv, !ic
}

// -----

// Non-rewrite: a block-scaled q projection (run msac-reference-pipeline first).
// CHECK-LABEL: func.func @block_scaled_weight
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @block_scaled_weight(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128x!bsq.nvfp4>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128x!bsq.nvfp4> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the k projection rounds to f32, not to the input type.
// CHECK-LABEL: func.func @activation_type
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @activation_type(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xf32>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xf32> into tensor<?x2x32xf32>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xf32>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xf32>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xf32> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: f16 activations, which the host kernel does not compute in.
// CHECK-LABEL: func.func @f16_activations
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @f16_activations(%h: tensor<?x128xf16>, %h2: tensor<?x128xf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xf16>) -> (tensor<?x4x32xf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xf16>
  %wv = msa.weight "v_proj" : tensor<64x128xf16>
  %nq = msa.weight "q_norm" : tensor<32xf16>
  %nk = msa.weight "k_norm" : tensor<32xf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xf16>, tensor<128x128xbf16> -> tensor<?x128xf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xf16> into tensor<?x4x32xf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xf16>, tensor<32xf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xf16>, tensor<64x128xf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xf16>, tensor<64x128xf16> -> tensor<?x64xf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xf16> into tensor<?x2x32xf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xf16>, !kv, !kv
}

// -----

// Non-rewrite: the new key cache is read before the v projection, the last op of the chain.
// CHECK-LABEL: func.func @user_before_chain_end
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @user_before_chain_end(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?x4x32xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %early = msa.dense_attention %qa, %kc2, %vc[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
      : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
  return %o, %kc2, %vc2 : tensor<?x4x32xbf16>, !kv, !kv
}

// -----

// Non-rewrite: the attention op is in another block (a region) than its prologue.
// CHECK-LABEL: func.func @other_block
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.kv_cache_insert
// CHECK-NOT: msa.attention_prologue
// CHECK: msa.dense_attention
// CHECK-NOT: msa.attention_prologue
!kv = !msa.paged_cache<heads = 2, page_size = 128, head_dim = 32, bf16>
!bt = !msa.block_table<page_size = 128, max_blocks = ?>
func.func @other_block(%h: tensor<?x128xbf16>, %h2: tensor<?x128xbf16>, %seq: tensor<?xi32>, %seq2: tensor<?xi32>,
    %pos: tensor<?xi32>, %pos2: tensor<?xi32>, %kc: !kv, %vc: !kv, %bt: !bt, %bt2: !bt,
    %qa: tensor<?x4x32xbf16>) -> (tensor<?xbf16>, !kv, !kv) {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %h, %c0 : tensor<?x128xbf16>
  %wq = msa.weight "q_proj" : tensor<128x128xbf16>
  %wk = msa.weight "k_proj" : tensor<64x128xbf16>
  %wv = msa.weight "v_proj" : tensor<64x128xbf16>
  %nq = msa.weight "q_norm" : tensor<32xbf16>
  %nk = msa.weight "k_norm" : tensor<32xbf16>
  %q2 = msa.linear %h, %wq : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [%t, 4, 32] : tensor<?x128xbf16> into tensor<?x4x32xbf16>
  %qn = msa.rms_norm %q3, %nq {eps = 1.0e-6 : f32} : tensor<?x4x32xbf16>, tensor<32xbf16>
  %qr = msa.rope %qn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x4x32xbf16>, tensor<?xi32>
  %k2 = msa.linear %h, %wk : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %k3 = tensor.expand_shape %k2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %kn = msa.rms_norm %k3, %nk {eps = 1.0e-6 : f32} : tensor<?x2x32xbf16>, tensor<32xbf16>
  %kr = msa.rope %kn, %pos {rotary_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x32xbf16>, tensor<?xi32>
  %kc2 = msa.kv_cache_insert %kr into %kc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %v2 = msa.linear %h, %wv : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %v3 = tensor.expand_shape %v2 [[0], [1, 2]] output_shape [%t, 2, 32] : tensor<?x64xbf16> into tensor<?x2x32xbf16>
  %vc2 = msa.kv_cache_insert %v3 into %vc[%bt, %seq, %pos] : tensor<?x2x32xbf16> into !kv, !bt, tensor<?xi32>, tensor<?xi32>
  %g = tensor.generate %t {
  ^bb0(%i: index):
    %o = msa.dense_attention %qr, %kc2, %vc2[%bt, %seq, %pos] {scale = 0.176776692 : f32}
        : (tensor<?x4x32xbf16>, !kv, !kv, !bt, tensor<?xi32>, tensor<?xi32>) -> tensor<?x4x32xbf16>
    %e = tensor.extract %o[%i, %c0, %c0] : tensor<?x4x32xbf16>
    tensor.yield %e : bf16
  } : tensor<?xbf16>
  return %g, %kc2, %vc2 : tensor<?xbf16>, !kv, !kv
}
