//===- BSQTypes.h - Block-scaled quantized element types --------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQTYPES_H
#define MSAC_DIALECT_BSQ_IR_BSQTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

#include "msac/Dialect/BSQ/IR/BSQTypeInterfaces.h.inc"

#define GET_TYPEDEF_CLASSES
#include "msac/Dialect/BSQ/IR/BSQTypes.h.inc"

namespace msac::bsq {

/// Bits of one stored payload element (4 or 8).
unsigned getStorageBitWidth(QuantizedTypeInterface type);

/// Shape of the payload when stored as bytes (`i8`/`ui8`) for a tensor of
/// logical shape `shape`: for 4-bit formats the last dimension is halved
/// (two values per byte, low nibble first). Dynamic extents stay dynamic.
/// Returns failure when a static last dimension of a 4-bit format is odd.
mlir::FailureOr<llvm::SmallVector<int64_t>>
getPackedByteShape(QuantizedTypeInterface type, llvm::ArrayRef<int64_t> shape);

/// Shape of the scale array for a tensor of logical shape `shape`
/// (see `bsq.pack`). Returns failure when a 1-D block does not divide the
/// static last dimension, or when the tensor rank is lower than the block
/// rank.
mlir::FailureOr<llvm::SmallVector<int64_t>>
getScaleShape(QuantizedTypeInterface type, llvm::ArrayRef<int64_t> shape);

/// Bytes needed to store a static tensor of logical shape `shape`: payload
/// plus scales (plus 4 bytes of global scale when the type has one). For
/// example `[128]` in NVFP4 takes 64 + 8 = 72 bytes (msa-m3-spec.md §4.4).
/// Returns failure for dynamic or inconsistent shapes.
mlir::FailureOr<int64_t> getStorageBytes(QuantizedTypeInterface type,
                                         llvm::ArrayRef<int64_t> shape);

/// Checks that a tensor of logical shape `shape` can be stored in `type`:
/// its rank covers the block and a 1-D block divides the static last
/// dimension. Returns an explanation when it cannot, `std::nullopt`
/// otherwise. Every op taking a quantized operand uses this check.
std::optional<std::string> checkQuantizedShape(QuantizedTypeInterface type,
                                               llvm::ArrayRef<int64_t> shape);

} // namespace msac::bsq

#endif // MSAC_DIALECT_BSQ_IR_BSQTYPES_H
