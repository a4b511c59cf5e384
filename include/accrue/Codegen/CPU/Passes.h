//===- Passes.h - CPU code generation passes --------------------*- C++ -*-===//

#ifndef ACCRUE_CODEGEN_CPU_PASSES_H
#define ACCRUE_CODEGEN_CPU_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace accrue::cpu {

#define GEN_PASS_DECL
#include "accrue/Codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "accrue/Codegen/CPU/Passes.h.inc"

} // namespace accrue::cpu

#endif // ACCRUE_CODEGEN_CPU_PASSES_H
