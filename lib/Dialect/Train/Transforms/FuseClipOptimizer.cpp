//===- FuseClipOptimizer.cpp - one pass for the end of a step ---*- C++ -*-===//
//
// Folds gradient normalization, global-norm clipping, the optimizer update
// and the reset of the accumulator into one train.fused_update, which lowers
// to two passes over gradient memory (norm, then update) instead of one per
// op.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINFUSECLIPOPTIMIZER
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// Whether every use of `value`, other than by ops in `ignored`, comes after
/// `point` in its block.
bool allUsesAfter(Value value, Operation *point,
                  ArrayRef<Operation *> ignored = {}) {
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    if (llvm::is_contained(ignored, user))
      return true;
    Operation *ancestor = point->getBlock()->findAncestorOpInBlock(*user);
    return ancestor && ancestor != point && point->isBeforeInBlock(ancestor);
  });
}

/// The linalg.fill of 0.0 whose destination is `accumulator`, if any.
linalg::FillOp findZeroFill(Value accumulator) {
  for (Operation *user : accumulator.getUsers()) {
    auto fill = dyn_cast<linalg::FillOp>(user);
    if (!fill || fill.getOutputs()[0] != accumulator)
      continue;
    FloatAttr value;
    if (matchPattern(fill.getInputs()[0], m_Constant(&value)) &&
        value.getValue().isZero())
      return fill;
  }
  return {};
}

struct TrainFuseClipOptimizerPass
    : public train::impl::TrainFuseClipOptimizerBase<
          TrainFuseClipOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<UpdateOp> updates;
    getOperation().walk([&](UpdateOp op) { updates.push_back(op); });
    for (UpdateOp update : updates)
      fuse(update);
  }

  void fuse(UpdateOp update) {
    // Optional clipping: scale(g, clip_coefficient(global_norm(g))).
    Value grad = update.getGrads();
    FloatAttr maxNorm;
    GlobalNormOp norm;
    SmallVector<Operation *> dead;
    if (auto clip = grad.getDefiningOp<ScaleOp>()) {
      auto coef = clip.getFactor().getDefiningOp<ClipCoefficientOp>();
      auto gn = coef ? coef.getNorm().getDefiningOp<GlobalNormOp>() : nullptr;
      if (gn && gn.getInput() == clip.getInput()) {
        maxNorm = coef.getMaxNormAttr();
        norm = gn;
        dead = {clip, coef};
        grad = clip.getInput();
      }
    }
    if (!norm)
      for (Operation *user : grad.getUsers())
        if (auto gn = dyn_cast<GlobalNormOp>(user))
          norm = gn;

    // Normalization and unscaling factors down to the accumulator. Zero
    // fills of any value on the way reset the accumulator.
    Value accumulator = grad;
    SmallVector<Value> factors;
    SmallVector<linalg::FillOp> fills;
    auto isKnownUser = [&](Operation *user) {
      return user == update || user == norm || llvm::is_contained(dead, user) ||
             isa<ScaleOp>(user) || llvm::is_contained(fills, user);
    };
    while (true) {
      if (linalg::FillOp fill = findZeroFill(accumulator))
        fills.push_back(fill);
      auto scale = accumulator.getDefiningOp<ScaleOp>();
      if (!scale || !llvm::all_of(scale->getUsers(), isKnownUser))
        break;
      factors.push_back(scale.getFactor());
      dead.push_back(scale);
      accumulator = scale.getInput();
    }

    // Everything replaced must be used only after the update.
    if (norm && !allUsesAfter(norm.getResult(), update, dead))
      return;
    for (linalg::FillOp fill : fills)
      if (!allUsesAfter(fill.getResult(0), update))
        return;

    OpBuilder b(update);
    Location loc = update.getLoc();
    Value gradScale =
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
    for (Value factor : factors)
      gradScale = arith::MulFOp::create(b, loc, gradScale, factor);
    auto fused = FusedUpdateOp::create(
        b, loc, update.getParams(), accumulator, update.getStates(), gradScale,
        update.getLr(), update.getStep(), update.getOptimizer(), maxNorm,
        update.getSkipNonfiniteAttr());
    update.getNewParams().replaceAllUsesWith(fused.getNewParams());
    update.getNewStates().replaceAllUsesWith(fused.getNewStates());
    if (norm)
      norm.getResult().replaceAllUsesWith(fused.getNorm());
    for (linalg::FillOp fill : fills) {
      fill.getResult(0).replaceAllUsesWith(fused.getNewAccumulator());
      fill.erase();
    }
    update.erase();
    if (norm)
      dead.push_back(norm);
    // Erase what became dead, users before producers.
    for (bool changed = true; changed;) {
      changed = false;
      for (Operation *&op : dead)
        if (op && op->use_empty()) {
          op->erase();
          op = nullptr;
          changed = true;
        }
    }
    ++numFused;
  }
};

} // namespace
