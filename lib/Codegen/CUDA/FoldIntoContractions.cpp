//===- FoldIntoContractions.cpp - shape contractions for GEMMs --*- C++ -*-===//
//
// A GEMM reads its operands through strides, writes its result through
// strides and sums over as many dimensions as it is given, so every fold
// of Codegen/Common's populateFoldIntoContractionsPatterns applies. It
// also reads bf16 and f16 operands and accumulates in f32, so every
// widening fold of populateFoldWideningPatterns applies as well: the GEMM
// reads the low-precision tensors, and the widening kernels and their f32
// copies go. Runs after
// CSE, whose merged zero fills it gives back to each contraction (one
// fill shared by two would bufferize into a copy).
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/Common/Contractions.h"

#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAFOLDINTOCONTRACTIONS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue::cuda;
using accrue::codegen::isNarrowFloat;
using accrue::codegen::onlyOpOf;

namespace {

/// Whether `op` only rounds a zero-started contraction's f32 result (its
/// only use) to bf16 or f16: nn-to-linalg's low-precision product, whose
/// GEMM can write the rounded values itself (cuda-contractions-to-gemm).
bool roundsContraction(linalg::GenericOp op) {
  auto trunc = dyn_cast_or_null<arith::TruncFOp>(onlyOpOf(op));
  if (!op.hasPureTensorSemantics() || !trunc ||
      !trunc.getIn().getType().isF32() || !isNarrowFloat(trunc.getType()))
    return false;
  Value product = op.getDpsInputs()[0];
  auto contraction = product.getDefiningOp<linalg::GenericOp>();
  return contraction && product.hasOneUse() &&
         accrue::codegen::matchContraction(contraction) &&
         accrue::codegen::isZeroFill(contraction.getDpsInits()[0]);
}

struct CudaFoldIntoContractionsPass
    : public accrue::cuda::impl::CudaFoldIntoContractionsBase<
          CudaFoldIntoContractionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    accrue::codegen::populateFoldIntoContractionsPatterns(patterns);
    accrue::codegen::populateFoldWideningPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // A zero fill that several contractions start from (CSE merges them)
    // would bufferize into one buffer and copies of it: each gets its own.
    getOperation().walk([](linalg::FillOp fill) {
      if (fill->getNumResults() != 1)
        return;
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : fill->getResult(0).getUses())
        uses.push_back(&use);
      for (OpOperand *use : llvm::drop_begin(uses)) {
        auto contraction = dyn_cast<linalg::GenericOp>(use->getOwner());
        if (!contraction || !contraction.isDpsInit(use))
          continue;
        OpBuilder b(contraction);
        use->set(b.clone(*fill)->getResult(0));
      }
    });
    // A product rounded to bf16 or f16 as soon as it is computed: the
    // rounding stays apart from what reads the rounded values (fusion
    // leaves it), for the GEMM to do. Its product gets an empty tensor of
    // its own: one CSE merged with others would bufferize into a buffer
    // that later ops reuse, which the GEMM could then not drop.
    getOperation().walk([](linalg::GenericOp op) {
      if (!roundsContraction(op))
        return;
      op->setAttr(accrue::codegen::kGemmRoundingAttr,
                  UnitAttr::get(op.getContext()));
      auto fill = op.getDpsInputs()[0]
                      .getDefiningOp<linalg::GenericOp>()
                      .getDpsInits()[0]
                      .getDefiningOp<linalg::FillOp>();
      auto empty = fill.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>();
      if (empty && !empty->hasOneUse()) {
        OpBuilder b(fill);
        fill.getDpsInitsMutable()[0].set(b.clone(*empty)->getResult(0));
      }
    });
  }
};

} // namespace
