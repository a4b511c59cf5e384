//===- Reduction.cpp - lower reductions -------------------------*- C++ -*-===//

#include "LoweringUtils.h"

#include <limits>

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;

namespace {

using Combiner =
    llvm::function_ref<Value(OpBuilder &, Location, Value acc, Value x)>;

/// Reduces `input` over `axes` into a tensor of `resultType` (keepdims or
/// not), starting from `init` and combining with `combine`.
Value buildReduction(OpBuilder &b, Location loc, Value input,
                     ArrayRef<int64_t> axes, RankedTensorType resultType,
                     double init, Combiner combine) {
  MLIRContext *ctx = b.getContext();
  auto inType = cast<RankedTensorType>(input.getType());
  int64_t rank = inType.getRank();
  bool keepdims = resultType.getRank() == rank;
  SmallVector<AffineExpr> outExprs;
  SmallVector<utils::IteratorType> iterators;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(axes, d);
    iterators.push_back(reduced ? utils::IteratorType::reduction
                                : utils::IteratorType::parallel);
    if (!reduced)
      outExprs.push_back(getAffineDimExpr(d, ctx));
    else if (keepdims)
      outExprs.push_back(getAffineConstantExpr(0, ctx));
  }
  SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(rank),
                              AffineMap::get(rank, 0, outExprs, ctx)};
  Value initTensor = filledTensor(b, loc, resultType, init);
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, input, initTensor, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl, combine(nb, nl, args[1], args[0]));
      });
  return generic.getResult(0);
}

Value buildSum(OpBuilder &b, Location loc, Value input, ArrayRef<int64_t> axes,
               RankedTensorType resultType) {
  return buildReduction(
      b, loc, input, axes, resultType, 0.0,
      [](OpBuilder &nb, Location nl, Value acc, Value x) {
        if (isa<IntegerType>(x.getType()))
          return Value(arith::AddIOp::create(nb, nl, acc, x));
        return Value(arith::AddFOp::create(nb, nl, acc, x, reassocFlags(nb)));
      });
}

template <typename OpTy, bool IsMax>
struct ExtremumLowering : public OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    double inf = std::numeric_limits<double>::infinity();
    Value result = buildReduction(
        rewriter, op.getLoc(), adaptor.getInput(), op.getAxes(),
        cast<RankedTensorType>(op.getType()), IsMax ? -inf : inf,
        [](OpBuilder &nb, Location nl, Value acc, Value x) -> Value {
          if (IsMax)
            return arith::MaximumFOp::create(nb, nl, acc, x);
          return arith::MinimumFOp::create(nb, nl, acc, x);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// ArgMax/ArgMin: a reduction along the axis carrying (best value, index).
template <typename OpTy, bool IsMax>
struct ArgExtremumLowering : public OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    Type element = inType.getElementType();
    int64_t rank = inType.getRank(), axis = static_cast<int64_t>(op.getAxis());
    bool keepdims = op.getKeepdims(), last = op.getSelectLastIndex();
    SmallVector<AffineExpr> outExprs;
    SmallVector<utils::IteratorType> iterators;
    for (int64_t d = 0; d < rank; ++d) {
      iterators.push_back(d == axis ? utils::IteratorType::reduction
                                    : utils::IteratorType::parallel);
      if (d != axis)
        outExprs.push_back(getAffineDimExpr(d, ctx));
      else if (keepdims)
        outExprs.push_back(getAffineConstantExpr(0, ctx));
    }
    AffineMap outMap = AffineMap::get(rank, 0, outExprs, ctx);
    auto valueType = RankedTensorType::get(resultType.getShape(), element);
    double inf = std::numeric_limits<double>::infinity();
    bool isFloatType = isa<FloatType>(element);
    // The first element along the axis always wins (below), so the initial
    // value only matters for floats' NaN-free comparisons.
    double initValue = isFloatType ? (IsMax ? -inf : inf) : 0.0;
    Value bestInit = filledTensor(rewriter, loc, valueType, initValue);
    Value indexInit = filledTensor(rewriter, loc, resultType, 0.0);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{valueType, resultType}, adaptor.getInput(),
        ValueRange{bestInit, indexInit},
        ArrayRef<AffineMap>{rewriter.getMultiDimIdentityMap(rank), outMap,
                            outMap},
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value x = args[0], best = args[1], bestIndex = args[2];
          Value index = arith::IndexCastOp::create(
              b, l, b.getI64Type(), linalg::IndexOp::create(b, l, axis));
          Value better;
          if (isFloatType)
            better = arith::CmpFOp::create(
                b, l,
                IsMax ? (last ? arith::CmpFPredicate::OGE
                              : arith::CmpFPredicate::OGT)
                      : (last ? arith::CmpFPredicate::OLE
                              : arith::CmpFPredicate::OLT),
                x, best);
          else
            better = arith::CmpIOp::create(
                b, l,
                IsMax ? (last ? arith::CmpIPredicate::sge
                              : arith::CmpIPredicate::sgt)
                      : (last ? arith::CmpIPredicate::sle
                              : arith::CmpIPredicate::slt),
                x, best);
          // The first element always wins, whatever the initial value.
          Value c0 = arith::ConstantOp::create(b, l, b.getI64IntegerAttr(0));
          Value first =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, index, c0);
          better = arith::OrIOp::create(b, l, better, first);
          linalg::YieldOp::create(
              b, l,
              ValueRange{
                  arith::SelectOp::create(b, l, better, x, best),
                  arith::SelectOp::create(b, l, better, index, bestIndex)});
        });
    rewriter.replaceOp(op, generic.getResult(1));
    return success();
  }
};

struct ReduceSumLowering : public OpConversionPattern<ReduceSumOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildSum(rewriter, op.getLoc(), adaptor.getInput(),
                                    op.getAxes(),
                                    cast<RankedTensorType>(op.getType())));
    return success();
  }
};

struct ReduceMeanLowering : public OpConversionPattern<ReduceMeanOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceMeanOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    int64_t count = 1;
    for (int64_t axis : op.getAxes())
      count *= inType.getDimSize(axis);
    Value sum = buildSum(rewriter, op.getLoc(), adaptor.getInput(),
                         op.getAxes(), resultType);
    Value mean = buildElementwise(
        rewriter, op.getLoc(), resultType, sum,
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value n = scalarConstant(b, l, resultType.getElementType(),
                                   static_cast<double>(count));
          return arith::DivFOp::create(b, l, args[0], n);
        });
    rewriter.replaceOp(op, mean);
    return success();
  }
};

} // namespace

void lowering::populateReductionLowering(RewritePatternSet &patterns) {
  patterns.add<ReduceSumLowering, ReduceMeanLowering,
               ExtremumLowering<ReduceMaxOp, true>,
               ExtremumLowering<ReduceMinOp, false>,
               ArgExtremumLowering<ArgMaxOp, true>,
               ArgExtremumLowering<ArgMinOp, false>>(patterns.getContext());
}
