//===- FoldIntoContractions.cpp - data movement into kernels ----*- C++ -*-===//
//
// The folds of Codegen/Common (transposes and sums into the indexing maps
// of the contractions that read or write them), made only where the
// contraction's new layout gets a vector kernel at least as good as its
// old one: a transposed weight read by x @ W^T stays a transpose, because
// folded, the outer products would become dot products.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/ContractionKernels.h"
#include "accrue/Codegen/CPU/Passes.h"
#include "accrue/Codegen/Common/Contractions.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_FOLDINTOCONTRACTIONS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

struct FoldIntoContractionsPass
    : accrue::cpu::impl::FoldIntoContractionsBase<FoldIntoContractionsPass> {
  using Base::Base;

  void runOnOperation() override {
    accrue::cpu::ContractionTiles tiles =
        accrue::cpu::contractionTilesFor(vectorBits);
    auto keepsKernel = [tiles](linalg::GenericOp op, ArrayRef<AffineMap> maps) {
      SmallVector<int64_t> bounds = op.getStaticLoopRanges();
      if (ShapedType::isDynamicShape(bounds))
        return false;
      return accrue::cpu::contractionKernel(maps, bounds, tiles) >=
             accrue::cpu::contractionKernel(op.getIndexingMapsArray(), bounds,
                                            tiles);
    };
    RewritePatternSet patterns(&getContext());
    accrue::codegen::populateFoldIntoContractionsPatterns(patterns,
                                                          keepsKernel);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
