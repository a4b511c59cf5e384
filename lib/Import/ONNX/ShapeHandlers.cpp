//===- ShapeHandlers.cpp - import shape and data-movement ops ---*- C++ -*-===//

#include "GraphImporter.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

LogicalResult importReshape(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<SmallVector<int64_t>> shape =
      im.constantInts(node, 1, "the target shape");
  if (failed(x) || failed(shape))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  bool allowZero = im.intAttr(node, "allowzero", 0) != 0;
  // Resolve 0 (copy the input's dimension) and -1 (infer).
  SmallVector<int64_t> dims;
  int64_t known = 1, inferred = -1;
  for (auto [i, d] : llvm::enumerate(*shape)) {
    if (d == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= type.getRank())
        return im.error(node)
               << "shape entry " << i << " is 0 but the input has rank "
               << type.getRank();
      d = type.getDimSize(i);
    }
    if (d == -1) {
      if (inferred >= 0)
        return im.error(node) << "shape has more than one -1";
      inferred = i;
      dims.push_back(1);
      continue;
    }
    if (d < 0)
      return im.error(node) << "shape entry " << d << " is invalid";
    known *= d;
    dims.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || type.getNumElements() % known != 0)
      return im.error(node)
             << "cannot infer the -1 dimension: " << type.getNumElements()
             << " elements do not divide into " << known;
    dims[inferred] = type.getNumElements() / known;
  }
  auto resultType = RankedTensorType::get(dims, type.getElementType());
  FailureOr<nn::ReshapeOp> op = im.create<nn::ReshapeOp>(node, resultType, *x);
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

LogicalResult importFlatten(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  int64_t axis = im.intAttr(node, "axis", 1);
  if (axis < -rank || axis > rank)
    return im.error(node) << "axis " << axis << " is out of range for rank "
                          << rank;
  if (axis < 0)
    axis += rank;
  FailureOr<nn::FlattenOp> op =
      im.create<nn::FlattenOp>(node, *x, im.builder.getI64IntegerAttr(axis));
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

LogicalResult importTranspose(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  SmallVector<int64_t> perm;
  if (auto attr = im.intsAttr(node, "perm"))
    perm = *attr;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  FailureOr<nn::TransposeOp> op = im.create<nn::TransposeOp>(
      node, *x, im.builder.getDenseI64ArrayAttr(perm));
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

LogicalResult importConstant(GraphImporter &im, const onnx::NodeProto &node) {
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  DenseElementsAttr value;
  if (const onnx::AttributeProto *attr = im.attribute(node, "value")) {
    FailureOr<DenseElementsAttr> decoded =
        decodeTensor(attr->t(), b.getContext(), im.modelPath, loc);
    if (failed(decoded))
      return failure();
    value = *decoded;
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   attr->f());
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   static_cast<int64_t>(attr->i()));
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_floats")) {
    SmallVector<float> v(attr->floats().begin(), attr->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(v.size())}, b.getF32Type()),
        ArrayRef(v));
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_ints")) {
    SmallVector<int64_t> v(attr->ints().begin(), attr->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(v.size())}, b.getI64Type()),
        ArrayRef(v));
  } else {
    return im.error(node) << "needs a value, value_float(s) or value_int(s) "
                             "attribute (sparse and string constants are not "
                             "supported)";
  }
  im.setOutput(node, 0, nn::ConstantOp::create(b, loc, value));
  return success();
}

} // namespace

void onnx_import::addShapeHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Reshape", 5, importReshape, {1}});
  list.push_back({"Flatten", 1, importFlatten});
  list.push_back({"Transpose", 1, importTranspose});
  list.push_back({"Constant", 1, importConstant});
}
