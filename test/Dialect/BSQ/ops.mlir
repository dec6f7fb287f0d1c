// RUN: msac-opt %s | msac-opt | FileCheck %s
// RUN: msac-opt %s --mlir-print-op-generic | msac-opt | FileCheck %s

// Round trip of every bsq type and op, with the storage layouts real
// checkpoints use (ModelOpt NVFP4, compressed-tensors NVFP4, MXFP8,
// DeepSeek-style block FP8).

// CHECK-LABEL: func.func private @types
// CHECK-SAME: tensor<16x!bsq.nvfp4>
// CHECK-SAME: tensor<16x!bsq.nvfp4<global_scale>>
// CHECK-SAME: tensor<32x!bsq.mx<f8E4M3FN>>
// CHECK-SAME: tensor<32x!bsq.mx<f8E5M2>>
// CHECK-SAME: tensor<32x!bsq.mx<f4E2M1FN>>
// CHECK-SAME: tensor<8x!bsq.fp8<f8E4M3FN>>
// CHECK-SAME: tensor<8x!bsq.fp8<f8E5M2, block = [128]>>
// CHECK-SAME: tensor<8x8x!bsq.fp8<f8E4M3FN, block = [128, 128]>>
func.func private @types(tensor<16x!bsq.nvfp4>, tensor<16x!bsq.nvfp4<global_scale>>,
                         tensor<32x!bsq.mx<f8E4M3FN>>, tensor<32x!bsq.mx<f8E5M2>>,
                         tensor<32x!bsq.mx<f4E2M1FN>>, tensor<8x!bsq.fp8<f8E4M3FN>>,
                         tensor<8x!bsq.fp8<f8E5M2, block = [128]>>,
                         tensor<8x8x!bsq.fp8<f8E4M3FN, block = [128, 128]>>)

// CHECK-LABEL: func.func @pack_checkpoint_layouts
func.func @pack_checkpoint_layouts(
    %nv_data: tensor<3072x3072xui8>, %nv_scales: tensor<3072x384xf8E4M3FN>, %g: tensor<f32>,
    %ct_data: tensor<3072x3072xi8>, %ct_scales: tensor<3072x384xi8>,
    %mx_data: tensor<512x6144xf8E4M3FN>, %mx_scales: tensor<512x192xui8>,
    %mx4_data: tensor<512x3072xui8>, %mx4_scales: tensor<512x192xf8E8M0FNU>,
    %b_data: tensor<300x7168xf8E4M3FN>, %b_scales: tensor<3x56xf32>,
    %t_data: tensor<?x64xf8E5M2>, %t_scale: tensor<1xf32>,
    %e2m1: tensor<4x32xf4E2M1FN>, %e2m1_scales: tensor<4x2xf8E4M3FN>) {
  // CHECK: bsq.pack %{{.*}}, %{{.*}}, %{{.*}} : tensor<3072x3072xui8>, tensor<3072x384xf8E4M3FN>, tensor<f32> -> tensor<3072x6144x!bsq.nvfp4<global_scale>>
  %a = bsq.pack %nv_data, %nv_scales, %g : tensor<3072x3072xui8>, tensor<3072x384xf8E4M3FN>, tensor<f32> -> tensor<3072x6144x!bsq.nvfp4<global_scale>>
  // CHECK: bsq.pack %{{.*}}, %{{.*}} : tensor<3072x3072xi8>, tensor<3072x384xi8> -> tensor<3072x6144x!bsq.nvfp4>
  %b = bsq.pack %ct_data, %ct_scales : tensor<3072x3072xi8>, tensor<3072x384xi8> -> tensor<3072x6144x!bsq.nvfp4>
  // CHECK: bsq.pack %{{.*}}, %{{.*}} : tensor<512x6144xf8E4M3FN>, tensor<512x192xui8> -> tensor<512x6144x!bsq.mx<f8E4M3FN>>
  %c = bsq.pack %mx_data, %mx_scales : tensor<512x6144xf8E4M3FN>, tensor<512x192xui8> -> tensor<512x6144x!bsq.mx<f8E4M3FN>>
  // CHECK: bsq.pack %{{.*}}, %{{.*}} : tensor<512x3072xui8>, tensor<512x192xf8E8M0FNU> -> tensor<512x6144x!bsq.mx<f4E2M1FN>>
  %d = bsq.pack %mx4_data, %mx4_scales : tensor<512x3072xui8>, tensor<512x192xf8E8M0FNU> -> tensor<512x6144x!bsq.mx<f4E2M1FN>>
  // CHECK: bsq.pack %{{.*}}, %{{.*}} : tensor<300x7168xf8E4M3FN>, tensor<3x56xf32> -> tensor<300x7168x!bsq.fp8<f8E4M3FN, block = [128, 128]>>
  %e = bsq.pack %b_data, %b_scales : tensor<300x7168xf8E4M3FN>, tensor<3x56xf32> -> tensor<300x7168x!bsq.fp8<f8E4M3FN, block = [128, 128]>>
  // CHECK: bsq.pack %{{.*}}, %{{.*}} : tensor<?x64xf8E5M2>, tensor<1xf32> -> tensor<?x64x!bsq.fp8<f8E5M2>>
  %f = bsq.pack %t_data, %t_scale : tensor<?x64xf8E5M2>, tensor<1xf32> -> tensor<?x64x!bsq.fp8<f8E5M2>>
  // CHECK: bsq.pack %{{.*}}, %{{.*}} : tensor<4x32xf4E2M1FN>, tensor<4x2xf8E4M3FN> -> tensor<4x32x!bsq.nvfp4>
  %h = bsq.pack %e2m1, %e2m1_scales : tensor<4x32xf4E2M1FN>, tensor<4x2xf8E4M3FN> -> tensor<4x32x!bsq.nvfp4>
  return
}

// Stacked routed experts keep one global scale per expert.
// CHECK-LABEL: func.func @pack_stacked_experts
// CHECK: bsq.pack %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x3072x3072xui8>, tensor<128x3072x384xf8E4M3FN>, tensor<128xf32> -> tensor<128x3072x6144x!bsq.nvfp4<global_scale>>
func.func @pack_stacked_experts(%d: tensor<128x3072x3072xui8>, %s: tensor<128x3072x384xf8E4M3FN>, %g: tensor<128xf32>) {
  %w = bsq.pack %d, %s, %g : tensor<128x3072x3072xui8>, tensor<128x3072x384xf8E4M3FN>, tensor<128xf32> -> tensor<128x3072x6144x!bsq.nvfp4<global_scale>>
  return
}

// Stacked per-tensor FP8 experts keep one scale per expert.
// CHECK-LABEL: func.func @pack_stacked_per_tensor_fp8
// CHECK: bsq.pack %{{.*}}, %{{.*}} : tensor<8x256x128xf8E4M3FN>, tensor<8xf32> -> tensor<8x256x128x!bsq.fp8<f8E4M3FN>>
func.func @pack_stacked_per_tensor_fp8(%d: tensor<8x256x128xf8E4M3FN>, %s: tensor<8xf32>) {
  %w = bsq.pack %d, %s : tensor<8x256x128xf8E4M3FN>, tensor<8xf32> -> tensor<8x256x128x!bsq.fp8<f8E4M3FN>>
  return
}

// CHECK-LABEL: func.func @quantize_dequantize
func.func @quantize_dequantize(%x: tensor<?x128xbf16>, %g: tensor<f32>) {
  // CHECK: bsq.quantize %{{.*}} : tensor<?x128xbf16> -> tensor<?x128x!bsq.nvfp4>
  %q = bsq.quantize %x : tensor<?x128xbf16> -> tensor<?x128x!bsq.nvfp4>
  // CHECK: bsq.quantize %{{.*}}, %{{.*}} : tensor<?x128xbf16>, tensor<f32> -> tensor<?x128x!bsq.nvfp4<global_scale>>
  %qg = bsq.quantize %x, %g : tensor<?x128xbf16>, tensor<f32> -> tensor<?x128x!bsq.nvfp4<global_scale>>
  // CHECK: bsq.dequantize %{{.*}} : tensor<?x128x!bsq.nvfp4> -> tensor<?x128xf8E4M3FN>
  %fp8 = bsq.dequantize %q : tensor<?x128x!bsq.nvfp4> -> tensor<?x128xf8E4M3FN>
  // CHECK: bsq.dequantize %{{.*}} : tensor<?x128x!bsq.nvfp4<global_scale>> -> tensor<?x128xf32>
  %f32 = bsq.dequantize %qg : tensor<?x128x!bsq.nvfp4<global_scale>> -> tensor<?x128xf32>
  %m = bsq.quantize %x : tensor<?x128xbf16> -> tensor<?x128x!bsq.mx<f8E5M2>>
  %t = bsq.quantize %x : tensor<?x128xbf16> -> tensor<?x128x!bsq.fp8<f8E4M3FN>>
  return
}

// CHECK-LABEL: func.func @scaled_matmul
func.func @scaled_matmul(%a: tensor<?x256xbf16>, %w: tensor<64x256x!bsq.nvfp4>,
                         %aq: tensor<?x256x!bsq.mx<f8E4M3FN>>, %wq: tensor<64x256x!bsq.mx<f4E2M1FN>>) {
  // CHECK: bsq.scaled_matmul %{{.*}}, %{{.*}} : tensor<?x256xbf16>, tensor<64x256x!bsq.nvfp4> -> tensor<?x64xbf16>
  %0 = bsq.scaled_matmul %a, %w : tensor<?x256xbf16>, tensor<64x256x!bsq.nvfp4> -> tensor<?x64xbf16>
  // CHECK: bsq.scaled_matmul %{{.*}}, %{{.*}} : tensor<?x256x!bsq.mx<f8E4M3FN>>, tensor<64x256x!bsq.mx<f4E2M1FN>> -> tensor<?x64xf32>
  %1 = bsq.scaled_matmul %aq, %wq : tensor<?x256x!bsq.mx<f8E4M3FN>>, tensor<64x256x!bsq.mx<f4E2M1FN>> -> tensor<?x64xf32>
  return
}
