//===- FoldIntoContractions.cpp - data movement into kernels ----*- C++ -*-===//
//
// The folds of Codegen/Common (transposes and sums into the indexing maps
// of the contractions that read or write them), made only where the
// contraction's new layout gets a vector kernel at least as good as its
// old one: a transposed weight read by x @ W^T stays a transpose, because
// folded, the outer products would become dot products. On CPUs with
// AVX512-BF16, contractions of bf16 operands read them as bf16 (the
// widening folds of Codegen/Common) where vdpbf16ps gives them the same
// kind of kernel.
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
    auto kernelOf = [tiles](linalg::GenericOp op, ArrayRef<AffineMap> maps,
                            bool bf16) {
      SmallVector<int64_t> bounds = op.getStaticLoopRanges();
      if (ShapedType::isDynamicShape(bounds))
        return accrue::cpu::ContractionKernel::None;
      return accrue::cpu::contractionKernel(maps, bounds, tiles, bf16);
    };
    auto readsBF16 = [](linalg::GenericOp op) {
      std::optional<accrue::codegen::Contraction> c =
          accrue::codegen::matchContraction(op);
      return c && c->lhsElement.isBF16() && c->rhsElement.isBF16();
    };
    RewritePatternSet patterns(&getContext());
    if (layouts) {
      auto keepsKernel = [&](linalg::GenericOp op, ArrayRef<AffineMap> maps) {
        bool bf16 = readsBF16(op);
        return kernelOf(op, maps, bf16) >=
               kernelOf(op, op.getIndexingMapsArray(), bf16);
      };
      accrue::codegen::populateFoldIntoContractionsPatterns(patterns,
                                                            keepsKernel);
      accrue::codegen::populateMoveBeforeElementwisePatterns(patterns,
                                                             keepsKernel);
      accrue::codegen::populateFoldAddedInitPatterns(patterns, keepsKernel);
    }
    if (bf16Dot) {
      // The bf16 kernel of the same kind as the f32 one (it needs k in
      // pairs).
      auto takesBF16 = [&](linalg::GenericOp op, Type narrow) {
        SmallVector<AffineMap> maps = op.getIndexingMapsArray();
        accrue::cpu::ContractionKernel kernel = kernelOf(op, maps, true);
        return narrow.isBF16() &&
               kernel != accrue::cpu::ContractionKernel::None &&
               kernel == kernelOf(op, maps, false);
      };
      accrue::codegen::populateFoldWideningPatterns(patterns, takesBF16);
    }
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
