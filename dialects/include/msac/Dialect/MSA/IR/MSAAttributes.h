//===- MSAAttributes.h - msa dialect attributes -----------------*- C++ -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSAATTRIBUTES_H
#define MSAC_DIALECT_MSA_IR_MSAATTRIBUTES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "msac/Dialect/MSA/IR/MSADialect.h"

#include "msac/Dialect/MSA/IR/MSAEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "msac/Dialect/MSA/IR/MSAAttributes.h.inc"

#endif // MSAC_DIALECT_MSA_IR_MSAATTRIBUTES_H
