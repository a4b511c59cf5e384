//===- Neural.cpp - lower softmax and dropout -------------------*- C++ -*-===//
//
// Softmax and log-softmax over an axis; training-mode Dropout's mask from a
// counter-based hash of (seed, sample, element). Convolutions and pooling
// are in Convolution.cpp and Pooling.cpp.
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

    Value max = linalg::GenericOp::create(
                    rewriter, loc, statType, input,
                    filledTensor(rewriter, loc, statType,
                                 -std::numeric_limits<double>::infinity()),
                    ArrayRef<AffineMap>{identity, stat}, reduce,
                    [](OpBuilder &b, Location l, ValueRange args) {
                      linalg::YieldOp::create(
                          b, l,
                          arith::MaximumFOp::create(b, l, args[0], args[1])
                              .getResult());
                    })
                    .getResult(0);
    // 16-bit floats sum their exponentials and divide in f32 (as PyTorch's
    // softmax accumulates them): only the result rounds to the input's type.
    Type element = type.getElementType();
    Type compute = element.getIntOrFloatBitWidth() < 32
                       ? Type(rewriter.getF32Type())
                       : element;
    auto widen = [compute](OpBuilder &b, Location l, Value v) -> Value {
      return v.getType() == compute ? v
                                    : arith::ExtFOp::create(b, l, compute, v);
    };
    Value sum =
        linalg::GenericOp::create(
            rewriter, loc, statType.clone(compute), ValueRange{input, max},
            filledTensor(rewriter, loc, statType.clone(compute), 0.0),
            ArrayRef<AffineMap>{identity, stat, stat}, reduce,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value e = math::ExpOp::create(
                  b, l,
                  arith::SubFOp::create(b, l, widen(b, l, args[0]),
                                        widen(b, l, args[1])));
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
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value shifted = arith::SubFOp::create(b, l, widen(b, l, args[0]),
                                                    widen(b, l, args[1]));
              Value r;
              if (IsLog)
                r = arith::SubFOp::create(b, l, shifted,
                                          math::LogOp::create(b, l, args[2]));
              else
                r = arith::DivFOp::create(
                    b, l, math::ExpOp::create(b, l, shifted), args[2]);
              if (r.getType() != element)
                r = arith::TruncFOp::create(b, l, element, r);
              linalg::YieldOp::create(b, l, r);
            })
            .getResult(0);
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// SplitMix64's finalizer: a bijective 64-bit mix.
Value mix64(OpBuilder &b, Location l, Value z) {
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(
               b, l, b.getI64IntegerAttr(static_cast<int64_t>(v)))
        .getResult();
  };
  z = arith::AddIOp::create(b, l, z, c(0x9E3779B97F4A7C15ull));
  z = arith::MulIOp::create(
      b, l,
      arith::XOrIOp::create(b, l, z, arith::ShRUIOp::create(b, l, z, c(30))),
      c(0xBF58476D1CE4E5B9ull));
  z = arith::MulIOp::create(
      b, l,
      arith::XOrIOp::create(b, l, z, arith::ShRUIOp::create(b, l, z, c(27))),
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
    Value base =
        tensor::ExtractOp::create(rewriter, loc, adaptor.getSampleBase());
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
            return arith::IndexCastOp::create(
                       b, l, b.getI64Type(), linalg::IndexOp::create(b, l, dim))
                .getResult();
          };
          Value sample = arith::AddIOp::create(b, l, base, idx(0));
          Value element = c(0);
          for (int64_t d = 1; d < type.getRank(); ++d)
            element = arith::AddIOp::create(
                b, l,
                arith::MulIOp::create(b, l, element, c(type.getDimSize(d))),
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
               SoftmaxLowering<LogSoftmaxOp, true>, DropoutLowering>(
      patterns.getContext());
  populateConvolutionLowering(patterns);
  populatePoolingLowering(patterns);
}
