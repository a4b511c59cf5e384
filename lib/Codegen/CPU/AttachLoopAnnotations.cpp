//===- AttachLoopAnnotations.cpp - loop metadata for LLVM -------*- C++ -*-===//
//
// An scf.for's `llvm.loop_annotation` (unroll-short-loops asks LLVM to
// vectorize short loops with it) is moved by convert-scf-to-cf to the
// loop's latch branch, where convert-cf-to-llvm keeps it as a discardable
// attribute that the translation to LLVM IR ignores; see the pass
// description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_ATTACHLOOPANNOTATIONS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

struct AttachLoopAnnotationsPass
    : accrue::cpu::impl::AttachLoopAnnotationsBase<AttachLoopAnnotationsPass> {
  void runOnOperation() override {
    StringAttr name =
        StringAttr::get(&getContext(), LLVM::LoopAnnotationAttr::name);
    getOperation()->walk([&](Operation *op) {
      auto annotation = op->getAttrOfType<LLVM::LoopAnnotationAttr>(name);
      if (!annotation)
        return;
      op->removeAttr(name);
      if (auto br = dyn_cast<LLVM::BrOp>(op))
        br.setLoopAnnotationAttr(annotation);
      else if (auto condBr = dyn_cast<LLVM::CondBrOp>(op))
        condBr.setLoopAnnotationAttr(annotation);
    });
  }
};

} // namespace
