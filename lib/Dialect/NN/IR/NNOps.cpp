//===- NNOps.cpp - nn op verifiers and folders ------------------*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace accrue::nn;

#define GET_OP_CLASSES
#include "accrue/Dialect/NN/IR/NNOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename OpTy>
static LogicalResult verifySameOperandElementTypes(OpTy op, Value lhs,
                                                   Value rhs) {
  if (getElementTypeOrSelf(lhs.getType()) !=
      getElementTypeOrSelf(rhs.getType()))
    return op.emitOpError("operands have different element types: ")
           << lhs.getType() << " and " << rhs.getType();
  return success();
}

#define NN_VERIFY_SAME_ELEMENT_TYPES(OP)                                       \
  LogicalResult OP::verify() {                                                 \
    return verifySameOperandElementTypes(*this, getLhs(), getRhs());           \
  }
NN_VERIFY_SAME_ELEMENT_TYPES(AddOp)
NN_VERIFY_SAME_ELEMENT_TYPES(SubOp)
NN_VERIFY_SAME_ELEMENT_TYPES(MulOp)
NN_VERIFY_SAME_ELEMENT_TYPES(DivOp)
NN_VERIFY_SAME_ELEMENT_TYPES(PowOp)
NN_VERIFY_SAME_ELEMENT_TYPES(GreaterOp)
#undef NN_VERIFY_SAME_ELEMENT_TYPES

LogicalResult WhereOp::verify() {
  return verifySameOperandElementTypes(*this, getX(), getY());
}

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename OpTy> static LogicalResult verifyReduction(OpTy op) {
  if (op.getAxes().empty())
    return op.emitOpError("needs at least one axis (the importer resolves "
                          "ONNX's empty axes)");
  return success();
}

LogicalResult ReduceSumOp::verify() { return verifyReduction(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduction(*this); }

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  if (!in.hasStaticShape() || !out.hasStaticShape() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ") << in << " to " << out;
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(cast<ShapedType>(getType()));
  // reshape(reshape(x)) -> reshape(x).
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

LogicalResult ExpandOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(in.getShape(), out.getShape());
  if (failed(shape) || ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ") << in << " to " << out;
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    if (dense.isSplat())
      return SplatElementsAttr::get(cast<ShapedType>(getType()),
                                    dense.getSplatValue<Attribute>());
  return {};
}
