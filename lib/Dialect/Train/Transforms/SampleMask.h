//===- SampleMask.h - which samples a value's rows hold ---------*- C++ -*-===//
//
// Exact normalization of a partial window masks padded samples out of a
// micro-batch's loss. That needs to know which elements of a value belong
// to which sample: SampleMask follows the batch inputs' leading dimension
// through the ops, each of which says how its results hold the samples
// (nn's Elementwise trait and SampleRowsOpInterface, SampleRows.h).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_SAMPLEMASK_H
#define ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_SAMPLEMASK_H

#include "accrue/Dialect/NN/IR/SampleRows.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace accrue::train {

/// Masks padded samples out of values of a split forward function.
class SampleMask {
public:
  /// The samples of every value of `function`, whose arguments `batchArgs`
  /// hold the micro-batch's samples by rows; `valid` is the number of real
  /// samples (a tensor<i64>).
  SampleMask(mlir::func::FuncOp function, llvm::ArrayRef<unsigned> batchArgs,
             int64_t microBatch, mlir::Value valid);

  /// Whether `v`'s rows are grouped by sample.
  bool byRows(mlir::Value v) const { return rowsOf(v) == nn::SampleRows::Rows; }

  /// The ops that depend on the batch but say nothing of how their results
  /// hold the samples (neither nn's Elementwise trait nor
  /// SampleRowsOpInterface), in order: their results count as mixing
  /// samples.
  llvm::ArrayRef<mlir::Operation *> getUnexplainedOps() const {
    return unexplained;
  }

  /// `x` with the elements of padded samples set to 0, or null when the
  /// samples of `x`'s elements are unknown.
  mlir::Value maskValues(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

  /// `labels` with the labels of padded samples replaced by `ignore`, or
  /// null when the samples of the labels are unknown.
  mlir::Value maskLabels(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value labels, int64_t ignore);

  int64_t microBatchSize() const { return microBatch; }

  /// The number of valid samples, as a 0-d f32 tensor.
  mlir::Value validCount(mlir::OpBuilder &b, mlir::Location loc);

private:
  nn::SampleRows rowsOf(mlir::Value v) const;
  nn::SampleRows classify(mlir::Operation *op, mlir::OpResult result);
  /// An i1 tensor broadcastable to `type`: true on the rows of valid
  /// samples.
  mlir::Value keepRows(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::RankedTensorType type);

  int64_t microBatch;
  mlir::Value valid;
  llvm::DenseMap<mlir::Value, nn::SampleRows> rows;
  llvm::SmallVector<mlir::Operation *> unexplained;
};

} // namespace accrue::train

#endif // ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_SAMPLEMASK_H
