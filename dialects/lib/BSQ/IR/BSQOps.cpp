//===- BSQOps.cpp - Block-scaled quantization ops -------------------------===//
//
// Part of msac.
//
//===----------------------------------------------------------------------===//

#include "msac/Dialect/BSQ/IR/BSQOps.h"
#include "msac/Support/ShapeDiagnostics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace msac;
using namespace msac::bsq;

static QuantizedTypeInterface getQuantizedElement(Type type) {
  return dyn_cast<QuantizedTypeInterface>(
      cast<RankedTensorType>(type).getElementType());
}

/// True for the 8-bit integer types checkpoints use to hold raw bytes.
static bool isByteType(Type type) {
  auto intType = dyn_cast<IntegerType>(type);
  return intType && intType.getWidth() == 8 && !intType.isSigned();
}

/// Checks that a tensor of logical `shape` can be stored in `qt`.
static LogicalResult verifyBlocking(Operation *op, QuantizedTypeInterface qt,
                                    ArrayRef<int64_t> shape, StringRef what) {
  if (std::optional<std::string> problem = checkQuantizedShape(qt, shape))
    return op->emitOpError() << what << " " << *problem;
  // Every 4-bit format has an even 1-D block, so an exact tiling also
  // splits the last dimension into whole bytes.
  assert(succeeded(getPackedByteShape(qt, shape)) &&
         "block tiling implies whole bytes");
  return success();
}

/// A global scale is present exactly when the type has one, and is either a
/// scalar or one value per matrix of the stack `shape[0 .. rank-2)`.
static LogicalResult verifyGlobalScale(Operation *op, QuantizedTypeInterface qt,
                                       Value globalScale,
                                       ArrayRef<int64_t> shape) {
  if (qt.hasGlobalScale() && !globalScale)
    return op->emitOpError() << qt << " needs a global_scale operand";
  if (!qt.hasGlobalScale() && globalScale)
    return op->emitOpError()
           << "global_scale given but " << qt << " has no global scale";
  if (!globalScale)
    return success();
  ArrayRef<int64_t> scaleShape =
      cast<RankedTensorType>(globalScale.getType()).getShape();
  ArrayRef<int64_t> stack =
      shape.size() >= 2 ? shape.drop_back(2) : ArrayRef<int64_t>();
  if (scaleShape.empty() || shapesCompatible(scaleShape, stack))
    return success();
  return op->emitOpError() << "global_scale shape " << formatShape(scaleShape)
                           << " must be [] or the matrix stack shape "
                           << formatShape(stack);
}

//===----------------------------------------------------------------------===//
// PackOp
//===----------------------------------------------------------------------===//

LogicalResult PackOp::verify() {
  auto resultType = getResult().getType();
  QuantizedTypeInterface qt = getQuantizedElement(resultType);
  ArrayRef<int64_t> shape = resultType.getShape();
  if (failed(verifyBlocking(*this, qt, shape, "result")))
    return failure();

  // Payload: the storage type at the logical shape, or raw bytes.
  auto dataType = getData().getType();
  Type dataElement = dataType.getElementType();
  SmallVector<int64_t> expectedData;
  if (dataElement == qt.getStorageType()) {
    expectedData.assign(shape.begin(), shape.end());
  } else if (isByteType(dataElement)) {
    expectedData = *getPackedByteShape(qt, shape);
  } else {
    return emitOpError() << "data element type must be " << qt.getStorageType()
                         << " or an 8-bit integer holding raw bytes, got "
                         << dataElement;
  }
  if (!shapesCompatible(dataType.getShape(), expectedData))
    return emitOpError() << "data shape " << formatShape(dataType.getShape())
                         << " does not match the expected "
                         << formatShape(expectedData) << " for logical shape "
                         << formatShape(shape) << " of " << qt;

  // Scales.
  auto scaleType = getScales().getType();
  Type scaleElement = scaleType.getElementType();
  bool byteScalesAllowed = qt.getScaleType().getWidth() == 8;
  if (scaleElement != qt.getScaleType() &&
      !(byteScalesAllowed && isByteType(scaleElement)))
    return emitOpError() << "scale element type must be " << qt.getScaleType()
                         << (byteScalesAllowed ? " or an 8-bit integer" : "")
                         << ", got " << scaleElement;
  if (qt.getBlockShape().empty()) {
    // One scale for the tensor, or one per matrix of a stack ([E] for
    // stacked experts, each stored with its own per-tensor scale).
    ArrayRef<int64_t> s = scaleType.getShape();
    ArrayRef<int64_t> stack =
        shape.size() > 2 ? shape.drop_back(2) : ArrayRef<int64_t>();
    if (!(s.empty() || (s.size() == 1 && !extentsConflict(s[0], 1)) ||
          (!stack.empty() && shapesCompatible(s, stack))))
      return emitOpError() << "per-tensor scale must have shape "
                           << (stack.empty() ? std::string("[] or 1")
                                             : "[], 1 or the matrix stack "
                                               "shape " +
                                                   formatShape(stack))
                           << ", got " << formatShape(s);
  } else {
    SmallVector<int64_t> expectedScales = *getScaleShape(qt, shape);
    if (!shapesCompatible(scaleType.getShape(), expectedScales))
      return emitOpError() << "scale shape "
                           << formatShape(scaleType.getShape())
                           << " does not match the expected "
                           << formatShape(expectedScales)
                           << " for logical shape " << formatShape(shape)
                           << " of " << qt;
  }
  return verifyGlobalScale(*this, qt, getGlobalScale(), shape);
}

//===----------------------------------------------------------------------===//
// QuantizeOp
//===----------------------------------------------------------------------===//

LogicalResult QuantizeOp::verify() {
  auto resultType = getResult().getType();
  QuantizedTypeInterface qt = getQuantizedElement(resultType);
  ArrayRef<int64_t> inputShape = getInput().getType().getShape();
  if (!shapesCompatible(inputShape, resultType.getShape()))
    return emitOpError() << "input shape " << formatShape(inputShape)
                         << " does not match result shape "
                         << formatShape(resultType.getShape());
  if (failed(verifyBlocking(*this, qt, resultType.getShape(), "result")))
    return failure();
  return verifyGlobalScale(*this, qt, getGlobalScale(), resultType.getShape());
}

//===----------------------------------------------------------------------===//
// DequantizeOp
//===----------------------------------------------------------------------===//

LogicalResult DequantizeOp::verify() {
  ArrayRef<int64_t> inputShape = getInput().getType().getShape();
  if (failed(verifyBlocking(*this, getQuantizedElement(getInput().getType()),
                            inputShape, "input")))
    return failure();
  ArrayRef<int64_t> resultShape = getResult().getType().getShape();
  if (!shapesCompatible(inputShape, resultShape))
    return emitOpError() << "input shape " << formatShape(inputShape)
                         << " does not match result shape "
                         << formatShape(resultShape);
  return success();
}

//===----------------------------------------------------------------------===//
// ScaledMatmulOp
//===----------------------------------------------------------------------===//

LogicalResult ScaledMatmulOp::verify() {
  auto lhsType = cast<RankedTensorType>(getLhs().getType());
  auto rhsType = cast<RankedTensorType>(getRhs().getType());
  auto resultType = cast<RankedTensorType>(getResult().getType());
  QuantizedTypeInterface lhsQ = getQuantizedElement(lhsType);
  QuantizedTypeInterface rhsQ = getQuantizedElement(rhsType);
  if (!lhsQ && !rhsQ)
    return emitOpError() << "needs at least one quantized operand; use "
                            "msa.linear for two floating-point operands";
  for (auto [name, type, q] :
       {std::tuple{"lhs", lhsType, lhsQ}, std::tuple{"rhs", rhsType, rhsQ}}) {
    if (!q && !isa<FloatType>(type.getElementType()))
      return emitOpError() << name << " element type must be a float or a "
                           << "quantized type, got " << type.getElementType();
    if (q && failed(verifyBlocking(*this, q, type.getShape(), name)))
      return failure();
  }
  int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1);
  int64_t n = rhsType.getDimSize(0), rhsK = rhsType.getDimSize(1);
  if (extentsConflict(k, rhsK))
    return emitOpError() << "contraction sizes differ: lhs has K = " << k
                         << ", rhs has K = " << rhsK;
  if (!shapesCompatible(resultType.getShape(), {m, n}))
    return emitOpError() << "result shape "
                         << formatShape(resultType.getShape())
                         << " does not match [M, N] = " << formatShape({m, n});
  if (lhsQ && rhsQ) {
    SmallVector<int64_t> lb = lhsQ.getBlockShape(), rb = rhsQ.getBlockShape();
    if (lb.size() == 1 && rb.size() == 1 && lb[0] != rb[0])
      return emitOpError() << "K block sizes differ: " << lb[0] << " (" << lhsQ
                           << ") vs " << rb[0] << " (" << rhsQ << ")";
  }
  return success();
}

#define GET_OP_CLASSES
#include "msac/Dialect/BSQ/IR/BSQOps.cpp.inc"
