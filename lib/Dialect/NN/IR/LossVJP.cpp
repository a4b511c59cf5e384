//===- LossVJP.cpp - VJP rules of loss ops ----------------------*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::nn;

LogicalResult SoftmaxCrossEntropyLossOp::buildVJP(OpBuilder &b, ValueRange dys,
                                                  SmallVectorImpl<Value> &dxs) {
  // Class weights are treated as constants: no adjoint for them or labels.
  dxs.push_back(SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getScores().getType(), dys[0], getScores(), getLabels(),
      getWeights(), getReductionAttr(), getIgnoreIndexAttr()));
  dxs.push_back(Value());
  if (getWeights())
    dxs.push_back(Value());
  return success();
}

LogicalResult
NegativeLogLikelihoodLossOp::buildVJP(OpBuilder &b, ValueRange dys,
                                      SmallVectorImpl<Value> &dxs) {
  // Class weights are treated as constants, like the cross-entropy's.
  dxs.push_back(NegativeLogLikelihoodGradOp::create(
      b, getLoc(), getInput().getType(), dys[0], getInput(), getTarget(),
      getWeights(), getReductionAttr(), getIgnoreIndexAttr()));
  dxs.push_back(Value());
  if (getWeights())
    dxs.push_back(Value());
  return success();
}
