//===- IndexChecks.h - the ranges of integer batch inputs -------*- C++ -*-===//
//
// A compiled step cannot tell a bad token id or class label from a good one:
// a gather clamps an index outside its table to row 0, and a label outside a
// loss's classes reads a wrong score. What the values must be is known from
// the forward function, so the compiler records it and the runtime checks the
// data before a step runs.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_TRAIN_UTILS_INDEXCHECKS_H
#define ACCRUE_DIALECT_TRAIN_UTILS_INDEXCHECKS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace accrue::train {

/// Sets `train.index_checks` on every integer batch argument of `forward`
/// whose values reach, through ops that only move, repeat or widen them
/// (reshape, flatten, transpose, expand, concat, identity, widening casts),
/// the indices of a gather (the rows of its table, negative ones counting
/// from the end as ONNX's Gather does) or the labels of a classification
/// loss (its classes, or its ignore_index). Each check is a dictionary
/// {low, high, ignore?, what}: values must lie in [low, high) or equal
/// `ignore`; `what` names the ONNX node for messages. A value that only
/// part of the argument reaches (through a slice) or that is computed
/// (arithmetic) is not checked.
void annotateIndexChecks(mlir::func::FuncOp forward);

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_UTILS_INDEXCHECKS_H
