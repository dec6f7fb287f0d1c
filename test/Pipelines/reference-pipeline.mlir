// RUN: msac-opt %s -msac-reference-pipeline | FileCheck %s

// The named reference pipeline takes a checkpoint-style quantized projection
// (payload and scales read by name, packed, used by msa.linear) to FP32
// dequantization plus msa.linear; CSE merges the two identical weight reads.

// CHECK-LABEL: func.func @proj
// CHECK:      %[[DATA:.*]] = msa.weight "w.weight" : tensor<32x32xui8>
// CHECK-NEXT: %[[SCALES:.*]] = msa.weight "w.weight_scale" : tensor<32x4xf8E4M3FN>
// CHECK-NEXT: %[[Q:.*]] = bsq.pack %[[DATA]], %[[SCALES]]
// CHECK-NEXT: %[[D:.*]] = bsq.dequantize %[[Q]] : tensor<32x64x!bsq.nvfp4> -> tensor<32x64xf32>
// CHECK-NEXT: %[[Y:.*]] = msa.linear %{{.*}}, %[[D]] : tensor<?x64xbf16>, tensor<32x64xf32> -> tensor<?x32xbf16>
// CHECK-NEXT: return %[[Y]], %[[Y]]
// CHECK-NOT: bsq.scaled_matmul
func.func @proj(%x: tensor<?x64xbf16>) -> (tensor<?x32xbf16>, tensor<?x32xbf16>) {
  %data = msa.weight "w.weight" : tensor<32x32xui8>
  %scales = msa.weight "w.weight_scale" : tensor<32x4xf8E4M3FN>
  %w = bsq.pack %data, %scales : tensor<32x32xui8>, tensor<32x4xf8E4M3FN> -> tensor<32x64x!bsq.nvfp4>
  %y = msa.linear %x, %w : tensor<?x64xbf16>, tensor<32x64x!bsq.nvfp4> -> tensor<?x32xbf16>
  %data2 = msa.weight "w.weight" : tensor<32x32xui8>
  %scales2 = msa.weight "w.weight_scale" : tensor<32x4xf8E4M3FN>
  %w2 = bsq.pack %data2, %scales2 : tensor<32x32xui8>, tensor<32x4xf8E4M3FN> -> tensor<32x64x!bsq.nvfp4>
  %y2 = msa.linear %x, %w2 : tensor<?x64xbf16>, tensor<32x64x!bsq.nvfp4> -> tensor<?x32xbf16>
  return %y, %y2 : tensor<?x32xbf16>, tensor<?x32xbf16>
}
