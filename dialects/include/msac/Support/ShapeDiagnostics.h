//===- ShapeDiagnostics.h - Shape checks shared by verifiers ----*- C++ -*-===//
//
// Part of msac.
//
// Small helpers that let op verifiers compare shapes with dynamic extents and
// print them the way MLIR prints tensor types (`3072x?x128`).
//
//===----------------------------------------------------------------------===//

#ifndef MSAC_SUPPORT_SHAPEDIAGNOSTICS_H
#define MSAC_SUPPORT_SHAPEDIAGNOSTICS_H

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include <string>

namespace msac {

/// Formats `shape` as MLIR prints it in a tensor type: `4x?x128`, or `[]`
/// for a scalar.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Formats `value` in the shortest form that reads back exactly
/// (`-0.5`, `7`, `1e-06`), for attribute values in diagnostics.
std::string formatNumber(double value);

/// True when both extents are static and differ (a dynamic extent matches
/// anything).
inline bool extentsConflict(int64_t a, int64_t b) {
  return !mlir::ShapedType::isDynamic(a) && !mlir::ShapedType::isDynamic(b) &&
         a != b;
}

/// True when the shapes have the same rank and no conflicting extents.
bool shapesCompatible(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

} // namespace msac

#endif // MSAC_SUPPORT_SHAPEDIAGNOSTICS_H
