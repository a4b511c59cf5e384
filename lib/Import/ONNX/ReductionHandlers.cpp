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
                                            int64_t rank,
                                            int64_t inputSince) {
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

/// Emits reduction `OpTy` of `x` as the node asks; `square` first squares
/// the input (ReduceSumSquare, ReduceL2) and `root` takes the square root
/// after (ReduceL2).
template <typename OpTy, int64_t InputSince, bool Square = false,
          bool Root = false>
LogicalResult importReduction(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  // Integer sums are counts (`mask.sum()`); the maximum and minimum of
  // booleans (opset 20) are any and all; other reductions take floats.
  bool integerSum = std::is_same_v<OpTy, nn::ReduceSumOp> && !Square &&
                    type.getElementType().isInteger() &&
                    !type.getElementType().isInteger(1);
  bool boolExtremum =
      (std::is_same_v<OpTy, nn::ReduceMaxOp> ||
       std::is_same_v<OpTy, nn::ReduceMinOp>) &&
      type.getElementType().isInteger(1);
  if (!isa<FloatType>(type.getElementType()) && !integerSum && !boolExtremum)
    return im.error(node) << "expects a floating-point input"
                          << (std::is_same_v<OpTy, nn::ReduceSumOp>
                                  ? " or 32/64-bit integers"
                                  : "");
  FailureOr<SmallVector<int64_t>> axes =
      resolveAxes(im, node, type.getRank(), InputSince);
  if (failed(axes))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Value input = Square ? nnb.mul(*x, *x) : *x;
  if (axes->empty())
    return im.setResult(node, Root ? im.create<nn::AbsOp>(node, *x)
                                   : FailureOr<Value>(input));
  bool keepdims = im.intAttr(node, "keepdims", 1) != 0;
  if (boolExtremum) {
    // As 0/1 floats, and back.
    FailureOr<Value> asFloat = im.create<nn::CastOp>(
        node,
        RankedTensorType::get(type.getShape(), im.builder.getF32Type()),
        input);
    if (failed(asFloat))
      return failure();
    input = *asFloat;
  }
  FailureOr<Value> reduced =
      im.create<OpTy>(node, input, im.builder.getDenseI64ArrayAttr(*axes),
                      im.builder.getBoolAttr(keepdims));
  if (boolExtremum && succeeded(reduced))
    reduced = im.create<nn::CastOp>(
        node,
        RankedTensorType::get(cast<RankedTensorType>(reduced->getType())
                                  .getShape(),
                              type.getElementType()),
        *reduced);
  if (Root && succeeded(reduced))
    reduced = im.create<nn::SqrtOp>(node, *reduced);
  return im.setResult(node, reduced);
}

template <typename OpTy>
LogicalResult importArgReduction(GraphImporter &im,
                                 const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  Builder &b = im.builder;
  return im.setResult(
      node, im.create<OpTy>(
                node, *x, b.getI64IntegerAttr(*axis),
                b.getBoolAttr(im.intAttr(node, "keepdims", 1) != 0),
                b.getBoolAttr(im.intAttr(node, "select_last_index", 0) != 0)));
}

} // namespace

void onnx_import::addReductionHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"ReduceSum", 1, importReduction<nn::ReduceSumOp, 13>, {1}});
  list.push_back({"ReduceMean", 1, importReduction<nn::ReduceMeanOp, 18>, {1}});
  list.push_back({"ReduceMax", 1, importReduction<nn::ReduceMaxOp, 18>, {1}});
  list.push_back({"ReduceMin", 1, importReduction<nn::ReduceMinOp, 18>, {1}});
  list.push_back({"ReduceSumSquare", 1,
                  importReduction<nn::ReduceSumOp, 18, true>, {1}});
  list.push_back({"ReduceL2", 1,
                  importReduction<nn::ReduceSumOp, 18, true, true>, {1}});
  list.push_back({"ArgMax", 1, importArgReduction<nn::ArgMaxOp>});
  list.push_back({"ArgMin", 1, importArgReduction<nn::ArgMinOp>});
}
