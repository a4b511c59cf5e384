//===- UnrollShortLoops.cpp - unroll a short innermost loop -----*- C++ -*-===//
//
// Fully unrolls short innermost scf.for loops so that the loop around them
// is the one LLVM's vectorizer sees; see the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_UNROLLSHORTLOOPS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// Loops of at least this many iterations fill a 256-bit vector of floats:
/// LLVM vectorizes them where they are (as in collapse-short-loops).
constexpr int64_t kShortLoop = 8;

/// Whether `loop` is a short innermost loop of scalar code nested in
/// another scf.for, whose unrolled body would hold at most `maxOps` ops.
bool shouldUnroll(scf::ForOp loop, int64_t maxOps) {
  if (!loop->getParentOfType<scf::ForOp>())
    return false;
  std::optional<APInt> trips = loop.getStaticTripCount();
  if (!trips || trips->uge(kShortLoop))
    return false;
  int64_t ops = 0;
  WalkResult walk = loop.getBody()->walk([&](Operation *op) {
    ++ops;
    auto isVector = [](Type t) { return isa<VectorType>(t); };
    if (isa<LoopLikeOpInterface>(op) ||
        llvm::any_of(op->getOperandTypes(), isVector) ||
        llvm::any_of(op->getResultTypes(), isVector))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !walk.wasInterrupted() &&
         ops * static_cast<int64_t>(trips->getZExtValue()) <= maxOps;
}

struct UnrollShortLoopsPass
    : accrue::cpu::impl::UnrollShortLoopsBase<UnrollShortLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    // Unrolling a loop can make the one around it a short innermost loop:
    // repeat until none is left.
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<scf::ForOp> loops;
      getOperation().walk([&](scf::ForOp loop) {
        if (shouldUnroll(loop, maxOps))
          loops.push_back(loop);
      });
      for (scf::ForOp loop : loops) {
        if (failed(loopUnrollFull(loop)))
          continue;
        ++numUnrolled;
        changed = true;
      }
    }
  }
};

} // namespace
