//===- Passes.h - CUDA code generation passes -------------------*- C++ -*-===//

#ifndef ACCRUE_CODEGEN_CUDA_PASSES_H
#define ACCRUE_CODEGEN_CUDA_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace accrue::cuda {

#define GEN_PASS_DECL
#include "accrue/Codegen/CUDA/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "accrue/Codegen/CUDA/Passes.h.inc"

} // namespace accrue::cuda

#endif // ACCRUE_CODEGEN_CUDA_PASSES_H
