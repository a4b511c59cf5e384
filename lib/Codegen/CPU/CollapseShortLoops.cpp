//===- CollapseShortLoops.cpp - merge a short innermost loop ----*- C++ -*-===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_COLLAPSESHORTLOOPS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// Below this many iterations an innermost loop does not fill even a
/// 256-bit vector of floats. (Loops of 8 to 15 are left alone: they
/// vectorize, and merging them would only change the order of sums.)
constexpr int64_t kShortLoop = 8;
/// Ops with fewer iterations take microseconds whatever their loops; they
/// keep their shape (and their sums their order).
constexpr int64_t kLargeOp = 1 << 14;

/// The loops to merge in `op`: the longest run of consecutive loops of the
/// same kind ending at a short innermost loop that all operands read
/// contiguously; none for contractions (vectorize-contractions' business).
SmallVector<ReassociationIndices> loopsToMerge(linalg::LinalgOp op) {
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic || !generic.hasPureTensorSemantics())
    return {};
  if (op.getNumReductionLoops() > 0 && op.getNumDpsInputs() > 1)
    return {};
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  int64_t last = static_cast<int64_t>(bounds.size()) - 1;
  if (last < 1 || llvm::any_of(bounds, ShapedType::isDynamic) ||
      bounds[last] >= kShortLoop)
    return {};
  int64_t iterations = 1;
  for (int64_t bound : bounds)
    iterations *= bound;
  if (iterations < kLargeOp)
    return {};
  SmallVector<utils::IteratorType> kinds = op.getIteratorTypesArray();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  // Windows (d0 + d1) and other non-permutation reads stay as they are.
  if (!llvm::all_of(maps,
                    [](AffineMap m) { return m.isProjectedPermutation(); }))
    return {};
  ReassociationIndices run{last};
  for (int64_t d = last - 1; d >= 0 && kinds[d] == kinds[last]; --d) {
    ReassociationIndices longer{d};
    longer.append(run.begin(), run.end());
    if (!linalg::areDimSequencesPreserved(maps, longer))
      break;
    run = std::move(longer);
  }
  if (run.size() < 2)
    return {};
  return {run};
}

struct CollapseShortLoopsPass
    : accrue::cpu::impl::CollapseShortLoopsBase<CollapseShortLoopsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateCollapseDimensions(patterns, loopsToMerge);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
