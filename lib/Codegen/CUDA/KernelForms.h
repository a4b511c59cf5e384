//===- KernelForms.h - the kernel forms of cuda-form-kernels ----*- C++ -*-===//
//
// cuda-form-kernels turns each linalg op on buffers into a gpu.launch of
// one of several forms: one thread per point (FormKernels.cpp), and the
// forms with vector accesses (VectorKernels.cpp): the streaming form of
// rank-1 elementwise ops and the tiled form of transposes. Private to the
// pass.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_CODEGEN_CUDA_KERNELFORMS_H
#define ACCRUE_LIB_CODEGEN_CUDA_KERNELFORMS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

#include <string>

namespace accrue::cuda::forms {

/// `index` values of `map`'s results at `ivs`.
llvm::SmallVector<mlir::Value> applyMap(mlir::OpBuilder &b, mlir::Location loc,
                                        mlir::AffineMap map,
                                        mlir::ValueRange ivs);

/// Clones the ops of a linalg op's body `body` (but its terminator) at the
/// point `ivs` of its loops: `linalg.index d` is `ivs[d]`.
void cloneBodyAt(mlir::OpBuilder &b, mlir::Block &body, mlir::ValueRange ivs,
                 mlir::IRMapping &mapping);

/// A gpu.launch of `blocks` x `threads` at the insertion point (threads
/// and blocks along x; `rows` rows of blocks along y where given), which
/// moves into its body; returns the thread's linear index along x there.
mlir::Value createLinearLaunch(mlir::RewriterBase &rewriter, mlir::Location loc,
                               mlir::Value blocks, mlir::Value threads,
                               mlir::Value rows = nullptr);

/// The ONNX node `loc` names, else "kernel": a kernel's tag.
std::string nodeTag(mlir::Location loc);

/// What a kernel computes, for its name: "update" for the op that writes
/// the parameters, else the ONNX node it comes from, else "kernel".
std::string kernelTag(mlir::linalg::GenericOp op);

/// The streaming form of an elementwise op over rank-1 buffers: a
/// grid-stride loop of 4-element vector accesses.
mlir::LogicalResult formStreamingKernel(mlir::RewriterBase &rewriter,
                                        mlir::linalg::GenericOp op,
                                        int64_t blockSize, int64_t maxBlocks);

/// The tiled form of a transpose: a thread per 4 x 4 tile, vector reads
/// along the input's rows and vector writes along the output's.
mlir::LogicalResult formTransposeKernel(mlir::RewriterBase &rewriter,
                                        mlir::linalg::GenericOp op,
                                        int64_t blockSize);

} // namespace accrue::cuda::forms

#endif // ACCRUE_LIB_CODEGEN_CUDA_KERNELFORMS_H
