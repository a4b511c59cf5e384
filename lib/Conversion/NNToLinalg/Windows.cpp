//===- Windows.cpp - sliding windows of convolution and pooling -*- C++ -*-===//

#include "LoweringUtils.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;
using mlir::utils::IteratorType;

/// Pads the two spatial dimensions of an NCHW tensor (pads: top, left,
/// bottom, right) with `value`.
Value lowering::padSpatial(OpBuilder &b, Location loc, Value input,
                           ArrayRef<int64_t> pads, double value) {
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; }))
    return input;
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[2] += pads[0] + pads[2];
  shape[3] += pads[1] + pads[3];
  SmallVector<OpFoldResult> low{b.getIndexAttr(0), b.getIndexAttr(0),
                                b.getIndexAttr(pads[0]),
                                b.getIndexAttr(pads[1])};
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
std::pair<Value, Value> lowering::windowOf(OpBuilder &b, Location loc, Value i,
                                           Value k, int64_t pad, int64_t stride,
                                           int64_t dilation, int64_t outSize) {
  // Signed arithmetic in i64: i + pad - k * dilation may be negative.
  Type i64 = b.getI64Type();
  Value ii = arith::IndexCastOp::create(b, loc, i64, i);
  Value kk = arith::IndexCastOp::create(b, loc, i64, k);
  auto c64 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value pos =
      arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, ii, c64(pad)),
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
Value lowering::windowView(OpBuilder &b, Location loc, Value padded,
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
Value lowering::addToWindowView(OpBuilder &b, Location loc, Value padded,
                                Value update, int64_t i, int64_t j,
                                ArrayRef<int64_t> s, ArrayRef<int64_t> d) {
  auto viewType = cast<RankedTensorType>(update.getType());
  auto view = windowView(b, loc, padded, viewType, i, j, s, d)
                  .getDefiningOp<tensor::ExtractSliceOp>();
  // The view is the sum's init, so that bufferization adds in place.
  AffineMap identity = b.getMultiDimIdentityMap(viewType.getRank());
  Value sum =
      linalg::GenericOp::create(
          b, loc, viewType, update, Value(view),
          ArrayRef<AffineMap>{identity, identity},
          SmallVector<IteratorType>(viewType.getRank(), IteratorType::parallel),
          [](OpBuilder &nb, Location l, ValueRange args) {
            linalg::YieldOp::create(
                nb, l,
                arith::AddFOp::create(nb, l, args[1], args[0]).getResult());
          })
          .getResult(0);
  return tensor::InsertSliceOp::create(
      b, loc, sum, padded, view.getMixedOffsets(), view.getMixedSizes(),
      view.getMixedStrides());
}
