//===- BuildStep.cpp - a training step around a forward function --*- C++
//-*-===//
//
// buildTrainStep as a pass, for forward functions written in MLIR (by hand
// or by another frontend) rather than imported from ONNX: it adds
// `@train_step`, a gradient-only step over flat arenas (the optimizer is
// accrue-compile's to choose), which the train passes then micro-batch.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/Transforms/Passes.h"
#include "accrue/Dialect/Train/Utils/StepBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINBUILDSTEP
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;

namespace {

struct TrainBuildStepPass
    : public accrue::train::impl::TrainBuildStepBase<TrainBuildStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(forward);
    if (!fn) {
      module.emitError("no forward function '") << forward << "'";
      return signalPassFailure();
    }
    accrue::train::StepOptions options;
    options.microBatch = microBatch;
    // A frontend that knows how its loss's constant divisor scales says so
    // on the forward function (the train dialect verifies its type).
    options.lossDivisor = fn->getAttrOfType<accrue::train::LossDivisorAttr>(
        accrue::train::StepAttrs::kLossDivisor);
    if (failed(accrue::train::buildTrainStep(module, fn, options)))
      return signalPassFailure();
  }
};

} // namespace
