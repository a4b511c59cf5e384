//===- NNToLinalg.cpp - the convert-nn-to-linalg pass -----------*- C++ -*-===//

#include "accrue/Conversion/Passes.h"

#include "LoweringUtils.h"

namespace accrue {
#define GEN_PASS_DEF_CONVERTNNTOLINALG
#include "accrue/Conversion/Passes.h.inc"
} // namespace accrue

using namespace mlir;
using namespace accrue;

namespace {

/// Contractions and sums over bf16/f16 values accumulate in fp32, as
/// tensor cores and PyTorch's CPU kernels do: the op runs on its operands
/// widened to f32 (exactly: every bf16 or f16 value is an f32, and so is
/// the product of two) and its result is rounded back once.
void widenLowPrecisionAccumulation(Operation *root) {
  SmallVector<Operation *> ops;
  root->walk([&](Operation *op) {
    if (!isa<nn::MatMulOp, nn::GemmOp, nn::ConvOp, nn::ConvGradInputOp,
             nn::ConvGradWeightOp, nn::ReduceSumOp, nn::ReduceMeanOp,
             nn::AveragePoolOp, nn::AveragePoolGradOp>(op))
      return;
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (type &&
        (type.getElementType().isBF16() || type.getElementType().isF16()))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    Type f32 = b.getF32Type();
    auto widen = [&](Type t) {
      return RankedTensorType::get(cast<RankedTensorType>(t).getShape(), f32);
    };
    for (OpOperand &operand : op->getOpOperands()) {
      auto t = dyn_cast<RankedTensorType>(operand.get().getType());
      if (t && isa<FloatType>(t.getElementType()) &&
          !t.getElementType().isF32())
        operand.set(
            nn::CastOp::create(b, op->getLoc(), widen(t), operand.get()));
    }
    Value result = op->getResult(0);
    Type narrow = result.getType();
    result.setType(widen(narrow));
    b.setInsertionPointAfter(op);
    auto back = nn::CastOp::create(b, op->getLoc(), narrow, result);
    result.replaceAllUsesExcept(back, back);
  }
}

struct ConvertNNToLinalgPass
    : public accrue::impl::ConvertNNToLinalgBase<ConvertNNToLinalgPass> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    widenLowPrecisionAccumulation(getOperation());
    ConversionTarget target(*ctx);
    target.addIllegalDialect<nn::NNDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    nn::lowering::populateElementwiseLowering(patterns);
    nn::lowering::populateContractionLowering(patterns);
    nn::lowering::populateReductionLowering(patterns);
    nn::lowering::populateShapeLowering(patterns);
    nn::lowering::populateLossLowering(patterns, decodeLabelsOnce);
    nn::lowering::populateNeuralLowering(patterns);
    nn::lowering::populateScanLowering(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
