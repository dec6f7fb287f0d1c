// RUN: msac-opt %s -split-input-file -bsq-expand-scaled-matmul | FileCheck %s

// The quantized weight is dequantized to FP32 (exact) and the product
// becomes msa.linear with the original result type.
// CHECK-LABEL: func.func @weight_only
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xbf16>, %[[W:.*]]: tensor<32x64x!bsq.nvfp4<global_scale>>)
// CHECK-NEXT: %[[D:.*]] = bsq.dequantize %[[W]] : tensor<32x64x!bsq.nvfp4<global_scale>> -> tensor<32x64xf32>
// CHECK-NEXT: %[[Y:.*]] = msa.linear %[[X]], %[[D]] : tensor<?x64xbf16>, tensor<32x64xf32> -> tensor<?x32xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @weight_only(%x: tensor<?x64xbf16>, %w: tensor<32x64x!bsq.nvfp4<global_scale>>) -> tensor<?x32xbf16> {
  %y = bsq.scaled_matmul %x, %w : tensor<?x64xbf16>, tensor<32x64x!bsq.nvfp4<global_scale>> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// Both operands quantized: both are dequantized.
// CHECK-LABEL: func.func @both_quantized
// CHECK-DAG: %[[A:.*]] = bsq.dequantize %{{.*}} : tensor<4x64x!bsq.mx<f8E4M3FN>> -> tensor<4x64xf32>
// CHECK-DAG: %[[B:.*]] = bsq.dequantize %{{.*}} : tensor<8x64x!bsq.mx<f4E2M1FN>> -> tensor<8x64xf32>
// CHECK: msa.linear %[[A]], %[[B]] : tensor<4x64xf32>, tensor<8x64xf32> -> tensor<4x8xf32>
// CHECK-NOT: bsq.scaled_matmul
func.func @both_quantized(%a: tensor<4x64x!bsq.mx<f8E4M3FN>>, %b: tensor<8x64x!bsq.mx<f4E2M1FN>>) -> tensor<4x8xf32> {
  %c = bsq.scaled_matmul %a, %b : tensor<4x64x!bsq.mx<f8E4M3FN>>, tensor<8x64x!bsq.mx<f4E2M1FN>> -> tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

// A quantized activation with a float weight.
// CHECK-LABEL: func.func @activation_only
// CHECK: %[[A:.*]] = bsq.dequantize %{{.*}} : tensor<4x128x!bsq.fp8<f8E4M3FN, block = [128]>> -> tensor<4x128xf32>
// CHECK: msa.linear %[[A]], %{{.*}} : tensor<4x128xf32>, tensor<8x128xbf16> -> tensor<4x8xbf16>
func.func @activation_only(%a: tensor<4x128x!bsq.fp8<f8E4M3FN, block = [128]>>, %w: tensor<8x128xbf16>) -> tensor<4x8xbf16> {
  %c = bsq.scaled_matmul %a, %w : tensor<4x128x!bsq.fp8<f8E4M3FN, block = [128]>>, tensor<8x128xbf16> -> tensor<4x8xbf16>
  return %c : tensor<4x8xbf16>
}
