//===- NNFolders.cpp - constant folding of nn ops ---------------*- C++ -*-===//
//
// Folders for the ops that shape subgraphs are made of (integer arithmetic,
// comparisons, Gather, Concat, Slice, Cast, Where, ...). The importer folds
// every op whose operands are constants, so the Shape -> Gather -> Unsqueeze
// -> Concat -> Reshape chains PyTorch emits for dynamic axes become constant
// shapes once the batch dimension is fixed.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;
using namespace accrue::nn;

namespace {

/// Constant tensors larger than this are not folded.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 22;

using ScalarFn = llvm::function_ref<Attribute(ArrayRef<Attribute>)>;

/// Row-major strides of `shape` aligned to `rank` trailing dimensions, with
/// 0 where the dimension is broadcast.
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> result) {
  SmallVector<int64_t> strides(result.size(), 0);
  int64_t stride = 1;
  int64_t lead = result.size() - shape.size();
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    if (shape[d] != 1)
      strides[d + lead] = stride;
    stride *= shape[d];
  }
  return strides;
}

/// Applies `fn` elementwise with numpy broadcasting to constant operands.
Attribute foldElementwise(ArrayRef<Attribute> operands, Type resultType,
                          ScalarFn fn) {
  auto type = cast<RankedTensorType>(resultType);
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldedElements)
    return {};
  SmallVector<DenseElementsAttr> inputs;
  for (Attribute a : operands) {
    auto dense = dyn_cast_or_null<DenseElementsAttr>(a);
    if (!dense)
      return {};
    inputs.push_back(dense);
  }
  SmallVector<SmallVector<int64_t>> strides;
  SmallVector<SmallVector<Attribute>> values;
  for (DenseElementsAttr in : inputs) {
    strides.push_back(
        broadcastStrides(in.getType().getShape(), type.getShape()));
    values.emplace_back(in.getValues<Attribute>().begin(),
                        in.getValues<Attribute>().end());
  }
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<int64_t> index(shape.size(), 0);
  SmallVector<Attribute> result;
  result.reserve(type.getNumElements());
  SmallVector<Attribute> args(inputs.size());
  for (int64_t n = 0; n < type.getNumElements(); ++n) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      int64_t offset = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        offset += index[d] * strides[k][d];
      args[k] = values[k][offset];
    }
    Attribute r = fn(args);
    if (!r)
      return {};
    result.push_back(r);
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return DenseElementsAttr::get(type, result);
}

/// An arithmetic folder on integer and float scalars.
Attribute foldArith(ArrayRef<Attribute> operands, Type resultType,
                    llvm::function_ref<std::optional<APInt>(APInt, APInt)> ints,
                    llvm::function_ref<APFloat(APFloat, APFloat)> floats) {
  return foldElementwise(operands, resultType, [&](ArrayRef<Attribute> args) {
    if (auto a = dyn_cast<IntegerAttr>(args[0])) {
      std::optional<APInt> v =
          ints(a.getValue(), cast<IntegerAttr>(args[1]).getValue());
      return v ? Attribute(IntegerAttr::get(a.getType(), *v)) : Attribute();
    }
    auto a = cast<FloatAttr>(args[0]);
    return Attribute(FloatAttr::get(
        a.getType(),
        floats(a.getValue(), cast<FloatAttr>(args[1]).getValue())));
  });
}

/// A comparison folder; `cmp` gets -1, 0 or 1 (and nullopt for NaN).
Attribute foldCompare(ArrayRef<Attribute> operands, Type resultType,
                      llvm::function_ref<bool(std::optional<int>)> accept) {
  Builder b(resultType.getContext());
  return foldElementwise(operands, resultType, [&](ArrayRef<Attribute> args) {
    std::optional<int> order;
    if (auto a = dyn_cast<IntegerAttr>(args[0])) {
      APInt x = a.getValue(), y = cast<IntegerAttr>(args[1]).getValue();
      order = x.slt(y) ? -1 : (x == y ? 0 : 1);
    } else {
      APFloat x = cast<FloatAttr>(args[0]).getValue();
      APFloat y = cast<FloatAttr>(args[1]).getValue();
      APFloat::cmpResult c = x.compare(y);
      if (c != APFloat::cmpUnordered)
        order =
            c == APFloat::cmpLessThan ? -1 : (c == APFloat::cmpEqual ? 0 : 1);
    }
    return Attribute(b.getBoolAttr(accept(order)));
  });
}

/// The flat row-major values of a constant, or empty when not foldable.
SmallVector<Attribute> flatValues(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldedElements)
    return {};
  return SmallVector<Attribute>(dense.getValues<Attribute>().begin(),
                                dense.getValues<Attribute>().end());
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(adaptor.getOperands(), getType(),
                         [](ArrayRef<Attribute> args) -> Attribute {
                           if (auto i = dyn_cast<IntegerAttr>(args[0]))
                             return IntegerAttr::get(i.getType(),
                                                     -i.getValue());
                           auto f = cast<FloatAttr>(args[0]);
                           return FloatAttr::get(f.getType(), -f.getValue());
                         });
}

OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<Attribute> args) -> Attribute {
        if (auto i = dyn_cast<IntegerAttr>(args[0]))
          return IntegerAttr::get(i.getType(), i.getValue().abs());
        auto f = cast<FloatAttr>(args[0]);
        return FloatAttr::get(f.getType(), abs(f.getValue()));
      });
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](APInt a, APInt b) -> std::optional<APInt> { return a + b; },
      [](APFloat a, APFloat b) { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](APInt a, APInt b) -> std::optional<APInt> { return a - b; },
      [](APFloat a, APFloat b) { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](APInt a, APInt b) -> std::optional<APInt> { return a * b; },
      [](APFloat a, APFloat b) { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](APInt a, APInt b) -> std::optional<APInt> {
        if (b.isZero())
          return std::nullopt;
        return a.sdiv(b);
      },
      [](APFloat a, APFloat b) { return a / b; });
}

OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  bool fmod = getFmod();
  return foldArith(
      adaptor.getOperands(), getType(),
      [&](APInt a, APInt b) -> std::optional<APInt> {
        if (b.isZero())
          return APInt::getZero(a.getBitWidth());
        APInt r = a.srem(b);
        if (!fmod && !r.isZero() && r.isNegative() != b.isNegative())
          r += b;
        return r;
      },
      [&](APFloat a, APFloat b) {
        APFloat r = a;
        r.mod(b);
        if (!fmod && r.isZero())
          r.copySign(b);
        else if (!fmod && r.isNegative() != b.isNegative())
          r.add(b, APFloat::rmNearestTiesToEven);
        return r;
      });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](APInt, APInt) -> std::optional<APInt> { return std::nullopt; },
      [](APFloat a, APFloat b) {
        APFloat r(std::pow(a.convertToDouble(), b.convertToDouble()));
        bool lost;
        r.convert(a.getSemantics(), APFloat::rmNearestTiesToEven, &lost);
        return r;
      });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](APInt a, APInt b) -> std::optional<APInt> { return a.sgt(b) ? a : b; },
      [](APFloat a, APFloat b) { return llvm::maximum(a, b); });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldArith(
      adaptor.getOperands(), getType(),
      [](APInt a, APInt b) -> std::optional<APInt> { return a.slt(b) ? a : b; },
      [](APFloat a, APFloat b) { return llvm::minimum(a, b); });
}

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(),
                     [](std::optional<int> o) { return o && *o > 0; });
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(),
                     [](std::optional<int> o) { return o && *o < 0; });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(),
                     [](std::optional<int> o) { return o && *o == 0; });
}

OpFoldResult LessOrEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(),
                     [](std::optional<int> o) { return o && *o <= 0; });
}

OpFoldResult GreaterOrEqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(),
                     [](std::optional<int> o) { return o && *o >= 0; });
}

/// Folds a logical op of two constant i1 tensors with `logic`.
static OpFoldResult foldLogical(Operation *op, ArrayRef<Attribute> operands,
                                function_ref<bool(bool, bool)> logic) {
  Builder b(op->getContext());
  return foldElementwise(
      operands, op->getResult(0).getType(), [&](ArrayRef<Attribute> args) {
        return Attribute(
            b.getBoolAttr(logic(cast<IntegerAttr>(args[0]).getInt() != 0,
                                cast<IntegerAttr>(args[1]).getInt() != 0)));
      });
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldLogical(*this, adaptor.getOperands(),
                     [](bool a, bool b) { return a && b; });
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldLogical(*this, adaptor.getOperands(),
                     [](bool a, bool b) { return a || b; });
}

OpFoldResult XorOp::fold(FoldAdaptor adaptor) {
  return foldLogical(*this, adaptor.getOperands(),
                     [](bool a, bool b) { return a != b; });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  Builder b(getContext());
  return foldElementwise(
      adaptor.getOperands(), getType(), [&](ArrayRef<Attribute> args) {
        return Attribute(b.getBoolAttr(!cast<IntegerAttr>(args[0]).getInt()));
      });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(), [](ArrayRef<Attribute> args) {
        return cast<IntegerAttr>(args[0]).getInt() ? args[1] : args[2];
      });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  Type target = getElementTypeOrSelf(getType());
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [&](ArrayRef<Attribute> args) -> Attribute {
        // Through double: exact for the integer and float values shape
        // computations use.
        double v;
        if (auto i = dyn_cast<IntegerAttr>(args[0]))
          v = i.getType().isInteger(1) ? (i.getInt() ? 1.0 : 0.0)
                                       : static_cast<double>(i.getInt());
        else
          v = cast<FloatAttr>(args[0]).getValueAsDouble();
        if (target.isInteger(1))
          return IntegerAttr::get(target, v != 0.0 ? 1 : 0);
        if (isa<IntegerType>(target)) {
          if (!std::isfinite(v))
            return {};
          return IntegerAttr::get(target, static_cast<int64_t>(std::trunc(v)));
        }
        return FloatAttr::get(target, v);
      });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return foldElementwise(adaptor.getOperands(), getType(),
                         [](ArrayRef<Attribute> args) { return args[0]; });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs()[0];
  auto type = cast<RankedTensorType>(getType());
  if (type.getNumElements() > kMaxFoldedElements)
    return {};
  SmallVector<SmallVector<Attribute>> parts;
  for (Attribute a : adaptor.getInputs()) {
    if (!isa_and_nonnull<DenseElementsAttr>(a))
      return {};
    parts.push_back(flatValues(a));
  }
  int64_t axis = getAxis();
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= type.getDimSize(d);
  SmallVector<Attribute> result;
  for (int64_t o = 0; o < outer; ++o)
    for (auto [input, values] : llvm::zip(getInputs(), parts)) {
      int64_t chunk = cast<RankedTensorType>(input.getType()).getNumElements() /
                      std::max<int64_t>(outer, 1);
      if (static_cast<int64_t>(values.size()) != chunk * outer)
        return {};
      result.append(values.begin() + o * chunk,
                    values.begin() + (o + 1) * chunk);
    }
  return DenseElementsAttr::get(type, result);
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  SmallVector<Attribute> data = flatValues(adaptor.getData());
  auto indicesAttr = dyn_cast_or_null<DenseElementsAttr>(adaptor.getIndices());
  auto type = cast<RankedTensorType>(getType());
  if (data.empty() || !indicesAttr ||
      type.getNumElements() > kMaxFoldedElements)
    return {};
  auto dataType = cast<RankedTensorType>(getData().getType());
  int64_t axis = getAxis();
  int64_t outer = 1, inner = 1, extent = dataType.getDimSize(axis);
  for (int64_t d = 0; d < dataType.getRank(); ++d) {
    if (d < axis)
      outer *= dataType.getDimSize(d);
    else if (d > axis)
      inner *= dataType.getDimSize(d);
  }
  SmallVector<int64_t> indices;
  for (const APInt &i : indicesAttr.getValues<APInt>()) {
    int64_t v = i.getSExtValue();
    if (v < 0)
      v += extent;
    if (v < 0 || v >= extent)
      return {};
    indices.push_back(v);
  }
  SmallVector<Attribute> result;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : indices)
      for (int64_t n = 0; n < inner; ++n)
        result.push_back(data[(o * extent + i) * inner + n]);
  return DenseElementsAttr::get(type, result);
}

/// The flat input offset of each result element of a strided slice.
static SmallVector<int64_t> sliceOffsets(RankedTensorType input,
                                         RankedTensorType result,
                                         ArrayRef<int64_t> starts,
                                         ArrayRef<int64_t> steps) {
  SmallVector<int64_t> strides(input.getRank(), 1);
  for (int64_t d = input.getRank() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * input.getDimSize(d + 1);
  SmallVector<int64_t> offsets;
  SmallVector<int64_t> index(result.getRank(), 0);
  for (int64_t n = 0; n < result.getNumElements(); ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < result.getRank(); ++d)
      offset += (starts[d] + index[d] * steps[d]) * strides[d];
    offsets.push_back(offset);
    for (int64_t d = result.getRank() - 1; d >= 0; --d) {
      if (++index[d] < result.getDimSize(d))
        break;
      index[d] = 0;
    }
  }
  return offsets;
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getSteps(), [](int64_t s) { return s == 1; }))
    return getInput();
  SmallVector<Attribute> data = flatValues(adaptor.getInput());
  if (data.empty())
    return {};
  auto type = cast<RankedTensorType>(getType());
  SmallVector<Attribute> result;
  for (int64_t offset :
       sliceOffsets(cast<RankedTensorType>(getInput().getType()), type,
                    getStarts(), getSteps()))
    result.push_back(data[offset]);
  return DenseElementsAttr::get(type, result);
}

OpFoldResult TriluOp::fold(FoldAdaptor adaptor) {
  SmallVector<Attribute> data = flatValues(adaptor.getInput());
  auto type = cast<RankedTensorType>(getType());
  if (data.empty() || type.getRank() < 2)
    return {};
  int64_t rows = type.getDimSize(type.getRank() - 2);
  int64_t cols = type.getDimSize(type.getRank() - 1);
  Attribute zero = isa<FloatType>(type.getElementType())
                       ? Attribute(FloatAttr::get(type.getElementType(), 0.0))
                       : Attribute(IntegerAttr::get(type.getElementType(), 0));
  for (size_t n = 0; n < data.size(); ++n) {
    int64_t i = (n / cols) % rows, j = n % cols;
    int64_t k = static_cast<int64_t>(getK());
    bool keep = getUpper() ? j - i >= k : j - i <= k;
    if (!keep)
      data[n] = zero;
  }
  return DenseElementsAttr::get(type, data);
}
