//===- ReductionHandlers.cpp - import reductions ----------------*- C++ -*-===//

#include "GraphImporter.h"

#include "mlir/IR/Matchers.h"

#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

/// Resolves ONNX's axes (attribute before `inputSince`, optional input from
/// then on), negative axes and "no axes means all, unless
/// noop_with_empty_axes" into a sorted list. Empty result means identity.
FailureOr<SmallVector<int64_t>> resolveAxes(GraphImporter &im,
                                            const onnx::NodeProto &node,
                                            int64_t rank, int64_t inputSince) {
  SmallVector<int64_t> axes;
  if (im.opset >= inputSince) {
    if (node.input_size() > 1 && !node.input(1).empty()) {
      FailureOr<SmallVector<int64_t>> given =
          im.constantInts(node, 1, "the axes");
      if (failed(given))
        return failure();
      axes = *given;
    }
  } else if (auto attr = im.intsAttr(node, "axes")) {
    axes = *attr;
  }
  if (axes.empty()) {
    if (im.opset >= inputSince && im.intAttr(node, "noop_with_empty_axes", 0))
      return axes;
    return llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  FailureOr<SmallVector<int64_t>> normalized =
      im.normalizeAxes(node, axes, rank);
  if (failed(normalized))
    return failure();
  axes = *normalized;
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return im.error(node) << "axes repeat";
  return axes;
}

/// What a sum does around its reduction: ReduceSumSquare squares the
/// elements first, ReduceL2 also takes the square root after, ReduceL1 sums
/// magnitudes, ReduceLogSum takes the log of the sum and ReduceLogSumExp
/// the log of the sum of exponentials (shifted by the maximum, so that no
/// exponential overflows).
enum class Around { None, Square, L2, L1, Log, LogExp };

/// Emits reduction `OpTy` of `x` as the node asks, with `around` applied.
template <typename OpTy, int64_t InputSince, Around around = Around::None>
LogicalResult importReduction(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  // Integer sums are counts (`mask.sum()`); the maximum and minimum of
  // booleans (opset 20) are any and all; other reductions take floats.
  bool integerSum =
      std::is_same_v<OpTy, nn::ReduceSumOp> && around == Around::None &&
      type.getElementType().isInteger() && !type.getElementType().isInteger(1);
  bool boolExtremum =
      (std::is_same_v<OpTy, nn::ReduceMaxOp> ||
       std::is_same_v<OpTy, nn::ReduceMinOp>)&&type.getElementType()
          .isInteger(1);
  if (!isa<FloatType>(type.getElementType()) && !integerSum && !boolExtremum)
    return im.error(node) << "expects a floating-point input"
                          << (std::is_same_v<OpTy, nn::ReduceSumOp> &&
                                      around == Around::None
                                  ? " or 32/64-bit integers"
                                  : "");
  FailureOr<SmallVector<int64_t>> axes =
      resolveAxes(im, node, type.getRank(), InputSince);
  if (failed(axes))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  bool keepdims = im.intAttr(node, "keepdims", 1) != 0;
  Value input = *x;
  // The shift of ReduceLogSumExp: the maximum over the axes, kept as a
  // broadcastable tensor, 0 where it is infinite (an empty or all -inf
  // set: the sum's log is then -inf or NaN by itself).
  Value shift;
  if (around == Around::LogExp && !axes->empty()) {
    Value max = nn::ReduceMaxOp::create(
        b, loc, input, b.getDenseI64ArrayAttr(*axes), b.getBoolAttr(true));
    Type element = type.getElementType();
    Value infinite = nn::EqualOp::create(
        b, loc, nn::AbsOp::create(b, loc, max),
        nnb.scalar(element, std::numeric_limits<double>::infinity()));
    shift =
        nn::WhereOp::create(b, loc, infinite, nnb.scalar(element, 0.0), max);
    input = nnb.sub(input, shift);
  }
  switch (around) {
  case Around::Square:
  case Around::L2:
    input = nnb.mul(input, input);
    break;
  case Around::L1:
    input = nn::AbsOp::create(b, loc, input);
    break;
  case Around::LogExp:
    input = nn::ExpOp::create(b, loc, input);
    break;
  case Around::None:
  case Around::Log:
    break;
  }
  FailureOr<Value> reduced = input;
  if (!axes->empty()) {
    if (boolExtremum)
      // As 0/1 floats, and back.
      input = nn::CastOp::create(
          b, loc, RankedTensorType::get(type.getShape(), b.getF32Type()),
          input);
    reduced = im.create<OpTy>(node, input, b.getDenseI64ArrayAttr(*axes),
                              b.getBoolAttr(keepdims));
    // Back to booleans: above one half (the maximum of an empty set, -inf,
    // is false; the minimum, +inf, true).
    if (boolExtremum && succeeded(reduced))
      reduced = im.create<nn::GreaterOp>(node, *reduced,
                                         nnb.scalar(b.getF32Type(), 0.5));
  }
  if (failed(reduced))
    return failure();
  switch (around) {
  case Around::L2:
    // Without axes, the root of a square is the magnitude.
    reduced = axes->empty() ? im.create<nn::AbsOp>(node, *x)
                            : im.create<nn::SqrtOp>(node, *reduced);
    break;
  case Around::Log:
  case Around::LogExp:
    reduced = im.create<nn::LogOp>(node, *reduced);
    if (shift && succeeded(reduced))
      reduced = im.create<nn::AddOp>(
          node, *reduced,
          keepdims
              ? shift
              : nnb.reshape(shift, cast<RankedTensorType>(reduced->getType())));
    break;
  default:
    break;
  }
  return im.setResult(node, reduced);
}

/// ReduceProd of a compile-time constant (shape arithmetic, such as
/// PyTorch's element count of a shape), folded at import.
LogicalResult importReduceProd(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  DenseElementsAttr value;
  if (!matchPattern(*x, m_Constant(&value)) ||
      !type.getElementType().isInteger(64))
    return im.error(node) << "products of run-time or float values are not "
                             "supported (only of compile-time int64 values, "
                             "such as shapes)";
  FailureOr<SmallVector<int64_t>> axes =
      resolveAxes(im, node, type.getRank(), 18);
  if (failed(axes))
    return failure();
  bool keepdims = im.intAttr(node, "keepdims", 1) != 0;
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!llvm::is_contained(*axes, d))
      shape.push_back(type.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  // Each input element multiplies the output element its kept
  // coordinates name.
  SmallVector<int64_t> products(count, 1);
  SmallVector<int64_t> coord(type.getRank(), 0);
  for (const APInt &element : value.getValues<APInt>()) {
    int64_t at = 0;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (!llvm::is_contained(*axes, d))
        at = at * type.getDimSize(d) + coord[d];
    products[at] *= element.getSExtValue();
    for (int64_t d = type.getRank() - 1; d >= 0; --d) {
      if (++coord[d] < type.getDimSize(d))
        break;
      coord[d] = 0;
    }
  }
  auto result = RankedTensorType::get(shape, type.getElementType());
  return im.setResult(node,
                      Value(nn::ConstantOp::create(
                          im.builder, im.loc(node),
                          DenseElementsAttr::get(result, ArrayRef(products)))));
}

template <typename OpTy>
LogicalResult importArgReduction(GraphImporter &im,
                                 const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  Builder &b = im.builder;
  return im.setResult(
      node, im.create<OpTy>(
                node, *x, b.getI64IntegerAttr(*axis),
                b.getBoolAttr(im.intAttr(node, "keepdims", 1) != 0),
                b.getBoolAttr(im.intAttr(node, "select_last_index", 0) != 0)));
}

/// TopK (opsets 1, 10, 11) by ranking: element i of a row ranks r_i = the
/// number of elements that come before it (larger, or equal with a lower
/// index; smaller for largest = 0), so output position r holds the element
/// with r_i = r. A comparison matrix per row: meant for the short rows
/// models sort (PyTorch's packed sequences sort the batch by length), not
/// for a vocabulary. The values are a selection (differentiable); the
/// output is always sorted, which `sorted = 0` allows.
LogicalResult importTopK(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  int64_t rank = type.getRank();
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t k;
  if (im.opset < 10) {
    k = im.intAttr(node, "k", -1);
  } else {
    FailureOr<SmallVector<int64_t>> ks = im.constantInts(node, 1, "K");
    if (failed(ks))
      return failure();
    if (ks->size() != 1)
      return im.error(node) << "K must hold one value";
    k = ks->front();
  }
  int64_t n = type.getDimSize(*axis);
  if (k < 0 || k > n)
    return im.error(node) << "K = " << k << " is outside [0, " << n << "]";
  constexpr int64_t kMaxRow = 4096;
  if (n > kMaxRow)
    return im.error(node) << "rows of " << n << " elements are not supported "
                          << "(at most " << kMaxRow << ": TopK ranks by "
                          << "comparing every pair)";
  bool largest = im.intAttr(node, "largest", 1) != 0;
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type element = type.getElementType();
  Type f32 = b.getF32Type();
  auto shaped = [](ArrayRef<int64_t> shape, Type t) {
    return RankedTensorType::get(shape, t);
  };
  // The axis last: [..., n].
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  Value rows =
      nn::TransposeOp::create(b, loc, *x, b.getDenseI64ArrayAttr(perm));
  SmallVector<int64_t> outer(
      cast<RankedTensorType>(rows.getType()).getShape().drop_back());
  auto withTail = [&](ArrayRef<int64_t> tail) {
    SmallVector<int64_t> shape(outer);
    llvm::append_range(shape, tail);
    return shape;
  };
  Value xi = nnb.reshape(rows, shaped(withTail({n, 1}), element));
  Value xj = nnb.reshape(rows, shaped(withTail({1, n}), element));
  // j comes before i: strictly better, or as good with j < i.
  SmallVector<bool> lower;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      lower.push_back(j < i);
  Value lowerMask = nn::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(shaped({n, n}, b.getI1Type()), ArrayRef(lower)));
  Value better = largest ? Value(nn::GreaterOp::create(b, loc, xj, xi))
                         : Value(nn::LessOp::create(b, loc, xj, xi));
  Value notWorse =
      nn::NotOp::create(b, loc,
                        largest ? Value(nn::LessOp::create(b, loc, xj, xi))
                                : Value(nn::GreaterOp::create(b, loc, xj, xi)));
  Value before = nn::WhereOp::create(b, loc, lowerMask, notWorse, better);
  Value ranks = nn::ReduceSumOp::create(
      b, loc, nn::CastOp::create(b, loc, shaped(withTail({n, n}), f32), before),
      SmallVector<int64_t>{static_cast<int64_t>(outer.size()) + 1},
      /*keepdims=*/true); // [..., n, 1]
  SmallVector<float> positions, iota;
  for (int64_t r = 0; r < k; ++r)
    positions.push_back(static_cast<float>(r));
  for (int64_t i = 0; i < n; ++i)
    iota.push_back(static_cast<float>(i));
  Value at = nn::EqualOp::create(
      b, loc, ranks,
      nn::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(shaped({k}, f32), ArrayRef(positions))));
  // [..., n, k]: element i goes to output position r.
  auto select = [&](Value v, Type t) {
    Value zero = nnb.scalar(t, 0.0);
    return nn::ReduceSumOp::create(
        b, loc, nn::WhereOp::create(b, loc, at, v, zero),
        SmallVector<int64_t>{static_cast<int64_t>(outer.size())},
        /*keepdims=*/false);
  };
  Value values = select(xi, element);
  Value indices = nn::CastOp::create(
      b, loc, shaped(withTail({k}), b.getI64Type()),
      select(nn::ConstantOp::create(
                 b, loc,
                 DenseElementsAttr::get(shaped({n, 1}, f32), ArrayRef(iota))),
             f32));
  // Back to the input's axis order.
  SmallVector<int64_t> inverse(rank);
  for (int64_t d = 0; d < rank; ++d)
    inverse[perm[d]] = d;
  auto back = [&](Value v) -> FailureOr<Value> {
    return im.finishOp(
        nn::TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(inverse)));
  };
  FailureOr<Value> v = back(values), idx = back(indices);
  if (failed(v) || failed(idx))
    return failure();
  im.setOutput(node, 0, *v);
  if (node.output_size() > 1)
    im.setOutput(node, 1, *idx);
  return success();
}

} // namespace

void onnx_import::addReductionHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"ReduceSum", 1, importReduction<nn::ReduceSumOp, 13>, {1}});
  list.push_back({"ReduceMean", 1, importReduction<nn::ReduceMeanOp, 18>, {1}});
  list.push_back({"ReduceMax", 1, importReduction<nn::ReduceMaxOp, 18>, {1}});
  list.push_back({"ReduceMin", 1, importReduction<nn::ReduceMinOp, 18>, {1}});
  list.push_back({"ReduceSumSquare",
                  1,
                  importReduction<nn::ReduceSumOp, 18, Around::Square>,
                  {1}});
  list.push_back(
      {"ReduceL2", 1, importReduction<nn::ReduceSumOp, 18, Around::L2>, {1}});
  list.push_back(
      {"ReduceL1", 1, importReduction<nn::ReduceSumOp, 18, Around::L1>, {1}});
  list.push_back({"ReduceLogSum",
                  1,
                  importReduction<nn::ReduceSumOp, 18, Around::Log>,
                  {1}});
  list.push_back({"ReduceLogSumExp",
                  1,
                  importReduction<nn::ReduceSumOp, 18, Around::LogExp>,
                  {1}});
  list.push_back({"ArgMax", 1, importArgReduction<nn::ArgMaxOp>});
  list.push_back({"ArgMin", 1, importArgReduction<nn::ArgMinOp>});
  list.push_back({"TopK", 1, importTopK, {1}});
  list.push_back({"ReduceProd", 1, importReduceProd, {1}});
}
