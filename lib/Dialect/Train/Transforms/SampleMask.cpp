//===- SampleMask.cpp - which samples a value's rows hold -------*- C++ -*-===//

#include "SampleMask.h"

#include "accrue/Dialect/NN/IR/NN.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

SampleMask::SampleMask(func::FuncOp function, ArrayRef<unsigned> batchArgs,
                       int64_t microBatch, Value valid)
    : microBatch(microBatch), valid(valid) {
  for (unsigned i : batchArgs)
    rows[function.getArgument(i)] = nn::SampleRows::Rows;
  function.walk([&](Operation *op) {
    for (OpResult result : op->getResults())
      rows[result] = classify(op, result);
  });
}

/// `x` with the elements of padded samples set to 0, or null when the
/// samples of `x`'s elements are unknown.
Value SampleMask::maskValues(OpBuilder &b, Location loc, Value x) {
  if (!byRows(x))
    return {};
  auto type = cast<RankedTensorType>(x.getType());
  Value keep = keepRows(b, loc, type);
  Value factor = nn::CastOp::create(
      b, loc,
      RankedTensorType::get(cast<RankedTensorType>(keep.getType()).getShape(),
                            type.getElementType()),
      keep);
  return nn::NNBuilder(b, loc).mul(x, factor);
}

/// `labels` with the labels of padded samples replaced by `ignore`, or
/// null when the samples of the labels are unknown.
Value SampleMask::maskLabels(OpBuilder &b, Location loc, Value labels,
                             int64_t ignore) {
  if (!byRows(labels))
    return {};
  auto type = cast<RankedTensorType>(labels.getType());
  Value keep = keepRows(b, loc, type);
  Value ignored = nn::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                             b.getIntegerAttr(type.getElementType(), ignore)));
  return nn::WhereOp::create(b, loc, type, keep, labels, ignored);
}

/// The number of valid samples, as a 0-d f32 tensor.
Value SampleMask::validCount(OpBuilder &b, Location loc) {
  return nn::CastOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()),
                            valid);
}

nn::SampleRows SampleMask::rowsOf(Value v) const {
  auto it = rows.find(v);
  return it == rows.end() ? nn::SampleRows::Free : it->second;
}

nn::SampleRows SampleMask::classify(Operation *op, OpResult result) {
  if (llvm::all_of(op->getOperands(),
                   [&](Value v) { return rowsOf(v) == nn::SampleRows::Free; }))
    return nn::SampleRows::Free;
  if (!isa<RankedTensorType>(result.getType()))
    return nn::SampleRows::Other;
  auto lookup = [&](Value v) { return rowsOf(v); };
  nn::SampleRowQuery query(microBatch, lookup);
  if (op->hasTrait<nn::trait::Elementwise>())
    return query.aligned(op, result);
  if (auto rowsOp = dyn_cast<nn::SampleRowsOpInterface>(op))
    return rowsOp.getSampleRows(result, query);
  if (unexplained.empty() || unexplained.back() != op)
    unexplained.push_back(op);
  return nn::SampleRows::Other;
}

/// An i1 tensor broadcastable to `type`: true on the rows of valid samples.
Value SampleMask::keepRows(OpBuilder &b, Location loc, RankedTensorType type) {
  int64_t rows = type.getDimSize(0), perSample = rows / microBatch;
  SmallVector<int64_t> sample;
  for (int64_t r = 0; r < rows; ++r)
    sample.push_back(r / perSample);
  auto indexType = RankedTensorType::get({rows}, b.getI64Type());
  Value index = nn::ConstantOp::create(
      b, loc, DenseElementsAttr::get(indexType, ArrayRef<int64_t>(sample)));
  Value keep = nn::LessOp::create(
      b, loc, RankedTensorType::get({rows}, b.getI1Type()), index, valid);
  SmallVector<int64_t> shape(type.getRank(), 1);
  shape[0] = rows;
  return nn::NNBuilder(b, loc).reshape(
      keep, RankedTensorType::get(shape, b.getI1Type()));
}
