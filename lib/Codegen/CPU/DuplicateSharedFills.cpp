//===- DuplicateSharedFills.cpp - one fill per destination -------*- C++
//-*-===//
//
// CSE merges the identical zero (or -inf) fills that contractions and
// reductions start from into one tensor; one-shot bufferization then
// copies that tensor for every op that writes into it (each needs its own
// buffer), a full copy per contraction where a fill would do. Giving each
// destination-passing use a fill of its own lets every one bufferize in
// place.
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
      // The first destination keeps the original (unless nothing else
      // reads it, every use gets its own).
      bool keepFirst =
          inits.size() == static_cast<size_t>(std::distance(filled.use_begin(),
                                                            filled.use_end()));
      for (OpOperand *use : llvm::drop_begin(inits, keepFirst ? 1 : 0)) {
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
    }
  }
};
} // namespace
