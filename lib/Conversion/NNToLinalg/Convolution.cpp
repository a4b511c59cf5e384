//===- Convolution.cpp - lower convolutions ---------------------*- C++ -*-===//
//
// Convolutions are contractions over their input's columns (im2col, see
// ConvLowering); their adjoints are contractions too.
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
// Convolution
//===----------------------------------------------------------------------===//

// A convolution is a matrix product over its columns (im2col): for sample
// n and group g, column p = (oh, ow) holds the input elements window p
// covers, row kk = (c, kh, kw) of the columns the element at that kernel
// position. Then, with W_g the group's weights as [F/G, C/G * KH * KW],
//   Y[n, g] = W_g x Col[n, g]             (forward),
//   dW_g = sum_n dY[n, g] x Col[n, g]^T    (weight gradient),
//   dCol[n, g] = W_g^T x dY[n, g]          (input gradient, then col2im),
// three contractions the CPU backend runs as register-blocked kernels. The
// columns cost C * KH * KW * OH * OW elements per sample, F/G times less
// than the products they feed.

/// The largest columns (im2col) of one micro-batch's convolution that are
/// kept from the forward for the weight gradient instead of built again.
constexpr int64_t kKeptColumnBytes = int64_t(16) << 20;

/// Sizes of one convolution: the input [N, C, H, W], the output's spatial
/// size, the kernel's and the groups.
struct ConvShape {
  int64_t n, c, h, w, f, kh, kw, oh, ow, groups;
  ArrayRef<int64_t> s, d, p;
  int64_t cg() const { return c / groups; }
  int64_t fg() const { return f / groups; }
  /// Rows of the columns (and of the grouped weight): C/G * KH * KW.
  int64_t rows() const { return cg() * kh * kw; }
  /// Whether the columns are the input itself (1x1 kernel, stride 1, no
  /// padding).
  bool direct() const {
    return kh == 1 && kw == 1 && s[0] == 1 && s[1] == 1 &&
           llvm::all_of(p, [](int64_t v) { return v == 0; });
  }
};

ConvShape convShape(RankedTensorType input, RankedTensorType weight,
                    RankedTensorType output, ArrayRef<int64_t> strides,
                    ArrayRef<int64_t> dilations, ArrayRef<int64_t> pads,
                    int64_t groups) {
  return {input.getDimSize(0),
          input.getDimSize(1),
          input.getDimSize(2),
          input.getDimSize(3),
          weight.getDimSize(0),
          weight.getDimSize(2),
          weight.getDimSize(3),
          output.getDimSize(2),
          output.getDimSize(3),
          groups,
          strides,
          dilations,
          pads};
}

RankedTensorType tensorType(ArrayRef<int64_t> shape, Type element) {
  return RankedTensorType::get(shape, element);
}

/// The columns of `input` [N, C, H, W] as [N, G, C/G * KH * KW, OH * OW].
/// With `recomputed` (the weight gradient's), the padding and the copy are
/// marked so that CSE does not merge them with the forward's: the columns
/// are KH * KW / (stride^2) times the input, too much to keep from the
/// forward to the backward when large, and cheap to build again.
Value convColumns(OpBuilder &b, Location loc, Value input, const ConvShape &cs,
                  bool recomputed = false) {
  MLIRContext *ctx = b.getContext();
  Type element = cast<RankedTensorType>(input.getType()).getElementType();
  auto colType =
      tensorType({cs.n, cs.groups, cs.rows(), cs.oh * cs.ow}, element);
  if (cs.direct())
    return reshapeTensor(b, loc, input, colType);
  Value padded = padSpatial(b, loc, input, cs.p, 0.0);
  auto mark = [&](Operation *op) {
    if (recomputed && op)
      op->setAttr("accrue.recomputed", b.getUnitAttr());
  };
  mark(padded.getDefiningOp<tensor::PadOp>());
  // Iteration space (n, g, c, kh, kw, oh, ow): rows of the columns are
  // written contiguously.
  AffineExpr n, g, c, kh, kw, oh, ow;
  bindDims(ctx, n, g, c, kh, kw, oh, ow);
  auto fullType = tensorType(
      {cs.n, cs.groups, cs.cg(), cs.kh, cs.kw, cs.oh, cs.ow}, element);
  auto generic = linalg::GenericOp::create(
      b, loc, fullType, padded, emptyTensor(b, loc, fullType),
      ArrayRef<AffineMap>{
          AffineMap::get(7, 0,
                         {n, g * cs.cg() + c, oh * cs.s[0] + kh * cs.d[0],
                          ow * cs.s[1] + kw * cs.d[1]},
                         ctx),
          b.getMultiDimIdentityMap(7)},
      SmallVector<IteratorType>(7, IteratorType::parallel),
      [](OpBuilder &nb, Location l, ValueRange args) {
        linalg::YieldOp::create(nb, l, args[0]);
      });
  mark(generic);
  return reshapeTensor(b, loc, generic.getResult(0), colType);
}

/// A weight (or weight-shaped) [F, C/G, KH, KW] as [G, F/G, C/G * KH * KW].
Value weightMatrix(OpBuilder &b, Location loc, Value weight,
                   const ConvShape &cs) {
  return reshapeTensor(
      b, loc, weight,
      tensorType({cs.groups, cs.fg(), cs.rows()},
                 cast<RankedTensorType>(weight.getType()).getElementType()));
}

/// An output-shaped [N, F, OH, OW] value as [N, G, F/G, OH * OW].
Value groupedOutput(OpBuilder &b, Location loc, Value value,
                    const ConvShape &cs) {
  return reshapeTensor(
      b, loc, value,
      tensorType({cs.n, cs.groups, cs.fg(), cs.oh * cs.ow},
                 cast<RankedTensorType>(value.getType()).getElementType()));
}

/// Accumulates the products of `lhs` and `rhs` into `init` over the
/// iteration space of the maps (the reduction dimensions are those not in
/// `init`'s map).
Value convContraction(OpBuilder &b, Location loc, Value lhs, Value rhs,
                      Value init, ArrayRef<AffineMap> maps) {
  SmallVector<IteratorType> iterators;
  for (unsigned d = 0; d < maps[2].getNumDims(); ++d)
    iterators.push_back(maps[2].isFunctionOfDim(d) ? IteratorType::parallel
                                                   : IteratorType::reduction);
  arith::FastMathFlagsAttr flags = reassocFlags(b);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{lhs, rhs}, init, maps,
             iterators,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value prod =
                   arith::MulFOp::create(nb, l, args[0], args[1], flags);
               linalg::YieldOp::create(
                   nb, l,
                   arith::AddFOp::create(nb, l, args[2], prod, flags)
                       .getResult());
             })
      .getResult(0);
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
    Type element = resultType.getElementType();
    ConvShape cs = convShape(inType, weightType, resultType, op.getStrides(),
                             op.getDilations(), op.getPads(),
                             static_cast<int64_t>(op.getGroup()));
    Value columns = convColumns(rewriter, loc, adaptor.getInput(), cs);
    Value weight = weightMatrix(rewriter, loc, adaptor.getWeight(), cs);
    auto outType =
        tensorType({cs.n, cs.groups, cs.fg(), cs.oh * cs.ow}, element);
    Value init;
    if (Value bias = adaptor.getBias()) {
      Value grouped = reshapeTensor(
          rewriter, loc, bias,
          tensorType({cs.groups, cs.fg()},
                     cast<RankedTensorType>(bias.getType()).getElementType()));
      init = linalg::GenericOp::create(
                 rewriter, loc, outType, grouped,
                 emptyTensor(rewriter, loc, outType),
                 ArrayRef<AffineMap>{AffineMap::get(4, 0,
                                                    {getAffineDimExpr(1, ctx),
                                                     getAffineDimExpr(2, ctx)},
                                                    ctx),
                                     rewriter.getMultiDimIdentityMap(4)},
                 SmallVector<IteratorType>(4, IteratorType::parallel),
                 [](OpBuilder &b, Location l, ValueRange args) {
                   linalg::YieldOp::create(b, l, args[0]);
                 })
                 .getResult(0);
    } else {
      init = filledTensor(rewriter, loc, outType, 0.0);
    }
    // Iteration space (n, g, f, kk, p): Y[n, g, f, p] += W[g, f, kk] *
    // Col[n, g, kk, p].
    AffineExpr n, g, f, kk, pp;
    bindDims(ctx, n, g, f, kk, pp);
    auto map = [&](ArrayRef<AffineExpr> e) {
      return AffineMap::get(5, 0, e, ctx);
    };
    Value product = convContraction(
        rewriter, loc, weight, columns, init,
        {map({g, f, kk}), map({n, g, kk, pp}), map({n, g, f, pp})});
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, product, resultType));
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
    Type element = resultType.getElementType();
    ConvShape cs = convShape(resultType, weightType, dyType, op.getStrides(),
                             op.getDilations(), op.getPads(),
                             static_cast<int64_t>(op.getGroup()));
    Value weight = weightMatrix(rewriter, loc, adaptor.getWeight(), cs);
    Value dy = groupedOutput(rewriter, loc, adaptor.getDresult(), cs);
    // Iteration space (n, g, kk, f, p): dCol[n, g, kk, p] += W[g, f, kk] *
    // dY[n, g, f, p].
    AffineExpr n, g, kk, f, pp;
    bindDims(ctx, n, g, kk, f, pp);
    auto map = [&](ArrayRef<AffineExpr> e) {
      return AffineMap::get(5, 0, e, ctx);
    };
    auto colType =
        tensorType({cs.n, cs.groups, cs.rows(), cs.oh * cs.ow}, element);
    Value columns = convContraction(
        rewriter, loc, weight, dy, filledTensor(rewriter, loc, colType, 0.0),
        {map({g, f, kk}), map({n, g, f, pp}), map({n, g, kk, pp})});
    if (cs.direct()) {
      rewriter.replaceOp(op, reshapeTensor(rewriter, loc, columns, resultType));
      return success();
    }
    // col2im: the padded input gradient gets, for each kernel position, the
    // columns' rows at that position added to the window it strides over.
    Value perPosition = reshapeTensor(
        rewriter, loc, columns,
        tensorType({cs.n, cs.c, cs.kh, cs.kw, cs.oh, cs.ow}, element));
    auto paddedType = tensorType(
        {cs.n, cs.c, cs.h + cs.p[0] + cs.p[2], cs.w + cs.p[1] + cs.p[3]},
        element);
    Value padded = filledTensor(rewriter, loc, paddedType, 0.0);
    auto index = [&](int64_t v) { return rewriter.getIndexAttr(v); };
    for (int64_t i = 0; i < cs.kh; ++i)
      for (int64_t j = 0; j < cs.kw; ++j) {
        Value part = tensor::ExtractSliceOp::create(
            rewriter, loc, tensorType({cs.n, cs.c, cs.oh, cs.ow}, element),
            perPosition,
            SmallVector<OpFoldResult>{index(0), index(0), index(i), index(j),
                                      index(0), index(0)},
            SmallVector<OpFoldResult>{index(cs.n), index(cs.c), index(1),
                                      index(1), index(cs.oh), index(cs.ow)},
            SmallVector<OpFoldResult>(6, index(1)));
        padded = addToWindowView(rewriter, loc, padded, part, i, j, cs.s, cs.d);
      }
    if (llvm::any_of(cs.p, [](int64_t v) { return v != 0; }))
      padded = tensor::ExtractSliceOp::create(
          rewriter, loc, resultType, padded,
          SmallVector<OpFoldResult>{index(0), index(0), index(cs.p[0]),
                                    index(cs.p[1])},
          SmallVector<OpFoldResult>{index(cs.n), index(cs.c), index(cs.h),
                                    index(cs.w)},
          SmallVector<OpFoldResult>(4, index(1)));
    rewriter.replaceOp(op, padded);
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
    auto dyType = cast<RankedTensorType>(adaptor.getDresult().getType());
    Type element = resultType.getElementType();
    ConvShape cs = convShape(inType, resultType, dyType, op.getStrides(),
                             op.getDilations(), op.getPads(),
                             static_cast<int64_t>(op.getGroup()));
    // Columns up to kKeptColumnBytes per micro-batch are shared with the
    // forward (CSE merges the two copies; measured 6% of a small CNN's
    // step); larger ones are built again here.
    int64_t columnBytes = cs.n * cs.groups * cs.rows() * cs.oh * cs.ow *
                          static_cast<int64_t>(sizeof(float));
    Value columns = convColumns(rewriter, loc, adaptor.getInput(), cs,
                                /*recomputed=*/columnBytes > kKeptColumnBytes);
    Value dy = groupedOutput(rewriter, loc, adaptor.getDresult(), cs);
    // Iteration space (g, f, kk, n, p): dW[g, f, kk] += dY[n, g, f, p] *
    // Col[n, g, kk, p].
    AffineExpr g, f, kk, n, pp;
    bindDims(ctx, g, f, kk, n, pp);
    auto map = [&](ArrayRef<AffineExpr> e) {
      return AffineMap::get(5, 0, e, ctx);
    };
    auto gradType = tensorType({cs.groups, cs.fg(), cs.rows()}, element);
    Value grad = convContraction(
        rewriter, loc, dy, columns, filledTensor(rewriter, loc, gradType, 0.0),
        {map({n, g, f, pp}), map({n, g, kk, pp}), map({g, f, kk})});
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, grad, resultType));
    return success();
  }
};

} // namespace

void lowering::populateConvolutionLowering(RewritePatternSet &patterns) {
  patterns.add<ConvLowering, ConvGradInputLowering, ConvGradWeightLowering>(
      patterns.getContext());
}
