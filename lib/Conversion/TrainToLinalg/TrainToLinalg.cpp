//===- TrainToLinalg.cpp - lower train ops to linalg ------------*- C++ -*-===//
//
// Arena ops become slices and reshapes (views after bufferization) and
// elementwise generics that write into their destination arena, so
// parameters and optimizer state are updated in place; accumulators are
// updated in place by train.accumulate's bufferization. Norms accumulate
// squares in f64.
//
//===----------------------------------------------------------------------===//

#include "accrue/Conversion/Passes.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "../NNToLinalg/LoweringUtils.h"

#include "accrue-runtime/StepABI.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

namespace accrue {
#define GEN_PASS_DEF_CONVERTTRAINTOLINALG
#include "accrue/Conversion/Passes.h.inc"
} // namespace accrue

using namespace mlir;
using namespace accrue;
using namespace accrue::train;
using nn::lowering::emptyTensor;
using nn::lowering::filledTensor;
using nn::lowering::reassocFlags;
using nn::lowering::reshapeTensor;

namespace {

using utils::IteratorType;

Value slice(OpBuilder &b, Location loc, Value arena, int64_t offset,
            int64_t size) {
  return tensor::ExtractSliceOp::create(
      b, loc, arena, ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

/// A 1-D elementwise generic that reads `inputs` and updates `outputs` in
/// place; `body` maps (input elements, output elements) to new outputs.
ValueRange
updateInPlace(OpBuilder &b, Location loc, ValueRange inputs, ValueRange outputs,
              llvm::function_ref<void(OpBuilder &, Location, ValueRange,
                                      ValueRange, SmallVectorImpl<Value> &)>
                  body) {
  SmallVector<AffineMap> maps(inputs.size() + outputs.size(),
                              b.getMultiDimIdentityMap(1));
  auto generic = linalg::GenericOp::create(
      b, loc, outputs.getTypes(), inputs, outputs, maps,
      ArrayRef<IteratorType>{IteratorType::parallel},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        SmallVector<Value> results;
        body(nb, nl, args.take_front(inputs.size()),
             args.drop_front(inputs.size()), results);
        linalg::YieldOp::create(nb, nl, results);
      });
  return generic.getResults();
}

/// sum((x * scale)^2) accumulated in f64.
Value sumOfSquares(OpBuilder &b, Location loc, Value arena, Value scale) {
  MLIRContext *ctx = b.getContext();
  auto scalarType = RankedTensorType::get({}, b.getF64Type());
  Value init = filledTensor(b, loc, scalarType, 0.0);
  auto generic = linalg::GenericOp::create(
      b, loc, scalarType, arena, init,
      ArrayRef<AffineMap>{b.getMultiDimIdentityMap(1),
                          AffineMap::get(1, 0, {}, ctx)},
      ArrayRef<IteratorType>{IteratorType::reduction},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value x = args[0];
        if (scale)
          x = arith::MulFOp::create(nb, nl, x, scale);
        Value wide = arith::ExtFOp::create(nb, nl, nb.getF64Type(), x);
        Value sq = arith::MulFOp::create(nb, nl, wide, wide);
        linalg::YieldOp::create(
            nb, nl,
            arith::AddFOp::create(nb, nl, args[1], sq, reassocFlags(nb))
                .getResult());
      });
  return tensor::ExtractOp::create(b, loc, generic.getResult(0));
}

/// sqrt(sum((x * scale)^2)) accumulated in f64, returned as f32.
Value sumOfSquaresNorm(OpBuilder &b, Location loc, Value arena, Value scale) {
  Value norm = math::SqrtOp::create(b, loc, sumOfSquares(b, loc, arena, scale));
  return arith::TruncFOp::create(b, loc, b.getF32Type(), norm);
}

/// A call of the step contract's shard hook `name` (accrue_shard_begin or
/// accrue_shard_size) for an arena of `size` elements, as an index.
Value shardBound(OpBuilder &b, Operation *from, StringRef name, int64_t size) {
  auto module = from->getParentOfType<ModuleOp>();
  Location loc = from->getLoc();
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    fn = func::FuncOp::create(
        b, module.getLoc(), name,
        b.getFunctionType({b.getI64Type()}, {b.getI64Type()}));
    fn.setPrivate();
  }
  Value n = arith::ConstantIntOp::create(b, loc, b.getI64Type(), size);
  Value bound = func::CallOp::create(b, loc, fn, ValueRange{n}).getResult(0);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), bound);
}

/// min(1, maxNorm / (norm + 1e-6)) in f32, NaN-propagating.
Value clipCoefficient(OpBuilder &b, Location loc, Value norm, double maxNorm) {
  auto f32 = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  };
  Value denom = arith::AddFOp::create(b, loc, norm, f32(1e-6));
  Value coef = arith::DivFOp::create(b, loc, f32(maxNorm), denom);
  return arith::MinimumFOp::create(b, loc, coef, f32(1.0));
}

struct UnpackLowering : public OpConversionPattern<UnpackOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(UnpackOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    SmallVector<Value> views;
    for (auto [offset, type] :
         llvm::zip(op.getOffsets(), op.getViews().getTypes())) {
      auto viewType = cast<RankedTensorType>(type);
      Value flat = slice(rewriter, op.getLoc(), adaptor.getArena(), offset,
                         viewType.getNumElements());
      views.push_back(reshapeTensor(rewriter, op.getLoc(), flat, viewType));
    }
    rewriter.replaceOp(op, views);
    return success();
  }
};

struct GlobalNormLowering : public OpConversionPattern<GlobalNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GlobalNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, sumOfSquaresNorm(rewriter, op.getLoc(),
                                            adaptor.getInput(), Value()));
    return success();
  }
};

struct ClipCoefficientLowering : public OpConversionPattern<ClipCoefficientOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ClipCoefficientOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       clipCoefficient(rewriter, op.getLoc(), adaptor.getNorm(),
                                       op.getMaxNorm().convertToDouble()));
    return success();
  }
};

struct ScaleLowering : public OpConversionPattern<ScaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScaleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value factor = adaptor.getFactor();
    Value result = updateInPlace(
        rewriter, op.getLoc(), ValueRange{}, adaptor.getInput(),
        [&](OpBuilder &b, Location l, ValueRange, ValueRange outs,
            SmallVectorImpl<Value> &results) {
          results.push_back(arith::MulFOp::create(b, l, outs[0], factor));
        })[0];
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// i1: `norm` is finite (false for +-inf and NaN).
Value isFinite(OpBuilder &b, Location loc, Value norm) {
  Value inf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(std::numeric_limits<float>::infinity()));
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                               math::AbsFOp::create(b, loc, norm), inf);
}

/// Keeps `old` (parameters and states) instead of `updated` where `apply`
/// is false: a skipped step.
void keepUnlessApplied(OpBuilder &b, Location loc, Value apply, ValueRange old,
                       SmallVectorImpl<Value> &updated) {
  for (auto [value, previous] : llvm::zip(updated, old))
    value = arith::SelectOp::create(b, loc, apply, value, previous);
}

/// GradScaler's rule on scalars, the scale in f32.
struct NextLossScaleLowering : public OpConversionPattern<NextLossScaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(NextLossScaleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto f32 = [&](const APFloat &v) -> Value {
      return arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(static_cast<float>(v.convertToDouble())));
    };
    auto i64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
    };
    Value scale = adaptor.getScale(), streak = adaptor.getStreak();
    Value finite = isFinite(b, loc, adaptor.getNorm());
    Value backedOff =
        arith::MulFOp::create(b, loc, scale, f32(op.getBackoff()));
    Value nextScale, nextStreak;
    if (op.getInterval() == 0) {
      // Static scaling: nothing grows, nothing counts.
      nextScale = arith::SelectOp::create(b, loc, finite, scale, backedOff);
      nextStreak = i64(0);
    } else {
      Value next = arith::AddIOp::create(b, loc, streak, i64(1));
      Value grow = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, next,
                                         i64(op.getInterval()));
      Value grown = arith::SelectOp::create(
          b, loc, grow,
          arith::MulFOp::create(b, loc, scale, f32(op.getGrowth())), scale);
      nextScale = arith::SelectOp::create(b, loc, finite, grown, backedOff);
      nextStreak = arith::SelectOp::create(
          b, loc, finite, arith::SelectOp::create(b, loc, grow, i64(0), next),
          i64(0));
    }
    rewriter.replaceOp(op, {nextScale, nextStreak, finite});
    return success();
  }
};

struct UpdateLowering : public OpConversionPattern<UpdateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(UpdateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    SmallVector<Value> outputs{adaptor.getParams()};
    llvm::append_range(outputs, adaptor.getStates());
    OptimizerAttrInterface optimizer = op.getOptimizer();
    Value lr = adaptor.getLr(), step = adaptor.getStep();
    // Skipping on overflow needs a finiteness check: its own pass here (the
    // fused update gets it from the norm it computes anyway).
    Value apply;
    if (op.getSkipNonfinite())
      apply = isFinite(
          rewriter, op.getLoc(),
          sumOfSquaresNorm(rewriter, op.getLoc(), adaptor.getGrads(), Value()));
    ValueRange results = updateInPlace(
        rewriter, op.getLoc(), adaptor.getGrads(), outputs,
        [&](OpBuilder &b, Location l, ValueRange ins, ValueRange outs,
            SmallVectorImpl<Value> &newValues) {
          optimizer.buildElementUpdate(b, l, outs[0], ins[0], outs.drop_front(),
                                       lr, step, newValues);
          if (apply)
            keepUnlessApplied(b, l, apply, outs, newValues);
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct FusedUpdateLowering : public OpConversionPattern<FusedUpdateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FusedUpdateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getSharded())
      return lowerSharded(op, adaptor, rewriter);
    Location loc = op.getLoc();
    Value scale = adaptor.getGradScale();
    // Pass 1: the norm of the final gradient.
    Value norm =
        sumOfSquaresNorm(rewriter, loc, adaptor.getAccumulator(), scale);
    // Pass 2: gradient, optimizer and accumulator reset per element.
    SmallVector<Value> outputs{adaptor.getParams(), adaptor.getAccumulator()};
    llvm::append_range(outputs, adaptor.getStates());
    ValueRange results = updateElements(rewriter, op, adaptor, norm,
                                        ValueRange{}, outputs, true);
    SmallVector<Value> replacements(results);
    replacements.push_back(norm);
    rewriter.replaceOp(op, replacements);
    return success();
  }

  /// ZeRO stage 1: the same two passes over this rank's shard, the norm's
  /// sum of squares summed over the ranks between them; then the
  /// parameters' shards are gathered and the whole accumulator is zeroed
  /// (outside the shard it holds what the reduce-scatter left). Under
  /// stage 2 the accumulator is the shard, zeroed by the update pass.
  LogicalResult lowerSharded(FusedUpdateOp op, OpAdaptor adaptor,
                             ConversionPatternRewriter &rewriter) const {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    int64_t size = op.getParams().getType().getNumElements();
    Value begin = shardBound(b, op, ACCRUE_SHARD_BEGIN_FUNCTION, size);
    Value count = shardBound(b, op, ACCRUE_SHARD_SIZE_FUNCTION, size);
    auto shardOf = [&](Value arena) {
      return tensor::ExtractSliceOp::create(
          b, loc, arena, ArrayRef<OpFoldResult>{begin},
          ArrayRef<OpFoldResult>{count},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    };
    // Stage 2's accumulator is the shard itself, zeroed in the update pass.
    bool shardedAccumulator =
        !cast<RankedTensorType>(op.getAccumulator().getType()).hasStaticShape();
    Value gradients = shardedAccumulator ? adaptor.getAccumulator()
                                         : shardOf(adaptor.getAccumulator());
    Value params = shardOf(adaptor.getParams());
    Value partial = arith::TruncFOp::create(
        b, loc, b.getF32Type(),
        sumOfSquares(b, loc, gradients, adaptor.getGradScale()));
    auto one = RankedTensorType::get({1}, b.getF32Type());
    Value summed = AllReduceArenaOp::create(
        b, loc, tensor::FromElementsOp::create(b, loc, one, partial));
    Value norm = math::SqrtOp::create(
        b, loc,
        tensor::ExtractOp::create(
            b, loc, summed,
            ValueRange{arith::ConstantIndexOp::create(b, loc, 0)}));
    SmallVector<Value> outputs{params};
    if (shardedAccumulator)
      outputs.push_back(gradients);
    llvm::append_range(outputs, adaptor.getStates());
    ValueRange results = updateElements(
        b, op, adaptor, norm, shardedAccumulator ? ValueRange{} : gradients,
        outputs, shardedAccumulator);
    Value updated = tensor::InsertSliceOp::create(
        b, loc, results[0], adaptor.getParams(), ArrayRef<OpFoldResult>{begin},
        ArrayRef<OpFoldResult>{count},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    SmallVector<Value> replacements{AllGatherArenaOp::create(b, loc, updated)};
    if (!shardedAccumulator)
      replacements.push_back(
          linalg::FillOp::create(b, loc,
                                 ValueRange{arith::ConstantOp::create(
                                     b, loc, b.getF32FloatAttr(0))},
                                 ValueRange{adaptor.getAccumulator()})
              .getResult(0));
    llvm::append_range(replacements, results.drop_front());
    replacements.push_back(norm);
    rewriter.replaceOp(op, replacements);
    return success();
  }

  /// The update pass: per element, the final gradient (the accumulator
  /// times grad_scale, clipped by the norm), the optimizer, and a skipped
  /// step where the norm is not finite. The accumulator is `gradients`, or
  /// else `outputs[1]`, zeroed where `resetAccumulator`; the parameters
  /// are `outputs[0]`, the states follow.
  static ValueRange updateElements(OpBuilder &rewriter, FusedUpdateOp op,
                                   OpAdaptor adaptor, Value norm,
                                   ValueRange gradients, ValueRange outputs,
                                   bool resetAccumulator) {
    Location loc = op.getLoc();
    Value scale = adaptor.getGradScale();
    Value coef;
    if (std::optional<APFloat> maxNorm = op.getMaxNorm())
      coef = clipCoefficient(rewriter, loc, norm, maxNorm->convertToDouble());
    Value apply =
        op.getSkipNonfinite() ? isFinite(rewriter, loc, norm) : Value();
    OptimizerAttrInterface optimizer = op.getOptimizer();
    Value lr = adaptor.getLr(), step = adaptor.getStep();
    unsigned firstState = resetAccumulator ? 2 : 1;
    return updateInPlace(
        rewriter, loc, gradients, outputs,
        [&](OpBuilder &b, Location l, ValueRange ins, ValueRange outs,
            SmallVectorImpl<Value> &newValues) {
          Value g = arith::MulFOp::create(
              b, l, resetAccumulator ? outs[1] : ins[0], scale);
          if (coef)
            g = arith::MulFOp::create(b, l, g, coef);
          SmallVector<Value> updated;
          optimizer.buildElementUpdate(
              b, l, outs[0], g, outs.drop_front(firstState), lr, step, updated);
          if (apply) {
            SmallVector<Value> old{outs[0]};
            llvm::append_range(old, outs.drop_front(firstState));
            keepUnlessApplied(b, l, apply, old, updated);
          }
          newValues.push_back(updated[0]);
          if (resetAccumulator)
            newValues.push_back(
                arith::ConstantOp::create(b, l, b.getF32FloatAttr(0.0f)));
          llvm::append_range(newValues, ArrayRef<Value>(updated).drop_front());
        });
  }
};

struct ConvertTrainToLinalgPass
    : public accrue::impl::ConvertTrainToLinalgBase<ConvertTrainToLinalgPass> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<TrainDialect>();
    // train.accumulate stays until one-shot bufferization, which updates the
    // accumulator in place (BufferizableOpInterfaceImpl.cpp).
    target.addLegalOp<AccumulateOp, StoreOp, RecomputeBarrierOp>();
    // So does train.all_reduce, which becomes a call of the runtime.
    target.addLegalOp<AllReduceOp, AllReduceArenaOp, AllGatherArenaOp,
                      ReduceScatterAddOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    patterns.add<UnpackLowering, GlobalNormLowering, NextLossScaleLowering,
                 ClipCoefficientLowering, ScaleLowering, UpdateLowering,
                 FusedUpdateLowering>(ctx);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
