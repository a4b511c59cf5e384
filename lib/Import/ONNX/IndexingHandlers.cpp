//===- IndexingHandlers.cpp - import gathers, scatters, indices -*- C++ -*-===//
//
// Gather, GatherElements, GatherND, ScatterElements and ScatterND; the ops
// that make or follow indices (Range, Trilu, CumSum, OneHot).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

LogicalResult importGather(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> data = im.input(node, 0), indices = im.input(node, 1);
  if (failed(data) || failed(indices))
    return failure();
  int64_t rank = cast<RankedTensorType>(data->getType()).getRank();
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  return im.setResult(
      node, im.create<nn::GatherOp>(node, *data, *indices,
                                    im.builder.getI64IntegerAttr(*axis)));
}

LogicalResult importGatherElements(GraphImporter &im,
                                   const onnx::NodeProto &node) {
  FailureOr<Value> data = im.input(node, 0), indices = im.input(node, 1);
  if (failed(data) || failed(indices))
    return failure();
  auto dataType = cast<RankedTensorType>(data->getType());
  auto indexType = cast<RankedTensorType>(indices->getType());
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), dataType.getRank());
  if (failed(axis))
    return failure();
  if (indexType.getRank() != dataType.getRank())
    return im.error(node) << "indices must have the data's rank ("
                          << dataType.getRank() << ")";
  return im.setResult(
      node, im.create<nn::GatherElementsOp>(
                node,
                RankedTensorType::get(indexType.getShape(),
                                      dataType.getElementType()),
                *data, *indices, im.builder.getI64IntegerAttr(*axis)));
}

/// Whether a scatter's `reduction` adds (add) or replaces (none, the
/// default); fails with an error on the others.
FailureOr<bool> scatterAdds(GraphImporter &im, const onnx::NodeProto &node) {
  std::string reduction = im.stringAttr(node, "reduction", "none");
  if (reduction != "none" && reduction != "add")
    return im.error(node) << "reduction '" << reduction
                          << "' is not supported (none and add are)";
  return reduction == "add";
}

/// `data` with `updates` scattered into it, given `scatter`, the scatter-add
/// of a value shaped like the updates into zeros shaped like `data`: added
/// (reduction add), or taken where some index points (none; duplicate
/// indices add up there, where ONNX leaves the result unspecified).
Value applyScatter(nn::NNBuilder &nnb, Value data, Value updates, bool add,
                   llvm::function_ref<Value(Value)> scatter) {
  Value scattered = scatter(updates);
  if (add)
    return nnb.add(data, scattered);
  auto updateType = cast<RankedTensorType>(updates.getType());
  Value hits = scatter(nnb.splat(updateType, 1.0));
  Value hit = nn::GreaterOp::create(
      nnb.b, nnb.loc, hits, nnb.scalar(updateType.getElementType(), 0.0));
  return nn::WhereOp::create(nnb.b, nnb.loc, hit, scattered, data);
}

/// `v` with elements of type `t` (nn.cast, or `v` itself).
Value withElements(OpBuilder &b, Location loc, Value v, Type t) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getElementType() == t)
    return v;
  return nn::CastOp::create(b, loc, type.clone(t), v);
}

/// ScatterElements (reductions none and add) from a scatter-add of the
/// updates (nn.gather_elements_grad): `add` adds it to the data; `none`
/// takes it where some index points (duplicate indices add up there,
/// where ONNX leaves the result unspecified).
LogicalResult importScatterElements(GraphImporter &im,
                                    const onnx::NodeProto &node) {
  FailureOr<Value> data = im.input(node, 0), indices = im.input(node, 1),
                   updates = im.input(node, 2);
  if (failed(data) || failed(indices) || failed(updates))
    return failure();
  auto dataType = cast<RankedTensorType>(data->getType());
  auto indexType = cast<RankedTensorType>(indices->getType());
  auto updateType = cast<RankedTensorType>(updates->getType());
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), dataType.getRank());
  if (failed(axis))
    return failure();
  FailureOr<bool> add = scatterAdds(im, node);
  if (failed(add))
    return failure();
  if (indexType.getShape() != updateType.getShape() ||
      indexType.getRank() != dataType.getRank())
    return im.error(node) << "indices and updates must have the same shape, "
                             "of the data's rank";
  Type element = dataType.getElementType();
  bool integers = element.isInteger(64) || element.isInteger(32);
  if (!isa<FloatType>(element) && !integers)
    return im.error(node) << "ScatterElements of " << element
                          << " data is not supported (floats and 32/64-bit "
                             "integers are)";
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  // Integers (index arithmetic, such as the inverse of a permutation) go
  // through float64, exact below 2^53.
  auto as = [&](Value v, Type t) { return withElements(b, loc, v, t); };
  Type work = integers ? Type(b.getF64Type()) : element;
  auto workType = dataType.clone(work);
  auto scatter = [&](Value v) {
    return nn::GatherElementsGradOp::create(b, loc, workType, v, *indices,
                                            b.getI64IntegerAttr(*axis))
        .getResult();
  };
  Value result =
      applyScatter(nnb, as(*data, work), as(*updates, work), *add, scatter);
  return im.setResult(node,
                      im.create<nn::IdentityOp>(node, as(result, element)));
}

/// The index tuples `indices` ([..., k], int64) of a GatherND or ScatterND
/// as row numbers of the data viewed as [B R, W] (B the batches, the data's
/// first `batchDims` dimensions; R the positions its next k dimensions
/// hold; W the elements of the rest): per tuple, its batch times R plus
/// sum_j index_j * stride_j, negative entries counting from the end of
/// their dimension. A [tuples, 1] tensor; the caller checked the shapes
/// (static, the batch dimensions alike).
Value tupleRows(nn::NNBuilder &nnb, Value indices, RankedTensorType dataType,
                int64_t batchDims) {
  OpBuilder &b = nnb.b;
  Location loc = nnb.loc;
  auto indexType = cast<RankedTensorType>(indices.getType());
  int64_t k = indexType.getShape().back();
  int64_t tuples = 1, rows = 1, batches = 1;
  for (int64_t d : indexType.getShape().drop_back())
    tuples *= d;
  for (int64_t d = 0; d < batchDims + k; ++d)
    (d < batchDims ? batches : rows) *= dataType.getDimSize(d);
  Type i64 = b.getI64Type();
  auto ints = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, i64);
  };
  Value flat = nnb.reshape(indices, ints({tuples, k}));
  Value row;
  int64_t stride = rows;
  for (int64_t j = 0; j < k; ++j) {
    int64_t size = dataType.getDimSize(batchDims + j);
    stride /= size;
    Value entry =
        nnb.reshape(nn::SliceOp::create(b, loc, ints({tuples, 1}), flat,
                                        b.getDenseI64ArrayAttr({0, j}),
                                        b.getDenseI64ArrayAttr({1, 1})),
                    ints({tuples, 1}));
    Value zero = nnb.scalar(i64, 0);
    entry = nn::WhereOp::create(b, loc, nn::LessOp::create(b, loc, entry, zero),
                                nnb.add(entry, nnb.scalar(i64, size)), entry);
    Value term = nnb.mul(entry, nnb.scalar(i64, stride));
    row = row ? nnb.add(row, term) : term;
  }
  if (batches > 1) {
    // Tuple t is of batch t / (tuples / batches): a constant offset.
    SmallVector<int64_t> offsets;
    for (int64_t t = 0; t < tuples; ++t)
      offsets.push_back(t / (tuples / batches) * rows);
    Value offset = nn::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(ints({tuples, 1}), ArrayRef<int64_t>(offsets)));
    row = nnb.add(row, offset);
  }
  return row;
}

/// Checks a GatherND's or ScatterND's shapes: int64 index tuples of length
/// k in [1, rank - batchDims], static shapes, the first `batchDims`
/// dimensions of the data and the indices alike. Returns k.
FailureOr<int64_t> checkTuples(GraphImporter &im, const onnx::NodeProto &node,
                               RankedTensorType dataType,
                               RankedTensorType indexType, int64_t batchDims) {
  if (!indexType.getElementType().isInteger(64) || indexType.getRank() < 1)
    return im.error(node) << "indices must be int64 of rank >= 1";
  if (!dataType.hasStaticShape() || !indexType.hasStaticShape())
    return im.error(node) << "needs static shapes, got " << dataType << " and "
                          << indexType;
  if (dataType.getNumElements() == 0 || indexType.getNumElements() == 0)
    return im.error(node) << "empty data or indices are not supported, got "
                          << dataType << " and " << indexType;
  int64_t r = dataType.getRank();
  if (batchDims < 0 || batchDims >= std::min(r, indexType.getRank()))
    return im.error(node) << "batch_dims " << batchDims
                          << " is not below both ranks";
  if (dataType.getShape().take_front(batchDims) !=
      indexType.getShape().take_front(batchDims))
    return im.error(node) << "the first " << batchDims
                          << " dimensions of data and indices differ";
  int64_t k = indexType.getShape().back();
  if (k < 1 || k > r - batchDims)
    return im.error(node) << "index tuples of length " << k
                          << " for data of rank " << r << " and batch_dims "
                          << batchDims;
  return k;
}

/// GatherND: the data as rows (tupleRows), each tuple's row gathered (so the
/// adjoint is the row gather's scatter-add), reshaped to indices.shape[:-1]
/// + data.shape[batch_dims + k:].
LogicalResult importGatherND(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> data = im.input(node, 0), indices = im.input(node, 1);
  if (failed(data) || failed(indices))
    return failure();
  auto dataType = cast<RankedTensorType>(data->getType());
  auto indexType = cast<RankedTensorType>(indices->getType());
  int64_t batchDims = im.intAttr(node, "batch_dims", 0);
  FailureOr<int64_t> k = checkTuples(im, node, dataType, indexType, batchDims);
  if (failed(k))
    return failure();
  int64_t table = 1, width = 1, tuples = 1;
  for (int64_t d = 0; d < dataType.getRank(); ++d)
    (d < batchDims + *k ? table : width) *= dataType.getDimSize(d);
  for (int64_t d : indexType.getShape().drop_back())
    tuples *= d;
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Value rows = nnb.reshape(tupleRows(nnb, *indices, dataType, batchDims),
                           RankedTensorType::get({tuples}, b.getI64Type()));
  Value flat = nnb.reshape(
      *data, RankedTensorType::get({table, width}, dataType.getElementType()));
  Value gathered =
      nn::GatherOp::create(b, loc, flat, rows, b.getI64IntegerAttr(0));
  SmallVector<int64_t> shape(indexType.getShape().drop_back());
  llvm::append_range(shape, dataType.getShape().drop_front(batchDims + *k));
  return im.setResult(node, reshapeTo(im, node, gathered, shape));
}

/// ScatterND (reductions none and add): the data as [D, W] rows (D the
/// positions the index tuples address), each tuple as a row number
/// (tupleRows), then a row scatter as in ScatterElements; integer data
/// through float64, exact below 2^53 (a decoder's labels shifted right).
LogicalResult importScatterND(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> data = im.input(node, 0), indices = im.input(node, 1),
                   updates = im.input(node, 2);
  if (failed(data) || failed(indices) || failed(updates))
    return failure();
  auto dataType = cast<RankedTensorType>(data->getType());
  auto indexType = cast<RankedTensorType>(indices->getType());
  auto updateType = cast<RankedTensorType>(updates->getType());
  FailureOr<bool> add = scatterAdds(im, node);
  if (failed(add))
    return failure();
  Type element = dataType.getElementType();
  bool integers = element.isInteger(64) || element.isInteger(32);
  if (!isa<FloatType>(element) && !integers)
    return im.error(node) << "ScatterND of " << element
                          << " data is not supported (floats and 32/64-bit "
                             "integers are)";
  FailureOr<int64_t> k = checkTuples(im, node, dataType, indexType, 0);
  if (failed(k))
    return failure();
  // updates = indices.shape[:-1] + data.shape[k:].
  SmallVector<int64_t> expected(indexType.getShape().drop_back());
  llvm::append_range(expected, dataType.getShape().drop_front(*k));
  if (updateType.getShape() != ArrayRef<int64_t>(expected))
    return im.error(node) << "updates must have shape indices.shape[:-1] + "
                             "data.shape[k:]";
  int64_t rows = 1, width = 1, tuples = 1;
  for (int64_t d = 0; d < dataType.getRank(); ++d)
    (d < *k ? rows : width) *= dataType.getDimSize(d);
  for (int64_t d : indexType.getShape().drop_back())
    tuples *= d;
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Value rowIndex = nn::ExpandOp::create(
      b, loc, RankedTensorType::get({tuples, width}, b.getI64Type()),
      tupleRows(nnb, *indices, dataType, 0));
  auto as = [&](Value v, Type t) { return withElements(b, loc, v, t); };
  Type work = integers ? Type(b.getF64Type()) : element;
  auto tableType = RankedTensorType::get({rows, width}, work);
  auto updateRows = RankedTensorType::get({tuples, width}, work);
  auto scatter = [&](Value v) {
    return nn::GatherElementsGradOp::create(b, loc, tableType,
                                            nnb.reshape(v, updateRows),
                                            rowIndex, b.getI64IntegerAttr(0))
        .getResult();
  };
  Value result = applyScatter(nnb, nnb.reshape(as(*data, work), tableType),
                              as(*updates, work), *add, scatter);
  return im.setResult(
      node, reshapeTo(im, node, as(result, element), dataType.getShape()));
}

/// CumSum along a constant axis, as a product with a triangular matrix of
/// ones (inclusive or exclusive, forward or reverse); its adjoint is the
/// product with the transpose. Float inputs, axes of at most 4096.
LogicalResult importCumSum(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<SmallVector<int64_t>> axisValue = im.constantInts(node, 1, "axis");
  if (failed(x) || failed(axisValue))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  if (!isa<FloatType>(type.getElementType()))
    return im.error(node) << "CumSum of integers is not supported (floats "
                             "only)";
  if (axisValue->size() != 1)
    return im.error(node) << "axis must be a scalar";
  int64_t rank = type.getRank();
  FailureOr<int64_t> axis = im.normalizeAxis(node, (*axisValue)[0], rank);
  if (failed(axis))
    return failure();
  int64_t length = type.getDimSize(*axis);
  if (length > 4096)
    return im.error(node) << "CumSum over " << length
                          << " elements is not supported (at most 4096)";
  bool exclusive = im.intAttr(node, "exclusive", 0) != 0;
  bool reverse = im.intAttr(node, "reverse", 0) != 0;
  // out[j] = sum_i x[i] m[i][j].
  SmallVector<float> m(length * length, 0.0f);
  for (int64_t i = 0; i < length; ++i)
    for (int64_t j = 0; j < length; ++j) {
      bool take =
          reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      m[i * length + j] = take ? 1.0f : 0.0f;
    }
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  Type element = type.getElementType();
  auto mType = RankedTensorType::get({length, length}, b.getF32Type());
  Value matrix = nn::ConstantOp::create(
      b, loc, DenseElementsAttr::get(mType, ArrayRef<float>(m)));
  if (!element.isF32())
    matrix = nn::CastOp::create(
        b, loc, RankedTensorType::get({length, length}, element), matrix);
  // Move the axis last, multiply, move it back.
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[*axis], perm[rank - 1]);
  Value y = *x;
  if (*axis != rank - 1) {
    FailureOr<Value> t =
        im.create<nn::TransposeOp>(node, y, b.getDenseI64ArrayAttr(perm));
    if (failed(t))
      return failure();
    y = *t;
  }
  if (rank == 1) {
    FailureOr<Value> row = reshapeTo(im, node, y, {1, length});
    if (failed(row))
      return failure();
    FailureOr<Value> product = im.create<nn::MatMulOp>(node, *row, matrix);
    if (failed(product))
      return failure();
    return im.setResult(node, reshapeTo(im, node, *product, {length}));
  }
  FailureOr<Value> product = im.create<nn::MatMulOp>(node, y, matrix);
  if (failed(product))
    return failure();
  if (*axis == rank - 1)
    return im.setResult(node, product);
  return im.setResult(node, im.create<nn::TransposeOp>(
                                node, *product, b.getDenseI64ArrayAttr(perm)));
}

/// OneHot: where(indices[..., None] == range(depth), on, off), negative
/// indices counting from depth, the new axis at `axis`.
LogicalResult importOneHot(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> indices = im.input(node, 0), values = im.input(node, 2);
  FailureOr<double> depthValue = im.constantScalar(node, 1, "depth");
  if (failed(indices) || failed(values) || failed(depthValue))
    return failure();
  auto indexType = cast<RankedTensorType>(indices->getType());
  auto valuesType = cast<RankedTensorType>(values->getType());
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  Type i64 = b.getI64Type();
  // Indices of other types convert to int64 (floats truncate), as ONNX says.
  if (!indexType.getElementType().isInteger(64)) {
    indexType = RankedTensorType::get(indexType.getShape(), i64);
    indices = nn::CastOp::create(b, loc, indexType, *indices).getResult();
  }
  if (valuesType.getNumElements() != 2 || valuesType.getRank() != 1)
    return im.error(node) << "values must be [off_value, on_value]";
  int64_t depth = static_cast<int64_t>(*depthValue);
  if (depth <= 0)
    return im.error(node) << "depth must be positive";
  int64_t rank = indexType.getRank() + 1;
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", -1), rank);
  if (failed(axis))
    return failure();
  nn::NNBuilder nnb(b, loc);
  // Negative indices count from the end.
  Value zero = nnb.scalar(i64, 0), size = nnb.scalar(i64, depth);
  Value wrapped =
      nn::WhereOp::create(b, loc, nn::LessOp::create(b, loc, *indices, zero),
                          nnb.add(*indices, size), *indices);
  SmallVector<int64_t> expandedShape(indexType.getShape());
  expandedShape.insert(expandedShape.begin() + *axis, 1);
  Value expanded =
      nnb.reshape(wrapped, RankedTensorType::get(expandedShape, i64));
  SmallVector<int64_t> rangeShape(rank, 1);
  rangeShape[*axis] = depth;
  Value range = nnb.reshape(
      indexVector(b, loc, llvm::to_vector(llvm::seq<int64_t>(0, depth))),
      RankedTensorType::get(rangeShape, i64));
  Value hot = nn::EqualOp::create(b, loc, expanded, range);
  auto pick = [&](int64_t i) {
    return nn::GatherOp::create(
               b, loc, *values,
               nn::ConstantOp::create(
                   b, loc,
                   DenseElementsAttr::get(RankedTensorType::get({}, i64),
                                          ArrayRef<int64_t>{i})),
               b.getI64IntegerAttr(0))
        .getResult();
  };
  return im.setResult(node,
                      im.create<nn::WhereOp>(node, hot, pick(1), pick(0)));
}

LogicalResult importRange(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<double> first = im.constantScalar(node, 0, "start");
  if (failed(first))
    return failure();
  FailureOr<double> limit = im.constantScalar(node, 1, "limit");
  if (failed(limit))
    return failure();
  FailureOr<double> delta = im.constantScalar(node, 2, "delta");
  if (failed(delta))
    return failure();
  Type element =
      cast<ShapedType>(im.lookup(node.input(0)).getType()).getElementType();
  double s = *first, l = *limit, d = *delta;
  if (!std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
    return im.error(node) << "start, limit and delta must be finite";
  if (d == 0)
    return im.error(node) << "delta is zero";
  // Range is computed here, at compile time: its values become a constant.
  double count = std::max(0.0, std::ceil((l - s) / d));
  if (!(count <= kMaxFoldedElements))
    return im.error(node) << "gives " << count
                          << " values; ranges of more than "
                          << kMaxFoldedElements
                          << " values are not supported (Accrue computes "
                             "Range at compile time)";
  int64_t n = static_cast<int64_t>(count);
  auto type = RankedTensorType::get({n}, element);
  DenseElementsAttr values;
  auto fill = [&](auto zero) {
    SmallVector<decltype(zero)> data(n);
    for (int64_t i = 0; i < n; ++i)
      data[i] = static_cast<decltype(zero)>(s + i * d);
    values = DenseElementsAttr::get(type, llvm::ArrayRef(data));
  };
  if (element.isF32())
    fill(float());
  else if (element.isF64())
    fill(double());
  else if (element.isInteger(64))
    fill(int64_t());
  else if (element.isInteger(32))
    fill(int32_t());
  else if (element.isInteger(16))
    fill(int16_t());
  else if (element.isBF16() || element.isF16()) {
    // Before opset 27, each value start + i delta (in double) rounded to
    // nearest even once; ONNX's function body accumulates in the type, and
    // numpy's half arange steps by the rounded second value: far from 0
    // those differ. From opset 27 on, stash_type 1 (float, the only one)
    // says: start + i delta in f32, rounded to the type.
    const llvm::fltSemantics &semantics =
        cast<FloatType>(element).getFloatSemantics();
    if (im.opset >= 27 && im.intAttr(node, "stash_type", 1) != 1)
      return im.error(node) << "stash_type must be 1 (float), not "
                            << im.intAttr(node, "stash_type", 1);
    bool lost;
    SmallVector<APFloat> data;
    for (int64_t i = 0; i < n; ++i) {
      APFloat value(s + i * d);
      if (im.opset >= 27)
        value = APFloat(static_cast<float>(s) +
                        static_cast<float>(i) * static_cast<float>(d));
      value.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
      data.push_back(value);
    }
    values = DenseElementsAttr::get(type, data);
  } else
    return im.error(node) << "supports floats (f16, bf16, f32, f64) and 16-, "
                             "32- and 64-bit integers, not "
                          << element;
  im.setOutput(node, 0,
               nn::ConstantOp::create(im.builder, im.loc(node), values));
  return success();
}

LogicalResult importTrilu(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t k = 0;
  if (node.input_size() > 1 && !node.input(1).empty()) {
    FailureOr<SmallVector<int64_t>> given = im.constantInts(node, 1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return im.error(node) << "k must be a scalar";
    k = (*given)[0];
  }
  if (cast<RankedTensorType>(x->getType()).getRank() < 2)
    return im.error(node) << "needs a tensor of rank >= 2";
  return im.setResult(
      node, im.create<nn::TriluOp>(
                node, *x, im.builder.getBoolAttr(im.intAttr(node, "upper", 1)),
                im.builder.getI64IntegerAttr(k)));
}

} // namespace

void onnx_import::addIndexingHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Gather", 1, importGather});
  list.push_back({"GatherElements", 11, importGatherElements});
  list.push_back({"ScatterElements", 11, importScatterElements});
  list.push_back({"ScatterND", 11, importScatterND});
  list.push_back({"GatherND", 11, importGatherND});
  list.push_back({"Range", 11, importRange, {0, 1, 2}});
  list.push_back({"Trilu", 14, importTrilu, {1}});
  list.push_back({"CumSum", 11, importCumSum, {1}});
  list.push_back({"OneHot", 9, importOneHot, {1}});
}
