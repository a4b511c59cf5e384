//===- Passes.h - train passes ----------------------------------*- C++ -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_TRANSFORMS_PASSES_H
#define ACCRUE_DIALECT_TRAIN_TRANSFORMS_PASSES_H

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace accrue::train {

#define GEN_PASS_DECL
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"

} // namespace accrue::train

#endif // ACCRUE_DIALECT_TRAIN_TRANSFORMS_PASSES_H
