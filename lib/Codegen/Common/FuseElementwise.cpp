//===- FuseElementwise.cpp - fusion without recomputation -------*- C++ -*-===//

#include "accrue/Codegen/Common/Contractions.h"
#include "accrue/Codegen/Common/LoopInvariance.h"
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

/// Whether `op` computes the same values in every iteration of the loop
/// whose body is `region` (a weight's cast, which hoist-loop-invariants
/// takes out of the micro-batch loop).
bool isInvariantIn(linalg::GenericOp op, Region *region) {
  return codegen::readsOnlyFrom(
      op, [&](Value v) { return !region->isAncestor(v.getParentRegion()); });
}

/// An elementwise producer with other uses, fused into a consumer that
/// every one of those uses follows: the fused op yields the producer's
/// values too (linalg::fuseElementwiseOps keeps them), they replace the
/// producer's everywhere, and the producer goes. Nothing is computed twice,
/// and the consumer no longer reads the producer's result back from
/// memory: a chain of elementwise ops over the same points (an LSTM cell's
/// gates and their gradients, a value and its bf16 cast for a product)
/// is one pass instead of one per op. Consumers with reductions or that
/// are contractions, and producers that are loop-invariant where the
/// consumer is not, keep theirs.
struct FuseSharedProducer : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    if (!consumer.hasPureTensorSemantics() ||
        consumer.getNumReductionLoops() != 0 ||
        codegen::matchContraction(consumer))
      return failure();
    Block *block = consumer->getBlock();
    for (OpOperand *operand : consumer.getDpsInputOperands()) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      if (!producer || producer->hasOneUse() || producer->getBlock() != block ||
          producer->hasAttr(codegen::kGemmRoundingAttr) ||
          !linalg::areElementwiseOpsFusable(operand) ||
          !consumer.getMatchingIndexingMap(operand).isPermutation())
        continue;
      if (Region *region = block->getParent();
          isInvariantIn(producer, region) && !isInvariantIn(consumer, region))
        continue;
      // The consumer reads the producer through this operand alone, and
      // every other use comes after the consumer.
      bool fusable = true;
      for (OpOperand &use : producer->getUses()) {
        Operation *user = use.getOwner();
        if (user == consumer.getOperation()) {
          fusable &= &use == operand;
          continue;
        }
        Operation *inBlock = block->findAncestorOpInBlock(*user);
        fusable &= inBlock && consumer->isBeforeInBlock(inBlock);
      }
      if (!fusable)
        continue;
      FailureOr<linalg::ElementwiseOpFusionResult> fused =
          linalg::fuseElementwiseOps(rewriter, operand);
      if (failed(fused))
        continue;
      for (auto [original, replacement] : fused->replacements)
        rewriter.replaceAllUsesWith(original, replacement);
      rewriter.eraseOp(consumer);
      rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }
};

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
    if (!sharedProducers)
      return;
    // After the single-use fusions: a producer fused into a reduction
    // there (a cross-entropy's per-sample losses into their sum) is not
    // made a second result of an elementwise op first, which would keep
    // it out of the reduction.
    RewritePatternSet shared(context);
    shared.add<FuseSharedProducer>(context);
    if (failed(applyPatternsGreedily(
            getOperation(), std::move(shared),
            GreedyRewriteConfig().setUseTopDownTraversal(true))))
      return signalPassFailure();
  }
};

} // namespace
