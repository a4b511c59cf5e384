//===- Passes.h - nn passes -------------------------------------*- C++ -*-===//

#ifndef ACCRUE_DIALECT_NN_TRANSFORMS_PASSES_H
#define ACCRUE_DIALECT_NN_TRANSFORMS_PASSES_H

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/Pass/Pass.h"

namespace accrue::nn {

#define GEN_PASS_DECL
#include "accrue/Dialect/NN/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "accrue/Dialect/NN/Transforms/Passes.h.inc"

} // namespace accrue::nn

#endif // ACCRUE_DIALECT_NN_TRANSFORMS_PASSES_H
