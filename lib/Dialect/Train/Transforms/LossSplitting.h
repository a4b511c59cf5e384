//===- LossSplitting.h - a loss as a sum and a count -----------*- C++ -*-===//
//
// train-microbatch's view of a forward function's loss: how the whole
// batch's loss relates to the micro-batches' (a mean N / D, a sum, a linear
// combination of such terms, or unrecognized), and the forward function
// rewritten to return the micro-batch's N and D.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_LOSSSPLITTING_H
#define ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_LOSSSPLITTING_H

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

#include <optional>

namespace accrue::train {

/// How the loss of the whole batch relates to the micro-batch losses.
enum class LossKind {
  /// L = N / D with N and D sums over samples: exact sum + count.
  Mean,
  /// L is already a sum over samples: sum the micro-batch losses.
  Sum,
  /// Unrecognized (or requested): average the micro-batch losses.
  MeanOfMeans,
};

/// The forward function rewritten to return (N, D) and how to combine them.
struct SplitLoss {
  mlir::func::FuncOp function;
  LossKind kind;
  /// The loss clamps its count from below (`mask.sum().clamp(min=1)`): the
  /// clamp applies to the total count of the effective batch.
  std::optional<double> countFloor;
  /// The function takes a trailing tensor<i64>: the number of real samples
  /// of its micro-batch, and masks the others out of N and D.
  bool masked = false;
  /// The count D of a full micro-batch as far as it is known statically
  /// (the elements a mean reduces; for a data-dependent count, the elements
  /// of the mask). Loss scaling divides its seed by the power of two nearest
  /// below this times K, so the backward sees gradients as large as those
  /// of the mean loss, as with PyTorch's GradScaler.
  double fullCount = 1;
  /// A linear combination of mean-reduced terms: `function` takes each
  /// mean term's count over the whole window (tensor<f32>, before the
  /// valid-sample count) and returns the micro-batch's share of the loss
  /// (kind Sum); `counts` returns the micro-batch's counts of those terms,
  /// from the data alone, for a counting pass before the micro-batch loop.
  mlir::func::FuncOp counts = {};
  llvm::SmallVector<std::optional<double>> countFloors = {};
};

/// Clones `forward` into a function returning (N, D), then the forward's
/// other results (buffers' new values). With `mask`, the clone takes the
/// number of valid samples of its micro-batch as a trailing tensor<i64> and
/// masks the others out; returns nothing (and leaves no function) when it
/// cannot. `batchArgs` are the arguments holding batch inputs; `divisor`
/// says how the constant divisor of a loss `sum / c` depends on the
/// micro-batch (null: unknown, the loss is not normalized through it).
std::optional<SplitLoss> splitLoss(mlir::func::FuncOp forward, bool exact,
                                   bool mask,
                                   llvm::ArrayRef<unsigned> batchArgs,
                                   int64_t microBatch, LossDivisorAttr divisor,
                                   mlir::SymbolTable &symbols);

} // namespace accrue::train

#endif // ACCRUE_LIB_DIALECT_TRAIN_TRANSFORMS_LOSSSPLITTING_H
