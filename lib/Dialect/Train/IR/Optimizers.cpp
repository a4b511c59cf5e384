//===- Optimizers.cpp - optimizer update rules ------------------*- C++ -*-===//
//
// The scalar update rule of each optimizer attribute, following PyTorch
// 1.13's single-tensor implementations operation by operation (see
// SEMANTICS.md): per-step scalars (bias corrections, step sizes) are computed
// in f64 like PyTorch's Python floats, elementwise math in f32.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::train;

namespace {
/// Emits f32 elementwise and f64 per-step arithmetic.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;

  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value f64(double v) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
  Value toF64(Value x) {
    return arith::ExtFOp::create(b, loc, b.getF64Type(), x);
  }
  Value toF32(Value x) {
    return arith::TruncFOp::create(b, loc, b.getF32Type(), x);
  }
  /// 1 - base^step in f64, step an i64.
  Value oneMinusPow(double base, Value step) {
    Value t = arith::SIToFPOp::create(b, loc, b.getF64Type(), step);
    return sub(f64(1.0), math::PowFOp::create(b, loc, f64(base), t));
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

unsigned SGDAttr::getNumStates() const {
  return getMomentum().isZero() ? 0 : 1;
}

StringRef SGDAttr::getStateName(unsigned) const { return "momentum_buffer"; }

void SGDAttr::buildElementUpdate(OpBuilder &builder, Location loc, Value param,
                                 Value grad, ValueRange states, Value lr,
                                 Value step,
                                 SmallVectorImpl<Value> &results) const {
  ScalarBuilder s{builder, loc};
  double momentum = getMomentum().convertToDouble();
  double weightDecay = getWeightDecay().convertToDouble();
  Value d = grad;
  if (weightDecay != 0.0)
    d = s.add(d, s.mul(s.f32(weightDecay), param));
  Value newBuf;
  if (momentum != 0.0) {
    // The buffer starts as a copy of the first gradient (PyTorch's
    // `buf is None` case), then decays.
    double dampening = getDampening().convertToDouble();
    Value later = s.add(s.mul(states[0], s.f32(momentum)),
                        s.mul(s.f32(1.0 - dampening), d));
    Value one =
        arith::ConstantOp::create(builder, loc, builder.getI64IntegerAttr(1));
    Value first = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq,
                                        step, one);
    newBuf = arith::SelectOp::create(builder, loc, first, d, later);
    d = getNesterov() ? s.add(d, s.mul(s.f32(momentum), newBuf)) : newBuf;
  }
  results.push_back(s.sub(param, s.mul(lr, d)));
  if (newBuf)
    results.push_back(newBuf);
}

//===----------------------------------------------------------------------===//
// Adam and AdamW
//===----------------------------------------------------------------------===//

/// Adam's moment update and parameter step, shared by Adam and AdamW; `grad`
/// already includes Adam's L2 term.
template <typename AttrTy>
static void buildAdamStep(AttrTy attr, ScalarBuilder &s, Value param,
                          Value grad, ValueRange states, Value lr, Value step,
                          SmallVectorImpl<Value> &results) {
  double beta1 = attr.getBeta1().convertToDouble();
  double beta2 = attr.getBeta2().convertToDouble();
  double eps = attr.getEps().convertToDouble();
  Value m =
      s.add(s.mul(states[0], s.f32(beta1)), s.mul(s.f32(1.0 - beta1), grad));
  Value v = s.add(s.mul(states[1], s.f32(beta2)),
                  s.mul(s.f32(1.0 - beta2), s.mul(grad, grad)));
  // Per-step scalars in f64, as PyTorch computes them in Python floats.
  Value stepSize = s.toF32(s.div(s.toF64(lr), s.oneMinusPow(beta1, step)));
  Value bc2Sqrt = s.toF32(s.sqrt(s.oneMinusPow(beta2, step)));
  Value denom = s.add(s.div(s.sqrt(v), bc2Sqrt), s.f32(eps));
  results.push_back(s.sub(param, s.mul(stepSize, s.div(m, denom))));
  results.push_back(m);
  results.push_back(v);
}

static StringRef adamStateName(unsigned index) {
  return index == 0 ? "exp_avg" : "exp_avg_sq";
}

unsigned AdamAttr::getNumStates() const { return 2; }
StringRef AdamAttr::getStateName(unsigned index) const {
  return adamStateName(index);
}

void AdamAttr::buildElementUpdate(OpBuilder &builder, Location loc, Value param,
                                  Value grad, ValueRange states, Value lr,
                                  Value step,
                                  SmallVectorImpl<Value> &results) const {
  ScalarBuilder s{builder, loc};
  double weightDecay = getWeightDecay().convertToDouble();
  if (weightDecay != 0.0)
    grad = s.add(grad, s.mul(s.f32(weightDecay), param));
  buildAdamStep(*this, s, param, grad, states, lr, step, results);
}

unsigned AdamWAttr::getNumStates() const { return 2; }
StringRef AdamWAttr::getStateName(unsigned index) const {
  return adamStateName(index);
}

void AdamWAttr::buildElementUpdate(OpBuilder &builder, Location loc,
                                   Value param, Value grad, ValueRange states,
                                   Value lr, Value step,
                                   SmallVectorImpl<Value> &results) const {
  ScalarBuilder s{builder, loc};
  double weightDecay = getWeightDecay().convertToDouble();
  if (weightDecay != 0.0) {
    // Decoupled decay first: p *= 1 - lr * weight_decay (f64 like PyTorch).
    Value factor = s.sub(s.f64(1.0), s.mul(s.toF64(lr), s.f64(weightDecay)));
    param = s.mul(param, s.toF32(factor));
  }
  buildAdamStep(*this, s, param, grad, states, lr, step, results);
}
