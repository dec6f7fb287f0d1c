//===- MSAAttributes.cpp - msa dialect attributes -------------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/MSA/IR/MSAAttributes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace msac::msa;

#include "msac/Dialect/MSA/IR/MSAEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "msac/Dialect/MSA/IR/MSAAttributes.cpp.inc"

void MSADialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "msac/Dialect/MSA/IR/MSAAttributes.cpp.inc"
      >();
}
