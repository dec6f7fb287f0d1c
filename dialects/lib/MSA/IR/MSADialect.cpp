//===- MSADialect.cpp - MiniMax sparse attention dialect ------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/MSA/IR/MSADialect.h"
#include "msac/Dialect/MSA/IR/MSAAttributes.h"
#include "msac/Dialect/MSA/IR/MSAOps.h"
#include "msac/Dialect/MSA/IR/MSATypes.h"

using namespace mlir;
using namespace msac::msa;

#include "msac/Dialect/MSA/IR/MSADialect.cpp.inc"

void MSADialect::initialize() {
  registerTypes();
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "msac/Dialect/MSA/IR/MSAOps.cpp.inc"
      >();
}
