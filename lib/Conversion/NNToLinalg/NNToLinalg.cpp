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
struct ConvertNNToLinalgPass
    : public accrue::impl::ConvertNNToLinalgBase<ConvertNNToLinalgPass> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<nn::NNDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    nn::lowering::populateElementwiseLowering(patterns);
    nn::lowering::populateContractionLowering(patterns);
    nn::lowering::populateReductionLowering(patterns);
    nn::lowering::populateShapeLowering(patterns);
    nn::lowering::populateLossLowering(patterns);
    nn::lowering::populateNeuralLowering(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
