//===- DuplicateSharedFills.cpp - one fill per destination -------*- C++
//-*-===//
//
// CSE merges the identical zero (or -inf) fills that contractions and
// reductions start from into one tensor; one-shot bufferization then
// copies that tensor for every op that writes into it (each needs its own
// buffer), a full copy per contraction where a fill would do. Giving each
// destination-passing use a fill of its own, right before it, lets every
// one bufferize in place.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_DUPLICATESHAREDFILLS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {
struct DuplicateSharedFillsPass
    : public accrue::cpu::impl::DuplicateSharedFillsBase<
          DuplicateSharedFillsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation()->walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && !fill->getResult(0).hasOneUse())
        fills.push_back(fill);
    });
    for (linalg::FillOp fill : fills) {
      Value filled = fill->getResult(0);
      SmallVector<OpOperand *> inits;
      for (OpOperand &use : filled.getUses())
        if (auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
            dps && dps.isDpsInit(&use))
          inits.push_back(&use);
      // Each destination gets a fill of its own right before it, where
      // accumulate-in-place finds it: one kept where CSE left the shared
      // fill (the first of its shape in the step, perhaps in the forward)
      // would decide by that position whether its gradient accumulates in
      // place, so that moving an unrelated op (hoist-loop-invariants) or
      // recomputing one (--recompute) would change the gradient's rounding.
      for (OpOperand *use : inits) {
        OpBuilder b(use->getOwner());
        Value empty = tensor::EmptyOp::create(
            b, fill.getLoc(),
            cast<RankedTensorType>(filled.getType()).getShape(),
            cast<RankedTensorType>(filled.getType()).getElementType());
        use->set(linalg::FillOp::create(b, fill.getLoc(),
                                        fill.getDpsInputs()[0], empty)
                     .getResult(0));
        ++numDuplicated;
      }
      if (!fill->use_empty())
        continue;
      Value init = fill.getDpsInits()[0];
      fill->erase();
      if (auto empty = init.getDefiningOp<tensor::EmptyOp>();
          empty && empty->use_empty())
        empty->erase();
    }
    // The same for a tensor.empty that several inits share (CSE merges
    // them too): bufferized, one of them would get its buffer and the others
    // copies of it, or a later one would reuse the buffer of an earlier
    // whose value had been copied elsewhere.
    SmallVector<tensor::EmptyOp> empties;
    getOperation()->walk([&](tensor::EmptyOp empty) {
      if (!empty->hasOneUse())
        empties.push_back(empty);
    });
    for (tensor::EmptyOp empty : empties) {
      SmallVector<std::pair<Operation *, unsigned>> inits;
      for (OpOperand &use : empty->getUses())
        if (auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
            dps && dps.isDpsInit(&use))
          inits.push_back({use.getOwner(), use.getOperandNumber()});
      if (inits.size() < 2)
        continue;
      // The first keeps the original.
      for (auto [owner, number] : llvm::drop_begin(inits)) {
        OpBuilder b(owner);
        owner->setOperand(number, b.clone(*empty)->getResult(0));
        ++numDuplicated;
      }
    }
  }
};
} // namespace
