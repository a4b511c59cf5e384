//===- ReductionVJP.cpp - VJP rules of reductions ---------------*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::nn;

/// Broadcasts the adjoint of a reduction back to the input's shape.
static Value broadcastReduced(NNBuilder &nn, Value dy, Value input,
                              ArrayRef<int64_t> axes) {
  auto inType = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> kept(inType.getShape());
  for (int64_t axis : axes)
    kept[axis] = 1;
  Value reshaped =
      nn.reshape(dy, RankedTensorType::get(kept, inType.getElementType()));
  return nn.broadcastTo(reshaped, inType);
}

LogicalResult ReduceSumOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(broadcastReduced(nn, dys[0], getInput(), getAxes()));
  return success();
}

LogicalResult ReduceMeanOp::buildVJP(OpBuilder &b, ValueRange dys,
                                     SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  auto inType = cast<RankedTensorType>(getInput().getType());
  int64_t count = 1;
  for (int64_t axis : getAxes())
    count *= inType.getDimSize(axis);
  Value scaled = nn.div(
      dys[0], nn.scalar(inType.getElementType(), static_cast<double>(count)));
  dxs.push_back(broadcastReduced(nn, scaled, getInput(), getAxes()));
  return success();
}

/// Adjoint of ReduceMax/ReduceMin: shared evenly by the elements equal to the
/// extremum (torch.amax/amin).
static Value buildExtremumReductionVJP(OpBuilder &b, Location loc, Value input,
                                       Value result, Value dy,
                                       ArrayRef<int64_t> axes) {
  NNBuilder nn(b, loc);
  auto inType = cast<RankedTensorType>(input.getType());
  Type element = inType.getElementType();
  Value extremum = broadcastReduced(nn, result, input, axes);
  Value hit = EqualOp::create(b, loc, input, extremum);
  Value ones = CastOp::create(
      b, loc, RankedTensorType::get(inType.getShape(), element), hit);
  Value count = ReduceSumOp::create(b, loc, ones, axes, /*keepdims=*/true);
  Value share = nn.div(broadcastReduced(nn, dy, input, axes),
                       nn.broadcastTo(count, inType));
  return WhereOp::create(b, loc, hit, share, nn.scalar(element, 0.0));
}

LogicalResult ReduceMaxOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  dxs.push_back(buildExtremumReductionVJP(b, getLoc(), getInput(), getResult(),
                                          dys[0], getAxes()));
  return success();
}

LogicalResult ReduceMinOp::buildVJP(OpBuilder &b, ValueRange dys,
                                    SmallVectorImpl<Value> &dxs) {
  dxs.push_back(buildExtremumReductionVJP(b, getLoc(), getInput(), getResult(),
                                          dys[0], getAxes()));
  return success();
}
