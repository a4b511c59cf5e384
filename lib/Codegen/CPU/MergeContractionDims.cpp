//===- MergeContractionDims.cpp - one loop per run of a kind ----*- C++ -*-===//
//
// Merges a contraction's consecutive loops of the same kind (batch, m, n or
// k) that every operand reads consecutively; see the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_MERGECONTRACTIONDIMS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// The runs of consecutive loops of `op`, a contraction on static tensors,
/// that every operand reads consecutively, in order, or not at all (so
/// each run's loops are all batch, all m, all n or all k dimensions: the
/// same operands read them); none for other ops.
SmallVector<ReassociationIndices> runsToMerge(linalg::LinalgOp op) {
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic || !generic.hasPureTensorSemantics() ||
      !linalg::isaContractionOpInterface(op) ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return {};
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<ReassociationIndices> runs;
  ReassociationIndices run;
  for (int64_t d = 0, e = op.getNumLoops(); d <= e; ++d) {
    if (d < e && !run.empty()) {
      ReassociationIndices longer = run;
      longer.push_back(d);
      if (linalg::areDimSequencesPreserved(maps, longer)) {
        run = std::move(longer);
        continue;
      }
    }
    if (run.size() > 1)
      runs.push_back(run);
    run = {d};
  }
  return runs;
}

struct MergeContractionDimsPass
    : accrue::cpu::impl::MergeContractionDimsBase<MergeContractionDimsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // A merged op has no runs left: each contraction counts once.
    linalg::populateCollapseDimensions(patterns, [&](linalg::LinalgOp op) {
      SmallVector<ReassociationIndices> runs = runsToMerge(op);
      if (!runs.empty())
        ++numMerged;
      return runs;
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
