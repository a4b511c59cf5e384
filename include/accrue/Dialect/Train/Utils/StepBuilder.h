//===- StepBuilder.h - build a whole-batch training step --------*- C++ -*-===//
//
// Builds `func.func @train_step` around an imported forward function: the
// one-big-batch semantics of a training step, written with train ops over
// flat arenas. The train passes then turn it into an accumulation loop with a
// fused update.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_TRAIN_UTILS_STEPBUILDER_H
#define ACCRUE_DIALECT_TRAIN_UTILS_STEPBUILDER_H

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace accrue::train {

/// What the step does.
struct StepOptions {
  /// Samples per micro-batch (dimension 0 of the forward's batch inputs).
  int64_t microBatch = 1;
  /// How a constant divisor of the forward's loss depends on the
  /// micro-batch (classifyLossDivisor), if it has one that is understood.
  LossDivisorAttr lossDivisor;
  /// The optimizer; null builds a gradient-only step that leaves the
  /// normalized gradient of the effective batch in the accumulator.
  OptimizerAttrInterface optimizer;
  /// Global-norm clipping threshold, if any.
  std::optional<double> maxNorm;
  /// Loss scaling: the step takes `loss_scale` (f32), seeds the backward
  /// with it, unscales, and skips the update when the gradient overflows.
  bool lossScale = false;
  /// GradScaler's rule for the next scale (train.next_loss_scale at the end
  /// of the step; the step also takes the finite streak and reports the
  /// next scale and streak as metrics): static scaling is growth = backoff
  /// = 1, interval 0 (never grows).
  double lossScaleGrowth = 1.0, lossScaleBackoff = 1.0;
  int64_t lossScaleInterval = 0;
  /// Data parallelism: the arenas end with ACCRUE_RESERVED_TAIL elements
  /// that no parameter uses, where the all-reduce carries the loss sum and
  /// count.
  bool dataParallel = false;
};

/// Where one parameter lives in the flat arenas.
struct ArenaSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numElements = 0;
};

/// The layout of the arenas the step takes.
struct StepLayout {
  std::vector<ArenaSlot> params;
  /// Elements per arena (parameters, accumulator and each state arena).
  int64_t arenaSize = 0;
  /// The model's buffers (running statistics the forward updates), each a
  /// slice of the buffer arena, and that arena's size (0: the step takes
  /// none).
  std::vector<ArenaSlot> buffers;
  int64_t buffersSize = 0;
  /// Names of the optimizer's state arenas, in argument order.
  std::vector<std::string> stateNames;
  /// Whether the step takes `sample_base`, the global index of its first
  /// sample (the forward has training-mode Dropout).
  bool hasSampleBase = false;
  /// Whether the step takes `loss_scale`.
  bool hasLossScale = false;
};

/// Parameter offsets are aligned to this many elements (64 bytes).
constexpr int64_t kArenaAlignment = ACCRUE_ARENA_ALIGNMENT;

/// Adds `@train_step` to `module`. The forward's arguments with role
/// params become views of the parameter arena, those with role buffers
/// views of the buffer arena (written back from the forward's results tied
/// to them), those with role batch take a whole effective batch
/// (dimension 0 dynamic).
llvm::FailureOr<StepLayout> buildTrainStep(mlir::ModuleOp module,
                                           mlir::func::FuncOp forward,
                                           const StepOptions &options);

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_UTILS_STEPBUILDER_H
