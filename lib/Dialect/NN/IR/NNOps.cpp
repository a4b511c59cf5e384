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
NN_VERIFY_SAME_ELEMENT_TYPES(LessOp)
NN_VERIFY_SAME_ELEMENT_TYPES(EqualOp)
NN_VERIFY_SAME_ELEMENT_TYPES(LessOrEqualOp)
NN_VERIFY_SAME_ELEMENT_TYPES(GreaterOrEqualOp)
NN_VERIFY_SAME_ELEMENT_TYPES(MaxOp)
NN_VERIFY_SAME_ELEMENT_TYPES(MinOp)
NN_VERIFY_SAME_ELEMENT_TYPES(ModOp)
#undef NN_VERIFY_SAME_ELEMENT_TYPES

LogicalResult WhereOp::verify() {
  return verifySameOperandElementTypes(*this, getX(), getY());
}

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

LogicalResult GatherElementsOp::verify() {
  auto data = cast<RankedTensorType>(getData().getType());
  auto indices = cast<RankedTensorType>(getIndices().getType());
  auto result = cast<RankedTensorType>(getType());
  int64_t axis = static_cast<int64_t>(getAxis());
  if (data.getRank() != indices.getRank())
    return emitOpError("indices must have the data's rank");
  if (axis < 0 || axis >= data.getRank())
    return emitOpError("axis ") << axis << " is out of range";
  if (result.getShape() != indices.getShape() ||
      result.getElementType() != data.getElementType())
    return emitOpError("result must have the indices' shape and the data's "
                       "element type");
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != axis && indices.getDimSize(d) > data.getDimSize(d))
      return emitOpError("indices dimension ")
             << d << " is larger than the data's";
  return success();
}

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
LogicalResult ReduceMaxOp::verify() { return verifyReduction(*this); }
LogicalResult ReduceMinOp::verify() { return verifyReduction(*this); }

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

LogicalResult CastOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getShape() != out.getShape())
    return emitOpError("changes the shape from ") << in << " to " << out;
  return success();
}

LogicalResult SliceOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  ArrayRef<int64_t> starts = getStarts(), steps = getSteps();
  if (in.getElementType() != out.getElementType() ||
      in.getRank() != out.getRank())
    return emitOpError("must keep the rank and element type");
  if (static_cast<int64_t>(starts.size()) != in.getRank() ||
      static_cast<int64_t>(steps.size()) != in.getRank())
    return emitOpError("needs one start and one step per dimension");
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t size = out.getDimSize(d);
    if (steps[d] == 0)
      return emitOpError("step ") << d << " is zero";
    if (size == 0)
      continue;
    int64_t last = starts[d] + (size - 1) * steps[d];
    if (starts[d] < 0 || starts[d] >= in.getDimSize(d) || last < 0 ||
        last >= in.getDimSize(d))
      return emitOpError("dimension ")
             << d << " reads outside the input (start " << starts[d]
             << ", step " << steps[d] << ", size " << size << ")";
  }
  return success();
}

template <typename OpTy> static LogicalResult verifySoftmaxAxis(OpTy op) {
  int64_t rank = cast<RankedTensorType>(op.getType()).getRank();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0 || axis >= rank)
    return op.emitOpError("axis ")
           << axis << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifySoftmaxAxis(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxAxis(*this); }
