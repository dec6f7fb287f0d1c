// RUN: msac-opt %s -split-input-file -msa-lower-quantized-linear | FileCheck %s

// A projection with an NVFP4 weight becomes bsq.scaled_matmul.
// CHECK-LABEL: func.func @nvfp4_weight
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xbf16>, %[[W:.*]]: tensor<32x64x!bsq.nvfp4>)
// CHECK-NEXT: %[[Y:.*]] = bsq.scaled_matmul %[[X]], %[[W]] : tensor<?x64xbf16>, tensor<32x64x!bsq.nvfp4> -> tensor<?x32xbf16>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: msa.linear
func.func @nvfp4_weight(%x: tensor<?x64xbf16>, %w: tensor<32x64x!bsq.nvfp4>) -> tensor<?x32xbf16> {
  %y = msa.linear %x, %w : tensor<?x64xbf16>, tensor<32x64x!bsq.nvfp4> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// MXFP8 and block-FP8 weights too.
// CHECK-LABEL: func.func @mx_and_block_fp8
// CHECK: bsq.scaled_matmul %{{.*}}, %{{.*}} : tensor<4x256xbf16>, tensor<64x256x!bsq.mx<f8E4M3FN>> -> tensor<4x64xbf16>
// CHECK: bsq.scaled_matmul %{{.*}}, %{{.*}} : tensor<4x256xbf16>, tensor<64x256x!bsq.fp8<f8E4M3FN, block = [128, 128]>> -> tensor<4x64xf32>
func.func @mx_and_block_fp8(%x: tensor<4x256xbf16>, %a: tensor<64x256x!bsq.mx<f8E4M3FN>>,
                            %b: tensor<64x256x!bsq.fp8<f8E4M3FN, block = [128, 128]>>) -> (tensor<4x64xbf16>, tensor<4x64xf32>) {
  %0 = msa.linear %x, %a : tensor<4x256xbf16>, tensor<64x256x!bsq.mx<f8E4M3FN>> -> tensor<4x64xbf16>
  %1 = msa.linear %x, %b : tensor<4x256xbf16>, tensor<64x256x!bsq.fp8<f8E4M3FN, block = [128, 128]>> -> tensor<4x64xf32>
  return %0, %1 : tensor<4x64xbf16>, tensor<4x64xf32>
}

// -----

// Non-rewrite: floating-point weights (bf16, and the FP32 router weight)
// stay msa.linear.
// CHECK-LABEL: func.func @float_weights
// CHECK: msa.linear %{{.*}}, %{{.*}} : tensor<4x256xbf16>, tensor<64x256xbf16> -> tensor<4x64xbf16>
// CHECK: msa.linear %{{.*}}, %{{.*}} : tensor<4x256xbf16>, tensor<8x256xf32> -> tensor<4x8xf32>
// CHECK-NOT: bsq.scaled_matmul
func.func @float_weights(%x: tensor<4x256xbf16>, %w: tensor<64x256xbf16>, %r: tensor<8x256xf32>) -> (tensor<4x64xbf16>, tensor<4x8xf32>) {
  %0 = msa.linear %x, %w : tensor<4x256xbf16>, tensor<64x256xbf16> -> tensor<4x64xbf16>
  %1 = msa.linear %x, %r : tensor<4x256xbf16>, tensor<8x256xf32> -> tensor<4x8xf32>
  return %0, %1 : tensor<4x64xbf16>, tensor<4x8xf32>
}
