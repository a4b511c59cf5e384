//===- ElementwiseHandlers.cpp - import elementwise ops ---------*- C++ -*-===//

#include "GraphImporter.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

template <typename OpTy>
LogicalResult importUnary(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  if (!isa<FloatType>(getElementTypeOrSelf(x->getType())))
    return im.error(node) << "expects a floating-point input, got "
                          << x->getType();
  FailureOr<OpTy> op = im.create<OpTy>(node, *x);
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

template <typename OpTy>
LogicalResult importBinary(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> lhs = im.input(node, 0), rhs = im.input(node, 1);
  if (failed(lhs) || failed(rhs))
    return failure();
  FailureOr<OpTy> op = im.create<OpTy>(node, *lhs, *rhs);
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

LogicalResult importPow(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> base = im.input(node, 0);
  FailureOr<DenseElementsAttr> exponent =
      im.constantInput(node, 1, "the exponent");
  if (failed(base) || failed(exponent))
    return failure();
  auto baseType = cast<RankedTensorType>(base->getType());
  auto floatType = dyn_cast<FloatType>(baseType.getElementType());
  if (!floatType)
    return im.error(node) << "expects a floating-point base";
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
  FailureOr<nn::PowOp> op = im.create<nn::PowOp>(node, *base, exp);
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

LogicalResult importWhere(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> c = im.input(node, 0), x = im.input(node, 1),
                   y = im.input(node, 2);
  if (failed(c) || failed(x) || failed(y))
    return failure();
  FailureOr<nn::WhereOp> op = im.create<nn::WhereOp>(node, *c, *x, *y);
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

LogicalResult importIdentity(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  FailureOr<nn::IdentityOp> op = im.create<nn::IdentityOp>(node, *x);
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

} // namespace

void onnx_import::addElementwiseHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Neg", 6, importUnary<nn::NegOp>});
  list.push_back({"Exp", 6, importUnary<nn::ExpOp>});
  list.push_back({"Log", 6, importUnary<nn::LogOp>});
  list.push_back({"Sqrt", 6, importUnary<nn::SqrtOp>});
  list.push_back({"Relu", 6, importUnary<nn::ReluOp>});
  list.push_back({"Sigmoid", 6, importUnary<nn::SigmoidOp>});
  list.push_back({"Tanh", 6, importUnary<nn::TanhOp>});
  list.push_back({"Add", 7, importBinary<nn::AddOp>});
  list.push_back({"Sub", 7, importBinary<nn::SubOp>});
  list.push_back({"Mul", 7, importBinary<nn::MulOp>});
  list.push_back({"Div", 7, importBinary<nn::DivOp>});
  list.push_back({"Greater", 7, importBinary<nn::GreaterOp>});
  list.push_back({"Pow", 7, importPow, {1}});
  list.push_back({"Where", 9, importWhere});
  list.push_back({"Identity", 1, importIdentity});
}
