//===- BSQ.td - Umbrella file for the bsq dialect ----------*- tablegen -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_BSQ_IR_BSQ_TD
#define MSAC_DIALECT_BSQ_IR_BSQ_TD

include "msac/Dialect/BSQ/IR/BSQDialect.td"
include "msac/Dialect/BSQ/IR/BSQTypeInterfaces.td"
include "msac/Dialect/BSQ/IR/BSQTypes.td"
include "msac/Dialect/BSQ/IR/BSQOps.td"

#endif // MSAC_DIALECT_BSQ_IR_BSQ_TD
