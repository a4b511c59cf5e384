//===- ElementwiseVJP.cpp - VJP rules of elementwise ops --------*- C++ -*-===//
//
// Adjoints of elementwise ops. Broadcasting binary ops sum the adjoint back
// to each operand's shape (NNBuilder::sumToShape).
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

#include <cmath>

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

LogicalResult SinOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(nn.mul(dys[0], CosOp::create(b, getLoc(), getInput())));
  return success();
}

LogicalResult CosOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, getLoc());
  dxs.push_back(NegOp::create(
      b, getLoc(), nn.mul(dys[0], SinOp::create(b, getLoc(), getInput()))));
  return success();
}

/// The adjoint of a piecewise-constant op: zeros shaped like its input.
static void zeroAdjoint(OpBuilder &b, Value input,
                        SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, input.getLoc());
  dxs.push_back(nn.splat(typeOf(input), 0.0));
}

#define NN_ZERO_ADJOINT(OP)                                                    \
  LogicalResult OP::buildVJP(OpBuilder &b, ValueRange,                         \
                             SmallVectorImpl<Value> &dxs) {                    \
    zeroAdjoint(b, getInput(), dxs);                                           \
    return success();                                                          \
  }
NN_ZERO_ADJOINT(SignOp)
NN_ZERO_ADJOINT(FloorOp)
NN_ZERO_ADJOINT(CeilOp)
NN_ZERO_ADJOINT(RoundOp)
#undef NN_ZERO_ADJOINT

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

LogicalResult AbsOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  // sign(x) * dy, with sign(0) = 0.
  NNBuilder nn(b, getLoc());
  Type element = elementOf(getInput());
  Value zero = nn.scalar(element, 0.0);
  Value positive = GreaterOp::create(b, getLoc(), getInput(), zero);
  Value negative = LessOp::create(b, getLoc(), getInput(), zero);
  Value neg = WhereOp::create(b, getLoc(), negative,
                              NegOp::create(b, getLoc(), dys[0]), zero);
  dxs.push_back(WhereOp::create(b, getLoc(), positive, dys[0], neg));
  return success();
}

LogicalResult ErfOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  // d erf(x) = 2 / sqrt(pi) * exp(-x^2).
  NNBuilder nn(b, getLoc());
  Type element = elementOf(getInput());
  Value x = getInput();
  Value e =
      ExpOp::create(b, getLoc(), NegOp::create(b, getLoc(), nn.mul(x, x)));
  Value c = nn.scalar(element, 2.0 / std::sqrt(M_PI));
  dxs.push_back(nn.mul(dys[0], nn.mul(c, e)));
  return success();
}

LogicalResult ClipOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  // Passes where min <= x <= max (torch.clamp).
  NNBuilder nn(b, getLoc());
  Type element = elementOf(getInput());
  Value zero = nn.scalar(element, 0.0);
  Value grad = dys[0];
  if (std::optional<APFloat> min = getMin()) {
    Value below = LessOp::create(b, getLoc(), getInput(),
                                 nn.scalar(element, min->convertToDouble()));
    grad = WhereOp::create(b, getLoc(), below, zero, grad);
  }
  if (std::optional<APFloat> max = getMax()) {
    Value above = GreaterOp::create(b, getLoc(), getInput(),
                                    nn.scalar(element, max->convertToDouble()));
    grad = WhereOp::create(b, getLoc(), above, zero, grad);
  }
  dxs.push_back(grad);
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  auto inType = typeOf(getInput());
  if (!isa<FloatType>(inType.getElementType()) ||
      !isa<FloatType>(elementOf(getResult()))) {
    dxs.push_back(Value());
    return success();
  }
  dxs.push_back(CastOp::create(b, getLoc(), inType, dys[0]));
  return success();
}

/// Adjoint of an elementwise max (`greater` true) or min: to the winner,
/// half to each on a tie.
static void buildExtremumVJP(OpBuilder &b, Location loc, Value lhs, Value rhs,
                             Value dy, bool greater,
                             SmallVectorImpl<Value> &dxs) {
  NNBuilder nn(b, loc);
  Type element = elementOf(lhs);
  Value zero = nn.scalar(element, 0.0);
  Value half = nn.mul(dy, nn.scalar(element, 0.5));
  Value tie = EqualOp::create(b, loc, lhs, rhs);
  auto wins = [&](Value x, Value y) -> Value {
    if (greater)
      return GreaterOp::create(b, loc, x, y);
    return LessOp::create(b, loc, x, y);
  };
  Value dl = WhereOp::create(b, loc, wins(lhs, rhs), dy,
                             WhereOp::create(b, loc, tie, half, zero));
  Value dr = WhereOp::create(b, loc, wins(rhs, lhs), dy,
                             WhereOp::create(b, loc, tie, half, zero));
  dxs.push_back(nn.sumToShape(dl, typeOf(lhs)));
  dxs.push_back(nn.sumToShape(dr, typeOf(rhs)));
}

LogicalResult MaxOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  buildExtremumVJP(b, getLoc(), getLhs(), getRhs(), dys[0], true, dxs);
  return success();
}

LogicalResult MinOp::buildVJP(OpBuilder &b, ValueRange dys,
                              SmallVectorImpl<Value> &dxs) {
  buildExtremumVJP(b, getLoc(), getLhs(), getRhs(), dys[0], false, dxs);
  return success();
}
