//===- NNTypeInference.cpp - shared result-type inference -------*- C++ -*-===//
//
// Result-type inference for the nn op families: broadcasting elementwise ops,
// reductions, contractions, shape ops and losses. Everything here works on
// static shapes.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace accrue::nn;

FailureOr<SmallVector<int64_t>>
accrue::nn::broadcastShapes(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l != r && l != 1 && r != 1)
      return failure();
    result[i] = l == 1 ? r : l;
  }
  return result;
}

LogicalResult
accrue::nn::inferElementwiseResultType(std::optional<Location> loc,
                                       ValueRange operands, Type elementType,
                                       SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> shape;
  for (Value operand : operands) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || !type.hasStaticShape())
      return emitOptionalError(loc,
                               "operands must be statically shaped tensors");
    FailureOr<SmallVector<int64_t>> next =
        broadcastShapes(shape, type.getShape());
    if (failed(next)) {
      std::string message;
      llvm::raw_string_ostream os(message);
      os << "operand shapes do not broadcast: ";
      llvm::interleave(operands.getTypes(), os, ", ");
      return emitOptionalError(loc, message);
    }
    shape = std::move(*next);
  }
  types.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

LogicalResult accrue::nn::inferReductionResultType(
    std::optional<Location> loc, Type inputType, ArrayRef<int64_t> axes,
    bool keepdims, SmallVectorImpl<Type> &types) {
  auto type = cast<RankedTensorType>(inputType);
  int64_t rank = type.getRank();
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return emitOptionalError(loc, "axis " + Twine(axes[i]) +
                                        " is out of range for rank " +
                                        Twine(rank));
    if (i > 0 && axes[i] <= axes[i - 1])
      return emitOptionalError(loc, "axes must be sorted and unique");
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(type.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto a = cast<RankedTensorType>(adaptor.getA().getType());
  auto b = cast<RankedTensorType>(adaptor.getB().getType());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOptionalError(loc, "Gemm operands A and B must be matrices");
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc, "Gemm operands have different element types");
  bool transA = adaptor.getTransA();
  bool transB = adaptor.getTransB();
  int64_t m = a.getDimSize(transA ? 1 : 0), ka = a.getDimSize(transA ? 0 : 1);
  int64_t kb = b.getDimSize(transB ? 1 : 0), n = b.getDimSize(transB ? 0 : 1);
  if (ka != kb)
    return emitOptionalError(loc, "Gemm inner dimensions differ: " + Twine(ka) +
                                      " vs " + Twine(kb));
  if (Value c = adaptor.getC()) {
    auto cType = cast<RankedTensorType>(c.getType());
    if (cType.getElementType() != a.getElementType())
      return emitOptionalError(loc, "Gemm operand C has another element type");
    FailureOr<SmallVector<int64_t>> shape =
        broadcastShapes({m, n}, cType.getShape());
    if (failed(shape) || *shape != SmallVector<int64_t>{m, n})
      return emitOptionalError(loc, "Gemm operand C does not broadcast to [" +
                                        Twine(m) + ", " + Twine(n) + "]");
  }
  types.push_back(RankedTensorType::get({m, n}, a.getElementType()));
  return success();
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "MatMul operands must have rank >= 2");
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc,
                             "MatMul operands have different element types");
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  if (l.back() != r[r.size() - 2])
    return emitOptionalError(
        loc, "MatMul inner dimensions differ: " + Twine(l.back()) + " vs " +
                 Twine(r[r.size() - 2]));
  FailureOr<SmallVector<int64_t>> batch =
      broadcastShapes(l.drop_back(2), r.drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "MatMul batch dimensions do not broadcast");
  SmallVector<int64_t> shape = *batch;
  shape.push_back(l[l.size() - 2]);
  shape.push_back(r.back());
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis > type.getRank())
    return emitOptionalError(loc, "Flatten axis " + Twine(axis) +
                                      " is out of range for rank " +
                                      Twine(type.getRank()));
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < type.getRank(); ++d)
    (d < axis ? rows : cols) *= type.getDimSize(d);
  types.push_back(RankedTensorType::get({rows, cols}, type.getElementType()));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return emitOptionalError(loc, "Transpose perm has " + Twine(perm.size()) +
                                      " entries for rank " +
                                      Twine(type.getRank()));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return emitOptionalError(loc, "Transpose perm is not a permutation");
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Shapes shared by the classification losses: `scores` [N, C, d...],
/// `labels` [N, d...], optional `weights` [C].
static LogicalResult inferLossResultType(std::optional<Location> loc,
                                         Value scoresValue, Value labelsValue,
                                         Value weights, LossReduction reduction,
                                         SmallVectorImpl<Type> &types) {
  auto scores = cast<RankedTensorType>(scoresValue.getType());
  auto labels = cast<RankedTensorType>(labelsValue.getType());
  if (scores.getRank() < 2)
    return emitOptionalError(loc, "scores must have shape [N, C, ...]");
  SmallVector<int64_t> itemShape{scores.getDimSize(0)};
  llvm::append_range(itemShape, scores.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(itemShape))
    return emitOptionalError(loc, "labels must have the shape of scores "
                                  "without the class dimension");
  if (weights) {
    auto w = cast<RankedTensorType>(weights.getType());
    if (w.getRank() != 1 || w.getDimSize(0) != scores.getDimSize(1) ||
        w.getElementType() != scores.getElementType())
      return emitOptionalError(loc, "weights must be a [C] tensor of the "
                                    "scores' element type");
  }
  if (reduction == LossReduction::None)
    types.push_back(RankedTensorType::get(itemShape, scores.getElementType()));
  else
    types.push_back(RankedTensorType::get({}, scores.getElementType()));
  return success();
}

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferLossResultType(loc, adaptor.getScores(), adaptor.getLabels(),
                             adaptor.getWeights(), adaptor.getReduction(),
                             types);
}

LogicalResult NegativeLogLikelihoodLossOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferLossResultType(loc, adaptor.getInput(), adaptor.getTarget(),
                             adaptor.getWeights(), adaptor.getReduction(),
                             types);
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "Concat needs at least one input");
  auto first = cast<RankedTensorType>(inputs[0].getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "Concat axis ", axis,
                             " is out of range for rank ", first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value input : inputs) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return emitOptionalError(loc, "Concat inputs differ in rank or "
                                    "element type");
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "Concat inputs differ in dimension ", d);
    shape[axis] += type.getDimSize(axis);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto data = cast<RankedTensorType>(adaptor.getData().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= data.getRank())
    return emitOptionalError(loc, "Gather axis ", axis,
                             " is out of range for rank ", data.getRank());
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  types.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Output size of a sliding window along one dimension.
static int64_t windowOutput(int64_t size, int64_t padBefore, int64_t padAfter,
                            int64_t kernel, int64_t stride, int64_t dilation) {
  int64_t extent = dilation * (kernel - 1) + 1;
  return (size + padBefore + padAfter - extent) / stride + 1;
}

/// Checks 2-D window attributes (pads top, left, bottom, right).
static LogicalResult
verifyWindow(std::optional<Location> loc, StringRef op, RankedTensorType input,
             ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
             ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations) {
  if (input.getRank() != 4)
    return emitOptionalError(loc, op, " supports 2-D inputs [N, C, H, W], not ",
                             input);
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4 ||
      dilations.size() != 2)
    return emitOptionalError(loc, op,
                             " needs 2 kernel sizes, strides and "
                             "dilations and 4 pads");
  for (int64_t v : llvm::concat<const int64_t>(kernel, strides, dilations))
    if (v <= 0)
      return emitOptionalError(loc, op,
                               " kernel sizes, strides and "
                               "dilations must be positive");
  for (int64_t p : pads)
    if (p < 0)
      return emitOptionalError(loc, op, " pads must be non-negative");
  for (int d = 0; d < 2; ++d)
    if (windowOutput(input.getDimSize(2 + d), pads[d], pads[2 + d], kernel[d],
                     strides[d], dilations[d]) <= 0)
      return emitOptionalError(loc, op, " window does not fit the input");
  return success();
}

static RankedTensorType windowResult(RankedTensorType input, int64_t channels,
                                     ArrayRef<int64_t> kernel,
                                     ArrayRef<int64_t> strides,
                                     ArrayRef<int64_t> pads,
                                     ArrayRef<int64_t> dilations) {
  return RankedTensorType::get(
      {input.getDimSize(0), channels,
       windowOutput(input.getDimSize(2), pads[0], pads[2], kernel[0],
                    strides[0], dilations[0]),
       windowOutput(input.getDimSize(3), pads[1], pads[3], kernel[1],
                    strides[1], dilations[1])},
      input.getElementType());
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = cast<RankedTensorType>(adaptor.getWeight().getType());
  int64_t group = adaptor.getGroup();
  if (input.getRank() != 4)
    return emitOptionalError(loc, "Conv supports 2-D inputs [N, C, H, W], not ",
                             input);
  if (weight.getRank() != 4)
    return emitOptionalError(loc, "Conv weight must be [F, C/group, KH, KW]");
  SmallVector<int64_t> kernel{weight.getDimSize(2), weight.getDimSize(3)};
  if (failed(verifyWindow(loc, "Conv", input, kernel, adaptor.getStrides(),
                          adaptor.getPads(), adaptor.getDilations())))
    return failure();
  int64_t channels = input.getDimSize(1), filters = weight.getDimSize(0);
  if (group <= 0 || channels % group != 0 || filters % group != 0 ||
      weight.getDimSize(1) != channels / group)
    return emitOptionalError(loc, "Conv weight ", weight, " does not match ",
                             channels, " input channels in ", group, " groups");
  if (weight.getElementType() != input.getElementType())
    return emitOptionalError(loc, "Conv operands differ in element type");
  if (Value bias = adaptor.getBias()) {
    auto b = cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != filters)
      return emitOptionalError(loc, "Conv bias must be [", filters, "]");
  }
  types.push_back(windowResult(input, filters, kernel, adaptor.getStrides(),
                               adaptor.getPads(), adaptor.getDilations()));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  if (failed(verifyWindow(loc, "MaxPool", input, adaptor.getKernel(),
                          adaptor.getStrides(), adaptor.getPads(),
                          adaptor.getDilations())))
    return failure();
  types.push_back(windowResult(input, input.getDimSize(1), adaptor.getKernel(),
                               adaptor.getStrides(), adaptor.getPads(),
                               adaptor.getDilations()));
  return success();
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t ones[] = {1, 1};
  if (failed(verifyWindow(loc, "AveragePool", input, adaptor.getKernel(),
                          adaptor.getStrides(), adaptor.getPads(), ones)))
    return failure();
  types.push_back(windowResult(input, input.getDimSize(1), adaptor.getKernel(),
                               adaptor.getStrides(), adaptor.getPads(), ones));
  return success();
}
