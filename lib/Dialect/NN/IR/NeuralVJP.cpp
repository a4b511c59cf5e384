//===- NeuralVJP.cpp - VJP rules of softmax, conv, pool, dropout -*- C++
//-*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::nn;

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  // dx = y * (dy - sum(dy * y)) along the axis.
  NNBuilder nn(b, getLoc());
  Value y = getResult();
  Value sum =
      ReduceSumOp::create(b, getLoc(), nn.mul(dys[0], y),
                          ArrayRef<int64_t>{static_cast<int64_t>(getAxis())},
                          /*keepdims=*/true);
  dxs.push_back(nn.mul(y, nn.sub(dys[0], sum)));
  return success();
}

LogicalResult LogSoftmaxOp::buildVJP(OpBuilder &b, ValueRange dys,
                                     SmallVectorImpl<Value> &dxs) {
  // dx = dy - exp(y) * sum(dy) along the axis.
  NNBuilder nn(b, getLoc());
  Value sum = ReduceSumOp::create(
      b, getLoc(), dys[0], ArrayRef<int64_t>{static_cast<int64_t>(getAxis())},
      /*keepdims=*/true);
  dxs.push_back(
      nn.sub(dys[0], nn.mul(ExpOp::create(b, getLoc(), getResult()), sum)));
  return success();
}

LogicalResult ConvOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  dxs.push_back(ConvGradInputOp::create(
      b, loc, getInput().getType(), dys[0], getWeight(), getStridesAttr(),
      getPadsAttr(), getDilationsAttr(), getGroupAttr()));
  dxs.push_back(ConvGradWeightOp::create(
      b, loc, getWeight().getType(), getInput(), dys[0], getStridesAttr(),
      getPadsAttr(), getDilationsAttr(), getGroupAttr()));
  if (getBias())
    dxs.push_back(ReduceSumOp::create(b, loc, dys[0],
                                      ArrayRef<int64_t>{0, 2, 3},
                                      /*keepdims=*/false));
  return success();
}

LogicalResult ConvGradInputOp::buildVJP(OpBuilder &b, ValueRange dys,
                                        SmallVectorImpl<Value> &dxs) {
  // The op is linear in each operand: its adjoint w.r.t. dresult is the
  // forward convolution of the cotangent, w.r.t. the weight the convolution
  // weight gradient with the cotangent as the input.
  Location loc = getLoc();
  dxs.push_back(ConvOp::create(b, loc, dys[0], getWeight(), Value(),
                               getStridesAttr(), getPadsAttr(),
                               getDilationsAttr(), getGroupAttr()));
  dxs.push_back(ConvGradWeightOp::create(
      b, loc, getWeight().getType(), dys[0], getDresult(), getStridesAttr(),
      getPadsAttr(), getDilationsAttr(), getGroupAttr()));
  return success();
}

LogicalResult MaxPoolOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  dxs.push_back(MaxPoolGradOp::create(
      b, getLoc(), getInput().getType(), getInput(), dys[0], getKernelAttr(),
      getStridesAttr(), getPadsAttr(), getDilationsAttr()));
  return success();
}

LogicalResult AveragePoolOp::buildVJP(OpBuilder &b, ValueRange dys,
                                      SmallVectorImpl<Value> &dxs) {
  dxs.push_back(AveragePoolGradOp::create(
      b, getLoc(), getInput().getType(), dys[0], getKernelAttr(),
      getStridesAttr(), getPadsAttr(), getCountIncludePadAttr()));
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  // Dropout is linear: its adjoint applies the same mask and scale.
  dxs.push_back(DropoutOp::create(b, getLoc(), dys[0], getStep(),
                                  getSampleBase(), getRatioAttr(),
                                  getSeedAttr(), getSaltAttr()));
  dxs.append({Value(), Value()});
  return success();
}
