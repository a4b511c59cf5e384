//===- MemoryEstimate.h - activation memory of a micro-step -----*- C++ -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_UTILS_MEMORYESTIMATE_H
#define ACCRUE_DIALECT_TRAIN_UTILS_MEMORYESTIMATE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace accrue::train {

/// The peak bytes of temporary buffers live at once during one iteration of
/// the micro-batch loop of a bufferized training step: a sweep over the
/// loop body in program order adding each memref.alloc and subtracting each
/// memref.dealloc, starting from what the step allocated before the loop and
/// holds through it (tensors computed once per step for every micro-batch).
/// This is what the compiled code holds per micro-step (activations and
/// backward temporaries), whatever the number of steps.
/// Returns nothing if the step has no micro-batch loop.
std::optional<int64_t> estimateMicroStepPeakBytes(mlir::func::FuncOp step);

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_UTILS_MEMORYESTIMATE_H
