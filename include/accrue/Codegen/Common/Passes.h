//===- Passes.h - passes every target runs ----------------------*- C++ -*-===//

#ifndef ACCRUE_CODEGEN_COMMON_PASSES_H
#define ACCRUE_CODEGEN_COMMON_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace accrue {

#define GEN_PASS_DECL
#include "accrue/Codegen/Common/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "accrue/Codegen/Common/Passes.h.inc"

} // namespace accrue

#endif // ACCRUE_CODEGEN_COMMON_PASSES_H
