//===- BSQDialect.cpp - Block-scaled quantization dialect -----------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/BSQ/IR/BSQDialect.h"
#include "msac/Dialect/BSQ/IR/BSQOps.h"
#include "msac/Dialect/BSQ/IR/BSQTypes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace msac::bsq;

#include "msac/Dialect/BSQ/IR/BSQDialect.cpp.inc"

void BSQDialect::initialize() {
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "msac/Dialect/BSQ/IR/BSQOps.cpp.inc"
      >();
}
