//===- BSQDialect.h - Block-scaled quantization dialect ---------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQDIALECT_H
#define MSAC_DIALECT_BSQ_IR_BSQDIALECT_H

#include "mlir/IR/Dialect.h"

#include "msac/Dialect/BSQ/IR/BSQDialect.h.inc"

#endif // MSAC_DIALECT_BSQ_IR_BSQDIALECT_H
