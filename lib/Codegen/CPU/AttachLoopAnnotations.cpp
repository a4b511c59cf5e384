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

#include "LoopAnnotations.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_ATTACHLOOPANNOTATIONS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// The blocks of the loop whose latch is `latch` (branching back to
/// `header`): the header and every block that reaches the latch without
/// passing through it.
SetVector<Block *> loopBlocks(Block *header, Block *latch) {
  SetVector<Block *> blocks;
  blocks.insert(header);
  SmallVector<Block *> work{latch};
  while (!work.empty()) {
    Block *block = work.pop_back_val();
    if (blocks.insert(block))
      llvm::append_range(work, block->getPredecessors());
  }
  return blocks;
}

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
      Block *header = nullptr;
      if (auto br = dyn_cast<LLVM::BrOp>(op)) {
        br.setLoopAnnotationAttr(annotation);
        header = br.getDest();
      } else if (auto condBr = dyn_cast<LLVM::CondBrOp>(op)) {
        condBr.setLoopAnnotationAttr(annotation);
      }
      // The loop's accesses join the groups it declares parallel.
      ArrayRef<LLVM::AccessGroupAttr> groups = annotation.getParallelAccesses();
      if (groups.empty() || !header)
        return;
      SmallVector<Attribute> joined(groups.begin(), groups.end());
      for (Block *block : loopBlocks(header, op->getBlock()))
        for (Operation &inner : *block)
          if (auto access = dyn_cast<LLVM::AccessGroupOpInterface>(inner)) {
            SmallVector<Attribute> all(joined);
            if (ArrayAttr old = access.getAccessGroupsOrNull())
              llvm::append_range(all, old);
            access.setAccessGroups(ArrayAttr::get(&getContext(), all));
          }
    });
  }
};

} // namespace

void accrue::cpu::annotateLoop(scf::ForOp loop, bool vectorize, bool parallel) {
  MLIRContext *context = loop.getContext();
  auto old = loop->getAttrOfType<LLVM::LoopAnnotationAttr>(
      LLVM::LoopAnnotationAttr::name);
  LLVM::LoopVectorizeAttr vectorizeAttr = old ? old.getVectorize() : nullptr;
  if (vectorize)
    vectorizeAttr = LLVM::LoopVectorizeAttr::get(
        context, BoolAttr::get(context, false), {}, {}, {}, {}, {}, {});
  SmallVector<LLVM::AccessGroupAttr> groups;
  if (old)
    llvm::append_range(groups, old.getParallelAccesses());
  if (parallel)
    groups.push_back(LLVM::AccessGroupAttr::get(context));
  loop->setAttr(LLVM::LoopAnnotationAttr::name,
                LLVM::LoopAnnotationAttr::get(context, {}, vectorizeAttr, {},
                                              {}, {}, {}, {}, {}, {}, {}, {},
                                              {}, {}, {}, groups));
}
