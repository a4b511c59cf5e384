//===- Neural.cpp - lower softmax, conv, pooling, dropout -------*- C++ -*-===//
//
// Convolutions are contractions over their input's columns (im2col, see
// ConvLowering). Pooling is a linalg.generic over the padded input with
// affine windows; its adjoint with respect to the input uses a "gather"
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

/// The [N, C, OH, OW] view of `padded` that kernel position (i, j) of
/// every window reads.
Value windowView(OpBuilder &b, Location loc, Value padded,
                 RankedTensorType viewType, int64_t i, int64_t j,
                 ArrayRef<int64_t> s, ArrayRef<int64_t> d) {
  auto index = [&](int64_t v) { return b.getIndexAttr(v); };
  SmallVector<OpFoldResult> sizes;
  for (int64_t size : viewType.getShape())
    sizes.push_back(index(size));
  return tensor::ExtractSliceOp::create(
      b, loc, viewType, padded,
      SmallVector<OpFoldResult>{index(0), index(0), index(i * d[0]),
                                index(j * d[1])},
      sizes,
      SmallVector<OpFoldResult>{index(1), index(1), index(s[0]), index(s[1])});
}

/// `padded` with `update` [N, C, OH, OW] added to the view of kernel
/// position (i, j).
Value addToWindowView(OpBuilder &b, Location loc, Value padded, Value update,
                      int64_t i, int64_t j, ArrayRef<int64_t> s,
                      ArrayRef<int64_t> d) {
  auto viewType = cast<RankedTensorType>(update.getType());
  auto view = windowView(b, loc, padded, viewType, i, j, s, d)
                  .getDefiningOp<tensor::ExtractSliceOp>();
  // The view is the sum's init, so that bufferization adds in place.
  AffineMap identity = b.getMultiDimIdentityMap(viewType.getRank());
  Value sum =
      linalg::GenericOp::create(
          b, loc, viewType, update, Value(view),
          ArrayRef<AffineMap>{identity, identity},
          SmallVector<IteratorType>(viewType.getRank(),
                                    IteratorType::parallel),
          [](OpBuilder &nb, Location l, ValueRange args) {
            linalg::YieldOp::create(
                nb, l,
                arith::AddFOp::create(nb, l, args[1], args[0]).getResult());
          })
          .getResult(0);
  return tensor::InsertSliceOp::create(b, loc, sum, padded,
                                       view.getMixedOffsets(),
                                       view.getMixedSizes(),
                                       view.getMixedStrides());
}

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
  return {input.getDimSize(0),  input.getDimSize(1),  input.getDimSize(2),
          input.getDimSize(3),  weight.getDimSize(0), weight.getDimSize(2),
          weight.getDimSize(3), output.getDimSize(2), output.getDimSize(3),
          groups,               strides,              dilations,
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
Value convColumns(OpBuilder &b, Location loc, Value input,
                  const ConvShape &cs, bool recomputed = false) {
  MLIRContext *ctx = b.getContext();
  Type element = cast<RankedTensorType>(input.getType()).getElementType();
  auto colType = tensorType({cs.n, cs.groups, cs.rows(), cs.oh * cs.ow},
                            element);
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
  auto fullType =
      tensorType({cs.n, cs.groups, cs.cg(), cs.kh, cs.kw, cs.oh, cs.ow},
                 element);
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
                 ArrayRef<AffineMap>{
                     AffineMap::get(4, 0,
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
    Value product =
        convContraction(rewriter, loc, weight, columns, init,
                        {map({g, f, kk}), map({n, g, kk, pp}),
                         map({n, g, f, pp})});
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
    auto paddedType = tensorType({cs.n, cs.c, cs.h + cs.p[0] + cs.p[2],
                                  cs.w + cs.p[1] + cs.p[3]},
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
        padded =
            addToWindowView(rewriter, loc, padded, part, i, j, cs.s, cs.d);
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

/// The maximum of each window and, with `positions`, the kernel position
/// (i * KW + j) of its first maximum among the input's elements (padding
/// never counts). One pass over the output reading the padded input once
/// per kernel position, each through an affine map of the output position
/// (the same buffer, so LLVM sees the strided loads as one interleaved
/// group and vectorizes them).
SmallVector<Value> windowMaxima(OpBuilder &b, Location loc, Value input,
                                ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                                ArrayRef<int64_t> d, ArrayRef<int64_t> p,
                                RankedTensorType resultType, bool positions) {
  double inf = std::numeric_limits<double>::infinity();
  auto inType = cast<RankedTensorType>(input.getType());
  int64_t height = inType.getDimSize(2), width = inType.getDimSize(3);
  Value padded = padSpatial(b, loc, input, p, -inf);
  // The first input only gives the loops the output's shape (linalg infers
  // a loop's range from the first operand indexing it plainly, which with
  // stride 1 would be the padded input); its elements are never read.
  SmallVector<Value> views{emptyTensor(b, loc, resultType)};
  SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(4)};
  AffineExpr n, c, oh, ow;
  bindDims(b.getContext(), n, c, oh, ow);
  // Strides of 1 would make some of these maps plain dimensions, which
  // linalg wants the size of the loop; such windows read strided views.
  bool sameBuffer = s[0] > 1 && s[1] > 1;
  for (int64_t i = 0; i < k[0]; ++i)
    for (int64_t j = 0; j < k[1]; ++j) {
      if (!sameBuffer) {
        views.push_back(windowView(b, loc, padded, resultType, i, j, s, d));
        maps.push_back(b.getMultiDimIdentityMap(4));
        continue;
      }
      views.push_back(padded);
      maps.push_back(AffineMap::get(
          4, 0, {n, c, oh * s[0] + i * d[0], ow * s[1] + j * d[1]},
          b.getContext()));
    }
  auto positionType =
      RankedTensorType::get(resultType.getShape(), b.getI32Type());
  SmallVector<Type> types{resultType};
  SmallVector<Value> inits{emptyTensor(b, loc, resultType)};
  if (positions) {
    types.push_back(positionType);
    inits.push_back(emptyTensor(b, loc, positionType));
  }
  maps.append(inits.size(), b.getMultiDimIdentityMap(4));
  bool padding = llvm::any_of(p, [](int64_t v) { return v != 0; });
  auto generic = linalg::GenericOp::create(
      b, loc, types, views, inits, maps,
      SmallVector<IteratorType>(4, IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        auto c32 = [&](int64_t v) {
          return arith::ConstantOp::create(nb, l, nb.getI32IntegerAttr(v))
              .getResult();
        };
        // Whether kernel position (i, j) of this window is in the input.
        auto real = [&](int64_t i, int64_t j) -> Value {
          auto inside = [&](unsigned dim, int64_t offset, int64_t size) {
            Value o = linalg::IndexOp::create(nb, l, dim);
            Value at = arith::AddIOp::create(
                nb, l,
                arith::MulIOp::create(
                    nb, l, o,
                    arith::ConstantIndexOp::create(nb, l, s[dim - 2])),
                arith::ConstantIndexOp::create(nb, l, offset));
            Value lo = arith::CmpIOp::create(
                nb, l, arith::CmpIPredicate::sge, at,
                arith::ConstantIndexOp::create(nb, l, p[dim - 2]));
            Value hi = arith::CmpIOp::create(
                nb, l, arith::CmpIPredicate::slt, at,
                arith::ConstantIndexOp::create(nb, l, p[dim - 2] + size));
            return arith::AndIOp::create(nb, l, lo, hi).getResult();
          };
          return arith::AndIOp::create(nb, l, inside(2, i * d[0], height),
                                       inside(3, j * d[1], width));
        };
        Value best = args[1], position = c32(padding ? -1 : 0);
        if (padding)
          best = scalarConstant(nb, l, resultType.getElementType(), -inf);
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            int64_t at = i * k[1] + j;
            if (!padding && at == 0)
              continue;
            Value v = args[1 + at];
            if (!positions) {
              best = arith::MaximumFOp::create(nb, l, best, v);
              continue;
            }
            Value better = arith::CmpFOp::create(
                nb, l, arith::CmpFPredicate::OGT, v, best);
            if (padding) {
              Value none = arith::CmpIOp::create(
                  nb, l, arith::CmpIPredicate::eq, position, c32(-1));
              better = arith::AndIOp::create(
                  nb, l, real(i, j),
                  arith::OrIOp::create(nb, l, better, none));
            }
            best = arith::SelectOp::create(nb, l, better, v, best);
            position = arith::SelectOp::create(nb, l, better, c32(at),
                                               position);
          }
        SmallVector<Value> results{best};
        if (positions)
          results.push_back(position);
        linalg::YieldOp::create(nb, l, results);
      });
  return SmallVector<Value>(generic.getResults());
}

struct MaxPoolLowering : public OpConversionPattern<MaxPoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxPoolOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, windowMaxima(rewriter, op.getLoc(), adaptor.getInput(),
                         op.getKernel(), op.getStrides(), op.getDilations(),
                         op.getPads(), cast<RankedTensorType>(op.getType()),
                         /*positions=*/false)[0]);
    return success();
  }
};

struct MaxPoolIndicesLowering : public OpConversionPattern<MaxPoolIndicesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxPoolIndicesOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations(),
                      p = op.getPads(), k = op.getKernel();
    // The kernel position (i * KW + j) of each window's first maximum.
    Value winners =
        windowMaxima(rewriter, loc, adaptor.getInput(), k, s, d, p,
                     RankedTensorType::get(resultType.getShape(),
                                           inType.getElementType()),
                     /*positions=*/true)[1];
    int64_t channels = inType.getDimSize(1), height = inType.getDimSize(2),
            width = inType.getDimSize(3);
    bool columnMajor = op.getStorageOrder() == 1;
    rewriter.replaceOp(
        op, buildElementwise(
                rewriter, loc, resultType, ValueRange{winners},
                [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                  auto c = [&](int64_t v) {
                    return arith::ConstantIndexOp::create(nb, l, v)
                        .getResult();
                  };
                  auto index = [&](unsigned dim) {
                    return linalg::IndexOp::create(nb, l, dim).getResult();
                  };
                  auto add = [&](Value a, Value b) {
                    return arith::AddIOp::create(nb, l, a, b).getResult();
                  };
                  auto mul = [&](Value a, int64_t b) {
                    return arith::MulIOp::create(nb, l, a, c(b)).getResult();
                  };
                  Value at = arith::IndexCastOp::create(
                      nb, l, nb.getIndexType(), args[0]);
                  Value i = arith::DivUIOp::create(nb, l, at, c(k[1]));
                  Value j = arith::RemUIOp::create(nb, l, at, c(k[1]));
                  // Input row and column of the winner (pads subtracted).
                  Value row = arith::SubIOp::create(
                      nb, l, add(mul(index(2), s[0]), mul(i, d[0])), c(p[0]));
                  Value col = arith::SubIOp::create(
                      nb, l, add(mul(index(3), s[1]), mul(j, d[1])), c(p[1]));
                  Value plane = mul(add(mul(index(0), channels), index(1)),
                                    height * width);
                  Value flat =
                      columnMajor
                          ? add(plane, add(row, mul(col, height)))
                          : add(plane, add(mul(row, width), col));
                  return arith::IndexCastOp::create(nb, l, nb.getI64Type(),
                                                    flat);
                }));
    return success();
  }
};

struct MaxPoolGradLowering : public OpConversionPattern<MaxPoolGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxPoolGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    auto dyType = cast<RankedTensorType>(adaptor.getDresult().getType());
    Type element = inType.getElementType();
    ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations(),
                      p = op.getPads(), k = op.getKernel();
    // 1. The kernel position of each window's first maximum.
    Value winners = windowMaxima(rewriter, loc, adaptor.getInput(), k, s, d,
                                 p, dyType, /*positions=*/true)[1];
    // 2. For each kernel position, the adjoints of the windows it won go to
    //    the input elements at that position (added: windows may overlap).
    auto paddedType = RankedTensorType::get(
        {inType.getDimSize(0), inType.getDimSize(1),
         inType.getDimSize(2) + p[0] + p[2], inType.getDimSize(3) + p[1] + p[3]},
        element);
    Value dy = adaptor.getDresult();
    int64_t oh = dyType.getDimSize(2), ow = dyType.getDimSize(3);
    Value padded;
    bool tiles = s[0] == k[0] && s[1] == k[1] && d[0] == 1 && d[1] == 1 &&
                 paddedType.getDimSize(2) == oh * s[0] &&
                 paddedType.getDimSize(3) == ow * s[1];
    if (tiles) {
      // Windows that tile the padded input: every element belongs to one
      // window, at kernel position (i, j); one pass writes them all, in
      // order.
      MLIRContext *ctx = rewriter.getContext();
      auto tiled = RankedTensorType::get(
          {inType.getDimSize(0), inType.getDimSize(1), oh, k[0], ow, k[1]},
          element);
      AffineExpr n, c, h, i, w, j;
      bindDims(ctx, n, c, h, i, w, j);
      AffineMap window = AffineMap::get(6, 0, {n, c, h, w}, ctx);
      Value spread =
          linalg::GenericOp::create(
              rewriter, loc, tiled, ValueRange{winners, dy},
              emptyTensor(rewriter, loc, tiled),
              ArrayRef<AffineMap>{window, window,
                                  rewriter.getMultiDimIdentityMap(6)},
              SmallVector<IteratorType>(6, IteratorType::parallel),
              [&](OpBuilder &nb, Location l, ValueRange args) {
                Value at = arith::AddIOp::create(
                    nb, l,
                    arith::MulIOp::create(
                        nb, l, linalg::IndexOp::create(nb, l, 3),
                        arith::ConstantIndexOp::create(nb, l, k[1])),
                    linalg::IndexOp::create(nb, l, 5));
                Value here = arith::CmpIOp::create(
                    nb, l, arith::CmpIPredicate::eq, args[0],
                    arith::IndexCastOp::create(nb, l, nb.getI32Type(), at));
                linalg::YieldOp::create(
                    nb, l,
                    arith::SelectOp::create(
                        nb, l, here, args[1],
                        scalarConstant(nb, l, element, 0.0))
                        .getResult());
              })
              .getResult(0);
      padded = reshapeTensor(rewriter, loc, spread, paddedType);
    } else {
      padded = filledTensor(rewriter, loc, paddedType, 0.0);
    }
    for (int64_t i = 0; !tiles && i < k[0]; ++i)
      for (int64_t j = 0; j < k[1]; ++j) {
        int64_t at = i * k[1] + j;
        Value won = buildElementwise(
            rewriter, loc, dyType, ValueRange{winners, dy},
            [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
              Value here = arith::CmpIOp::create(
                  nb, l, arith::CmpIPredicate::eq, args[0],
                  arith::ConstantOp::create(nb, l, nb.getI32IntegerAttr(at)));
              return arith::SelectOp::create(
                  nb, l, here, args[1], scalarConstant(nb, l, element, 0.0));
            });
        padded = addToWindowView(rewriter, loc, padded, won, i, j, s, d);
      }
    Value result = padded;
    if (llvm::any_of(p, [](int64_t v) { return v != 0; })) {
      auto index = [&](int64_t v) { return rewriter.getIndexAttr(v); };
      result = tensor::ExtractSliceOp::create(
          rewriter, loc, inType, padded,
          SmallVector<OpFoldResult>{index(0), index(0), index(p[0]),
                                    index(p[1])},
          SmallVector<OpFoldResult>{index(inType.getDimSize(0)),
                                    index(inType.getDimSize(1)),
                                    index(inType.getDimSize(2)),
                                    index(inType.getDimSize(3))},
          SmallVector<OpFoldResult>(4, index(1)));
    }
    rewriter.replaceOp(op, result);
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
               MaxPoolIndicesLowering, MaxPoolGradLowering, AveragePoolLowering,
               AveragePoolGradLowering, DropoutLowering>(patterns.getContext());
}
