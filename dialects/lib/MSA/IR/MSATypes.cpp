//===- MSATypes.cpp - Paged KV cache and block table types ----------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/MSA/IR/MSATypes.h"
#include "msac/Dialect/BSQ/IR/BSQTypes.h"
#include "msac/Dialect/MSA/IR/MSADialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace msac;
using namespace msac::msa;

#define GET_TYPEDEF_CLASSES
#include "msac/Dialect/MSA/IR/MSATypes.cpp.inc"

void MSADialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "msac/Dialect/MSA/IR/MSATypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// PagedCacheType
//===----------------------------------------------------------------------===//

LogicalResult
PagedCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t heads, int64_t pageSize, int64_t headDim,
                       Type elementType) {
  if (heads <= 0 || pageSize <= 0 || headDim <= 0)
    return emitError() << "paged cache extents must be positive, got heads = "
                       << heads << ", page_size = " << pageSize
                       << ", head_dim = " << headDim;
  if (isa<BFloat16Type, Float16Type, Float32Type, Float8E4M3FNType,
          Float8E5M2Type>(elementType))
    return success();
  if (auto nvfp4 = dyn_cast<bsq::NVFP4Type>(elementType)) {
    if (headDim % 16 != 0)
      return emitError() << "an NVFP4 paged cache needs head_dim to be a "
                            "multiple of 16 (one E4M3 scale per 16 values), "
                            "got "
                         << headDim;
    return success();
  }
  return emitError() << "paged cache element type must be bf16, f16, f32, "
                        "f8E4M3FN, f8E5M2 or !bsq.nvfp4, got "
                     << elementType;
}

int64_t PagedCacheType::getBytesPerToken() const {
  Type element = getElementType();
  if (auto quantized = dyn_cast<bsq::QuantizedTypeInterface>(element))
    return getHeads() * *bsq::getStorageBytes(quantized, {getHeadDim()});
  return getHeads() * getHeadDim() * element.getIntOrFloatBitWidth() / 8;
}

//===----------------------------------------------------------------------===//
// BlockTableType
//===----------------------------------------------------------------------===//

LogicalResult
BlockTableType::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t pageSize, int64_t maxBlocks) {
  if (pageSize <= 0)
    return emitError() << "block table page_size must be positive, got "
                       << pageSize;
  if (!ShapedType::isDynamic(maxBlocks) && maxBlocks <= 0)
    return emitError() << "block table max_blocks must be positive or ?, got "
                       << maxBlocks;
  return success();
}

Type BlockTableType::parse(AsmParser &parser) {
  int64_t pageSize;
  int64_t maxBlocks = ShapedType::kDynamic;
  if (parser.parseLess() || parser.parseKeyword("page_size") ||
      parser.parseEqual() || parser.parseInteger(pageSize) ||
      parser.parseComma() || parser.parseKeyword("max_blocks") ||
      parser.parseEqual())
    return {};
  if (failed(parser.parseOptionalQuestion()) &&
      parser.parseInteger(maxBlocks))
    return {};
  if (parser.parseGreater())
    return {};
  return parser.getChecked<BlockTableType>(parser.getContext(), pageSize,
                                           maxBlocks);
}

void BlockTableType::print(AsmPrinter &printer) const {
  printer << "<page_size = " << getPageSize() << ", max_blocks = ";
  if (ShapedType::isDynamic(getMaxBlocks()))
    printer << "?";
  else
    printer << getMaxBlocks();
  printer << ">";
}
