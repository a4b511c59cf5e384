//===- SampleMask.h - which samples a value's rows hold ---------*- C++ -*-===//
//
// Exact normalization of a partial window masks padded samples out of a
// micro-batch's loss. That needs to know which elements of a value belong
// to which sample: SampleMask follows the batch inputs' leading dimension
// through ops that keep rows of one sample together (elementwise ops,
// matmuls over a row-major batch, reductions and softmaxes over other axes,
// reshapes that keep whole samples per row, ...).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_SAMPLEMASK_H
#define ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_SAMPLEMASK_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace accrue::train {

/// Which samples a value's elements belong to.
enum class SampleDep {
  /// Does not depend on the batch (parameters, constants).
  Free,
  /// Dimension 0 is a multiple of the micro-batch size and its rows are
  /// grouped by sample, in order.
  Rows,
  /// Depends on the batch some other way.
  Other,
};

/// Masks padded samples out of values of a split forward function.
class SampleMask {
public:
  /// The samples of every value of `function`, whose arguments `batchArgs`
  /// hold the micro-batch's samples by rows; `valid` is the number of real
  /// samples (a tensor<i64>).
  SampleMask(mlir::func::FuncOp function, llvm::ArrayRef<unsigned> batchArgs,
             int64_t microBatch, mlir::Value valid);

  /// Whether `v`'s rows are grouped by sample.
  bool byRows(mlir::Value v) const { return dep(v) == SampleDep::Rows; }

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
  SampleDep dep(mlir::Value v) const;
  static int64_t dim0(mlir::Value v);
  /// Whether the result keeps its operands' rows: every operand that
  /// depends on the batch is grouped by rows, of the result's rank and
  /// dimension 0 (broadcasting elsewhere).
  bool rowsAligned(mlir::Operation *op, mlir::Value result);
  SampleDep classify(mlir::Operation *op, mlir::Value result);
  /// An i1 tensor broadcastable to `type`: true on the rows of valid
  /// samples.
  mlir::Value keepRows(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::RankedTensorType type);

  int64_t microBatch;
  mlir::Value valid;
  llvm::DenseMap<mlir::Value, SampleDep> deps;
};

} // namespace accrue::train

#endif // ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_SAMPLEMASK_H
