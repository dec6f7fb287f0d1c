//===- BSQTypes.cpp - Block-scaled quantized element types ----------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/BSQ/IR/BSQTypes.h"
#include "msac/Dialect/BSQ/IR/BSQDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace msac::bsq;

#include "msac/Dialect/BSQ/IR/BSQTypeInterfaces.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "msac/Dialect/BSQ/IR/BSQTypes.cpp.inc"

void BSQDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "msac/Dialect/BSQ/IR/BSQTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// NVFP4Type
//===----------------------------------------------------------------------===//

Type NVFP4Type::parse(AsmParser &parser) {
  bool globalScale = false;
  if (succeeded(parser.parseOptionalLess())) {
    if (parser.parseKeyword("global_scale") || parser.parseGreater())
      return {};
    globalScale = true;
  }
  return NVFP4Type::get(parser.getContext(), globalScale);
}

void NVFP4Type::print(AsmPrinter &printer) const {
  if (getGlobalScale())
    printer << "<global_scale>";
}

FloatType NVFP4Type::getStorageType() const {
  return Float4E2M1FNType::get(getContext());
}
FloatType NVFP4Type::getScaleType() const {
  return Float8E4M3FNType::get(getContext());
}
SmallVector<int64_t> NVFP4Type::getBlockShape() const { return {16}; }
bool NVFP4Type::hasGlobalScale() const { return getGlobalScale(); }

//===----------------------------------------------------------------------===//
// MXType
//===----------------------------------------------------------------------===//

LogicalResult MXType::verify(function_ref<InFlightDiagnostic()> emitError,
                             FloatType elementType) {
  if (!isa<Float8E4M3FNType, Float8E5M2Type, Float4E2M1FNType>(elementType))
    return emitError() << "MX element type must be f8E4M3FN, f8E5M2 or "
                          "f4E2M1FN, got "
                       << elementType;
  return success();
}

FloatType MXType::getStorageType() const { return getElementType(); }
FloatType MXType::getScaleType() const {
  return Float8E8M0FNUType::get(getContext());
}
SmallVector<int64_t> MXType::getBlockShape() const { return {32}; }
bool MXType::hasGlobalScale() const { return false; }

//===----------------------------------------------------------------------===//
// FP8Type
//===----------------------------------------------------------------------===//

LogicalResult FP8Type::verify(function_ref<InFlightDiagnostic()> emitError,
                              FloatType elementType, ArrayRef<int64_t> block) {
  if (!isa<Float8E4M3FNType, Float8E5M2Type>(elementType))
    return emitError() << "FP8 element type must be f8E4M3FN or f8E5M2, got "
                       << elementType;
  if (block.size() > 2)
    return emitError() << "FP8 block must have 1 or 2 extents, got "
                       << block.size();
  for (int64_t extent : block)
    if (extent <= 0)
      return emitError() << "FP8 block extents must be positive, got "
                         << extent;
  return success();
}

Type FP8Type::parse(AsmParser &parser) {
  FloatType elementType;
  SmallVector<int64_t> block;
  if (parser.parseLess() || parser.parseType(elementType))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("block") || parser.parseEqual() ||
        parser.parseLSquare())
      return {};
    if (parser.parseCommaSeparatedList([&]() -> ParseResult {
          int64_t extent;
          if (parser.parseInteger(extent))
            return failure();
          block.push_back(extent);
          return success();
        }))
      return {};
    if (parser.parseRSquare())
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<FP8Type>(parser.getContext(), elementType, block);
}

void FP8Type::print(AsmPrinter &printer) const {
  printer << "<" << getElementType();
  if (!getBlock().empty()) {
    printer << ", block = [";
    llvm::interleaveComma(getBlock(), printer);
    printer << "]";
  }
  printer << ">";
}

FloatType FP8Type::getStorageType() const { return getElementType(); }
FloatType FP8Type::getScaleType() const {
  return Float32Type::get(getContext());
}
SmallVector<int64_t> FP8Type::getBlockShape() const {
  return llvm::to_vector(getBlock());
}
bool FP8Type::hasGlobalScale() const { return false; }

//===----------------------------------------------------------------------===//
// Layout helpers
//===----------------------------------------------------------------------===//

unsigned msac::bsq::getStorageBitWidth(QuantizedTypeInterface type) {
  return type.getStorageType().getWidth();
}

FailureOr<SmallVector<int64_t>>
msac::bsq::getPackedByteShape(QuantizedTypeInterface type,
                              ArrayRef<int64_t> shape) {
  SmallVector<int64_t> result(shape);
  if (getStorageBitWidth(type) == 8 || result.empty())
    return result;
  int64_t &last = result.back();
  if (ShapedType::isDynamic(last))
    return result;
  if (last % 2 != 0)
    return failure();
  last /= 2;
  return result;
}

FailureOr<SmallVector<int64_t>>
msac::bsq::getScaleShape(QuantizedTypeInterface type, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> block = type.getBlockShape();
  if (block.empty())
    return SmallVector<int64_t>{};
  if (shape.size() < block.size())
    return failure();
  SmallVector<int64_t> result(shape);
  size_t offset = shape.size() - block.size();
  for (auto [i, extent] : llvm::enumerate(block)) {
    int64_t &dim = result[offset + i];
    if (ShapedType::isDynamic(dim))
      continue;
    // 1-D blocks must tile the last dimension exactly; 2-D tiles may be
    // partial at the edges (ceil division), as block-FP8 checkpoints store.
    if (block.size() == 1 && dim % extent != 0)
      return failure();
    dim = llvm::divideCeil(dim, extent);
  }
  return result;
}

FailureOr<int64_t> msac::bsq::getStorageBytes(QuantizedTypeInterface type,
                                              ArrayRef<int64_t> shape) {
  if (ShapedType::isDynamicShape(shape))
    return failure();
  FailureOr<SmallVector<int64_t>> packed = getPackedByteShape(type, shape);
  FailureOr<SmallVector<int64_t>> scales = getScaleShape(type, shape);
  if (failed(packed) || failed(scales))
    return failure();
  int64_t scaleBytes =
      type.getBlockShape().empty()
          ? 4
          : ShapedType::getNumElements(*scales) *
                (type.getScaleType().getWidth() / 8);
  int64_t globalBytes = type.hasGlobalScale() ? 4 : 0;
  return ShapedType::getNumElements(*packed) + scaleBytes + globalBytes;
}

std::optional<std::string>
msac::bsq::checkQuantizedShape(QuantizedTypeInterface type,
                               ArrayRef<int64_t> shape) {
  SmallVector<int64_t> block = type.getBlockShape();
  std::string message;
  llvm::raw_string_ostream os(message);
  if (shape.size() < block.size()) {
    os << "has rank " << shape.size() << " but the '" << type
       << "' block has rank " << block.size();
    return message;
  }
  if (failed(getScaleShape(type, shape))) {
    os << "last dimension " << shape.back()
       << " is not a multiple of the block size " << block.back() << " of '"
       << type << "'";
    return message;
  }
  return std::nullopt;
}
