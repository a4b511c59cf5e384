//===- FuseElementwise.cpp - fusion without recomputation -------*- C++ -*-===//

#include "accrue/Codegen/Common/Contractions.h"
#include "accrue/Codegen/Common/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace accrue {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "accrue/Codegen/Common/Passes.h.inc"
} // namespace accrue

using namespace mlir;
using namespace accrue;

namespace {

/// Fuse a single-use producer only where the consumer reads each of its
/// values once (a permutation of all the consumer's loops), and never a
/// rounding a GEMM will do (codegen::kGemmRoundingAttr).
bool fusesWithoutRecompute(OpOperand *fused) {
  Operation *producer = fused->get().getDefiningOp();
  if (!producer || !producer->hasOneUse() ||
      producer->hasAttr(codegen::kGemmRoundingAttr))
    return false;
  auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
  if (!consumer)
    return true;
  return consumer.getMatchingIndexingMap(fused).isPermutation();
}

struct FuseElementwisePass
    : accrue::impl::FuseElementwiseBase<FuseElementwisePass> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    linalg::ControlFusionFn control = fusesWithoutRecompute;
    if (recomputeCasts)
      control = [](OpOperand *fused) {
        Operation *producer = fused->get().getDefiningOp();
        // A widening into a contraction stays for
        // cuda-fold-into-contractions, which reads the narrow operand.
        auto consumer = dyn_cast<linalg::GenericOp>(fused->getOwner());
        // A widening (codegen::widenedFrom): recomputed, it costs a
        // conversion, not a pass over memory, and its readers read the
        // narrow values.
        bool castIntoLinalg = producer && producer->getNumResults() == 1 &&
                              codegen::widenedFrom(producer->getResult(0)) &&
                              !producer->hasAttr(codegen::kGemmRoundingAttr) &&
                              consumer && consumer.getNumReductionLoops() > 0 &&
                              !codegen::matchContraction(consumer);
        return castIntoLinalg || fusesWithoutRecompute(fused);
      };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, control);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<linalg::LinalgDialect>()
        ->getCanonicalizationPatterns(patterns);
    linalg::populateConstantFoldLinalgOperations(patterns, control);
    if (failed(applyPatternsGreedily(
            getOperation(), std::move(patterns),
            GreedyRewriteConfig().setUseTopDownTraversal(true))))
      return signalPassFailure();
  }
};

} // namespace
