//===- MSATypes.h - Paged KV cache and block table types --------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSATYPES_H
#define MSAC_DIALECT_MSA_IR_MSATYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "msac/Dialect/MSA/IR/MSATypes.h.inc"

#endif // MSAC_DIALECT_MSA_IR_MSATYPES_H
