//===- ReductionHandlers.cpp - import reductions ----------------*- C++ -*-===//

#include "GraphImporter.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

/// Resolves ONNX's axes (attribute before `inputSince`, optional input from
/// then on), negative axes and "no axes means all, unless
/// noop_with_empty_axes" into a sorted list. Empty result means identity.
FailureOr<SmallVector<int64_t>> resolveAxes(GraphImporter &im,
                                            const onnx::NodeProto &node,
                                            int64_t rank, int64_t inputSince) {
  SmallVector<int64_t> axes;
  if (im.opset >= inputSince) {
    if (node.input_size() > 1 && !node.input(1).empty()) {
      FailureOr<SmallVector<int64_t>> given =
          im.constantInts(node, 1, "the axes");
      if (failed(given))
        return failure();
      axes = *given;
    }
  } else if (auto attr = im.intsAttr(node, "axes")) {
    axes = *attr;
  }
  if (axes.empty()) {
    if (im.opset >= inputSince && im.intAttr(node, "noop_with_empty_axes", 0))
      return axes;
    return llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  for (int64_t &axis : axes) {
    FailureOr<int64_t> normalized = im.normalizeAxis(node, axis, rank);
    if (failed(normalized))
      return failure();
    axis = *normalized;
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return im.error(node) << "axes repeat";
  return axes;
}

template <typename OpTy, int64_t InputSince>
LogicalResult importReduction(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  if (!isa<FloatType>(type.getElementType()))
    return im.error(node) << "expects a floating-point input";
  FailureOr<SmallVector<int64_t>> axes =
      resolveAxes(im, node, type.getRank(), InputSince);
  if (failed(axes))
    return failure();
  if (axes->empty()) {
    im.setOutput(node, 0, *x);
    return success();
  }
  bool keepdims = im.intAttr(node, "keepdims", 1) != 0;
  FailureOr<OpTy> op =
      im.create<OpTy>(node, *x, im.builder.getDenseI64ArrayAttr(*axes),
                      im.builder.getBoolAttr(keepdims));
  if (failed(op))
    return failure();
  im.setOutput(node, 0, *op);
  return success();
}

} // namespace

void onnx_import::addReductionHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"ReduceSum", 1, importReduction<nn::ReduceSumOp, 13>, {1}});
  list.push_back({"ReduceMean", 1, importReduction<nn::ReduceMeanOp, 18>, {1}});
}
