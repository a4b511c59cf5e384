//===- LossHandlers.cpp - import loss operators -----------------*- C++ -*-===//

#include "GraphImporter.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

/// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss share their inputs
/// and attributes; the cross-entropy's optional log_prob output is the
/// log-softmax of the scores.
template <typename OpTy, bool IsSCE>
LogicalResult importClassificationLoss(GraphImporter &im,
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
  if (failed(im.setResult(
          node, im.create<OpTy>(
                    node, *scores, *labels, *weights,
                    nn::LossReductionAttr::get(im.builder.getContext(), *kind),
                    ignore))))
    return failure();
  if (IsSCE && node.output_size() > 1 && !node.output(1).empty()) {
    FailureOr<Value> logProb = im.create<nn::LogSoftmaxOp>(
        node, *scores, im.builder.getI64IntegerAttr(1));
    if (failed(logProb))
      return failure();
    im.setOutput(node, 1, *logProb);
  }
  return success();
}

} // namespace

void onnx_import::addLossHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"SoftmaxCrossEntropyLoss",
                  12,
                  importClassificationLoss<nn::SoftmaxCrossEntropyLossOp, true>,
                  {2}});
  list.push_back(
      {"NegativeLogLikelihoodLoss",
       12,
       importClassificationLoss<nn::NegativeLogLikelihoodLossOp, false>,
       {2}});
}
