//===- BSQTypeInterfaces.td - Quantized element type interface -*- tablegen -*-===//
//
// Part of msac. The interface every block-scaled element type implements.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQTYPEINTERFACES_TD
#define MSAC_DIALECT_BSQ_IR_BSQTYPEINTERFACES_TD

include "mlir/IR/OpBase.td"

def BSQ_QuantizedTypeInterface : TypeInterface<"QuantizedTypeInterface"> {
  let cppNamespace = "::msac::bsq";
  let description = [{
    A block-scaled element type. The logical value of an element is
    `storage * scale` (times the global scale when there is one), where
    `scale` is shared by all elements of one block of the trailing
    dimensions (see `getBlockShape`).
  }];
  let methods = [
    InterfaceMethod<
      "Element type of the stored payload: f4E2M1FN, f8E4M3FN or f8E5M2.",
      "::mlir::FloatType", "getStorageType">,
    InterfaceMethod<
      "Element type of the per-block scale: f8E4M3FN, f8E8M0FNU or f32.",
      "::mlir::FloatType", "getScaleType">,
    InterfaceMethod<[{
        Block extents over the trailing logical dimensions, innermost last:
        `{16}` for NVFP4, `{32}` for MX types, `{128, 128}` for 2-D FP8
        tiles, and empty when one scale covers the whole tensor.
      }],
      "::llvm::SmallVector<int64_t>", "getBlockShape">,
    InterfaceMethod<
      "True when an FP32 per-tensor scale multiplies every block scale.",
      "bool", "hasGlobalScale">,
  ];
}

#endif // MSAC_DIALECT_BSQ_IR_BSQTYPEINTERFACES_TD
