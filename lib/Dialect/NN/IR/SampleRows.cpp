//===- SampleRows.cpp - how nn ops' results hold the samples ----*- C++ -*-===//
//
// Each op's SampleRowsOpInterface rule, beside the rules several ops
// share. An op is only asked when some operand
// depends on the batch, and only for ranked tensor results.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::nn;

//===----------------------------------------------------------------------===//
// Shared rules
//===----------------------------------------------------------------------===//

int64_t SampleRowQuery::dim0(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() > 0 ? type.getDimSize(0) : -1;
}

SampleRows SampleRowQuery::aligned(Operation *op, Value result) const {
  auto type = cast<RankedTensorType>(result.getType());
  if (type.getRank() == 0 || type.getDimSize(0) % microBatch() != 0)
    return SampleRows::Other;
  for (Value operand : op->getOperands()) {
    SampleRows rows = of(operand);
    if (rows == SampleRows::Free)
      continue;
    auto t = cast<RankedTensorType>(operand.getType());
    if (rows != SampleRows::Rows || t.getRank() != type.getRank() ||
        t.getDimSize(0) != type.getDimSize(0))
      return SampleRows::Other;
  }
  return SampleRows::Rows;
}

SampleRows SampleRowQuery::keepsRowsOf(Value input, Value result) const {
  return rowsIf(byRows(input) && dim0(result) == dim0(input));
}

/// Per-item losses keep the items' rows: scores [n, C, ...] and labels
/// [n, ...] give losses [n, ...] when nothing is reduced.
static SampleRows perItemLoss(Operation *op, LossReduction reduction,
                              Value result, const SampleRowQuery &query) {
  if (reduction != LossReduction::None)
    return SampleRows::Other;
  int64_t rows = SampleRowQuery::dim0(result);
  for (Value operand : op->getOperands()) {
    SampleRows r = query.of(operand);
    if (r != SampleRows::Free &&
        (r != SampleRows::Rows || SampleRowQuery::dim0(operand) != rows))
      return SampleRows::Other;
  }
  return SampleRowQuery::rowsIf(
      cast<RankedTensorType>(result.getType()).getRank() > 0 &&
      rows % query.microBatch() == 0);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

SampleRows MatMulOp::getSampleRows(OpResult result,
                                   const SampleRowQuery &query) {
  // A batched matmul maps batch rows to batch rows; a 2-D one keeps the
  // rows of its left operand when the right one is a parameter.
  if (getType().getRank() >= 3)
    return query.aligned(*this, result);
  return SampleRowQuery::rowsIf(query.byRows(getLhs()) &&
                                query.isFree(getRhs()));
}

SampleRows GemmOp::getSampleRows(OpResult, const SampleRowQuery &query) {
  return SampleRowQuery::rowsIf(!getTransA() && query.byRows(getA()) &&
                                query.isFree(getB()) &&
                                (!getC() || query.isFree(getC())));
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations along other axes
//===----------------------------------------------------------------------===//

/// A reduction keeps the rows when it leaves dimension 0 alone.
template <typename ReductionOp>
static SampleRows reductionRows(ReductionOp op, OpResult result,
                                const SampleRowQuery &query) {
  if (llvm::is_contained(op.getAxes(), 0))
    return SampleRows::Other;
  return query.keepsRowsOf(op.getInput(), result);
}

SampleRows ReduceSumOp::getSampleRows(OpResult result,
                                      const SampleRowQuery &query) {
  return reductionRows(*this, result, query);
}
SampleRows ReduceMeanOp::getSampleRows(OpResult result,
                                       const SampleRowQuery &query) {
  return reductionRows(*this, result, query);
}
SampleRows ReduceMaxOp::getSampleRows(OpResult result,
                                      const SampleRowQuery &query) {
  return reductionRows(*this, result, query);
}
SampleRows ReduceMinOp::getSampleRows(OpResult result,
                                      const SampleRowQuery &query) {
  return reductionRows(*this, result, query);
}

SampleRows ArgMaxOp::getSampleRows(OpResult result,
                                   const SampleRowQuery &query) {
  return getAxis() == 0 ? SampleRows::Other
                        : query.keepsRowsOf(getInput(), result);
}
SampleRows ArgMinOp::getSampleRows(OpResult result,
                                   const SampleRowQuery &query) {
  return getAxis() == 0 ? SampleRows::Other
                        : query.keepsRowsOf(getInput(), result);
}

SampleRows SoftmaxOp::getSampleRows(OpResult, const SampleRowQuery &query) {
  return SampleRowQuery::rowsIf(getAxis() != 0 && query.byRows(getInput()));
}
SampleRows LogSoftmaxOp::getSampleRows(OpResult, const SampleRowQuery &query) {
  return SampleRowQuery::rowsIf(getAxis() != 0 && query.byRows(getInput()));
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

/// A row-major reshape keeps whole samples per row while dimension 0 stays
/// a multiple of the micro-batch.
static SampleRows reshapeRows(Value input, RankedTensorType type,
                              const SampleRowQuery &query) {
  return SampleRowQuery::rowsIf(query.byRows(input) && type.getRank() > 0 &&
                                type.getDimSize(0) % query.microBatch() == 0);
}

SampleRows ReshapeOp::getSampleRows(OpResult, const SampleRowQuery &query) {
  return reshapeRows(getInput(), getType(), query);
}
SampleRows FlattenOp::getSampleRows(OpResult, const SampleRowQuery &query) {
  return reshapeRows(getInput(), getType(), query);
}

SampleRows TransposeOp::getSampleRows(OpResult, const SampleRowQuery &query) {
  return SampleRowQuery::rowsIf(!getPerm().empty() && getPerm()[0] == 0 &&
                                query.byRows(getInput()));
}

SampleRows ConcatOp::getSampleRows(OpResult result,
                                   const SampleRowQuery &query) {
  return getAxis() == 0 ? SampleRows::Other : query.aligned(*this, result);
}

SampleRows SliceOp::getSampleRows(OpResult result,
                                  const SampleRowQuery &query) {
  if (getStarts().empty() || getStarts()[0] != 0 || getSteps()[0] != 1)
    return SampleRows::Other;
  return query.keepsRowsOf(getInput(), result);
}

//===----------------------------------------------------------------------===//
// Gathers
//===----------------------------------------------------------------------===//

SampleRows GatherOp::getSampleRows(OpResult result,
                                   const SampleRowQuery &query) {
  // Rows of a table looked up by per-sample indices (an embedding), or
  // per-sample data gathered away from the batch axis.
  if (getAxis() == 0)
    return SampleRowQuery::rowsIf(
        query.isFree(getData()) && query.byRows(getIndices()) &&
        getType().getRank() > 0 &&
        SampleRowQuery::dim0(result) == SampleRowQuery::dim0(getIndices()));
  return SampleRowQuery::rowsIf(
      query.byRows(getData()) && query.isFree(getIndices()) &&
      SampleRowQuery::dim0(result) == SampleRowQuery::dim0(getData()));
}

// Per-element gathers away from the batch axis keep the rows.
SampleRows GatherElementsOp::getSampleRows(OpResult result,
                                           const SampleRowQuery &query) {
  return getAxis() == 0 ? SampleRows::Other : query.aligned(*this, result);
}
SampleRows GatherElementsGradOp::getSampleRows(OpResult result,
                                               const SampleRowQuery &query) {
  return getAxis() == 0 ? SampleRows::Other : query.aligned(*this, result);
}

//===----------------------------------------------------------------------===//
// Losses and scans
//===----------------------------------------------------------------------===//

SampleRows
SoftmaxCrossEntropyLossOp::getSampleRows(OpResult result,
                                         const SampleRowQuery &query) {
  return perItemLoss(*this, getReduction(), result, query);
}
SampleRows
NegativeLogLikelihoodLossOp::getSampleRows(OpResult result,
                                           const SampleRowQuery &query) {
  return perItemLoss(*this, getReduction(), result, query);
}

SampleRows ScanOp::getSampleRows(OpResult result, const SampleRowQuery &query) {
  // A scan treats samples independently along dimension 0 (its contract):
  // its results keep the rows of its batch-dependent inputs.
  int64_t rows = SampleRowQuery::dim0(result);
  return SampleRowQuery::rowsIf(rows % query.microBatch() == 0 &&
                                llvm::all_of(getOperands(), [&](Value v) {
                                  return query.isFree(v) ||
                                         (query.byRows(v) &&
                                          SampleRowQuery::dim0(v) == rows);
                                }));
}
