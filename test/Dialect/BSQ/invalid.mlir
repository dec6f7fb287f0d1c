// RUN: msac-opt %s -split-input-file -verify-diagnostics

// Every verifier error of the bsq dialect, one case per block.

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// expected-error @+1 {{MX element type must be f8E4M3FN, f8E5M2 or f4E2M1FN, got 'bf16'}}
func.func private @mx_bf16(tensor<32x!bsq.mx<bf16>>)

// -----

// expected-error @+1 {{FP8 element type must be f8E4M3FN or f8E5M2, got 'f8E4M3FNUZ'}}
func.func private @fp8_fnuz(tensor<8x!bsq.fp8<f8E4M3FNUZ>>)

// -----

// expected-error @+1 {{FP8 block must have 1 or 2 extents, got 3}}
func.func private @fp8_block_rank(tensor<8x!bsq.fp8<f8E4M3FN, block = [1, 2, 3]>>)

// -----

// expected-error @+1 {{FP8 block extents must be positive, got 0}}
func.func private @fp8_block_zero(tensor<8x!bsq.fp8<f8E4M3FN, block = [128, 0]>>)

//===----------------------------------------------------------------------===//
// bsq.pack
//===----------------------------------------------------------------------===//

// -----

func.func @pack_block(%d: tensor<4x50xui8>, %s: tensor<4x6xf8E4M3FN>) {
  // expected-error @+1 {{result last dimension 100 is not a multiple of the block size 16 of '!bsq.nvfp4'}}
  %q = bsq.pack %d, %s : tensor<4x50xui8>, tensor<4x6xf8E4M3FN> -> tensor<4x100x!bsq.nvfp4>
  return
}

// -----

func.func @pack_block_rank(%d: tensor<128xf8E4M3FN>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{result has rank 1 but the '!bsq.fp8<f8E4M3FN, block = [128, 128]>' block has rank 2}}
  %q = bsq.pack %d, %s : tensor<128xf8E4M3FN>, tensor<1x1xf32> -> tensor<128x!bsq.fp8<f8E4M3FN, block = [128, 128]>>
  return
}

// -----

func.func @pack_data_element(%d: tensor<4x32xbf16>, %s: tensor<4x2xf8E4M3FN>) {
  // expected-error @+1 {{data element type must be 'f4E2M1FN' or an 8-bit integer holding raw bytes, got 'bf16'}}
  %q = bsq.pack %d, %s : tensor<4x32xbf16>, tensor<4x2xf8E4M3FN> -> tensor<4x32x!bsq.nvfp4>
  return
}

// -----

func.func @pack_data_shape(%d: tensor<4x32xui8>, %s: tensor<4x2xf8E4M3FN>) {
  // expected-error @+1 {{data shape 4x32 does not match the expected 4x16 for logical shape 4x32 of '!bsq.nvfp4'}}
  %q = bsq.pack %d, %s : tensor<4x32xui8>, tensor<4x2xf8E4M3FN> -> tensor<4x32x!bsq.nvfp4>
  return
}

// -----

func.func @pack_data_signed(%d: tensor<4x16xsi8>, %s: tensor<4x2xf8E4M3FN>) {
  // expected-error @+1 {{data element type must be 'f4E2M1FN' or an 8-bit integer holding raw bytes, got 'si8'}}
  %q = bsq.pack %d, %s : tensor<4x16xsi8>, tensor<4x2xf8E4M3FN> -> tensor<4x32x!bsq.nvfp4>
  return
}

// -----

func.func @pack_scale_element(%d: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf32>) {
  // expected-error @+1 {{scale element type must be 'f8E8M0FNU' or an 8-bit integer, got 'f32'}}
  %q = bsq.pack %d, %s : tensor<4x64xf8E4M3FN>, tensor<4x2xf32> -> tensor<4x64x!bsq.mx<f8E4M3FN>>
  return
}

// -----

func.func @pack_scale_bytes_for_f32(%d: tensor<4x64xf8E4M3FN>, %s: tensor<1xui8>) {
  // expected-error @+1 {{scale element type must be 'f32', got 'ui8'}}
  %q = bsq.pack %d, %s : tensor<4x64xf8E4M3FN>, tensor<1xui8> -> tensor<4x64x!bsq.fp8<f8E4M3FN>>
  return
}

// -----

func.func @pack_per_tensor_shape(%d: tensor<4x64xf8E4M3FN>, %s: tensor<4xf32>) {
  // expected-error @+1 {{per-tensor scale must have shape [] or 1, got 4}}
  %q = bsq.pack %d, %s : tensor<4x64xf8E4M3FN>, tensor<4xf32> -> tensor<4x64x!bsq.fp8<f8E4M3FN>>
  return
}

// -----

func.func @pack_per_tensor_stack_shape(%d: tensor<3x4x64xf8E4M3FN>, %s: tensor<4xf32>) {
  // expected-error @+1 {{per-tensor scale must have shape [], 1 or the matrix stack shape 3, got 4}}
  %q = bsq.pack %d, %s : tensor<3x4x64xf8E4M3FN>, tensor<4xf32> -> tensor<3x4x64x!bsq.fp8<f8E4M3FN>>
  return
}

// -----

func.func @pack_scale_shape(%d: tensor<4x16xui8>, %s: tensor<4x4xf8E4M3FN>) {
  // expected-error @+1 {{scale shape 4x4 does not match the expected 4x2 for logical shape 4x32 of '!bsq.nvfp4'}}
  %q = bsq.pack %d, %s : tensor<4x16xui8>, tensor<4x4xf8E4M3FN> -> tensor<4x32x!bsq.nvfp4>
  return
}

// -----

func.func @pack_missing_global(%d: tensor<4x16xui8>, %s: tensor<4x2xf8E4M3FN>) {
  // expected-error @+1 {{'!bsq.nvfp4<global_scale>' needs a global_scale operand}}
  %q = bsq.pack %d, %s : tensor<4x16xui8>, tensor<4x2xf8E4M3FN> -> tensor<4x32x!bsq.nvfp4<global_scale>>
  return
}

// -----

func.func @pack_extra_global(%d: tensor<4x16xui8>, %s: tensor<4x2xf8E4M3FN>, %g: tensor<f32>) {
  // expected-error @+1 {{global_scale given but '!bsq.nvfp4' has no global scale}}
  %q = bsq.pack %d, %s, %g : tensor<4x16xui8>, tensor<4x2xf8E4M3FN>, tensor<f32> -> tensor<4x32x!bsq.nvfp4>
  return
}

// -----

func.func @pack_global_shape(%d: tensor<8x4x16xui8>, %s: tensor<8x4x2xf8E4M3FN>, %g: tensor<4xf32>) {
  // expected-error @+1 {{global_scale shape 4 must be [] or the matrix stack shape 8}}
  %q = bsq.pack %d, %s, %g : tensor<8x4x16xui8>, tensor<8x4x2xf8E4M3FN>, tensor<4xf32> -> tensor<8x4x32x!bsq.nvfp4<global_scale>>
  return
}

// -----

func.func @pack_float_result(%d: tensor<4x16xui8>, %s: tensor<4x2xf8E4M3FN>) {
  // expected-error @+1 {{result #0 must be ranked tensor of block-scaled quantized element type values}}
  %q = bsq.pack %d, %s : tensor<4x16xui8>, tensor<4x2xf8E4M3FN> -> tensor<4x32xbf16>
  return
}

//===----------------------------------------------------------------------===//
// bsq.quantize and bsq.dequantize
//===----------------------------------------------------------------------===//

// -----

func.func @quantize_shape(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{input shape 4x64 does not match result shape 4x32}}
  %q = bsq.quantize %x : tensor<4x64xbf16> -> tensor<4x32x!bsq.nvfp4>
  return
}

// -----

func.func @quantize_block(%x: tensor<4x48xbf16>) {
  // expected-error @+1 {{result last dimension 48 is not a multiple of the block size 32 of '!bsq.mx<f8E4M3FN>'}}
  %q = bsq.quantize %x : tensor<4x48xbf16> -> tensor<4x48x!bsq.mx<f8E4M3FN>>
  return
}

// -----

func.func @quantize_global(%x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'!bsq.nvfp4<global_scale>' needs a global_scale operand}}
  %q = bsq.quantize %x : tensor<4x64xbf16> -> tensor<4x64x!bsq.nvfp4<global_scale>>
  return
}

// -----

func.func @dequantize_shape(%q: tensor<4x64x!bsq.nvfp4>) {
  // expected-error @+1 {{input shape 4x64 does not match result shape 4x32}}
  %x = bsq.dequantize %q : tensor<4x64x!bsq.nvfp4> -> tensor<4x32xbf16>
  return
}

//===----------------------------------------------------------------------===//
// bsq.scaled_matmul
//===----------------------------------------------------------------------===//

// -----

func.func @matmul_float(%a: tensor<4x64xbf16>, %b: tensor<8x64xbf16>) {
  // expected-error @+1 {{needs at least one quantized operand; use msa.linear for two floating-point operands}}
  %c = bsq.scaled_matmul %a, %b : tensor<4x64xbf16>, tensor<8x64xbf16> -> tensor<4x8xbf16>
  return
}

// -----

func.func @matmul_int(%a: tensor<4x64xi8>, %b: tensor<8x64x!bsq.nvfp4>) {
  // expected-error @+1 {{lhs element type must be a float or a quantized type, got 'i8'}}
  %c = bsq.scaled_matmul %a, %b : tensor<4x64xi8>, tensor<8x64x!bsq.nvfp4> -> tensor<4x8xbf16>
  return
}

// -----

func.func @matmul_block(%a: tensor<4x40xbf16>, %b: tensor<8x40x!bsq.nvfp4>) {
  // expected-error @+1 {{rhs last dimension 40 is not a multiple of the block size 16 of '!bsq.nvfp4'}}
  %c = bsq.scaled_matmul %a, %b : tensor<4x40xbf16>, tensor<8x40x!bsq.nvfp4> -> tensor<4x8xbf16>
  return
}

// -----

func.func @matmul_k(%a: tensor<4x32xbf16>, %b: tensor<8x64x!bsq.nvfp4>) {
  // expected-error @+1 {{contraction sizes differ: lhs has K = 32, rhs has K = 64}}
  %c = bsq.scaled_matmul %a, %b : tensor<4x32xbf16>, tensor<8x64x!bsq.nvfp4> -> tensor<4x8xbf16>
  return
}

// -----

func.func @matmul_result(%a: tensor<4x64xbf16>, %b: tensor<8x64x!bsq.nvfp4>) {
  // expected-error @+1 {{result shape 4x4 does not match [M, N] = 4x8}}
  %c = bsq.scaled_matmul %a, %b : tensor<4x64xbf16>, tensor<8x64x!bsq.nvfp4> -> tensor<4x4xbf16>
  return
}

// -----

func.func @matmul_blocks_differ(%a: tensor<4x64x!bsq.mx<f8E4M3FN>>, %b: tensor<8x64x!bsq.nvfp4>) {
  // expected-error @+1 {{K block sizes differ: 32 ('!bsq.mx<f8E4M3FN>') vs 16 ('!bsq.nvfp4')}}
  %c = bsq.scaled_matmul %a, %b : tensor<4x64x!bsq.mx<f8E4M3FN>>, tensor<8x64x!bsq.nvfp4> -> tensor<4x8xf32>
  return
}

// -----

func.func @dequantize_block(%q: tensor<64x15x!bsq.nvfp4>) {
  // expected-error @+1 {{input last dimension 15 is not a multiple of the block size 16 of '!bsq.nvfp4'}}
  %x = bsq.dequantize %q : tensor<64x15x!bsq.nvfp4> -> tensor<64x15xf32>
  return
}
