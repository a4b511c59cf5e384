//===- ElementwiseHandlers.cpp - import elementwise ops ---------*- C++ -*-===//
//
// One nn op per ONNX operator where there is one; LeakyRelu, Elu, Softplus,
// Reciprocal, Gelu, HardSigmoid, HardSwish, Softsign, Selu, Celu,
// ThresholdedRelu, Mish, PRelu, Swish, Sinh and Cosh are built from nn ops, so
// their VJPs come from the parts.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

Type elementOf(Value v) { return getElementTypeOrSelf(v.getType()); }

FailureOr<Value> floatInput(GraphImporter &im, const onnx::NodeProto &node,
                            int index) {
  FailureOr<Value> x = im.input(node, index);
  if (succeeded(x) && !isa<FloatType>(elementOf(*x)))
    return im.error(node) << "expects a floating-point input, got "
                          << x->getType();
  return x;
}

template <typename OpTy>
LogicalResult importUnary(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  return im.setResult(node, im.create<OpTy>(node, *x));
}

/// A unary op on any element type.
template <typename OpTy>
LogicalResult importAnyUnary(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  return im.setResult(node, im.create<OpTy>(node, *x));
}

template <typename OpTy>
LogicalResult importBinary(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> lhs = im.input(node, 0), rhs = im.input(node, 1);
  if (failed(lhs) || failed(rhs))
    return failure();
  return im.setResult(node, im.create<OpTy>(node, *lhs, *rhs));
}

/// Max/Min/Sum of any number of operands, left to right.
template <typename OpTy>
LogicalResult importVariadic(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> acc = im.input(node, 0);
  for (int i = 1; succeeded(acc) && i < node.input_size(); ++i) {
    FailureOr<Value> next = im.input(node, i);
    if (failed(next))
      return failure();
    acc = im.create<OpTy>(node, *acc, *next);
  }
  return im.setResult(node, acc);
}

/// Mod: the remainder with the divisor's sign, or with `fmod` the
/// dividend's.
LogicalResult importMod(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> lhs = im.input(node, 0), rhs = im.input(node, 1);
  if (failed(lhs) || failed(rhs))
    return failure();
  return im.setResult(
      node, im.create<nn::ModOp>(
                node, *lhs, *rhs,
                im.builder.getBoolAttr(im.intAttr(node, "fmod", 0) != 0)));
}

LogicalResult importNot(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  return im.setResult(node, im.create<nn::NotOp>(node, *x));
}

/// IsNaN: x differs from itself only where it is NaN.
LogicalResult importIsNaN(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  Value same = nn::EqualOp::create(im.builder, im.loc(node), *x, *x);
  return im.setResult(node, im.create<nn::NotOp>(node, same));
}

/// IsInf: x equal to +inf (detect_positive) or -inf (detect_negative).
LogicalResult importIsInf(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type element = elementOf(*x);
  auto equalTo = [&](double value) -> Value {
    return nn::EqualOp::create(b, loc, *x, nnb.scalar(element, value));
  };
  bool positive = im.intAttr(node, "detect_positive", 1) != 0,
       negative = im.intAttr(node, "detect_negative", 1) != 0;
  double infinity = std::numeric_limits<double>::infinity();
  if (positive && negative)
    return im.setResult(
        node, im.create<nn::OrOp>(node, equalTo(infinity), equalTo(-infinity)));
  if (positive || negative)
    return im.setResult(node,
                        im.create<nn::IdentityOp>(
                            node, equalTo(positive ? infinity : -infinity)));
  // Neither: false everywhere (x equal to 0 and not).
  Value zero = equalTo(0.0);
  return im.setResult(
      node, im.create<nn::AndOp>(node, zero, nn::NotOp::create(b, loc, zero)));
}

LogicalResult importPow(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> base = im.input(node, 0);
  FailureOr<DenseElementsAttr> exponent =
      im.constantInput(node, 1, "the exponent");
  if (failed(base) || failed(exponent))
    return failure();
  auto baseType = cast<RankedTensorType>(base->getType());
  if (isa<IntegerType>(baseType.getElementType())) {
    // Integer powers through f64 (exact for the values integers hold).
    auto f64 =
        RankedTensorType::get(baseType.getShape(), im.builder.getF64Type());
    auto expType = cast<RankedTensorType>(im.input(node, 1)->getType());
    FailureOr<Value> b = im.create<nn::CastOp>(node, f64, *base);
    FailureOr<Value> e = im.create<nn::CastOp>(
        node,
        RankedTensorType::get(expType.getShape(), im.builder.getF64Type()),
        *im.input(node, 1));
    if (failed(b) || failed(e))
      return failure();
    FailureOr<Value> p = im.create<nn::PowOp>(node, *b, *e);
    if (failed(p))
      return failure();
    auto resultType =
        RankedTensorType::get(cast<RankedTensorType>(p->getType()).getShape(),
                              baseType.getElementType());
    return im.setResult(node, im.create<nn::CastOp>(node, resultType, *p));
  }
  auto floatType = dyn_cast<FloatType>(elementOf(*base));
  if (!floatType)
    return im.error(node) << "expects a floating-point or integer base";
  Value exp = *im.input(node, 1);
  if (exponent->getElementType() != floatType) {
    // Opset 12+ allows another exponent type: convert to the base's.
    SmallVector<APFloat> values;
    for (Attribute v : exponent->getValues<Attribute>()) {
      APFloat f(isa<FloatAttr>(v)
                    ? cast<FloatAttr>(v).getValueAsDouble()
                    : static_cast<double>(cast<IntegerAttr>(v).getInt()));
      bool lost;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
      values.push_back(f);
    }
    auto expType =
        RankedTensorType::get(exponent->getType().getShape(), floatType);
    exp = nn::ConstantOp::create(im.builder, im.loc(node),
                                 DenseElementsAttr::get(expType, values));
  }
  return im.setResult(node, im.create<nn::PowOp>(node, *base, exp));
}

LogicalResult importWhere(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> c = im.input(node, 0), x = im.input(node, 1),
                   y = im.input(node, 2);
  if (failed(c) || failed(x) || failed(y))
    return failure();
  return im.setResult(node, im.create<nn::WhereOp>(node, *c, *x, *y));
}

LogicalResult importIdentity(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  return im.setResult(node, im.create<nn::IdentityOp>(node, *x));
}

LogicalResult importCast(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t to = im.intAttr(node, "to", 0);
  Type element = convertElementType(im.builder.getContext(), to);
  if (!element)
    return im.error(node) << "unsupported element type "
                          << onnx::TensorProto::DataType_Name(
                                 static_cast<onnx::TensorProto::DataType>(to));
  auto type = RankedTensorType::get(
      cast<RankedTensorType>(x->getType()).getShape(), element);
  return im.setResult(node, im.create<nn::CastOp>(node, type, *x));
}

/// CastLike (opset 15): Cast to the element type of the second input, whose
/// values are not read (so a parameter there gets no gradient).
LogicalResult importCastLike(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<Value> like = im.input(node, 1);
  if (failed(x) || failed(like))
    return failure();
  auto type = RankedTensorType::get(
      cast<RankedTensorType>(x->getType()).getShape(),
      cast<RankedTensorType>(like->getType()).getElementType());
  return im.setResult(node, im.create<nn::CastOp>(node, type, *x));
}

/// The constant scalar of input `index`, or `fallback` when absent.
FailureOr<std::optional<double>> optionalScalar(GraphImporter &im,
                                                const onnx::NodeProto &node,
                                                int index, StringRef what) {
  if (index >= node.input_size() || node.input(index).empty())
    return std::optional<double>();
  FailureOr<DenseElementsAttr> attr = im.constantInput(node, index, what);
  if (failed(attr))
    return failure();
  if (attr->getNumElements() != 1)
    return im.error(node) << what << " must be a scalar";
  Attribute v = *attr->getValues<Attribute>().begin();
  if (auto f = dyn_cast<FloatAttr>(v))
    return std::optional<double>(f.getValueAsDouble());
  return std::optional<double>(
      static_cast<double>(cast<IntegerAttr>(v).getInt()));
}

LogicalResult importClip(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  std::optional<double> min, max;
  if (im.opset < 11) {
    if (im.attribute(node, "min"))
      min = im.floatAttr(node, "min", 0);
    if (im.attribute(node, "max"))
      max = im.floatAttr(node, "max", 0);
  } else {
    FailureOr<std::optional<double>> lo = optionalScalar(im, node, 1, "min");
    FailureOr<std::optional<double>> hi = optionalScalar(im, node, 2, "max");
    if (failed(lo) || failed(hi))
      return failure();
    min = *lo;
    max = *hi;
  }
  Builder &b = im.builder;
  return im.setResult(
      node, im.create<nn::ClipOp>(node, *x,
                                  min ? b.getF64FloatAttr(*min) : FloatAttr(),
                                  max ? b.getF64FloatAttr(*max) : FloatAttr()));
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

LogicalResult importReciprocal(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  return im.setResult(
      node, im.create<nn::DivOp>(node, nnb.scalar(elementOf(*x), 1.0), *x));
}

LogicalResult importLeakyRelu(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Type element = elementOf(*x);
  Value alpha = nnb.scalar(element, im.floatAttr(node, "alpha", 0.01f));
  Value positive = nn::GreaterOp::create(im.builder, im.loc(node), *x,
                                         nnb.scalar(element, 0));
  return im.setResult(
      node, im.create<nn::WhereOp>(node, positive, *x, nnb.mul(*x, alpha)));
}

LogicalResult importElu(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Type element = elementOf(*x);
  Value alpha = nnb.scalar(element, im.floatAttr(node, "alpha", 1.0f));
  Value one = nnb.scalar(element, 1.0);
  Value negative = nnb.mul(
      alpha, nnb.sub(nn::ExpOp::create(im.builder, im.loc(node), *x), one));
  Value positive = nn::GreaterOp::create(im.builder, im.loc(node), *x,
                                         nnb.scalar(element, 0));
  return im.setResult(node,
                      im.create<nn::WhereOp>(node, positive, *x, negative));
}

/// log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), which does not
/// overflow.
Value softplus(OpBuilder &b, Location loc, Value x) {
  nn::NNBuilder nnb(b, loc);
  Value relu = nn::ReluOp::create(b, loc, x);
  Value e = nn::ExpOp::create(
      b, loc, nn::NegOp::create(b, loc, nn::AbsOp::create(b, loc, x)));
  Value log =
      nn::LogOp::create(b, loc, nnb.add(nnb.scalar(elementOf(x), 1.0), e));
  return nnb.add(relu, log);
}

LogicalResult importSoftplus(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  return im.setResult(node, softplus(im.builder, im.loc(node), *x));
}

/// max(0, min(1, alpha x + beta)).
Value hardSigmoid(OpBuilder &b, Location loc, Value x, double alpha,
                  double beta) {
  nn::NNBuilder nnb(b, loc);
  Type element = elementOf(x);
  Value linear = nnb.add(nnb.mul(x, nnb.scalar(element, alpha)),
                         nnb.scalar(element, beta));
  return nn::ClipOp::create(b, loc, linear, b.getF64FloatAttr(0.0),
                            b.getF64FloatAttr(1.0));
}

LogicalResult importHardSigmoid(GraphImporter &im,
                                const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  return im.setResult(node, hardSigmoid(im.builder, im.loc(node), *x,
                                        im.floatAttr(node, "alpha", 0.2f),
                                        im.floatAttr(node, "beta", 0.5f)));
}

LogicalResult importHardSwish(GraphImporter &im, const onnx::NodeProto &node) {
  // x * relu6(x + 3) / 6 = x * hardsigmoid(x; 1/6, 1/2).
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  return im.setResult(
      node,
      im.create<nn::MulOp>(
          node, *x, hardSigmoid(im.builder, im.loc(node), *x, 1.0 / 6.0, 0.5)));
}

/// Swish (opset 24): x sigmoid(alpha x).
LogicalResult importSwish(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Value scaled =
      nnb.mul(*x, nnb.scalar(elementOf(*x), im.floatAttr(node, "alpha", 1.0f)));
  return im.setResult(
      node,
      im.create<nn::MulOp>(
          node, *x, nn::SigmoidOp::create(im.builder, im.loc(node), scaled)));
}

LogicalResult importSoftsign(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Value abs = nn::AbsOp::create(im.builder, im.loc(node), *x);
  return im.setResult(
      node, im.create<nn::DivOp>(node, *x,
                                 nnb.add(nnb.scalar(elementOf(*x), 1.0), abs)));
}

/// x where x > 0, else alpha (exp(x / scale) - 1).
Value exponentialBelowZero(OpBuilder &b, Location loc, Value x, double alpha,
                           double scale) {
  nn::NNBuilder nnb(b, loc);
  Type element = elementOf(x);
  Value inner = scale == 1.0 ? x : nnb.div(x, nnb.scalar(element, scale));
  Value negative = nnb.mul(
      nnb.scalar(element, alpha),
      nnb.sub(nn::ExpOp::create(b, loc, inner), nnb.scalar(element, 1.0)));
  Value positive = nn::GreaterOp::create(b, loc, x, nnb.scalar(element, 0.0));
  return nn::WhereOp::create(b, loc, positive, x, negative);
}

LogicalResult importSelu(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  double alpha = im.floatAttr(node, "alpha", 1.67326319217681884765625f);
  double gamma = im.floatAttr(node, "gamma", 1.05070102214813232421875f);
  return im.setResult(
      node, im.create<nn::MulOp>(node, nnb.scalar(elementOf(*x), gamma),
                                 exponentialBelowZero(im.builder, im.loc(node),
                                                      *x, alpha, 1.0)));
}

LogicalResult importCelu(GraphImporter &im, const onnx::NodeProto &node) {
  // max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  double alpha = im.floatAttr(node, "alpha", 1.0f);
  if (alpha == 0.0)
    return im.error(node) << "alpha must not be 0";
  return im.setResult(
      node, exponentialBelowZero(im.builder, im.loc(node), *x, alpha, alpha));
}

LogicalResult importThresholdedRelu(GraphImporter &im,
                                    const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Type element = elementOf(*x);
  Value above = nn::GreaterOp::create(
      im.builder, im.loc(node), *x,
      nnb.scalar(element, im.floatAttr(node, "alpha", 1.0f)));
  return im.setResult(
      node, im.create<nn::WhereOp>(node, above, *x, nnb.scalar(element, 0.0)));
}

LogicalResult importMish(GraphImporter &im, const onnx::NodeProto &node) {
  // x tanh(softplus(x)).
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  Value tanh = nn::TanhOp::create(im.builder, im.loc(node),
                                  softplus(im.builder, im.loc(node), *x));
  return im.setResult(node, im.create<nn::MulOp>(node, *x, tanh));
}

LogicalResult importPRelu(GraphImporter &im, const onnx::NodeProto &node) {
  // slope * x where x < 0, else x; the slope broadcasts to x (and trains).
  FailureOr<Value> x = floatInput(im, node, 0);
  FailureOr<Value> slope = floatInput(im, node, 1);
  if (failed(x) || failed(slope))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Value negative = nn::LessOp::create(im.builder, im.loc(node), *x,
                                      nnb.scalar(elementOf(*x), 0.0));
  return im.setResult(
      node, im.create<nn::WhereOp>(node, negative, nnb.mul(*slope, *x), *x));
}

/// (exp(x) + sign exp(-x)) / 2: Cosh for sign 1, Sinh for -1.
template <int Sign>
LogicalResult importHyperbolic(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Value up = nn::ExpOp::create(b, loc, *x);
  Value down = nn::ExpOp::create(b, loc, nn::NegOp::create(b, loc, *x));
  Value sum = Sign > 0 ? nnb.add(up, down) : nnb.sub(up, down);
  return im.setResult(
      node, im.create<nn::MulOp>(node, sum, nnb.scalar(elementOf(*x), 0.5)));
}

LogicalResult importGelu(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = floatInput(im, node, 0);
  if (failed(x))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type element = elementOf(*x);
  auto c = [&](double v) { return nnb.scalar(element, v); };
  std::string approximate = im.stringAttr(node, "approximate", "none");
  Value inner;
  if (approximate == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    Value cube = nnb.mul(*x, nnb.mul(*x, *x));
    Value arg = nnb.mul(c(std::sqrt(2.0 / M_PI)),
                        nnb.add(*x, nnb.mul(c(0.044715), cube)));
    inner = nn::TanhOp::create(b, loc, arg);
  } else if (approximate == "none") {
    // 0.5 x (1 + erf(x / sqrt(2))).
    inner = nn::ErfOp::create(b, loc, nnb.mul(*x, c(M_SQRT1_2)));
  } else {
    return im.error(node) << "unknown approximate '" << approximate << "'";
  }
  Value half = nnb.mul(*x, c(0.5));
  return im.setResult(node,
                      im.create<nn::MulOp>(node, half, nnb.add(c(1.0), inner)));
}

} // namespace

void onnx_import::addElementwiseHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Neg", 6, importAnyUnary<nn::NegOp>});
  list.push_back({"Abs", 6, importAnyUnary<nn::AbsOp>});
  list.push_back({"Exp", 6, importUnary<nn::ExpOp>});
  list.push_back({"Log", 6, importUnary<nn::LogOp>});
  list.push_back({"Sqrt", 6, importUnary<nn::SqrtOp>});
  list.push_back({"Erf", 9, importUnary<nn::ErfOp>});
  list.push_back({"Relu", 6, importUnary<nn::ReluOp>});
  list.push_back({"Sigmoid", 6, importUnary<nn::SigmoidOp>});
  list.push_back({"Tanh", 6, importUnary<nn::TanhOp>});
  list.push_back({"Sin", 7, importUnary<nn::SinOp>});
  list.push_back({"Cos", 7, importUnary<nn::CosOp>});
  list.push_back({"Sign", 9, importUnary<nn::SignOp>});
  list.push_back({"Sinh", 9, importHyperbolic<-1>});
  list.push_back({"Cosh", 9, importHyperbolic<1>});
  list.push_back({"Floor", 6, importUnary<nn::FloorOp>});
  list.push_back({"Ceil", 6, importUnary<nn::CeilOp>});
  list.push_back({"Round", 11, importUnary<nn::RoundOp>});
  list.push_back({"Reciprocal", 6, importReciprocal});
  list.push_back({"LeakyRelu", 6, importLeakyRelu});
  list.push_back({"Elu", 6, importElu});
  list.push_back({"Softplus", 1, importSoftplus});
  list.push_back({"HardSigmoid", 6, importHardSigmoid});
  list.push_back({"HardSwish", 14, importHardSwish});
  list.push_back({"Softsign", 1, importSoftsign});
  list.push_back({"Swish", 24, importSwish});
  list.push_back({"Selu", 6, importSelu});
  list.push_back({"Celu", 12, importCelu});
  list.push_back({"ThresholdedRelu", 10, importThresholdedRelu});
  list.push_back({"Mish", 18, importMish});
  list.push_back({"PRelu", 9, importPRelu});
  list.push_back({"Gelu", 20, importGelu});
  list.push_back({"Add", 7, importBinary<nn::AddOp>});
  list.push_back({"Sub", 7, importBinary<nn::SubOp>});
  list.push_back({"Mul", 7, importBinary<nn::MulOp>});
  list.push_back({"Div", 7, importBinary<nn::DivOp>});
  list.push_back({"Max", 8, importVariadic<nn::MaxOp>});
  list.push_back({"Min", 8, importVariadic<nn::MinOp>});
  list.push_back({"Sum", 6, importVariadic<nn::AddOp>});
  list.push_back({"Mod", 10, importMod});
  list.push_back({"Greater", 7, importBinary<nn::GreaterOp>});
  list.push_back({"Less", 7, importBinary<nn::LessOp>});
  list.push_back({"Equal", 7, importBinary<nn::EqualOp>});
  list.push_back({"LessOrEqual", 12, importBinary<nn::LessOrEqualOp>});
  list.push_back({"GreaterOrEqual", 12, importBinary<nn::GreaterOrEqualOp>});
  list.push_back({"And", 7, importBinary<nn::AndOp>});
  list.push_back({"Or", 7, importBinary<nn::OrOp>});
  list.push_back({"Xor", 7, importBinary<nn::XorOp>});
  list.push_back({"IsNaN", 9, importIsNaN});
  list.push_back({"IsInf", 10, importIsInf});
  list.push_back({"Not", 1, importNot});
  list.push_back({"Pow", 7, importPow, {1}});
  list.push_back({"Clip", 6, importClip, {1, 2}});
  list.push_back({"Where", 9, importWhere});
  list.push_back({"Identity", 1, importIdentity});
  list.push_back({"Cast", 6, importCast});
  list.push_back({"CastLike", 15, importCastLike, {1}});
}
