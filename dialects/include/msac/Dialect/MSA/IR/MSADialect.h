//===- MSADialect.h - MiniMax sparse attention dialect ----------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSADIALECT_H
#define MSAC_DIALECT_MSA_IR_MSADIALECT_H

#include "mlir/IR/Dialect.h"
#include "msac/Dialect/BSQ/IR/BSQDialect.h"

#include "msac/Dialect/MSA/IR/MSADialect.h.inc"

#endif // MSAC_DIALECT_MSA_IR_MSADIALECT_H
