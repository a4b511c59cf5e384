//===- OutlineMicrobatch.cpp - micro-batch bodies as functions --*- C++ -*-===//
//
// After bufferization the micro-batch loop's body reads and writes buffers
// only, so it outlines cleanly: every value it uses from outside becomes an
// argument. The outlined function is noinline so that LLVM optimizes the
// loop nests of one micro-batch on their own.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINOUTLINEMICROBATCH
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// Clones the constants and globals the loop body uses into it, so the
/// outlined function does not take them as arguments.
void sinkConstants(RewriterBase &rewriter, scf::ForOp loop) {
  Block *body = loop.getBody();
  llvm::SetVector<Operation *> outside;
  loop.getBody()->walk([&](Operation *op) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && !loop->isAncestor(def) && def->getNumOperands() == 0 &&
          def->getNumResults() == 1 && isMemoryEffectFree(def) &&
          def->getNumRegions() == 0)
        outside.insert(def);
    }
  });
  rewriter.setInsertionPointToStart(body);
  for (Operation *def : outside) {
    Operation *copy = rewriter.clone(*def);
    rewriter.replaceUsesWithIf(
        def->getResult(0), copy->getResult(0), [&](OpOperand &use) {
          return loop.getRegion().isAncestor(use.getOwner()->getParentRegion());
        });
  }
}

struct TrainOutlineMicrobatchPass
    : train::impl::TrainOutlineMicrobatchBase<TrainOutlineMicrobatchPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<scf::ForOp> loops;
    module.walk([&](scf::ForOp loop) {
      if (loop->hasAttr(StepAttrs::kMicrobatchLoop))
        loops.push_back(loop);
    });
    IRRewriter rewriter(module.getContext());
    SymbolTable symbols(module);
    for (scf::ForOp loop : loops) {
      auto parent = loop->getParentOfType<func::FuncOp>();
      std::string name = (parent.getSymName() + "_microbatch").str();
      for (int i = 1; symbols.lookup(name); ++i)
        name = (parent.getSymName() + "_microbatch" + Twine(i)).str();
      sinkConstants(rewriter, loop);
      rewriter.setInsertionPoint(loop);
      FailureOr<func::FuncOp> outlined = outlineSingleBlockRegion(
          rewriter, loop.getLoc(), loop.getRegion(), name);
      if (failed(outlined)) {
        loop.emitError("cannot outline the micro-batch loop body");
        return signalPassFailure();
      }
      outlined->setPrivate();
      outlined->getOperation()->setAttr("passthrough",
                                        rewriter.getStrArrayAttr({"noinline"}));
      symbols.insert(*outlined);
      loop->removeAttr(StepAttrs::kMicrobatchLoop);
    }
  }
};

} // namespace
