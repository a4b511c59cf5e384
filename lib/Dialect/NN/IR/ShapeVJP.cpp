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
