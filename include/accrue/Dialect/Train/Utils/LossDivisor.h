//===- LossDivisor.h - how a loss's constant divisor scales -----*- C++ -*-===//
//
// A loss `sum(x) / c` with a constant c is a mean when c counts the samples
// (PyTorch's `x.sum() / x.shape[0]`, folded to a number at export) and a
// sum when c is a plain scale. One graph cannot tell the two apart; the
// same model imported at two micro-batch sizes can. The answer is a
// `#train.loss_divisor` on the step's value_and_grad.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_TRAIN_UTILS_LOSSDIVISOR_H
#define ACCRUE_DIALECT_TRAIN_UTILS_LOSSDIVISOR_H

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <utility>

namespace accrue::train {

/// The nn.div that computes `loss` (through identities) when its divisor
/// is a one-element float constant, and that constant.
std::optional<std::pair<nn::DivOp, double>>
getConstantDivision(mlir::Value loss);

/// How the constant divisor of the loss `forward` returns depends on the
/// micro-batch, from the same model imported at micro-batch `b`
/// (`forward`) and at `b + 1` (`forwardAtNext`): null when the loss has no
/// constant divisor or it is neither a count per sample nor fixed.
LossDivisorAttr classifyLossDivisor(mlir::func::FuncOp forward,
                                    mlir::func::FuncOp forwardAtNext,
                                    int64_t b);

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_UTILS_LOSSDIVISOR_H
