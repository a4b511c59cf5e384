//===- Reduction.cpp - lower reductions -------------------------*- C++ -*-===//

#include "LoweringUtils.h"

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;

namespace {

/// Sums `input` over `axes` into a tensor of `resultType` (keepdims or not).
Value buildSum(OpBuilder &b, Location loc, Value input, ArrayRef<int64_t> axes,
               RankedTensorType resultType) {
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
  Value init = filledTensor(b, loc, resultType, 0.0);
  arith::FastMathFlagsAttr flags = reassocFlags(b);
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, input, init, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(
            nb, nl,
            arith::AddFOp::create(nb, nl, args[1], args[0], flags).getResult());
      });
  return generic.getResult(0);
}

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
  patterns.add<ReduceSumLowering, ReduceMeanLowering>(patterns.getContext());
}
