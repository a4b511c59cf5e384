//===- LoopInvariance.h - linalg ops a loop computes alike -----*- C++ -*-===//
//
// What hoist-loop-invariants moves out of the micro-batch loop and what
// fuse-elementwise keeps apart for it: a linalg op on tensors that reads
// only values from outside a loop computes the same tensor in every
// iteration.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_COMMON_LOOPINVARIANCE_H
#define ACCRUE_CODEGEN_COMMON_LOOPINVARIANCE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/RegionUtils.h"

namespace accrue::codegen {

/// Whether `op` reads only values `outside` accepts: its inputs and the
/// values its body captures, its inits being tensor.empty ops (whose
/// values it does not read).
inline bool readsOnlyFrom(mlir::linalg::LinalgOp op,
                          llvm::function_ref<bool(mlir::Value)> outside) {
  llvm::SetVector<mlir::Value> captured;
  mlir::getUsedValuesDefinedAbove(op->getRegions(), captured);
  return llvm::all_of(op.getDpsInputs(), outside) &&
         llvm::all_of(captured, outside) &&
         llvm::all_of(op.getDpsInits(), [](mlir::Value init) {
           return init.getDefiningOp<mlir::tensor::EmptyOp>() != nullptr;
         });
}

} // namespace accrue::codegen

#endif // ACCRUE_CODEGEN_COMMON_LOOPINVARIANCE_H
