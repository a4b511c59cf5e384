//===- Pooling.cpp - lower max and average pooling --------------*- C++ -*-===//
//
// Pooling is a linalg.generic over the padded input with affine windows;
// its adjoint with respect to the input uses a "gather" form: each input
// element sums, over the kernel positions, the output elements whose window
// covered it (the division by the stride is checked in the body), so no
// scatter or atomic update is needed.
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
                  nb, l, real(i, j), arith::OrIOp::create(nb, l, better, none));
            }
            best = arith::SelectOp::create(nb, l, better, v, best);
            position =
                arith::SelectOp::create(nb, l, better, c32(at), position);
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
    Value winners = windowMaxima(
        rewriter, loc, adaptor.getInput(), k, s, d, p,
        RankedTensorType::get(resultType.getShape(), inType.getElementType()),
        /*positions=*/true)[1];
    int64_t channels = inType.getDimSize(1), height = inType.getDimSize(2),
            width = inType.getDimSize(3);
    bool columnMajor = op.getStorageOrder() == 1;
    rewriter.replaceOp(
        op,
        buildElementwise(
            rewriter, loc, resultType, ValueRange{winners},
            [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
              auto c = [&](int64_t v) {
                return arith::ConstantIndexOp::create(nb, l, v).getResult();
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
              Value at =
                  arith::IndexCastOp::create(nb, l, nb.getIndexType(), args[0]);
              Value i = arith::DivUIOp::create(nb, l, at, c(k[1]));
              Value j = arith::RemUIOp::create(nb, l, at, c(k[1]));
              // Input row and column of the winner (pads subtracted).
              Value row = arith::SubIOp::create(
                  nb, l, add(mul(index(2), s[0]), mul(i, d[0])), c(p[0]));
              Value col = arith::SubIOp::create(
                  nb, l, add(mul(index(3), s[1]), mul(j, d[1])), c(p[1]));
              Value plane =
                  mul(add(mul(index(0), channels), index(1)), height * width);
              Value flat = columnMajor ? add(plane, add(row, mul(col, height)))
                                       : add(plane, add(mul(row, width), col));
              return arith::IndexCastOp::create(nb, l, nb.getI64Type(), flat);
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
    Value winners = windowMaxima(rewriter, loc, adaptor.getInput(), k, s, d, p,
                                 dyType, /*positions=*/true)[1];
    // 2. For each kernel position, the adjoints of the windows it won go to
    //    the input elements at that position (added: windows may overlap).
    auto paddedType =
        RankedTensorType::get({inType.getDimSize(0), inType.getDimSize(1),
                               inType.getDimSize(2) + p[0] + p[2],
                               inType.getDimSize(3) + p[1] + p[3]},
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
                    arith::SelectOp::create(nb, l, here, args[1],
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
          SmallVector<OpFoldResult>{
              index(inType.getDimSize(0)), index(inType.getDimSize(1)),
              index(inType.getDimSize(2)), index(inType.getDimSize(3))},
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
                  int64_t height, int64_t width, bool includePad,
                  Type element) {
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
  Value count =
      arith::MulIOp::create(b, l, extent(oh, k[0], s[0], p[0], height),
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
    Value sum =
        linalg::GenericOp::create(
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
          Value count = windowCount(b, l, linalg::IndexOp::create(b, l, 2),
                                    linalg::IndexOp::create(b, l, 3), k, s, p,
                                    inType.getDimSize(2), inType.getDimSize(3),
                                    includePad, element);
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
              b, l,
              arith::AddFOp::create(b, l, args[1], contribution).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void lowering::populatePoolingLowering(RewritePatternSet &patterns) {
  patterns.add<MaxPoolLowering, MaxPoolIndicesLowering, MaxPoolGradLowering,
               AveragePoolLowering, AveragePoolGradLowering>(
      patterns.getContext());
}
