//===- LossHandlers.cpp - import loss operators -----------------*- C++ -*-===//

#include "GraphImporter.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

LogicalResult importSoftmaxCrossEntropyLoss(GraphImporter &im,
                                            const onnx::NodeProto &node) {
  FailureOr<Value> scores = im.input(node, 0), labels = im.input(node, 1);
  FailureOr<Value> weights = im.optionalInput(node, 2);
  if (failed(scores) || failed(labels) || failed(weights))
    return failure();
  std::string reduction = im.stringAttr(node, "reduction", "mean");
  std::optional<nn::LossReduction> kind = nn::symbolizeLossReduction(reduction);
  if (!kind)
    return im.error(node) << "unknown reduction '" << reduction << "'";
  IntegerAttr ignore;
  if (im.attribute(node, "ignore_index"))
    ignore = im.builder.getI64IntegerAttr(im.intAttr(node, "ignore_index", 0));
  FailureOr<nn::SoftmaxCrossEntropyLossOp> op =
      im.create<nn::SoftmaxCrossEntropyLossOp>(
          node, *scores, *labels, *weights,
          nn::LossReductionAttr::get(im.builder.getContext(), *kind), ignore);
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

} // namespace

void onnx_import::addLossHandlers(std::vector<OpRegistration> &list) {
  list.push_back(
      {"SoftmaxCrossEntropyLoss", 12, importSoftmaxCrossEntropyLoss});
}
