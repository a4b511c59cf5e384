//===- Shape.cpp - lower shape and data-movement ops ------------*- C++ -*-===//

#include "LoweringUtils.h"

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;

namespace {

struct ConstantLowering : public OpConversionPattern<ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, cast<TypedAttr>(op.getValue()));
    return success();
  }
};

template <typename OpTy>
struct ReshapeLikeLowering : public OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       reshapeTensor(rewriter, op.getLoc(), adaptor.getInput(),
                                     cast<RankedTensorType>(op.getType())));
    return success();
  }
};

struct TransposeLowering : public OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    Value init = emptyTensor(rewriter, op.getLoc(), resultType);
    auto transpose = linalg::TransposeOp::create(
        rewriter, op.getLoc(), adaptor.getInput(), init, op.getPerm());
    rewriter.replaceOp(op, transpose.getResult());
    return success();
  }
};

struct ExpandLowering : public OpConversionPattern<ExpandOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ExpandOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value result = buildElementwise(
        rewriter, op.getLoc(), cast<RankedTensorType>(op.getType()),
        adaptor.getInput(),
        [](OpBuilder &, Location, ValueRange args) { return args[0]; });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void lowering::populateShapeLowering(RewritePatternSet &patterns) {
  patterns
      .add<ConstantLowering, ReshapeLikeLowering<ReshapeOp>,
           ReshapeLikeLowering<FlattenOp>, TransposeLowering, ExpandLowering>(
          patterns.getContext());
}
