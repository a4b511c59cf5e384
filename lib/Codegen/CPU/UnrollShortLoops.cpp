//===- UnrollShortLoops.cpp - unroll a short innermost loop -----*- C++ -*-===//
//
// Fully unrolls short innermost scf.for loops so that the loop around them
// is the one LLVM's vectorizer sees; see the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "LoopAnnotations.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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

/// LLVM's vectorizer treats a loop of fewer iterations as tiny (its
/// `vectorizer-min-trip-count`): it vectorizes it only without run-time
/// checks, which two buffers it cannot prove apart need.
constexpr int64_t kTinyLoop = 16;

/// The ops of `loop`'s body, or nullopt when it holds a loop or vector
/// values (an innermost loop of scalar code is what LLVM vectorizes).
std::optional<int64_t> scalarBodyOps(scf::ForOp loop) {
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
  if (walk.wasInterrupted())
    return std::nullopt;
  return ops;
}

/// Whether `loop` is a short innermost loop of scalar code nested in
/// another scf.for, whose unrolled body would hold at most `maxOps` ops.
bool shouldUnroll(scf::ForOp loop, int64_t maxOps) {
  if (!loop->getParentOfType<scf::ForOp>())
    return false;
  std::optional<APInt> trips = loop.getStaticTripCount();
  if (!trips || trips->uge(kShortLoop))
    return false;
  std::optional<int64_t> ops = scalarBodyOps(loop);
  return ops && *ops * static_cast<int64_t>(trips->getZExtValue()) <= maxOps;
}

/// Whether `loop` rounds to bf16 or widens from it. LLVM 22 prices those
/// conversions one element at a time: asked to vectorize such a loop, it
/// takes 4 lanes (the host code's pass widens the longer ones to 16).
bool convertsBF16(scf::ForOp loop) {
  auto isBF16 = [](Type t) { return t.isBF16(); };
  WalkResult walk = loop.getBody()->walk([&](Operation *op) {
    if (isa<arith::TruncFOp, arith::ExtFOp>(op) &&
        (llvm::any_of(op->getOperandTypes(), isBF16) ||
         llvm::any_of(op->getResultTypes(), isBF16)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return walk.wasInterrupted();
}

/// Whether `loop` is an innermost loop of scalar code that fills a vector
/// but that LLVM's vectorizer takes for tiny.
bool isTiny(scf::ForOp loop) {
  std::optional<APInt> trips = loop.getStaticTripCount();
  return trips && trips->uge(kShortLoop) && trips->ult(kTinyLoop) &&
         scalarBodyOps(loop) && !convertsBF16(loop);
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
    // Asked to vectorize, LLVM emits the checks (one vector iteration of 8
    // floats instead of 8 scalar ones: an 8 x 8 image's rows).
    getOperation().walk([&](scf::ForOp loop) {
      if (!isTiny(loop))
        return;
      // (convert-scf-to-cf moves it to the loop's latch branch, and
      // attach-loop-annotations makes it the loop's metadata.)
      accrue::cpu::annotateLoop(loop, /*vectorize=*/true, /*parallel=*/false);
      ++numVectorized;
    });
  }
};

} // namespace
