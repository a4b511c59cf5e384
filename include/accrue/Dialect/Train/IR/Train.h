//===- Train.h - train dialect ----------------------------------*- C++ -*-===//
//
// The `train` dialect: value_and_grad, flat arenas, clipping, optimizers.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_TRAIN_IR_TRAIN_H
#define ACCRUE_DIALECT_TRAIN_IR_TRAIN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "accrue-runtime/StepABI.h"

#include "accrue/Dialect/Train/IR/TrainOpsDialect.h.inc"

#include "accrue/Dialect/Train/IR/TrainInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "accrue/Dialect/Train/IR/TrainAttrs.h.inc"

#define GET_OP_CLASSES
#include "accrue/Dialect/Train/IR/TrainOps.h.inc"

namespace accrue::train {

/// Attribute names that tie a training step's signature to its roles. The
/// step builder sets them, `train-finalize-step-abi` and the artifact
/// manifest read them.
struct StepAttrs {
  /// Unit attribute on a func.func: this function is a training step.
  static constexpr llvm::StringLiteral kStep = "train.step";
  /// #train.role argument attribute (and key of train.abi's entries): the
  /// argument's role, an AccrueArgRole of the step contract
  /// (accrue-runtime/StepABI.h).
  static constexpr llvm::StringLiteral kRole = "train.role";
  /// String argument attribute: the user-facing name of a buffer.
  static constexpr llvm::StringLiteral kName = "train.name";
  /// Integer result attribute: index of the argument this result updates.
  static constexpr llvm::StringLiteral kTied = "train.tied";
  /// String result attribute: name of a scalar metric (loss, grad_norm).
  static constexpr llvm::StringLiteral kMetric = "train.metric";
  /// Array attribute on a finalized step: one dictionary per argument of
  /// the lowered function, in order, with its `role` and `name` (and, for
  /// the metrics buffer, its `fields`). The artifact manifest is made from
  /// it (set by `train-finalize-step-abi`).
  static constexpr llvm::StringLiteral kABI = "train.abi";
  /// In train.abi: the names of the metrics buffer's elements.
  static constexpr llvm::StringLiteral kFields = "train.fields";
  /// Array argument attribute of an integer batch input, kept in train.abi:
  /// the ranges its values must lie in ({low, high, ignore?, what}
  /// dictionaries, set by annotateIndexChecks), which the runtime checks.
  static constexpr llvm::StringLiteral kIndexChecks = "train.index_checks";
  /// Unit attribute on the scf.for that `train-microbatch` builds: its body
  /// computes one micro-batch's loss and gradients.
  static constexpr llvm::StringLiteral kMicrobatchLoop =
      "train.microbatch_loop";
  /// Unit attribute on a step function: `train-microbatch` masks padded
  /// samples out of its loss, so a partial last window may be padded to
  /// whole micro-batches (its `valid_samples` argument counts the real ones).
  static constexpr llvm::StringLiteral kPartialWindows =
      "train.partial_windows";
  /// #train.loss_divisor on a forward function written in MLIR: how the
  /// constant divisor of its loss scales with the micro-batch, which its
  /// frontend knows (train-build-step puts it on the value_and_grad).
  static constexpr llvm::StringLiteral kLossDivisor = "train.loss_divisor";
  /// I64 attribute on a step function, set by `train-microbatch`: the
  /// samples per micro-batch of its loop (the artifact's micro-batch).
  static constexpr llvm::StringLiteral kMicroBatch = "train.micro_batch";
};

/// Number of elements of a statically shaped tensor type.
int64_t getNumElements(mlir::Type type);

/// The role of argument `index` of `func` (its train.role, or its entry in
/// a finalized step's train.abi), if it has a known one.
std::optional<AccrueArgRole> getArgRole(mlir::FunctionOpInterface func,
                                        unsigned index);

/// `{train.name = name, train.role = role}`, the attributes of an argument
/// with a role.
mlir::DictionaryAttr getArgRoleAttrs(mlir::MLIRContext *context,
                                     AccrueArgRole role, llvm::StringRef name);

/// The first argument of `func` with `role`, if any.
std::optional<mlir::BlockArgument>
getArgWithRole(mlir::FunctionOpInterface func, AccrueArgRole role);

/// Appends an argument of `type` with `role` and `name` to `step`: to its
/// train.abi when the step is finalized, else as its argument attributes.
/// The one way passes add a step argument (the contract follows the IR).
mlir::FailureOr<mlir::BlockArgument>
appendStepArgument(mlir::FunctionOpInterface step, mlir::Type type,
                   AccrueArgRole role, llvm::StringRef name);

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_IR_TRAIN_H
