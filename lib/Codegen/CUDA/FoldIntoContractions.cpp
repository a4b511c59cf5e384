//===- FoldIntoContractions.cpp - shape contractions for GEMMs --*- C++ -*-===//
//
// A GEMM reads its operands through strides, writes its result through
// strides and sums over as many dimensions as it is given, so every fold
// of Codegen/Common's populateFoldIntoContractionsPatterns applies. Runs
// after CSE, whose merged zero fills it gives back to each contraction
// (one fill shared by two would bufferize into a copy).
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/Common/Contractions.h"

#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAFOLDINTOCONTRACTIONS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue::cuda;

namespace {

struct CudaFoldIntoContractionsPass
    : public accrue::cuda::impl::CudaFoldIntoContractionsBase<
          CudaFoldIntoContractionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    accrue::codegen::populateFoldIntoContractionsPatterns(patterns);
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
  }
};

} // namespace
