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

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  auto scores = cast<RankedTensorType>(adaptor.getScores().getType());
  auto labels = cast<RankedTensorType>(adaptor.getLabels().getType());
  if (scores.getRank() < 2)
    return emitOptionalError(loc, "scores must have shape [N, C, ...]");
  SmallVector<int64_t> itemShape{scores.getDimSize(0)};
  llvm::append_range(itemShape, scores.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(itemShape))
    return emitOptionalError(loc, "labels must have the shape of scores "
                                  "without the class dimension");
  if (Value weights = adaptor.getWeights()) {
    auto w = cast<RankedTensorType>(weights.getType());
    if (w.getRank() != 1 || w.getDimSize(0) != scores.getDimSize(1) ||
        w.getElementType() != scores.getElementType())
      return emitOptionalError(loc, "weights must be a [C] tensor of the "
                                    "scores' element type");
  }
  if (adaptor.getReduction() == LossReduction::None)
    types.push_back(RankedTensorType::get(itemShape, scores.getElementType()));
  else
    types.push_back(RankedTensorType::get({}, scores.getElementType()));
  return success();
}
