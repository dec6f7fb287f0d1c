//===- MSAOps.h - MiniMax-M3 text model ops ---------------------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSAOPS_H
#define MSAC_DIALECT_MSA_IR_MSAOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "msac/Dialect/MSA/IR/MSAAttributes.h"
#include "msac/Dialect/MSA/IR/MSADialect.h"
#include "msac/Dialect/MSA/IR/MSATypes.h"

#define GET_OP_CLASSES
#include "msac/Dialect/MSA/IR/MSAOps.h.inc"

#endif // MSAC_DIALECT_MSA_IR_MSAOPS_H
