//===- LoopAnnotations.h - LLVM loop metadata on scf.for --------*- C++ -*-===//
//
// What the CPU passes ask of LLVM's loop passes through an scf.for's
// `llvm.loop_annotation`, which attach-loop-annotations turns into the
// loop's !llvm.loop metadata (AttachLoopAnnotations.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CPU_LOOPANNOTATIONS_H
#define ACCRUE_CODEGEN_CPU_LOOPANNOTATIONS_H

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace accrue::cpu {

/// Adds to `loop`'s annotation, keeping what it already asks: `vectorize`,
/// that LLVM vectorize it (llvm.loop.vectorize.enable); `parallel`, that
/// no iteration depends on another (an access group its loads and stores
/// join, llvm.loop.parallel_accesses), so that LLVM vectorizes it without
/// checking at run time that its buffers are apart.
void annotateLoop(mlir::scf::ForOp loop, bool vectorize, bool parallel);

} // namespace accrue::cpu

#endif // ACCRUE_CODEGEN_CPU_LOOPANNOTATIONS_H
