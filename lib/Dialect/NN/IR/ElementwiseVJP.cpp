//===- ElementwiseVJP.cpp - VJP rules of elementwise ops --------*- C++ -*-===//
//
// Adjoints of elementwise ops. Broadcasting binary ops sum the adjoint back
// to each operand's shape (NNBuilder::sumToShape).
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::nn;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
Type elementOf(Value v) { return typeOf(v).getElementType(); }
} // namespace

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.push_back(NegOp::create(b, getLoc(), dys[0]));
  return success();
}

LogicalResult ExpOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(nn.mul(dys[0], getResult()));
  return success();
}

LogicalResult LogOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(nn.div(dys[0], getInput()));
  return success();
}

LogicalResult SqrtOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  // d sqrt(x) = 0.5 / sqrt(x).
  NNBuilder nn(b, getLoc());
  Value half = nn.scalar(elementOf(getInput()), 0.5);
  dxs.push_back(nn.div(nn.mul(dys[0], half), getResult()));
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  // Gradient 1 where x > 0, else 0 (PyTorch's choice at x == 0).
  NNBuilder nn(b, getLoc());
  Value zero = nn.scalar(elementOf(getInput()), 0.0);
  Value positive = GreaterOp::create(b, getLoc(), getInput(), zero);
  dxs.push_back(WhereOp::create(b, getLoc(), positive, dys[0], zero));
  return success();
}

LogicalResult SigmoidOp::buildVJP(OpBuilder &b, ValueRange dys,
                                  SmallVectorImpl<Value> &dxs) {
  // d sigmoid = y * (1 - y).
  NNBuilder nn(b, getLoc());
  Value one = nn.scalar(elementOf(getInput()), 1.0);
  Value y = getResult();
  dxs.push_back(nn.mul(dys[0], nn.mul(y, nn.sub(one, y))));
  return success();
}

LogicalResult TanhOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  // d tanh = 1 - y^2.
  NNBuilder nn(b, getLoc());
  Value one = nn.scalar(elementOf(getInput()), 1.0);
  Value y = getResult();
  dxs.push_back(nn.mul(dys[0], nn.sub(one, nn.mul(y, y))));
  return success();
}

LogicalResult IdentityOp::buildVJP(OpBuilder &, ValueRange dys,
                                   SmallVectorImpl<Value> &dxs) {
  dxs.push_back(dys[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(nn.sumToShape(dys[0], typeOf(getLhs())));
  dxs.push_back(nn.sumToShape(dys[0], typeOf(getRhs())));
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(nn.sumToShape(dys[0], typeOf(getLhs())));
  dxs.push_back(
      NegOp::create(b, getLoc(), nn.sumToShape(dys[0], typeOf(getRhs()))));
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(nn.sumToShape(nn.mul(dys[0], getRhs()), typeOf(getLhs())));
  dxs.push_back(nn.sumToShape(nn.mul(dys[0], getLhs()), typeOf(getRhs())));
  return success();
}

LogicalResult DivOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  // y = a / b: da = dy / b, db = -dy * y / b.
  NNBuilder nn(b, getLoc());
  Value da = nn.div(dys[0], getRhs());
  dxs.push_back(nn.sumToShape(da, typeOf(getLhs())));
  Value db = NegOp::create(b, getLoc(), nn.mul(da, getResult()));
  dxs.push_back(nn.sumToShape(db, typeOf(getRhs())));
  return success();
}

LogicalResult PowOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  // y = a^p: da = dy * p * a^(p-1), dp = dy * y * log(a).
  NNBuilder nn(b, getLoc());
  Value one = nn.scalar(elementOf(getRhs()), 1.0);
  Value pm1 = nn.sub(getRhs(), one);
  Value da = nn.mul(
      dys[0], nn.mul(getRhs(), PowOp::create(b, getLoc(), getLhs(), pm1)));
  dxs.push_back(nn.sumToShape(da, typeOf(getLhs())));
  Value dp =
      nn.mul(dys[0], nn.mul(getResult(), LogOp::create(b, getLoc(), getLhs())));
  dxs.push_back(nn.sumToShape(dp, typeOf(getRhs())));
  return success();
}

LogicalResult WhereOp::buildVJP(OpBuilder &b, ValueRange dys,
                                SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  Value zero = nn.scalar(elementOf(getX()), 0.0);
  dxs.push_back(Value()); // condition
  Value dx = WhereOp::create(b, getLoc(), getCondition(), dys[0], zero);
  dxs.push_back(nn.sumToShape(dx, typeOf(getX())));
  Value dy = WhereOp::create(b, getLoc(), getCondition(), zero, dys[0]);
  dxs.push_back(nn.sumToShape(dy, typeOf(getY())));
  return success();
}
