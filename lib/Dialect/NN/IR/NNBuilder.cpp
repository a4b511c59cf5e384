//===- NNBuilder.cpp - helpers to emit nn ops -------------------*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace accrue::nn;

Value NNBuilder::splat(RankedTensorType type, double value) {
  Type element = type.getElementType();
  Attribute attr;
  if (isa<FloatType>(element))
    attr = b.getFloatAttr(element, value);
  else
    attr = b.getIntegerAttr(element, static_cast<int64_t>(value));
  return ConstantOp::create(b, loc, type, SplatElementsAttr::get(type, attr));
}

Value NNBuilder::scalar(Type elementType, double value) {
  return splat(RankedTensorType::get({}, elementType), value);
}

Value NNBuilder::reshape(Value value, RankedTensorType target) {
  if (value.getType() == target)
    return value;
  return ReshapeOp::create(b, loc, target, value);
}

Value NNBuilder::broadcastTo(Value value, RankedTensorType target) {
  if (value.getType() == target)
    return value;
  return ExpandOp::create(b, loc, target, value);
}

Value NNBuilder::rowsProduct(Value a, Value d) {
  auto aType = cast<RankedTensorType>(a.getType());
  auto dType = cast<RankedTensorType>(d.getType());
  int64_t i = aType.getShape().back(), j = dType.getShape().back();
  int64_t rows = aType.getNumElements() / i;
  Value a2 =
      reshape(a, RankedTensorType::get({rows, i}, aType.getElementType()));
  Value d2 =
      reshape(d, RankedTensorType::get({rows, j}, dType.getElementType()));
  FloatAttr one = b.getF32FloatAttr(1.0f);
  return GemmOp::create(b, loc, a2, d2, /*c=*/Value(), one, one,
                        b.getBoolAttr(true), b.getBoolAttr(false));
}

Value NNBuilder::sumToShape(Value value, RankedTensorType target) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type == target)
    return value;
  int64_t lead = type.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < lead ||
        (target.getDimSize(d - lead) == 1 && type.getDimSize(d) != 1))
      axes.push_back(d);
  if (!axes.empty())
    value = ReduceSumOp::create(b, loc, value, axes, /*keepdims=*/true);
  return reshape(value, target);
}

Value NNBuilder::add(Value lhs, Value rhs) {
  return AddOp::create(b, loc, lhs, rhs);
}
Value NNBuilder::sub(Value lhs, Value rhs) {
  return SubOp::create(b, loc, lhs, rhs);
}
Value NNBuilder::mul(Value lhs, Value rhs) {
  return MulOp::create(b, loc, lhs, rhs);
}
Value NNBuilder::div(Value lhs, Value rhs) {
  return DivOp::create(b, loc, lhs, rhs);
}
