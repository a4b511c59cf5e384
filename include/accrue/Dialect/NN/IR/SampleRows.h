//===- SampleRows.h - how an op's results hold the samples ------*- C++ -*-===//
//
// A partial accumulation window pads its last micro-batches with dead
// samples and masks them out of the loss. That needs to know which rows of
// a value hold which sample. An op says it through SampleRowsOpInterface
// (NNInterfaces.td) or, for elementwise ops, the Elementwise trait; the
// training passes follow the batch inputs through them (SampleMask).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_NN_IR_SAMPLEROWS_H
#define ACCRUE_DIALECT_NN_IR_SAMPLEROWS_H

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace accrue::nn {

/// How a value's elements belong to the micro-batch's samples.
enum class SampleRows {
  /// Does not depend on the batch (parameters, constants).
  Free,
  /// Dimension 0 is a multiple of the micro-batch size and its rows are
  /// grouped by sample, in order.
  Rows,
  /// Depends on the batch some other way (or in a way no op said).
  Other,
};

/// What an op's `getSampleRows` may ask about its operands, and the rules
/// several ops share. Holds `rowsOf` by reference (a function_ref): the
/// callable must outlive the query.
class SampleRowQuery {
public:
  SampleRowQuery(int64_t microBatch,
                 llvm::function_ref<SampleRows(mlir::Value)> rowsOf)
      : microBatchSize(microBatch), rowsOf(rowsOf) {}

  int64_t microBatch() const { return microBatchSize; }
  SampleRows of(mlir::Value v) const { return rowsOf(v); }
  bool isFree(mlir::Value v) const { return of(v) == SampleRows::Free; }
  bool byRows(mlir::Value v) const { return of(v) == SampleRows::Rows; }

  /// Dimension 0 of a ranked tensor, or -1.
  static int64_t dim0(mlir::Value v);
  static SampleRows rowsIf(bool c) {
    return c ? SampleRows::Rows : SampleRows::Other;
  }

  /// The rule of ops that map each row of their operands to the same row
  /// of `result`: every operand that depends on the batch is grouped by
  /// rows, of the result's rank and dimension 0 (broadcasting elsewhere),
  /// and dimension 0 is a multiple of the micro-batch.
  SampleRows aligned(mlir::Operation *op, mlir::Value result) const;
  /// The rule of ops that transform each row of `input` on its own:
  /// `result` keeps `input`'s rows when `input` is grouped by rows and
  /// dimension 0 is kept.
  SampleRows keepsRowsOf(mlir::Value input, mlir::Value result) const;

private:
  int64_t microBatchSize;
  llvm::function_ref<SampleRows(mlir::Value)> rowsOf;
};

namespace trait {

/// An op that applies one scalar function to each element of its operands,
/// broadcast together to the result's shape (NNInterfaces.td). A marker:
/// the ops' own type inference and verifiers enforce the shapes.
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {
};

} // namespace trait

} // namespace accrue::nn

#endif // ACCRUE_DIALECT_NN_IR_SAMPLEROWS_H
