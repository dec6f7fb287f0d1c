//===- ShapeDiagnostics.cpp - Shape checks shared by verifiers ------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Support/ShapeDiagnostics.h"

#include "llvm/ADT/STLExtras.h"

#include <charconv>

using namespace mlir;

std::string msac::formatShape(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "[]";
  std::string result;
  for (auto [i, extent] : llvm::enumerate(shape)) {
    if (i != 0)
      result += 'x';
    result += ShapedType::isDynamic(extent) ? "?" : std::to_string(extent);
  }
  return result;
}

bool msac::shapesCompatible(llvm::ArrayRef<int64_t> a,
                            llvm::ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip_equal(a, b))
    if (extentsConflict(x, y))
      return false;
  return true;
}

std::string msac::formatNumber(double value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}
