//===- Loss.cpp - lower softmax cross-entropy ops ---------------*- C++ -*-===//
//
// SoftmaxCrossEntropyLoss on scores [N, C, d...]: a max and a sum-of-exp
// reduction over the class dimension, then a per-item generic that gathers
// the label's score. Labels equal to ignore_index contribute 0; labels
// outside [0, C) make the loss NaN (reads stay in bounds), so bad data shows
// up as a non-finite loss instead of a crash.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;

namespace {

using utils::IteratorType;

/// Shapes and operands shared by the loss ops.
struct LossShapes {
  RankedTensorType scores; // [N, C, d...]
  RankedTensorType items;  // [N, d...], scores' element type
  int64_t rank;            // rank of scores
  int64_t numClasses;

  explicit LossShapes(Value scoresValue) {
    scores = cast<RankedTensorType>(scoresValue.getType());
    rank = scores.getRank();
    numClasses = scores.getDimSize(1);
    SmallVector<int64_t> shape{scores.getDimSize(0)};
    llvm::append_range(shape, scores.getShape().drop_front(2));
    items = RankedTensorType::get(shape, scores.getElementType());
  }

  /// Map from the scores iteration space (n, c, d...) to items (n, d...).
  AffineMap itemsMap(MLIRContext *ctx) const {
    SmallVector<AffineExpr> exprs{getAffineDimExpr(0, ctx)};
    for (int64_t d = 2; d < rank; ++d)
      exprs.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(rank, 0, exprs, ctx);
  }
};

/// What a label means for one item.
struct LabelInfo {
  Value counted; // i1: not ignored and in range
  Value ignored; // i1: equals ignore_index
  Value index;   // index: the label when counted, else 0 (safe to read)
};

LabelInfo decodeLabel(OpBuilder &b, Location loc, Value label,
                      std::optional<int64_t> ignoreIndex, int64_t numClasses) {
  Type i64 = b.getI64Type();
  if (label.getType() != i64)
    label = arith::ExtSIOp::create(b, loc, i64, label);
  auto cst = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value ignored = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  if (ignoreIndex)
    ignored = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, label,
                                    cst(*ignoreIndex));
  Value nonNegative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, label, cst(0));
  Value below = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, label,
                                      cst(numClasses));
  Value inRange = arith::AndIOp::create(b, loc, nonNegative, below);
  Value notIgnored = arith::XOrIOp::create(
      b, loc, ignored, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
  Value counted = arith::AndIOp::create(b, loc, inRange, notIgnored);
  Value safe = arith::SelectOp::create(b, loc, counted, label, cst(0));
  Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), safe);
  return {counted, ignored, index};
}

/// Each item's class as a gradient over the scores reads it: the label
/// where it counts, else -1; i32 where the classes fit. The gradient's loop
/// over the classes then compares i32 (as i64, the vectorizer halves its
/// width for them: the label's decoding, reloaded every iteration because
/// the store may alias it, would run in i64 lanes).
Value itemClasses(OpBuilder &b, Location loc, Value labels,
                  std::optional<int64_t> ignore, int64_t numClasses) {
  Type type = numClasses <= std::numeric_limits<int32_t>::max()
                  ? b.getI32Type()
                  : b.getI64Type();
  auto labelType = cast<RankedTensorType>(labels.getType());
  return buildElementwise(
      b, loc, RankedTensorType::get(labelType.getShape(), type), labels,
      [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
        LabelInfo info = decodeLabel(nb, nl, args[0], ignore, numClasses);
        return arith::SelectOp::create(
            nb, nl, info.counted,
            arith::IndexCastOp::create(nb, nl, type, info.index),
            arith::ConstantOp::create(nb, nl, b.getIntegerAttr(type, -1)));
      });
}

/// In a generic over the scores, from its item's class (itemClasses):
/// whether the label counts, the class to read weights at, and whether
/// this element's class (dimension 1) is the label's.
struct ClassInfo {
  LabelInfo label;
  Value isLabel;
};
ClassInfo decodeClass(OpBuilder &b, Location loc, Value itemClass) {
  Type type = itemClass.getType();
  Value zero = arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, 0));
  Value counted =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, itemClass, zero);
  Value index = arith::IndexCastOp::create(
      b, loc, b.getIndexType(),
      arith::SelectOp::create(b, loc, counted, itemClass, zero));
  Value c = arith::IndexCastOp::create(b, loc, type,
                                       linalg::IndexOp::create(b, loc, 1));
  Value isLabel =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, c, itemClass);
  return {{counted, /*ignored=*/Value(), index}, isLabel};
}

/// ClassInfo of an element of a gradient over the scores, from its item's
/// class (itemClasses) where `decoded`, else from its item's label.
ClassInfo elementClass(OpBuilder &b, Location loc, Value labelOrClass,
                       bool decoded, std::optional<int64_t> ignore,
                       int64_t numClasses) {
  if (decoded)
    return decodeClass(b, loc, labelOrClass);
  LabelInfo info = decodeLabel(b, loc, labelOrClass, ignore, numClasses);
  Value isLabel =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                            linalg::IndexOp::create(b, loc, 1), info.index);
  return {info, isLabel};
}

/// The class weight of `info`'s label, or 1 without weights.
Value classWeight(OpBuilder &b, Location loc, Value weights, LabelInfo &info,
                  Type element) {
  if (!weights)
    return scalarConstant(b, loc, element, 1.0);
  return tensor::ExtractOp::create(b, loc, weights, info.index);
}

/// Per-item max and sum of exp(score - max) over the class dimension.
std::pair<Value, Value> softmaxStats(OpBuilder &b, Location loc, Value scores,
                                     const LossShapes &shapes) {
  MLIRContext *ctx = b.getContext();
  SmallVector<IteratorType> iterators(shapes.rank, IteratorType::parallel);
  iterators[1] = IteratorType::reduction;
  AffineMap identity = b.getMultiDimIdentityMap(shapes.rank);
  AffineMap items = shapes.itemsMap(ctx);
  Value maxInit = filledTensor(b, loc, shapes.items,
                               -std::numeric_limits<double>::infinity());
  Value max = linalg::GenericOp::create(
                  b, loc, shapes.items, scores, maxInit,
                  ArrayRef<AffineMap>{identity, items}, iterators,
                  [&](OpBuilder &nb, Location nl, ValueRange args) {
                    linalg::YieldOp::create(
                        nb, nl,
                        arith::MaximumFOp::create(nb, nl, args[0], args[1])
                            .getResult());
                  })
                  .getResult(0);
  Value sumInit = filledTensor(b, loc, shapes.items, 0.0);
  Value sumExp =
      linalg::GenericOp::create(
          b, loc, shapes.items, ValueRange{scores, max}, sumInit,
          ArrayRef<AffineMap>{identity, items, items}, iterators,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value shifted = arith::SubFOp::create(nb, nl, args[0], args[1]);
            Value e = math::ExpOp::create(nb, nl, shifted);
            linalg::YieldOp::create(
                nb, nl,
                arith::AddFOp::create(nb, nl, args[2], e, reassocFlags(nb))
                    .getResult());
          })
          .getResult(0);
  return {max, sumExp};
}

/// Sums a tensor over all its dimensions into a 0-d tensor.
Value sumAll(OpBuilder &b, Location loc, Value input) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(input.getType());
  auto scalarType = RankedTensorType::get({}, type.getElementType());
  SmallVector<IteratorType> iterators(type.getRank(), IteratorType::reduction);
  AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
  AffineMap toScalar = AffineMap::get(type.getRank(), 0, {}, ctx);
  return linalg::GenericOp::create(
             b, loc, scalarType, input, filledTensor(b, loc, scalarType, 0.0),
             ArrayRef<AffineMap>{identity, toScalar}, iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(nb, nl,
                                       arith::AddFOp::create(nb, nl, args[1],
                                                             args[0],
                                                             reassocFlags(nb))
                                           .getResult());
             })
      .getResult(0);
}

/// sum_i w[y_i] over counted items, as a 0-d tensor of `element` type.
Value weightSum(OpBuilder &b, Location loc, Value labels, Value weights,
                std::optional<int64_t> ignoreIndex, int64_t numClasses,
                Type element) {
  auto labelType = cast<RankedTensorType>(labels.getType());
  auto perItem = RankedTensorType::get(labelType.getShape(), element);
  Value w = buildElementwise(
      b, loc, perItem, labels,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        LabelInfo info = decodeLabel(nb, nl, args[0], ignoreIndex, numClasses);
        Value weight = classWeight(nb, nl, weights, info, element);
        Value zero = scalarConstant(nb, nl, element, 0.0);
        return Value(
            arith::SelectOp::create(nb, nl, info.counted, weight, zero));
      });
  return sumAll(b, loc, w);
}

/// Reads scores[n, index, d...] inside a generic over the items space.
Value gatherScore(OpBuilder &b, Location loc, Value scores, Value classIndex,
                  int64_t itemsRank) {
  SmallVector<Value> indices{linalg::IndexOp::create(b, loc, 0)};
  indices.push_back(classIndex);
  for (int64_t d = 1; d < itemsRank; ++d)
    indices.push_back(linalg::IndexOp::create(b, loc, d));
  return tensor::ExtractOp::create(b, loc, scores, indices);
}

/// Reduces per-item losses as `reduction` asks (sum, or sum divided by the
/// weight of the counted labels).
Value reduceItems(OpBuilder &b, Location loc, Value perItem,
                  LossReduction reduction, Value labels, Value weights,
                  std::optional<int64_t> ignore, int64_t numClasses,
                  Type element) {
  if (reduction == LossReduction::None)
    return perItem;
  Value result = sumAll(b, loc, perItem);
  if (reduction == LossReduction::Mean) {
    Value count =
        weightSum(b, loc, labels, weights, ignore, numClasses, element);
    result = buildElementwise(
        b, loc, cast<RankedTensorType>(result.getType()),
        ValueRange{result, count},
        [](OpBuilder &nb, Location l, ValueRange args) -> Value {
          return arith::DivFOp::create(nb, l, args[0], args[1]);
        });
  }
  return result;
}

/// The loss of one item from the log-probability of its label: -logp times
/// the label's class weight; 0 for an ignored label, NaN for a label out of
/// range.
Value itemLoss(OpBuilder &b, Location l, Value logp, LabelInfo &info,
               Value weights, Type element) {
  Value loss = arith::MulFOp::create(b, l, arith::NegFOp::create(b, l, logp),
                                     classWeight(b, l, weights, info, element));
  Value zero = scalarConstant(b, l, element, 0.0);
  Value nan =
      scalarConstant(b, l, element, std::numeric_limits<double>::quiet_NaN());
  Value bad = arith::SelectOp::create(b, l, info.ignored, zero, nan);
  return arith::SelectOp::create(b, l, info.counted, loss, bad);
}

/// Adds what a loss gradient reads besides the scores: the upstream
/// gradient `dloss` (per item, or one scalar), and for reduction=mean the
/// weight of the counted labels; then the identity map of the result.
void addGradientInputs(OpBuilder &b, Location loc, const LossShapes &shapes,
                       LossReduction reduction, Value labels, Value dloss,
                       Value weights, std::optional<int64_t> ignore,
                       SmallVectorImpl<Value> &inputs,
                       SmallVectorImpl<AffineMap> &maps) {
  MLIRContext *ctx = b.getContext();
  AffineMap items = shapes.itemsMap(ctx);
  AffineMap scalar = AffineMap::get(shapes.rank, 0, {}, ctx);
  inputs.push_back(dloss);
  maps.push_back(reduction == LossReduction::None ? items : scalar);
  if (reduction == LossReduction::Mean) {
    inputs.push_back(weightSum(b, loc, labels, weights, ignore,
                               shapes.numClasses,
                               shapes.items.getElementType()));
    maps.push_back(scalar);
  }
  maps.push_back(b.getMultiDimIdentityMap(shapes.rank));
}

/// In a gradient's body: the upstream gradient of an item (divided by the
/// counted weight for reduction=mean) times its label's class weight.
/// `upstream` holds the values addGradientInputs added.
Value weightedUpstream(OpBuilder &b, Location l, ValueRange upstream, bool mean,
                       Value weights, LabelInfo &info, Type element) {
  Value coef = upstream[0];
  if (mean)
    coef = arith::DivFOp::create(b, l, coef, upstream[1]);
  return arith::MulFOp::create(b, l, coef,
                               classWeight(b, l, weights, info, element));
}

struct SoftmaxCrossEntropyLossLowering
    : public OpConversionPattern<SoftmaxCrossEntropyLossOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxCrossEntropyLossOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    LossShapes shapes(adaptor.getScores());
    Type element = shapes.items.getElementType();
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    Value scores = adaptor.getScores(), weights = adaptor.getWeights();
    auto [max, sumExp] = softmaxStats(rewriter, loc, scores, shapes);
    int64_t itemsRank = shapes.items.getRank();
    Value perItem = buildElementwise(
        rewriter, loc, shapes.items,
        ValueRange{adaptor.getLabels(), max, sumExp},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          LabelInfo info =
              decodeLabel(b, l, args[0], ignore, shapes.numClasses);
          Value score = gatherScore(b, l, scores, info.index, itemsRank);
          // -log_softmax(x)_y = -((x_y - max) - log(sum exp(x - max))).
          Value logSoftmax = arith::SubFOp::create(
              b, l, arith::SubFOp::create(b, l, score, args[1]),
              math::LogOp::create(b, l, args[2]));
          return itemLoss(b, l, logSoftmax, info, weights, element);
        });
    rewriter.replaceOp(op,
                       reduceItems(rewriter, loc, perItem, op.getReduction(),
                                   adaptor.getLabels(), weights, ignore,
                                   shapes.numClasses, element));
    return success();
  }
};

struct SoftmaxCrossEntropyGradLowering
    : public OpConversionPattern<SoftmaxCrossEntropyGradOp> {
  SoftmaxCrossEntropyGradLowering(MLIRContext *ctx, bool decodeLabelsOnce)
      : OpConversionPattern(ctx), decodeLabelsOnce(decodeLabelsOnce) {}
  bool decodeLabelsOnce;
  LogicalResult
  matchAndRewrite(SoftmaxCrossEntropyGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    LossShapes shapes(adaptor.getScores());
    Type element = shapes.items.getElementType();
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    Value scores = adaptor.getScores(), weights = adaptor.getWeights();
    auto [max, sumExp] = softmaxStats(rewriter, loc, scores, shapes);

    AffineMap items = shapes.itemsMap(ctx);
    Value classes = decodeLabelsOnce
                        ? itemClasses(rewriter, loc, adaptor.getLabels(),
                                      ignore, shapes.numClasses)
                        : adaptor.getLabels();
    SmallVector<Value> inputs{scores, classes, max, sumExp};
    SmallVector<AffineMap> maps{rewriter.getMultiDimIdentityMap(shapes.rank),
                                items, items, items};
    addGradientInputs(rewriter, loc, shapes, op.getReduction(),
                      adaptor.getLabels(), adaptor.getDloss(), weights, ignore,
                      inputs, maps);
    SmallVector<IteratorType> iterators(shapes.rank, IteratorType::parallel);
    bool mean = op.getReduction() == LossReduction::Mean;
    auto generic = linalg::GenericOp::create(
        rewriter, loc, shapes.scores, inputs,
        emptyTensor(rewriter, loc, shapes.scores), maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto [info, isLabel] = elementClass(b, l, args[1], decodeLabelsOnce,
                                              ignore, shapes.numClasses);
          Value prob = arith::DivFOp::create(
              b, l,
              math::ExpOp::create(
                  b, l, arith::SubFOp::create(b, l, args[0], args[2])),
              args[3]);
          Value one = scalarConstant(b, l, element, 1.0);
          Value zero = scalarConstant(b, l, element, 0.0);
          Value onehot = arith::SelectOp::create(b, l, isLabel, one, zero);
          Value coef = weightedUpstream(b, l, args.drop_front(4), mean, weights,
                                        info, element);
          Value grad = arith::MulFOp::create(
              b, l, arith::SubFOp::create(b, l, prob, onehot), coef);
          linalg::YieldOp::create(
              b, l,
              arith::SelectOp::create(b, l, info.counted, grad, zero)
                  .getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct NegativeLogLikelihoodLossLowering
    : public OpConversionPattern<NegativeLogLikelihoodLossOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(NegativeLogLikelihoodLossOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    LossShapes shapes(adaptor.getInput());
    Type element = shapes.items.getElementType();
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    Value input = adaptor.getInput(), weights = adaptor.getWeights();
    int64_t itemsRank = shapes.items.getRank();
    Value perItem = buildElementwise(
        rewriter, loc, shapes.items, adaptor.getTarget(),
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          LabelInfo info =
              decodeLabel(b, l, args[0], ignore, shapes.numClasses);
          Value logp = gatherScore(b, l, input, info.index, itemsRank);
          return itemLoss(b, l, logp, info, weights, element);
        });
    rewriter.replaceOp(op,
                       reduceItems(rewriter, loc, perItem, op.getReduction(),
                                   adaptor.getTarget(), weights, ignore,
                                   shapes.numClasses, element));
    return success();
  }
};

struct NegativeLogLikelihoodGradLowering
    : public OpConversionPattern<NegativeLogLikelihoodGradOp> {
  NegativeLogLikelihoodGradLowering(MLIRContext *ctx, bool decodeLabelsOnce)
      : OpConversionPattern(ctx), decodeLabelsOnce(decodeLabelsOnce) {}
  bool decodeLabelsOnce;
  LogicalResult
  matchAndRewrite(NegativeLogLikelihoodGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    LossShapes shapes(adaptor.getInput());
    Type element = shapes.items.getElementType();
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    Value weights = adaptor.getWeights();
    bool mean = op.getReduction() == LossReduction::Mean;
    SmallVector<Value> inputs{
        decodeLabelsOnce ? itemClasses(rewriter, loc, adaptor.getTarget(),
                                       ignore, shapes.numClasses)
                         : adaptor.getTarget()};
    SmallVector<AffineMap> maps{shapes.itemsMap(ctx)};
    addGradientInputs(rewriter, loc, shapes, op.getReduction(),
                      adaptor.getTarget(), adaptor.getDloss(), weights, ignore,
                      inputs, maps);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, shapes.scores, inputs,
        emptyTensor(rewriter, loc, shapes.scores), maps,
        SmallVector<IteratorType>(shapes.rank, IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto [info, isLabel] = elementClass(b, l, args[0], decodeLabelsOnce,
                                              ignore, shapes.numClasses);
          Value hit = arith::AndIOp::create(b, l, isLabel, info.counted);
          Value grad = arith::NegFOp::create(
              b, l,
              weightedUpstream(b, l, args.drop_front(1), mean, weights, info,
                               element));
          linalg::YieldOp::create(
              b, l,
              arith::SelectOp::create(b, l, hit, grad,
                                      scalarConstant(b, l, element, 0.0))
                  .getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct ClassWeightSumLowering : public OpConversionPattern<ClassWeightSumOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ClassWeightSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type element = cast<RankedTensorType>(op.getType()).getElementType();
    // Without weights there is no class count to bound labels by; any
    // non-ignored label counts (the loss itself flags bad labels).
    int64_t numClasses = std::numeric_limits<int64_t>::max();
    if (Value w = adaptor.getWeights())
      numClasses = cast<RankedTensorType>(w.getType()).getDimSize(0);
    rewriter.replaceOp(op, weightSum(rewriter, op.getLoc(), adaptor.getLabels(),
                                     adaptor.getWeights(), op.getIgnoreIndex(),
                                     numClasses, element));
    return success();
  }
};

} // namespace

void lowering::populateLossLowering(RewritePatternSet &patterns,
                                    bool decodeLabelsOnce) {
  patterns.add<SoftmaxCrossEntropyLossLowering,
               NegativeLogLikelihoodLossLowering, ClassWeightSumLowering>(
      patterns.getContext());
  patterns
      .add<SoftmaxCrossEntropyGradLowering, NegativeLogLikelihoodGradLowering>(
          patterns.getContext(), decodeLabelsOnce);
}
