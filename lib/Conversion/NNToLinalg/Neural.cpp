//===- Neural.cpp - lower softmax, conv, pooling, dropout -------*- C++ -*-===//
//
// Convolutions and pooling are linalg.generic ops over padded inputs with
// affine windows. Their adjoints with respect to the input use a "gather"
// form: each input element sums, over the kernel positions, the output
// elements whose window covered it (the division by the stride is checked
// in the body), so no scatter or atomic update is needed.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;

namespace {

using utils::IteratorType;

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

template <typename OpTy, bool IsLog>
struct SoftmaxLowering : public OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto type = cast<RankedTensorType>(op.getType());
    int64_t rank = type.getRank(), axis = static_cast<int64_t>(op.getAxis());
    SmallVector<int64_t> statShape(type.getShape());
    statShape[axis] = 1;
    auto statType = RankedTensorType::get(statShape, type.getElementType());
    SmallVector<AffineExpr> statExprs;
    for (int64_t d = 0; d < rank; ++d)
      statExprs.push_back(d == axis ? getAffineConstantExpr(0, ctx)
                                    : getAffineDimExpr(d, ctx));
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    AffineMap stat = AffineMap::get(rank, 0, statExprs, ctx);
    SmallVector<IteratorType> reduce(rank, IteratorType::parallel);
    reduce[axis] = IteratorType::reduction;
    Value input = adaptor.getInput();

    Value max =
        linalg::GenericOp::create(
            rewriter, loc, statType, input,
            filledTensor(rewriter, loc, statType,
                         -std::numeric_limits<double>::infinity()),
            ArrayRef<AffineMap>{identity, stat}, reduce,
            [](OpBuilder &b, Location l, ValueRange args) {
              linalg::YieldOp::create(
                  b, l,
                  arith::MaximumFOp::create(b, l, args[0], args[1]).getResult());
            })
            .getResult(0);
    Value sum =
        linalg::GenericOp::create(
            rewriter, loc, statType, ValueRange{input, max},
            filledTensor(rewriter, loc, statType, 0.0),
            ArrayRef<AffineMap>{identity, stat, stat}, reduce,
            [](OpBuilder &b, Location l, ValueRange args) {
              Value e = math::ExpOp::create(
                  b, l, arith::SubFOp::create(b, l, args[0], args[1]));
              linalg::YieldOp::create(
                  b, l,
                  arith::AddFOp::create(b, l, args[2], e, reassocFlags(b))
                      .getResult());
            })
            .getResult(0);
    Value result =
        linalg::GenericOp::create(
            rewriter, loc, type, ValueRange{input, max, sum},
            emptyTensor(rewriter, loc, type),
            ArrayRef<AffineMap>{identity, stat, stat, identity},
            SmallVector<IteratorType>(rank, IteratorType::parallel),
            [](OpBuilder &b, Location l, ValueRange args) {
              Value shifted = arith::SubFOp::create(b, l, args[0], args[1]);
              Value r;
              if (IsLog)
                r = arith::SubFOp::create(b, l, shifted,
                                          math::LogOp::create(b, l, args[2]));
              else
                r = arith::DivFOp::create(b, l,
                                          math::ExpOp::create(b, l, shifted),
                                          args[2]);
              linalg::YieldOp::create(b, l, r);
            })
            .getResult(0);
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Windows
//===----------------------------------------------------------------------===//

/// Pads the two spatial dimensions of an NCHW tensor (pads: top, left,
/// bottom, right) with `value`.
Value padSpatial(OpBuilder &b, Location loc, Value input, ArrayRef<int64_t> pads,
                 double value) {
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; }))
    return input;
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[2] += pads[0] + pads[2];
  shape[3] += pads[1] + pads[3];
  SmallVector<OpFoldResult> low{b.getIndexAttr(0), b.getIndexAttr(0),
                                b.getIndexAttr(pads[0]), b.getIndexAttr(pads[1])};
  SmallVector<OpFoldResult> high{b.getIndexAttr(0), b.getIndexAttr(0),
                                 b.getIndexAttr(pads[2]),
                                 b.getIndexAttr(pads[3])};
  Value padValue = scalarConstant(b, loc, type.getElementType(), value);
  return tensor::PadOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), input, low,
      high, padValue);
}

/// For an input coordinate `i` (one spatial dimension) and kernel offset
/// `k`: whether a window starts at output `o = (i + pad - k * dilation) /
/// stride`, exactly and inside [0, outSize), and that `o`.
std::pair<Value, Value> windowOf(OpBuilder &b, Location loc, Value i, Value k,
                                 int64_t pad, int64_t stride, int64_t dilation,
                                 int64_t outSize) {
  // Signed arithmetic in i64: i + pad - k * dilation may be negative.
  Type i64 = b.getI64Type();
  Value ii = arith::IndexCastOp::create(b, loc, i64, i);
  Value kk = arith::IndexCastOp::create(b, loc, i64, k);
  auto c64 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value pos = arith::SubIOp::create(
      b, loc, arith::AddIOp::create(b, loc, ii, c64(pad)),
      arith::MulIOp::create(b, loc, kk, c64(dilation)));
  Value nonNegative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, pos, c64(0));
  Value rem = arith::RemSIOp::create(b, loc, pos, c64(stride));
  Value exact =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rem, c64(0));
  Value o = arith::DivSIOp::create(b, loc, pos, c64(stride));
  Value below =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, o, c64(outSize));
  Value valid = arith::AndIOp::create(
      b, loc, arith::AndIOp::create(b, loc, nonNegative, exact), below);
  Value safe = arith::SelectOp::create(b, loc, valid, o, c64(0));
  return {valid, arith::IndexCastOp::create(b, loc, b.getIndexType(), safe)};
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// Views a [F, C/G, KH, KW] weight (or weight-shaped tensor) as
/// [G, F/G, C/G, KH, KW], so that the group and the filter within it are
/// separate loops of the generic.
Value groupedWeight(OpBuilder &b, Location loc, Value weight, int64_t groups) {
  auto type = cast<RankedTensorType>(weight.getType());
  SmallVector<int64_t> shape{groups, type.getDimSize(0) / groups};
  llvm::append_range(shape, type.getShape().drop_front());
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), weight,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}, {4}});
}

struct ConvLowering : public OpConversionPattern<ConvOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConvOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto weightType = cast<RankedTensorType>(adaptor.getWeight().getType());
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    int64_t groups = static_cast<int64_t>(op.getGroup());
    int64_t cg = inType.getDimSize(1) / groups;
    int64_t fg = weightType.getDimSize(0) / groups;
    ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations();
    Value padded = padSpatial(rewriter, loc, adaptor.getInput(), op.getPads(), 0.0);

    // Iteration space (n, g, f, oh, ow, c, kh, kw).
    AffineExpr n, g, f, oh, ow, c, kh, kw;
    bindDims(ctx, n, g, f, oh, ow, c, kh, kw);
    auto map = [&](ArrayRef<AffineExpr> e) { return AffineMap::get(8, 0, e, ctx); };
    AffineMap inMap =
        map({n, g * cg + c, oh * s[0] + kh * d[0], ow * s[1] + kw * d[1]});
    AffineMap wMap = map({g, f, c, kh, kw});
    AffineMap outMap = map({n, g * fg + f, oh, ow});
    Value weight = groupedWeight(rewriter, loc, adaptor.getWeight(), groups);

    Value init;
    if (Value bias = adaptor.getBias()) {
      init = linalg::GenericOp::create(
                 rewriter, loc, resultType, bias,
                 emptyTensor(rewriter, loc, resultType),
                 ArrayRef<AffineMap>{
                     AffineMap::get(4, 0, getAffineDimExpr(1, ctx), ctx),
                     rewriter.getMultiDimIdentityMap(4)},
                 SmallVector<IteratorType>(4, IteratorType::parallel),
                 [](OpBuilder &b, Location l, ValueRange args) {
                   linalg::YieldOp::create(b, l, args[0]);
                 })
                 .getResult(0);
    } else {
      init = filledTensor(rewriter, loc, resultType, 0.0);
    }
    // The output viewed as [N, G, F/G, OH, OW] through the map's g * fg + f.
    SmallVector<IteratorType> iterators(5, IteratorType::parallel);
    iterators.append(3, IteratorType::reduction);
    arith::FastMathFlagsAttr flags = reassocFlags(rewriter);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultType, ValueRange{padded, weight}, init,
        ArrayRef<AffineMap>{inMap, wMap, outMap}, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value prod = arith::MulFOp::create(b, l, args[0], args[1], flags);
          linalg::YieldOp::create(
              b, l, arith::AddFOp::create(b, l, args[2], prod, flags).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct ConvGradInputLowering : public OpConversionPattern<ConvGradInputOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConvGradInputOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto weightType = cast<RankedTensorType>(adaptor.getWeight().getType());
    auto dyType = cast<RankedTensorType>(adaptor.getDresult().getType());
    int64_t groups = static_cast<int64_t>(op.getGroup());
    int64_t cg = resultType.getDimSize(1) / groups;
    int64_t fg = weightType.getDimSize(0) / groups;
    ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations(),
                      p = op.getPads();
    Value dy = adaptor.getDresult();

    // Iteration space (n, g, c, ih, iw, f, kh, kw).
    AffineExpr n, g, c, ih, iw, f, kh, kw;
    bindDims(ctx, n, g, c, ih, iw, f, kh, kw);
    auto map = [&](ArrayRef<AffineExpr> e) { return AffineMap::get(8, 0, e, ctx); };
    SmallVector<IteratorType> iterators(5, IteratorType::parallel);
    iterators.append(3, IteratorType::reduction);
    Type element = resultType.getElementType();
    Value weight = groupedWeight(rewriter, loc, adaptor.getWeight(), groups);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultType, weight,
        filledTensor(rewriter, loc, resultType, 0.0),
        ArrayRef<AffineMap>{map({g, f, c, kh, kw}),
                            map({n, g * cg + c, ih, iw})},
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          auto idx = [&](unsigned dim) {
            return linalg::IndexOp::create(b, l, dim).getResult();
          };
          auto [validH, oh] = windowOf(b, l, idx(3), idx(6), p[0], s[0], d[0],
                                       dyType.getDimSize(2));
          auto [validW, ow] = windowOf(b, l, idx(4), idx(7), p[1], s[1], d[1],
                                       dyType.getDimSize(3));
          Value filter = arith::AddIOp::create(
              b, l,
              arith::MulIOp::create(b, l, idx(1),
                                    arith::ConstantIndexOp::create(b, l, fg)),
              idx(5));
          Value grad = tensor::ExtractOp::create(
              b, l, dy, ValueRange{idx(0), filter, oh, ow});
          Value prod = arith::MulFOp::create(b, l, grad, args[0]);
          Value valid = arith::AndIOp::create(b, l, validH, validW);
          Value contribution = arith::SelectOp::create(
              b, l, valid, prod, scalarConstant(b, l, element, 0.0));
          linalg::YieldOp::create(
              b, l, arith::AddFOp::create(b, l, args[1], contribution).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct ConvGradWeightLowering : public OpConversionPattern<ConvGradWeightOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConvGradWeightOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    int64_t groups = static_cast<int64_t>(op.getGroup());
    int64_t cg = inType.getDimSize(1) / groups;
    int64_t fg = resultType.getDimSize(0) / groups;
    ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations();
    Value padded = padSpatial(rewriter, loc, adaptor.getInput(), op.getPads(), 0.0);
    // Iteration space (g, f, c, kh, kw, n, oh, ow).
    AffineExpr g, f, c, kh, kw, n, oh, ow;
    bindDims(ctx, g, f, c, kh, kw, n, oh, ow);
    auto map = [&](ArrayRef<AffineExpr> e) { return AffineMap::get(8, 0, e, ctx); };
    SmallVector<IteratorType> iterators(5, IteratorType::parallel);
    iterators.append(3, IteratorType::reduction);
    arith::FastMathFlagsAttr flags = reassocFlags(rewriter);
    Value init = groupedWeight(
        rewriter, loc, filledTensor(rewriter, loc, resultType, 0.0), groups);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, init.getType(), ValueRange{adaptor.getDresult(), padded},
        init,
        ArrayRef<AffineMap>{
            map({n, g * fg + f, oh, ow}),
            map({n, g * cg + c, oh * s[0] + kh * d[0], ow * s[1] + kw * d[1]}),
            map({g, f, c, kh, kw})},
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value prod = arith::MulFOp::create(b, l, args[0], args[1], flags);
          linalg::YieldOp::create(
              b, l, arith::AddFOp::create(b, l, args[2], prod, flags).getResult());
        });
    rewriter.replaceOp(op, tensor::CollapseShapeOp::create(
                               rewriter, loc, resultType, generic.getResult(0),
                               ArrayRef<ReassociationIndices>{
                                   {0, 1}, {2}, {3}, {4}}));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Maps of a pooling window over (n, c, oh, ow, kh, kw).
struct PoolMaps {
  AffineMap input, output;
  SmallVector<IteratorType> iterators;
  PoolMaps(MLIRContext *ctx, ArrayRef<int64_t> s, ArrayRef<int64_t> d) {
    AffineExpr n, c, oh, ow, kh, kw;
    bindDims(ctx, n, c, oh, ow, kh, kw);
    input = AffineMap::get(
        6, 0, {n, c, oh * s[0] + kh * d[0], ow * s[1] + kw * d[1]}, ctx);
    output = AffineMap::get(6, 0, {n, c, oh, ow}, ctx);
    iterators.assign(4, IteratorType::parallel);
    iterators.append(2, IteratorType::reduction);
  }
};

struct MaxPoolLowering : public OpConversionPattern<MaxPoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxPoolOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    double inf = std::numeric_limits<double>::infinity();
    Value padded =
        padSpatial(rewriter, loc, adaptor.getInput(), op.getPads(), -inf);
    PoolMaps maps(rewriter.getContext(), op.getStrides(), op.getDilations());
    // The kernel's shape only bounds the two reduction loops.
    Value kernel = tensor::EmptyOp::create(rewriter, loc, op.getKernel(),
                                           resultType.getElementType());
    AffineExpr kh = rewriter.getAffineDimExpr(4), kw = rewriter.getAffineDimExpr(5);
    AffineMap kernelMap = AffineMap::get(6, 0, {kh, kw}, rewriter.getContext());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultType, ValueRange{padded, kernel},
        filledTensor(rewriter, loc, resultType, -inf),
        ArrayRef<AffineMap>{maps.input, kernelMap, maps.output}, maps.iterators,
        [](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(
              b, l, arith::MaximumFOp::create(b, l, args[2], args[0]).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct MaxPoolGradLowering : public OpConversionPattern<MaxPoolGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxPoolGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    auto dyType = cast<RankedTensorType>(adaptor.getDresult().getType());
    Type element = inType.getElementType();
    ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations(),
                      p = op.getPads(), k = op.getKernel();
    int64_t height = inType.getDimSize(2), width = inType.getDimSize(3);
    double inf = std::numeric_limits<double>::infinity();
    Value padded =
        padSpatial(rewriter, loc, adaptor.getInput(), p, -inf);
    PoolMaps maps(ctx, s, d);
    Value kernel = tensor::EmptyOp::create(rewriter, loc, k, element);
    AffineMap kernelMap = AffineMap::get(
        6, 0, {getAffineDimExpr(4, ctx), getAffineDimExpr(5, ctx)}, ctx);

    // 1. The first maximum of each window, as a flat input index (-1: none
    //    yet). Padding never counts.
    auto indexType = RankedTensorType::get(dyType.getShape(), rewriter.getI64Type());
    auto valueType = RankedTensorType::get(dyType.getShape(), element);
    auto argmax = linalg::GenericOp::create(
        rewriter, loc, TypeRange{valueType, indexType},
        ValueRange{padded, kernel},
        ValueRange{filledTensor(rewriter, loc, valueType, -inf),
                   filledTensor(rewriter, loc, indexType, -1.0)},
        ArrayRef<AffineMap>{maps.input, kernelMap, maps.output, maps.output},
        maps.iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          auto idx = [&](unsigned dim) {
            Value i = linalg::IndexOp::create(b, l, dim);
            return arith::IndexCastOp::create(b, l, b.getI64Type(), i).getResult();
          };
          auto c64 = [&](int64_t v) {
            return arith::ConstantOp::create(b, l, b.getI64IntegerAttr(v))
                .getResult();
          };
          // Input coordinates of this window element.
          Value ih = arith::SubIOp::create(
              b, l,
              arith::AddIOp::create(b, l,
                                    arith::MulIOp::create(b, l, idx(2), c64(s[0])),
                                    arith::MulIOp::create(b, l, idx(4), c64(d[0]))),
              c64(p[0]));
          Value iw = arith::SubIOp::create(
              b, l,
              arith::AddIOp::create(b, l,
                                    arith::MulIOp::create(b, l, idx(3), c64(s[1])),
                                    arith::MulIOp::create(b, l, idx(5), c64(d[1]))),
              c64(p[1]));
          auto inside = [&](Value v, int64_t size) {
            return arith::AndIOp::create(
                b, l,
                arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, v, c64(0)),
                arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, v,
                                      c64(size)));
          };
          Value real = arith::AndIOp::create(b, l, inside(ih, height),
                                             inside(iw, width));
          Value greater = arith::CmpFOp::create(
              b, l, arith::CmpFPredicate::OGT, args[0], args[2]);
          Value none = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                             args[3], c64(-1));
          Value better = arith::AndIOp::create(
              b, l, real, arith::OrIOp::create(b, l, greater, none));
          Value flat = arith::AddIOp::create(
              b, l, arith::MulIOp::create(b, l, ih, c64(width)), iw);
          linalg::YieldOp::create(
              b, l,
              ValueRange{arith::SelectOp::create(b, l, better, args[0], args[2]),
                         arith::SelectOp::create(b, l, better, flat, args[3])});
        });
    Value winners = argmax.getResult(1);

    // 2. Each input element collects the adjoints of the windows it won.
    Value dy = adaptor.getDresult();
    AffineExpr n, c, ih, iw, kh, kw;
    bindDims(ctx, n, c, ih, iw, kh, kw);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, inType, kernel, filledTensor(rewriter, loc, inType, 0.0),
        ArrayRef<AffineMap>{AffineMap::get(6, 0, {kh, kw}, ctx),
                            AffineMap::get(6, 0, {n, c, ih, iw}, ctx)},
        maps.iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          auto idx = [&](unsigned dim) {
            return linalg::IndexOp::create(b, l, dim).getResult();
          };
          auto [validH, oh] = windowOf(b, l, idx(2), idx(4), p[0], s[0], d[0],
                                       dyType.getDimSize(2));
          auto [validW, ow] = windowOf(b, l, idx(3), idx(5), p[1], s[1], d[1],
                                       dyType.getDimSize(3));
          SmallVector<Value, 4> at{idx(0), idx(1), oh, ow};
          Value winner = tensor::ExtractOp::create(b, l, winners, at);
          Value here = arith::IndexCastOp::create(
              b, l, b.getI64Type(),
              arith::AddIOp::create(
                  b, l,
                  arith::MulIOp::create(b, l, idx(2),
                                        arith::ConstantIndexOp::create(b, l, width)),
                  idx(3)));
          Value won = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                            winner, here);
          Value valid = arith::AndIOp::create(
              b, l, arith::AndIOp::create(b, l, validH, validW), won);
          Value grad = tensor::ExtractOp::create(b, l, dy, at);
          Value contribution = arith::SelectOp::create(
              b, l, valid, grad, scalarConstant(b, l, element, 0.0));
          linalg::YieldOp::create(
              b, l, arith::AddFOp::create(b, l, args[1], contribution).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// The number of elements averaged by the window at output (oh, ow): the
/// kernel size with count_include_pad, else the part inside the input.
Value windowCount(OpBuilder &b, Location l, Value oh, Value ow,
                  ArrayRef<int64_t> k, ArrayRef<int64_t> s, ArrayRef<int64_t> p,
                  int64_t height, int64_t width, bool includePad, Type element) {
  if (includePad)
    return scalarConstant(b, l, element, static_cast<double>(k[0] * k[1]));
  auto c64 = [&](int64_t v) {
    return arith::ConstantOp::create(b, l, b.getI64IntegerAttr(v)).getResult();
  };
  auto extent = [&](Value o, int64_t kernel, int64_t stride, int64_t pad,
                    int64_t size) {
    Value o64 = arith::IndexCastOp::create(b, l, b.getI64Type(), o);
    Value start = arith::SubIOp::create(
        b, l, arith::MulIOp::create(b, l, o64, c64(stride)), c64(pad));
    Value end = arith::AddIOp::create(b, l, start, c64(kernel));
    Value lo = arith::MaxSIOp::create(b, l, start, c64(0));
    Value hi = arith::MinSIOp::create(b, l, end, c64(size));
    return arith::SubIOp::create(b, l, hi, lo).getResult();
  };
  Value count = arith::MulIOp::create(b, l, extent(oh, k[0], s[0], p[0], height),
                                      extent(ow, k[1], s[1], p[1], width));
  return arith::SIToFPOp::create(b, l, element, count);
}

struct AveragePoolLowering : public OpConversionPattern<AveragePoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AveragePoolOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    Type element = resultType.getElementType();
    int64_t ones[] = {1, 1};
    ArrayRef<int64_t> k = op.getKernel(), s = op.getStrides(), p = op.getPads();
    Value padded = padSpatial(rewriter, loc, adaptor.getInput(), p, 0.0);
    PoolMaps maps(ctx, s, ones);
    Value kernel = tensor::EmptyOp::create(rewriter, loc, k, element);
    AffineMap kernelMap = AffineMap::get(
        6, 0, {getAffineDimExpr(4, ctx), getAffineDimExpr(5, ctx)}, ctx);
    Value sum = linalg::GenericOp::create(
                    rewriter, loc, resultType, ValueRange{padded, kernel},
                    filledTensor(rewriter, loc, resultType, 0.0),
                    ArrayRef<AffineMap>{maps.input, kernelMap, maps.output},
                    maps.iterators,
                    [](OpBuilder &b, Location l, ValueRange args) {
                      linalg::YieldOp::create(
                          b, l,
                          arith::AddFOp::create(b, l, args[2], args[0]).getResult());
                    })
                    .getResult(0);
    bool includePad = op.getCountIncludePad();
    Value result = buildElementwise(
        rewriter, loc, resultType, sum,
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value count = windowCount(
              b, l, linalg::IndexOp::create(b, l, 2),
              linalg::IndexOp::create(b, l, 3), k, s, p, inType.getDimSize(2),
              inType.getDimSize(3), includePad, element);
          return arith::DivFOp::create(b, l, args[0], count);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct AveragePoolGradLowering : public OpConversionPattern<AveragePoolGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AveragePoolGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto inType = cast<RankedTensorType>(op.getType());
    auto dyType = cast<RankedTensorType>(adaptor.getDresult().getType());
    Type element = inType.getElementType();
    ArrayRef<int64_t> k = op.getKernel(), s = op.getStrides(), p = op.getPads();
    bool includePad = op.getCountIncludePad();
    Value dy = adaptor.getDresult();
    Value kernel = tensor::EmptyOp::create(rewriter, loc, k, element);
    AffineExpr n, c, ih, iw, kh, kw;
    bindDims(ctx, n, c, ih, iw, kh, kw);
    SmallVector<IteratorType> iterators(4, IteratorType::parallel);
    iterators.append(2, IteratorType::reduction);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, inType, kernel, filledTensor(rewriter, loc, inType, 0.0),
        ArrayRef<AffineMap>{AffineMap::get(6, 0, {kh, kw}, ctx),
                            AffineMap::get(6, 0, {n, c, ih, iw}, ctx)},
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          auto idx = [&](unsigned dim) {
            return linalg::IndexOp::create(b, l, dim).getResult();
          };
          auto [validH, oh] = windowOf(b, l, idx(2), idx(4), p[0], s[0], 1,
                                       dyType.getDimSize(2));
          auto [validW, ow] = windowOf(b, l, idx(3), idx(5), p[1], s[1], 1,
                                       dyType.getDimSize(3));
          Value grad = tensor::ExtractOp::create(
              b, l, dy, ValueRange{idx(0), idx(1), oh, ow});
          Value count = windowCount(b, l, oh, ow, k, s, p, inType.getDimSize(2),
                                    inType.getDimSize(3), includePad, element);
          Value share = arith::DivFOp::create(b, l, grad, count);
          Value valid = arith::AndIOp::create(b, l, validH, validW);
          Value contribution = arith::SelectOp::create(
              b, l, valid, share, scalarConstant(b, l, element, 0.0));
          linalg::YieldOp::create(
              b, l, arith::AddFOp::create(b, l, args[1], contribution).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// SplitMix64's finalizer: a bijective 64-bit mix.
Value mix64(OpBuilder &b, Location l, Value z) {
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(b, l,
                                     b.getI64IntegerAttr(static_cast<int64_t>(v)))
        .getResult();
  };
  z = arith::AddIOp::create(b, l, z, c(0x9E3779B97F4A7C15ull));
  z = arith::MulIOp::create(
      b, l, arith::XOrIOp::create(b, l, z, arith::ShRUIOp::create(b, l, z, c(30))),
      c(0xBF58476D1CE4E5B9ull));
  z = arith::MulIOp::create(
      b, l, arith::XOrIOp::create(b, l, z, arith::ShRUIOp::create(b, l, z, c(27))),
      c(0x94D049BB133111EBull));
  return arith::XOrIOp::create(b, l, z, arith::ShRUIOp::create(b, l, z, c(31)));
}

struct DropoutLowering : public OpConversionPattern<DropoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(DropoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    double ratio = op.getRatio().convertToDouble();
    // keep iff the top 24 bits of the hash, as an integer, reach
    // ceil(ratio * 2^24): a uniform u in [0, 1) with u >= ratio.
    int64_t threshold = static_cast<int64_t>(std::ceil(ratio * (1 << 24)));
    Value step = tensor::ExtractOp::create(rewriter, loc, adaptor.getStep());
    Value base = tensor::ExtractOp::create(rewriter, loc, adaptor.getSampleBase());
    int64_t seed = static_cast<int64_t>(op.getSeed());
    int64_t salt = static_cast<int64_t>(op.getSalt());
    double scale = ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0;
    Value result = buildElementwise(
        rewriter, loc, type, adaptor.getInput(),
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          auto c = [&](int64_t v) {
            return arith::ConstantOp::create(b, l, b.getI64IntegerAttr(v))
                .getResult();
          };
          auto idx = [&](unsigned dim) {
            return arith::IndexCastOp::create(b, l, b.getI64Type(),
                                              linalg::IndexOp::create(b, l, dim))
                .getResult();
          };
          Value sample = arith::AddIOp::create(b, l, base, idx(0));
          Value element = c(0);
          for (int64_t d = 1; d < type.getRank(); ++d)
            element = arith::AddIOp::create(
                b, l, arith::MulIOp::create(b, l, element, c(type.getDimSize(d))),
                idx(d));
          Value h = mix64(b, l, arith::XOrIOp::create(b, l, c(seed), c(salt)));
          for (Value v : {step, sample, element})
            h = mix64(b, l, arith::XOrIOp::create(b, l, h, v));
          Value bits = arith::ShRUIOp::create(b, l, h, c(40));
          Value keep = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge,
                                             bits, c(threshold));
          Value scaled = arith::MulFOp::create(
              b, l, args[0], scalarConstant(b, l, args[0].getType(), scale));
          return arith::SelectOp::create(
              b, l, keep, scaled, scalarConstant(b, l, args[0].getType(), 0.0));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void lowering::populateNeuralLowering(RewritePatternSet &patterns) {
  patterns.add<SoftmaxLowering<SoftmaxOp, false>,
               SoftmaxLowering<LogSoftmaxOp, true>, ConvLowering,
               ConvGradInputLowering, ConvGradWeightLowering, MaxPoolLowering,
               MaxPoolGradLowering, AveragePoolLowering,
               AveragePoolGradLowering, DropoutLowering>(patterns.getContext());
}
