//===- Contraction.cpp - lower Gemm and MatMul ------------------*- C++ -*-===//
//
// Contractions become linalg.generic ops whose loop order suits the CPU
// backend: with B stored [K, N] the loops run (m, k, n) so the innermost loop
// streams rows of B and C; with B stored [N, K] they run (m, n, k) and the sum
// carries reassociation flags so LLVM can vectorize it.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;

namespace {

/// Accumulates lhs x rhs into `init` (shaped like the result). `lhsMap` etc.
/// are built by the caller over the iteration space `iterators`.
Value buildContraction(OpBuilder &b, Location loc, Value lhs, Value rhs,
                       Value init, ArrayRef<AffineMap> maps,
                       ArrayRef<utils::IteratorType> iterators) {
  arith::FastMathFlagsAttr flags = reassocFlags(b);
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), ValueRange{lhs, rhs}, init, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value prod = arith::MulFOp::create(nb, nl, args[0], args[1], flags);
        Value sum = arith::AddFOp::create(nb, nl, args[2], prod, flags);
        linalg::YieldOp::create(nb, nl, sum);
      });
  return generic.getResult(0);
}

struct GemmLowering : public OpConversionPattern<GemmOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GemmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    Type element = resultType.getElementType();
    double alpha = op.getAlpha().convertToDouble();
    double beta = op.getBeta().convertToDouble();
    Value c = adaptor.getC();

    // C (times beta) seeds the accumulation when alpha is 1.
    Value init;
    if (c && alpha == 1.0) {
      init = buildElementwise(rewriter, loc, resultType, c,
                              [&](OpBuilder &b, Location l, ValueRange args) {
                                if (beta == 1.0)
                                  return args[0];
                                Value s = scalarConstant(b, l, element, beta);
                                return Value(
                                    arith::MulFOp::create(b, l, args[0], s));
                              });
    } else {
      init = filledTensor(rewriter, loc, resultType, 0.0);
    }

    MLIRContext *ctx = rewriter.getContext();
    AffineExpr m, n, k;
    SmallVector<utils::IteratorType> iterators;
    // Loop order (m, k, n) when B is [K, N], else (m, n, k).
    bool kMiddle = !op.getTransB();
    if (kMiddle) {
      bindDims(ctx, m, k, n);
      iterators = {utils::IteratorType::parallel,
                   utils::IteratorType::reduction,
                   utils::IteratorType::parallel};
    } else {
      bindDims(ctx, m, n, k);
      iterators = {utils::IteratorType::parallel, utils::IteratorType::parallel,
                   utils::IteratorType::reduction};
    }
    auto map = [&](AffineExpr x, AffineExpr y) {
      return AffineMap::get(3, 0, {x, y}, ctx);
    };
    AffineMap aMap = op.getTransA() ? map(k, m) : map(m, k);
    AffineMap bMap = op.getTransB() ? map(n, k) : map(k, n);
    Value product =
        buildContraction(rewriter, loc, adaptor.getA(), adaptor.getB(), init,
                         {aMap, bMap, map(m, n)}, iterators);
    if (alpha != 1.0) {
      SmallVector<Value> operands{product};
      if (c)
        operands.push_back(c);
      product = buildElementwise(
          rewriter, loc, resultType, operands,
          [&](OpBuilder &b, Location l, ValueRange args) {
            Value r = arith::MulFOp::create(
                b, l, args[0], scalarConstant(b, l, element, alpha));
            if (c)
              r = arith::AddFOp::create(
                  b, l, r,
                  arith::MulFOp::create(b, l, args[1],
                                        scalarConstant(b, l, element, beta)));
            return r;
          });
    }
    rewriter.replaceOp(op, product);
    return success();
  }
};

struct MatMulLowering : public OpConversionPattern<MatMulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MatMulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto lhsType = cast<RankedTensorType>(adaptor.getLhs().getType());
    auto rhsType = cast<RankedTensorType>(adaptor.getRhs().getType());
    int64_t batch = resultType.getRank() - 2;
    // Iteration space: (batch..., m, k, n).
    int64_t numDims = batch + 3;
    AffineExpr m = getAffineDimExpr(batch, ctx);
    AffineExpr k = getAffineDimExpr(batch + 1, ctx);
    AffineExpr n = getAffineDimExpr(batch + 2, ctx);
    auto operandMap = [&](RankedTensorType type, AffineExpr row,
                          AffineExpr col) {
      int64_t lead = batch - (type.getRank() - 2);
      SmallVector<AffineExpr> exprs;
      for (int64_t d = 0; d < type.getRank() - 2; ++d) {
        bool stretched =
            type.getDimSize(d) == 1 && resultType.getDimSize(d + lead) != 1;
        exprs.push_back(stretched ? getAffineConstantExpr(0, ctx)
                                  : getAffineDimExpr(d + lead, ctx));
      }
      exprs.push_back(row);
      exprs.push_back(col);
      return AffineMap::get(numDims, 0, exprs, ctx);
    };
    SmallVector<AffineExpr> outExprs;
    for (int64_t d = 0; d < batch; ++d)
      outExprs.push_back(getAffineDimExpr(d, ctx));
    outExprs.push_back(m);
    outExprs.push_back(n);
    SmallVector<utils::IteratorType> iterators(numDims,
                                               utils::IteratorType::parallel);
    iterators[batch + 1] = utils::IteratorType::reduction;
    Value init = filledTensor(rewriter, loc, resultType, 0.0);
    Value product = buildContraction(
        rewriter, loc, adaptor.getLhs(), adaptor.getRhs(), init,
        {operandMap(lhsType, m, k), operandMap(rhsType, k, n),
         AffineMap::get(numDims, 0, outExprs, ctx)},
        iterators);
    rewriter.replaceOp(op, product);
    return success();
  }
};

} // namespace

void lowering::populateContractionLowering(RewritePatternSet &patterns) {
  patterns.add<GemmLowering, MatMulLowering>(patterns.getContext());
}
