//===- BSQOps.h - Block-scaled quantization ops -----------------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQOPS_H
#define MSAC_DIALECT_BSQ_IR_BSQOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "msac/Dialect/BSQ/IR/BSQDialect.h"
#include "msac/Dialect/BSQ/IR/BSQTypes.h"

#define GET_OP_CLASSES
#include "msac/Dialect/BSQ/IR/BSQOps.h.inc"

#endif // MSAC_DIALECT_BSQ_IR_BSQOPS_H
