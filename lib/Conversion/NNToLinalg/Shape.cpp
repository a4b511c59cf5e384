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

struct ConcatLowering : public OpConversionPattern<ConcatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    int64_t axis = static_cast<int64_t>(op.getAxis());
    Value result = emptyTensor(rewriter, loc, resultType);
    int64_t offset = 0;
    for (Value input : adaptor.getInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      SmallVector<OpFoldResult> offsets(type.getRank(),
                                        rewriter.getIndexAttr(0));
      offsets[axis] = rewriter.getIndexAttr(offset);
      SmallVector<OpFoldResult> sizes,
          strides(type.getRank(), rewriter.getIndexAttr(1));
      for (int64_t d : type.getShape())
        sizes.push_back(rewriter.getIndexAttr(d));
      result = tensor::InsertSliceOp::create(rewriter, loc, input, result,
                                             offsets, sizes, strides);
      offset += type.getDimSize(axis);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Reverses `value` along every dimension where `flip` is set.
Value reverseDims(OpBuilder &b, Location loc, Value value,
                  ArrayRef<bool> flip) {
  if (llvm::none_of(flip, [](bool f) { return f; }))
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    AffineExpr dim = b.getAffineDimExpr(d);
    exprs.push_back(flip[d] ? type.getDimSize(d) - 1 - dim : dim);
  }
  AffineMap read = AffineMap::get(type.getRank(), 0, exprs, b.getContext());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, type, value, emptyTensor(b, loc, type),
             ArrayRef<AffineMap>{read,
                                 b.getMultiDimIdentityMap(type.getRank())},
             iterators,
             [](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(nb, nl, args[0]);
             })
      .getResult(0);
}

/// A strided slice as positive-stride offsets/sizes/strides plus the
/// dimensions to reverse (those with negative steps).
struct StridedSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  SmallVector<bool> flip;
};

StridedSlice positiveSlice(OpBuilder &b, ArrayRef<int64_t> starts,
                           ArrayRef<int64_t> steps, ArrayRef<int64_t> shape) {
  StridedSlice s;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t size = shape[d], start = starts[d], step = steps[d];
    bool negative = step < 0;
    if (negative && size > 0)
      start = start + (size - 1) * step;
    s.offsets.push_back(b.getIndexAttr(size > 0 ? start : 0));
    s.sizes.push_back(b.getIndexAttr(size));
    s.strides.push_back(b.getIndexAttr(negative ? -step : step));
    s.flip.push_back(negative);
  }
  return s;
}

struct SliceLowering : public OpConversionPattern<SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    StridedSlice s = positiveSlice(rewriter, op.getStarts(), op.getSteps(),
                                   resultType.getShape());
    Value slice = tensor::ExtractSliceOp::create(rewriter, op.getLoc(),
                                                 resultType, adaptor.getInput(),
                                                 s.offsets, s.sizes, s.strides);
    rewriter.replaceOp(op, reverseDims(rewriter, op.getLoc(), slice, s.flip));
    return success();
  }
};

struct SliceGradLowering : public OpConversionPattern<SliceGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SliceGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    StridedSlice s = positiveSlice(rewriter, op.getStarts(), op.getSteps(),
                                   inType.getShape());
    Value source = reverseDims(rewriter, loc, adaptor.getInput(), s.flip);
    Value zeros =
        filledTensor(rewriter, loc, cast<RankedTensorType>(op.getType()), 0.0);
    rewriter.replaceOp(op, tensor::InsertSliceOp::create(rewriter, loc, source,
                                                         zeros, s.offsets,
                                                         s.sizes, s.strides));
    return success();
  }
};

struct GatherLowering : public OpConversionPattern<GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto dataType = cast<RankedTensorType>(adaptor.getData().getType());
    auto indicesType = cast<RankedTensorType>(adaptor.getIndices().getType());
    int64_t axis = static_cast<int64_t>(op.getAxis());
    int64_t q = indicesType.getRank();
    int64_t rank = resultType.getRank();
    // Iterate over the result; read the index at dims [axis, axis + q).
    SmallVector<AffineExpr> indexExprs;
    for (int64_t d = 0; d < q; ++d)
      indexExprs.push_back(rewriter.getAffineDimExpr(axis + d));
    AffineMap indexMap =
        AffineMap::get(rank, 0, indexExprs, rewriter.getContext());
    Value data = adaptor.getData();
    int64_t extent = dataType.getDimSize(axis);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultType, adaptor.getIndices(),
        emptyTensor(rewriter, loc, resultType),
        ArrayRef<AffineMap>{indexMap, rewriter.getMultiDimIdentityMap(rank)},
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange args) {
          SmallVector<Value> coords;
          for (int64_t d = 0; d < axis; ++d)
            coords.push_back(linalg::IndexOp::create(b, l, d));
          coords.push_back(normalizeIndex(b, l, args[0], extent));
          for (int64_t d = axis + q; d < rank; ++d)
            coords.push_back(linalg::IndexOp::create(b, l, d));
          linalg::YieldOp::create(
              b, l, tensor::ExtractOp::create(b, l, data, coords).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// Scatter-add of `dy` into zeros of `resultType`: each element of dy is
/// added at the position `target` gives for its coordinates (indices may
/// repeat; the result is updated in place after bufferization). `target`
/// keeps every coordinate of dy outside `indexDims`, so two elements of dy
/// that differ there never meet: the loops walk the index dimensions in
/// order (outer) and, inside, the others as a loop of independent
/// iterations (kIndependentIterations). Every element of the result sums
/// its contributions in the order of dy's elements, the order of one loop
/// over them; on the GPU each inner iteration is a thread.
Value scatterAdd(OpBuilder &rewriter, Location loc, RankedTensorType resultType,
                 Value dy, ArrayRef<int64_t> indexDims,
                 llvm::function_ref<SmallVector<Value>(OpBuilder &, Location,
                                                       ArrayRef<Value>)>
                     target) {
  auto dyType = cast<RankedTensorType>(dy.getType());
  SmallVector<int64_t> otherDims;
  for (int64_t d = 0; d < dyType.getRank(); ++d)
    if (!llvm::is_contained(indexDims, d))
      otherDims.push_back(d);
  auto count = [&](ArrayRef<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= dyType.getDimSize(d);
    return n;
  };
  // Coordinates `dims` of dy from their row-major linear index.
  auto delinearize = [&](OpBuilder &b, Location l, Value linear,
                         ArrayRef<int64_t> dims, SmallVector<Value> &coords) {
    Value rest = linear;
    for (int64_t d : llvm::reverse(dims)) {
      Value size = arith::ConstantIndexOp::create(b, l, dyType.getDimSize(d));
      coords[d] = arith::RemUIOp::create(b, l, rest, size);
      rest = arith::DivUIOp::create(b, l, rest, size);
    }
  };
  Value zeros = filledTensor(rewriter, loc, resultType, 0.0);
  Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value indexCount =
      arith::ConstantIndexOp::create(rewriter, loc, count(indexDims));
  Value otherCount =
      arith::ConstantIndexOp::create(rewriter, loc, count(otherDims));
  auto loop = scf::ForOp::create(
      rewriter, loc, c0, indexCount, c1, ValueRange{zeros},
      [&](OpBuilder &b, Location l, Value position, ValueRange outer) {
        auto inner = scf::ForOp::create(
            b, l, c0, otherCount, c1, outer,
            [&](OpBuilder &ib, Location il, Value slice, ValueRange iter) {
              SmallVector<Value> coords(dyType.getRank());
              delinearize(ib, il, position, indexDims, coords);
              delinearize(ib, il, slice, otherDims, coords);
              SmallVector<Value> at = target(ib, il, coords);
              Value add = arith::AddFOp::create(
                  ib, il, tensor::ExtractOp::create(ib, il, iter[0], at),
                  tensor::ExtractOp::create(ib, il, dy, coords));
              scf::YieldOp::create(
                  ib, il,
                  tensor::InsertOp::create(ib, il, add, iter[0], at)
                      .getResult());
            });
        inner->setAttr(accrue::nn::kIndependentIterations, b.getUnitAttr());
        scf::YieldOp::create(b, l, inner.getResults());
      });
  return loop.getResult(0);
}

/// The gradient of a gather whose indices are the constant 0, 1, ..., n-1
/// (a position embedding's arange): no index repeats, so it is the adjoint
/// itself in the first n slices along `axis` and zero after them, written
/// as 0 + dy (the sum the scatter-add would form, -0 included). Null when
/// the indices are anything else.
Value iotaGatherGrad(OpBuilder &b, Location loc, RankedTensorType resultType,
                     Value dy, Value indices, int64_t axis) {
  DenseIntElementsAttr values;
  auto indicesType = cast<RankedTensorType>(indices.getType());
  if (indicesType.getRank() == 0 || !matchPattern(indices, m_Constant(&values)))
    return nullptr;
  int64_t n = 0;
  for (const APInt &value : values.getValues<APInt>())
    if (value.getSExtValue() != n++)
      return nullptr;
  if (n > resultType.getDimSize(axis))
    return nullptr;
  // dy with its index dimensions as one of n.
  auto dyType = cast<RankedTensorType>(dy.getType());
  SmallVector<int64_t> shape(resultType.getShape());
  shape[axis] = n;
  auto sliceType = RankedTensorType::get(shape, dyType.getElementType());
  Value rows = reshapeTensor(b, loc, dy, sliceType);
  Value zero = scalarConstant(b, loc, sliceType.getElementType(), 0.0);
  Value sum = buildElementwise(
      b, loc, sliceType, ValueRange{rows},
      [&](OpBuilder &eb, Location l, ValueRange args) -> Value {
        return arith::AddFOp::create(eb, l, zero, args[0]);
      });
  Value zeros = filledTensor(b, loc, resultType, 0.0);
  SmallVector<OpFoldResult> offsets(shape.size(), b.getIndexAttr(0)), sizes,
      strides(shape.size(), b.getIndexAttr(1));
  for (int64_t size : shape)
    sizes.push_back(b.getIndexAttr(size));
  return tensor::InsertSliceOp::create(b, loc, sum, zeros, offsets, sizes,
                                       strides);
}

/// Scatter-add: each element of the adjoint goes to the slice its index
/// read.
struct GatherGradLowering : public OpConversionPattern<GatherGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    auto indicesType = cast<RankedTensorType>(adaptor.getIndices().getType());
    int64_t axis = static_cast<int64_t>(op.getAxis());
    int64_t q = indicesType.getRank();
    Value indices = adaptor.getIndices();
    int64_t extent = resultType.getDimSize(axis);
    if (Value slice = iotaGatherGrad(rewriter, op.getLoc(), resultType,
                                     adaptor.getDresult(), indices, axis)) {
      rewriter.replaceOp(op, slice);
      return success();
    }
    SmallVector<int64_t> indexDims =
        llvm::to_vector(llvm::seq<int64_t>(axis, axis + q));
    rewriter.replaceOp(
        op,
        scatterAdd(
            rewriter, op.getLoc(), resultType, adaptor.getDresult(), indexDims,
            [&](OpBuilder &b, Location l, ArrayRef<Value> coords) {
              SmallVector<Value> indexCoords(coords.begin() + axis,
                                             coords.begin() + axis + q);
              Value index =
                  tensor::ExtractOp::create(b, l, indices, indexCoords);
              SmallVector<Value> at(coords.begin(), coords.begin() + axis);
              at.push_back(normalizeIndex(b, l, index, extent));
              at.append(coords.begin() + axis + q, coords.end());
              return at;
            }));
    return success();
  }
};

/// One parallel loop over the result, each element read from the data at
/// its own coordinates with the axis coordinate from the indices.
struct GatherElementsLowering : public OpConversionPattern<GatherElementsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherElementsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    int64_t axis = static_cast<int64_t>(op.getAxis());
    int64_t rank = resultType.getRank();
    Value data = adaptor.getData();
    int64_t extent = cast<RankedTensorType>(data.getType()).getDimSize(axis);
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultType, adaptor.getIndices(),
        emptyTensor(rewriter, loc, resultType),
        ArrayRef<AffineMap>{identity, identity},
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange args) {
          SmallVector<Value> coords;
          for (int64_t d = 0; d < rank; ++d)
            coords.push_back(
                d == axis ? normalizeIndex(b, l, args[0], extent)
                          : linalg::IndexOp::create(b, l, d).getResult());
          linalg::YieldOp::create(
              b, l, tensor::ExtractOp::create(b, l, data, coords).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// Scatter-add: each element of the adjoint goes where its index points.
struct GatherElementsGradLowering
    : public OpConversionPattern<GatherElementsGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherElementsGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    int64_t axis = static_cast<int64_t>(op.getAxis());
    Value indices = adaptor.getIndices();
    int64_t extent = resultType.getDimSize(axis);
    rewriter.replaceOp(
        op, scatterAdd(
                rewriter, op.getLoc(), resultType, adaptor.getDresult(), {axis},
                [&](OpBuilder &b, Location l, ArrayRef<Value> coords) {
                  SmallVector<Value> at(coords);
                  at[axis] = normalizeIndex(
                      b, l, tensor::ExtractOp::create(b, l, indices, coords),
                      extent);
                  return at;
                }));
    return success();
  }
};

struct TriluLowering : public OpConversionPattern<TriluOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TriluOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t rank = type.getRank(), k = static_cast<int64_t>(op.getK());
    bool upper = op.getUpper();
    Value result = buildElementwise(
        rewriter, op.getLoc(), type, adaptor.getInput(),
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value i = linalg::IndexOp::create(b, l, rank - 2);
          Value j = linalg::IndexOp::create(b, l, rank - 1);
          Value diff = arith::SubIOp::create(b, l, j, i);
          Value kv = arith::ConstantIndexOp::create(b, l, k);
          Value keep = arith::CmpIOp::create(b, l,
                                             upper ? arith::CmpIPredicate::sge
                                                   : arith::CmpIPredicate::sle,
                                             diff, kv);
          return arith::SelectOp::create(
              b, l, keep, args[0],
              scalarConstant(b, l, type.getElementType(), 0.0));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void lowering::populateShapeLowering(RewritePatternSet &patterns) {
  patterns.add<ConstantLowering, ReshapeLikeLowering<ReshapeOp>,
               ReshapeLikeLowering<FlattenOp>, TransposeLowering,
               ExpandLowering, ConcatLowering, SliceLowering, SliceGradLowering,
               GatherLowering, GatherGradLowering, GatherElementsLowering,
               GatherElementsGradLowering, TriluLowering>(
      patterns.getContext());
}
