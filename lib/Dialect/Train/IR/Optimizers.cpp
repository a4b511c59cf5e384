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
  Value toF32(Value x) {
    return arith::TruncFOp::create(b, loc, b.getF32Type(), x);
  }
  /// 1 - base^step in f64, step an i64.
  Value oneMinusPow(double base, Value step) {
    return sub(f64(1.0), math::PowFOp::create(b, loc, f64(base), toF64(step)));
  }
  /// An i64 as f64.
  Value toF64(Value x) {
    if (isa<IntegerType>(x.getType()))
      return arith::SIToFPOp::create(b, loc, b.getF64Type(), x);
    return arith::ExtFOp::create(b, loc, b.getF64Type(), x);
  }
  /// The number of updates conducted before step `step` (1-based): t - 1.
  Value updatesBefore(Value step) {
    Value one = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1));
    return arith::SubIOp::create(b, loc, step, one);
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
    // The first step takes the whole gradient, later ones (1 - dampening)
    // of it. The buffer starts at zero, so the first step gives exactly
    // PyTorch's copy of the first gradient (its `buf is None` case); with
    // ONNX's Momentum (beta = 1 - dampening, T = t - 1) it is the rule
    // `alpha * V + (T > 0 ? beta : 1) * G` for any V.
    double dampening = getDampening().convertToDouble();
    Value decayed = s.mul(states[0], s.f32(momentum));
    Value one =
        arith::ConstantOp::create(builder, loc, builder.getI64IntegerAttr(1));
    Value first = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq,
                                        step, one);
    Value scale = arith::SelectOp::create(builder, loc, first, s.f32(1.0),
                                          s.f32(1.0 - dampening));
    newBuf = s.add(decayed, s.mul(scale, d));
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

//===----------------------------------------------------------------------===//
// Adagrad (PyTorch's and ONNX's)
//===----------------------------------------------------------------------===//

unsigned AdagradAttr::getNumStates() const { return 1; }
StringRef AdagradAttr::getStateName(unsigned) const { return "sum"; }

void AdagradAttr::buildElementUpdate(OpBuilder &builder, Location loc,
                                     Value param, Value grad, ValueRange states,
                                     Value lr, Value step,
                                     SmallVectorImpl<Value> &results) const {
  ScalarBuilder s{builder, loc};
  double weightDecay = getWeightDecay().convertToDouble();
  double lrDecay = getLrDecay().convertToDouble();
  if (weightDecay != 0.0)
    grad = s.add(grad, s.mul(s.f32(weightDecay), param));
  // clr = lr / (1 + (t - 1) * lr_decay), a Python float in PyTorch.
  Value clr = s.div(
      s.toF64(lr),
      s.add(s.f64(1.0), s.mul(s.toF64(s.updatesBefore(step)), s.f64(lrDecay))));
  Value sum = s.add(states[0], s.mul(grad, grad));
  Value denom = s.add(s.sqrt(sum), s.f32(getEps().convertToDouble()));
  results.push_back(s.sub(param, s.mul(s.toF32(clr), s.div(grad, denom))));
  results.push_back(sum);
}

//===----------------------------------------------------------------------===//
// ONNX Adam
//===----------------------------------------------------------------------===//

unsigned OnnxAdamAttr::getNumStates() const { return 2; }
StringRef OnnxAdamAttr::getStateName(unsigned index) const {
  return index == 0 ? "V" : "H";
}

void OnnxAdamAttr::buildElementUpdate(OpBuilder &builder, Location loc,
                                      Value param, Value grad,
                                      ValueRange states, Value lr, Value step,
                                      SmallVectorImpl<Value> &results) const {
  ScalarBuilder s{builder, loc};
  double alpha = getAlpha().convertToDouble();
  double beta = getBeta().convertToDouble();
  double norm = getNormCoefficient().convertToDouble();
  double post = getNormCoefficientPost().convertToDouble();
  if (norm != 0.0)
    grad = s.add(s.mul(s.f32(norm), param), grad);
  Value v =
      s.add(s.mul(s.f32(alpha), states[0]), s.mul(s.f32(1.0 - alpha), grad));
  Value h = s.add(s.mul(s.f32(beta), states[1]),
                  s.mul(s.f32(1.0 - beta), s.mul(grad, grad)));
  Value root = s.add(s.sqrt(h), s.f32(getEpsilon().convertToDouble()));
  // r = T > 0 ? lr * sqrt(1 - beta^T) / (1 - alpha^T) : lr, in f64.
  Value updates = s.updatesBefore(step);
  Value corrected =
      s.div(s.mul(s.toF64(lr), s.sqrt(s.oneMinusPow(beta, updates))),
            s.oneMinusPow(alpha, updates));
  Value zero =
      arith::ConstantOp::create(builder, loc, builder.getI64IntegerAttr(0));
  Value later = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::sgt,
                                      updates, zero);
  Value r =
      arith::SelectOp::create(builder, loc, later, corrected, s.toF64(lr));
  Value updated = s.sub(param, s.mul(s.toF32(r), s.div(v, root)));
  if (post != 0.0)
    updated = s.mul(s.f32(1.0 - post), updated);
  results.push_back(updated);
  results.push_back(v);
  results.push_back(h);
}
