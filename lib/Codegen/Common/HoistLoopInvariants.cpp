//===- HoistLoopInvariants.cpp - once per step ----------------*- C++ -*-===//
//
// A weight's transpose and its low-precision cast read nothing a
// micro-batch changes, yet the micro-batch loop computes them K times per
// optimizer step. On tensors every linalg op is a value: one whose operands
// and captured values all come from outside the loop moves before it.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/Common/LoopInvariance.h"
#include "accrue/Codegen/Common/Passes.h"

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace accrue {
#define GEN_PASS_DEF_HOISTLOOPINVARIANTS
#include "accrue/Codegen/Common/Passes.h.inc"
} // namespace accrue

using namespace mlir;

namespace {

/// Whether `op`, a top-level op of `loop`'s body, computes the same value
/// in every iteration and may move before the loop (writing into
/// `tensor.empty` ops of static shape, which it takes copies of).
bool isHoistable(scf::ForOp loop, linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || !isMemoryEffectFree(op))
    return false;
  if (!accrue::codegen::readsOnlyFrom(
          op, [&](Value value) { return loop.isDefinedOutsideOfLoop(value); }))
    return false;
  for (Value init : op.getDpsInits())
    if (!init.getDefiningOp<tensor::EmptyOp>().getDynamicSizes().empty())
      return false;
  // Only read: an op that writes into the result in place (a destination,
  // a loop's initial value) would bufferize into a copy per micro-batch.
  for (Value result : op->getResults())
    for (OpOperand &use : result.getUses()) {
      Operation *user = use.getOwner();
      auto reader = dyn_cast<DestinationStyleOpInterface>(user);
      if (!isa<tensor::ExtractOp>(user) && !(reader && reader.isDpsInput(&use)))
        return false;
    }
  return true;
}

struct HoistLoopInvariantsPass
    : public accrue::impl::HoistLoopInvariantsBase<HoistLoopInvariantsPass> {
  void runOnOperation() override {
    getOperation().walk([](scf::ForOp loop) {
      if (!loop->hasAttr(accrue::train::StepAttrs::kMicrobatchLoop))
        return;
      // In order: an op whose inputs were hoisted is hoisted after them.
      for (Operation &op :
           llvm::make_early_inc_range(loop.getBody()->without_terminator())) {
        auto linalgOp = dyn_cast<linalg::LinalgOp>(&op);
        if (!linalgOp || !isHoistable(loop, linalgOp))
          continue;
        // CSE shares one tensor.empty between ops of one shape: the
        // hoisted op gets its own, before the loop.
        OpBuilder builder(loop);
        for (OpOperand &init : linalgOp.getDpsInitsMutable())
          init.set(builder.clone(*init.get().getDefiningOp())->getResult(0));
        op.moveBefore(loop);
      }
    });
  }
};

} // namespace
