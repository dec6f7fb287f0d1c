//===- MSA.td - Umbrella file for the msa dialect ----------*- tablegen -*-===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_DIALECT_MSA_IR_MSA_TD
#define MSAC_DIALECT_MSA_IR_MSA_TD

include "msac/Dialect/MSA/IR/MSADialect.td"
include "msac/Dialect/MSA/IR/MSAAttributes.td"
include "msac/Dialect/MSA/IR/MSATypes.td"
include "msac/Dialect/MSA/IR/MSAOps.td"

#endif // MSAC_DIALECT_MSA_IR_MSA_TD
