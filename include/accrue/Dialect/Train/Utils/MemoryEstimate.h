//===- MemoryEstimate.h - activation memory of a micro-step -----*- C++ -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_UTILS_MEMORYESTIMATE_H
#define ACCRUE_DIALECT_TRAIN_UTILS_MEMORYESTIMATE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace accrue::train {

/// Estimates the peak bytes of temporary tensors live at once during one
/// iteration of the micro-batch loop of a training step (after
/// train-microbatch and train-autodiff have run and calls are inlined): a
/// liveness sweep over the loop body in program order. Views (slices,
/// reshapes) and the in-place accumulator count as nothing. Returns nothing
/// if the step has no micro-batch loop.
std::optional<int64_t> estimateMicroStepPeakBytes(mlir::func::FuncOp step);

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_UTILS_MEMORYESTIMATE_H
