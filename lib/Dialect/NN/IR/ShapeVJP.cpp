//===- ShapeVJP.cpp - VJP rules of shape and data-movement ops --*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::nn;

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(
      nn.reshape(dys[0], cast<RankedTensorType>(getInput().getType())));
  return success();
}

LogicalResult FlattenOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(
      nn.reshape(dys[0], cast<RankedTensorType>(getInput().getType())));
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  dxs.push_back(TransposeOp::create(b, getLoc(), dys[0], inverse));
  return success();
}

LogicalResult ExpandOp::buildVJP(OpBuilder &b, ValueRange dys,
                                 SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(
      nn.sumToShape(dys[0], cast<RankedTensorType>(getInput().getType())));
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ValueRange dys,
                                 SmallVectorImpl<Value> &dxs) {
  // Each input's adjoint is its slice of the result's adjoint.
  int64_t offset = 0, axis = getAxis();
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> starts(type.getRank(), 0), steps(type.getRank(), 1);
    starts[axis] = offset;
    offset += type.getDimSize(axis);
    dxs.push_back(SliceOp::create(b, getLoc(), type, dys[0], starts, steps));
  }
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ValueRange dys,
                                SmallVectorImpl<Value> &dxs) {
  dxs.push_back(SliceGradOp::create(b, getLoc(), getInput().getType(), dys[0],
                                    getStartsAttr(), getStepsAttr()));
  return success();
}

LogicalResult GatherOp::buildVJP(OpBuilder &b, ValueRange dys,
                                 SmallVectorImpl<Value> &dxs) {
  if (!isa<FloatType>(getElementTypeOrSelf(getData().getType()))) {
    dxs.append({Value(), Value()});
    return success();
  }
  dxs.push_back(GatherGradOp::create(b, getLoc(), getData().getType(), dys[0],
                                     getIndices(), getAxisAttr()));
  dxs.push_back(Value());
  return success();
}

LogicalResult GatherElementsOp::buildVJP(OpBuilder &b, ValueRange dys,
                                         SmallVectorImpl<Value> &dxs) {
  if (!isa<FloatType>(getElementTypeOrSelf(getData().getType()))) {
    dxs.append({Value(), Value()});
    return success();
  }
  dxs.push_back(GatherElementsGradOp::create(
      b, getLoc(), getData().getType(), dys[0], getIndices(), getAxisAttr()));
  dxs.push_back(Value());
  return success();
}

LogicalResult GatherElementsGradOp::buildVJP(OpBuilder &b, ValueRange dys,
                                             SmallVectorImpl<Value> &dxs) {
  // Each dresult element went to one position: its adjoint reads it back.
  dxs.push_back(GatherElementsOp::create(b, getLoc(), getDresult().getType(),
                                         dys[0], getIndices(), getAxisAttr()));
  dxs.push_back(Value());
  return success();
}

LogicalResult TriluOp::buildVJP(OpBuilder &b, ValueRange dys,
                                SmallVectorImpl<Value> &dxs) {
  dxs.push_back(
      TriluOp::create(b, getLoc(), dys[0], getUpperAttr(), getKAttr()));
  return success();
}
