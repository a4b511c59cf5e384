//===- Passes.h - conversion passes -----------------------------*- C++ -*-===//

#ifndef ACCRUE_CONVERSION_PASSES_H
#define ACCRUE_CONVERSION_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace accrue {

#define GEN_PASS_DECL
#include "accrue/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "accrue/Conversion/Passes.h.inc"

} // namespace accrue

#endif // ACCRUE_CONVERSION_PASSES_H
