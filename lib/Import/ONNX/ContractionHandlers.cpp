//===- ContractionHandlers.cpp - import Gemm and MatMul ---------*- C++ -*-===//

#include "GraphImporter.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

LogicalResult importGemm(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> a = im.input(node, 0), b = im.input(node, 1);
  FailureOr<Value> c = im.optionalInput(node, 2);
  if (failed(a) || failed(b) || failed(c))
    return failure();
  OpBuilder &builder = im.builder;
  FailureOr<Value> op = im.create<nn::GemmOp>(
      node, *a, *b, *c,
      builder.getF32FloatAttr(im.floatAttr(node, "alpha", 1.0f)),
      builder.getF32FloatAttr(im.floatAttr(node, "beta", 1.0f)),
      builder.getBoolAttr(im.intAttr(node, "transA", 0) != 0),
      builder.getBoolAttr(im.intAttr(node, "transB", 0) != 0));
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

/// numpy.matmul's rank-1 rules: a rank-1 lhs is a row, a rank-1 rhs a
/// column, and the added dimension is dropped from the result.
LogicalResult importMatMul(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> lhs = im.input(node, 0), rhs = im.input(node, 1);
  if (failed(lhs) || failed(rhs))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  auto lhsType = cast<RankedTensorType>(lhs->getType());
  auto rhsType = cast<RankedTensorType>(rhs->getType());
  if (lhsType.getRank() == 0 || rhsType.getRank() == 0)
    return im.error(node) << "operands must have rank >= 1";
  bool lhsVector = lhsType.getRank() == 1, rhsVector = rhsType.getRank() == 1;
  Value l = *lhs, r = *rhs;
  if (lhsVector)
    l = nnb.reshape(l, RankedTensorType::get({1, lhsType.getDimSize(0)},
                                             lhsType.getElementType()));
  if (rhsVector)
    r = nnb.reshape(r, RankedTensorType::get({rhsType.getDimSize(0), 1},
                                             rhsType.getElementType()));
  FailureOr<Value> op = im.create<nn::MatMulOp>(node, l, r);
  if (failed(op))
    return failure();
  Value result = *op;
  if (lhsVector || rhsVector) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<int64_t> shape(type.getShape());
    if (rhsVector)
      shape.pop_back();
    if (lhsVector)
      shape.erase(shape.end() - (rhsVector ? 1 : 2));
    result = nnb.reshape(result,
                         RankedTensorType::get(shape, type.getElementType()));
  }
  im.setOutput(node, 0, result);
  return success();
}

} // namespace

void onnx_import::addContractionHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Gemm", 7, importGemm});
  list.push_back({"MatMul", 1, importMatMul});
}
