//===- ShapeHandlers.cpp - import shape and data-movement ops ---*- C++ -*-===//
//
// Reshapes, transposes, concatenation and slices, padding and tiling, and
// the ops that compute shapes. Gathers, scatters and the ops that produce
// indices are in IndexingHandlers.cpp.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

/// When `x` is a transpose of z and reshaping it to `shape` only drops
/// unit dimensions and merges runs of dimensions that are adjacent and in
/// order in z, the same value as a reshape of z followed by a transpose (or
/// no transpose). Recurrent ops produce sequence-major values this way from
/// batch-major ones, so the reshapes and transposes PyTorch's exports put
/// after them lead back to batch-major values.
std::optional<std::pair<SmallVector<int64_t>, SmallVector<int64_t>>>
reshapeBeforeTranspose(nn::TransposeOp t, ArrayRef<int64_t> shape) {
  auto zType = cast<RankedTensorType>(t.getInput().getType());
  ArrayRef<int64_t> q = t.getPerm();
  auto xType = cast<RankedTensorType>(t.getType());
  // Group the non-unit dimensions of x into the target's dimensions.
  SmallVector<SmallVector<int64_t>> groups;
  int64_t i = 0, rank = xType.getRank();
  for (int64_t target : shape) {
    if (target == 1)
      return std::nullopt;
    SmallVector<int64_t> group;
    int64_t product = 1;
    while (i < rank && product < target) {
      if (xType.getDimSize(i) != 1) {
        group.push_back(i);
        product *= xType.getDimSize(i);
      }
      ++i;
    }
    if (product != target || group.empty())
      return std::nullopt;
    groups.push_back(group);
  }
  for (; i < rank; ++i)
    if (xType.getDimSize(i) != 1)
      return std::nullopt;
  // Each group must be a run of z's dimensions, in order, apart from unit
  // dimensions.
  for (const auto &group : groups)
    for (size_t k = 1; k < group.size(); ++k) {
      int64_t from = q[group[k - 1]], to = q[group[k]];
      if (to <= from)
        return std::nullopt;
      for (int64_t d = from + 1; d < to; ++d)
        if (zType.getDimSize(d) != 1)
          return std::nullopt;
    }
  // z reshaped: the groups in z's order; then the permutation back.
  SmallVector<int64_t> order = llvm::to_vector(
      llvm::seq<int64_t>(0, static_cast<int64_t>(groups.size())));
  llvm::sort(order, [&](int64_t a, int64_t b) {
    return q[groups[a].front()] < q[groups[b].front()];
  });
  SmallVector<int64_t> zShape, perm(groups.size());
  for (auto [position, g] : llvm::enumerate(order)) {
    zShape.push_back(shape[g]);
    perm[g] = position;
  }
  return std::make_pair(zShape, perm);
}

} // namespace

FailureOr<Value> onnx_import::reshapeTo(GraphImporter &im,
                                        const onnx::NodeProto &node, Value x,
                                        ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(x.getType());
  if (auto t = x.getDefiningOp<nn::TransposeOp>()) {
    if (auto plan = reshapeBeforeTranspose(t, shape)) {
      FailureOr<Value> z = im.create<nn::ReshapeOp>(
          node, RankedTensorType::get(plan->first, type.getElementType()),
          t.getInput());
      if (failed(z) ||
          llvm::equal(plan->second, llvm::seq<int64_t>(0, plan->second.size())))
        return z;
      return im.create<nn::TransposeOp>(
          node, *z, im.builder.getDenseI64ArrayAttr(plan->second));
    }
  }
  return im.create<nn::ReshapeOp>(
      node, RankedTensorType::get(shape, type.getElementType()), x);
}

namespace {

LogicalResult importReshape(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<SmallVector<int64_t>> shape =
      im.constantInts(node, 1, "the target shape");
  if (failed(x) || failed(shape))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  bool allowZero = im.intAttr(node, "allowzero", 0) != 0;
  // Resolve 0 (copy the input's dimension) and -1 (infer).
  SmallVector<int64_t> dims;
  int64_t known = 1, inferred = -1;
  for (auto [i, d] : llvm::enumerate(*shape)) {
    if (d == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= type.getRank())
        return im.error(node)
               << "shape entry " << i << " is 0 but the input has rank "
               << type.getRank();
      d = type.getDimSize(i);
    }
    if (d == -1) {
      if (inferred >= 0)
        return im.error(node) << "shape has more than one -1";
      inferred = i;
      dims.push_back(1);
      continue;
    }
    if (d < 0)
      return im.error(node) << "shape entry " << d << " is invalid";
    if (llvm::MulOverflow(known, d, known))
      return im.error(node) << "the shape's element count overflows int64";
    dims.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || type.getNumElements() % known != 0)
      return im.error(node)
             << "cannot infer the -1 dimension: " << type.getNumElements()
             << " elements do not divide into " << known;
    dims[inferred] = type.getNumElements() / known;
  }
  return im.setResult(node, reshapeTo(im, node, *x, dims));
}

LogicalResult importFlatten(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  int64_t axis = im.intAttr(node, "axis", 1);
  if (axis < -rank || axis > rank)
    return im.error(node) << "axis " << axis << " is out of range for rank "
                          << rank;
  if (axis < 0)
    axis += rank;
  return im.setResult(node, im.create<nn::FlattenOp>(
                                node, *x, im.builder.getI64IntegerAttr(axis)));
}

LogicalResult importTranspose(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  SmallVector<int64_t> perm;
  if (auto attr = im.intsAttr(node, "perm"))
    perm = *attr;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  // A transpose of a transpose is one transpose, or none.
  Value input = *x;
  if (auto inner = input.getDefiningOp<nn::TransposeOp>()) {
    if (perm.size() == inner.getPerm().size() &&
        llvm::all_of(perm, [&](int64_t p) {
          return p >= 0 && p < static_cast<int64_t>(perm.size());
        })) {
      SmallVector<int64_t> composed;
      for (int64_t p : perm)
        composed.push_back(inner.getPerm()[p]);
      input = inner.getInput();
      perm = composed;
    }
  }
  if (llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    return im.setResult(node, im.create<nn::IdentityOp>(node, input));
  return im.setResult(
      node, im.create<nn::TransposeOp>(node, input,
                                       im.builder.getDenseI64ArrayAttr(perm)));
}

LogicalResult importConstant(GraphImporter &im, const onnx::NodeProto &node) {
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  DenseElementsAttr value;
  if (const onnx::AttributeProto *attr = im.attribute(node, "value")) {
    FailureOr<DenseElementsAttr> decoded =
        decodeTensor(attr->t(), b.getContext(), im.modelPath, loc);
    if (failed(decoded))
      return failure();
    value = *decoded;
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   attr->f());
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   static_cast<int64_t>(attr->i()));
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_floats")) {
    SmallVector<float> v(attr->floats().begin(), attr->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(v.size())}, b.getF32Type()),
        ArrayRef(v));
  } else if (const onnx::AttributeProto *attr =
                 im.attribute(node, "value_ints")) {
    SmallVector<int64_t> v(attr->ints().begin(), attr->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(v.size())}, b.getI64Type()),
        ArrayRef(v));
  } else {
    return im.error(node) << "needs a value, value_float(s) or value_int(s) "
                             "attribute (sparse and string constants are not "
                             "supported)";
  }
  im.setOutput(node, 0, nn::ConstantOp::create(b, loc, value));
  return success();
}

/// Axes from an attribute (before `inputSince`) or a constant input.
FailureOr<SmallVector<int64_t>>
axesOf(GraphImporter &im, const onnx::NodeProto &node, int64_t inputSince) {
  if (im.opset >= inputSince) {
    if (node.input_size() < 2 || node.input(1).empty())
      return SmallVector<int64_t>();
    return im.constantInts(node, 1, "the axes");
  }
  return im.intsAttr(node, "axes").value_or(SmallVector<int64_t>());
}

LogicalResult importSqueeze(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<SmallVector<int64_t>> axes = axesOf(im, node, 13);
  if (failed(x) || failed(axes))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  SmallVector<bool> drop(type.getRank(), false);
  if (axes->empty()) {
    for (int64_t d = 0; d < type.getRank(); ++d)
      drop[d] = type.getDimSize(d) == 1;
  }
  for (int64_t axis : *axes) {
    FailureOr<int64_t> a = im.normalizeAxis(node, axis, type.getRank());
    if (failed(a))
      return failure();
    if (type.getDimSize(*a) != 1)
      return im.error(node) << "cannot squeeze dimension " << *a << " of size "
                            << type.getDimSize(*a);
    drop[*a] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!drop[d])
      shape.push_back(type.getDimSize(d));
  return im.setResult(node, reshapeTo(im, node, *x, shape));
}

LogicalResult importUnsqueeze(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<SmallVector<int64_t>> axes = axesOf(im, node, 13);
  if (failed(x) || failed(axes))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  int64_t rank = type.getRank() + axes->size();
  SmallVector<bool> added(rank, false);
  for (int64_t axis : *axes) {
    FailureOr<int64_t> a = im.normalizeAxis(node, axis, rank);
    if (failed(a))
      return failure();
    if (added[*a])
      return im.error(node) << "axes repeat";
    added[*a] = true;
  }
  SmallVector<int64_t> shape;
  int64_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(added[d] ? 1 : type.getDimSize(next++));
  return im.setResult(node, reshapeTo(im, node, *x, shape));
}

LogicalResult importConcat(GraphImporter &im, const onnx::NodeProto &node) {
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    FailureOr<Value> v = im.input(node, i);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  if (inputs.empty())
    return im.error(node) << "needs at least one input";
  int64_t rank = cast<RankedTensorType>(inputs[0].getType()).getRank();
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  // Parts of no elements along the axis (the empty rest of a split, as
  // RotaryEmbedding's expansion makes when the whole head rotates) add
  // nothing; all must still agree in rank and in the other dimensions.
  auto first = cast<RankedTensorType>(inputs[0].getType());
  SmallVector<Value> parts;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    auto type = cast<RankedTensorType>(input.getType());
    for (int64_t d = 0; d < rank; ++d)
      if (type.getRank() != rank ||
          (d != *axis && type.getDimSize(d) != first.getDimSize(d)))
        return im.error(node)
               << "input " << i << " (" << type << ") does not match input 0 ("
               << first << ") but along axis " << *axis;
    if (type.getDimSize(*axis) != 0)
      parts.push_back(input);
  }
  if (parts.size() == 1)
    return im.setResult(node, im.create<nn::IdentityOp>(node, parts[0]));
  if (parts.empty())
    parts.push_back(inputs[0]);
  return im.setResult(
      node, im.create<nn::ConcatOp>(node, parts,
                                    im.builder.getI64IntegerAttr(*axis)));
}

/// A contiguous slice of `x` along `axis`.
FailureOr<Value> sliceAxis(GraphImporter &im, const onnx::NodeProto &node,
                           Value x, int64_t axis, int64_t start, int64_t size) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), steps(type.getRank(), 1);
  SmallVector<int64_t> shape(type.getShape());
  starts[axis] = start;
  shape[axis] = size;
  return im.create<nn::SliceOp>(
      node, RankedTensorType::get(shape, type.getElementType()), x,
      im.builder.getDenseI64ArrayAttr(starts),
      im.builder.getDenseI64ArrayAttr(steps));
}

/// `x` cut along `axis` into consecutive parts of `sizes` (Split's and
/// SplitToSequence's parts).
FailureOr<SmallVector<Value>> sliceParts(GraphImporter &im,
                                         const onnx::NodeProto &node, Value x,
                                         int64_t axis,
                                         ArrayRef<int64_t> sizes) {
  SmallVector<Value> parts;
  int64_t start = 0;
  for (int64_t size : sizes) {
    FailureOr<Value> part = sliceAxis(im, node, x, axis, start, size);
    if (failed(part))
      return failure();
    parts.push_back(*part);
    start += size;
  }
  return parts;
}

LogicalResult importSplit(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t extent = type.getDimSize(*axis);
  int64_t outputs = node.output_size();
  SmallVector<int64_t> sizes;
  if (im.opset >= 13 && node.input_size() > 1 && !node.input(1).empty()) {
    FailureOr<SmallVector<int64_t>> given =
        im.constantInts(node, 1, "the split sizes");
    if (failed(given))
      return failure();
    sizes = *given;
  } else if (auto attr = im.intsAttr(node, "split"); attr && im.opset < 13) {
    sizes = *attr;
  } else {
    // Equal parts; the last one smaller when it does not divide (opset 18).
    int64_t parts = im.intAttr(node, "num_outputs", outputs);
    int64_t chunk = (extent + parts - 1) / parts;
    for (int64_t p = 0, left = extent; p < parts; ++p, left -= chunk)
      sizes.push_back(std::min(chunk, left));
  }
  int64_t total = 0;
  for (int64_t size : sizes)
    total += size;
  if (static_cast<int64_t>(sizes.size()) != outputs || total != extent)
    return im.error(node) << "split sizes do not cover dimension " << *axis
                          << " (" << extent << ") in " << outputs << " parts";
  FailureOr<SmallVector<Value>> parts = sliceParts(im, node, *x, *axis, sizes);
  if (failed(parts))
    return failure();
  for (auto [i, part] : llvm::enumerate(*parts))
    im.setOutput(node, i, part);
  return success();
}

/// SplitToSequence: the parts Split would make (sizes given, chunks of a
/// given size with a smaller last one, or, without `split`, parts of one
/// element, the axis dropped when keepdims is 0), kept as a sequence that
/// SequenceAt reads (exports split a Linear's output into q, k, v so).
LogicalResult importSplitToSequence(GraphImporter &im,
                                    const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t extent = type.getDimSize(*axis);
  if (ShapedType::isDynamic(extent))
    return im.error(node) << "splits a dimension of unknown size";
  SmallVector<int64_t> sizes;
  bool keepdims = true;
  if (node.input_size() > 1 && !node.input(1).empty()) {
    FailureOr<DenseElementsAttr> split =
        im.constantInput(node, 1, "the split sizes");
    if (failed(split))
      return failure();
    SmallVector<int64_t> given;
    for (const APInt &v : split->getValues<APInt>())
      given.push_back(v.getSExtValue());
    if (split->getType().getRank() == 0) {
      // Chunks of one size, the last one smaller when it does not divide.
      if (given[0] < 1)
        return im.error(node)
               << "split size " << given[0] << " is not positive";
      for (int64_t left = extent; left > 0; left -= given[0])
        sizes.push_back(std::min(given[0], left));
    } else {
      sizes = given;
    }
  } else {
    sizes.assign(extent, 1);
    keepdims = im.intAttr(node, "keepdims", 1) != 0;
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      return im.error(node) << "split size " << size << " is negative";
    total += size;
  }
  if (total != extent)
    return im.error(node) << "split sizes sum to " << total
                          << ", not dimension " << *axis << "'s " << extent;
  FailureOr<SmallVector<Value>> parts = sliceParts(im, node, *x, *axis, sizes);
  if (failed(parts))
    return failure();
  if (!keepdims) {
    SmallVector<int64_t> squeezed(type.getShape());
    squeezed.erase(squeezed.begin() + *axis);
    for (Value &part : *parts) {
      FailureOr<Value> dropped = reshapeTo(im, node, part, squeezed);
      if (failed(dropped))
        return failure();
      part = *dropped;
    }
  }
  im.setSequence(node, 0, *parts);
  return success();
}

/// SequenceAt: the part of a SplitToSequence at a constant position
/// (negative counting from the end).
LogicalResult importSequenceAt(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<ArrayRef<Value>> parts = im.sequenceInput(node, 0);
  if (failed(parts))
    return failure();
  FailureOr<double> position = im.constantScalar(node, 1, "the position");
  if (failed(position))
    return failure();
  int64_t count = parts->size();
  int64_t at = static_cast<int64_t>(*position);
  if (at < -count || at >= count)
    return im.error(node) << "position " << at << " is outside the sequence's "
                          << count << " tensors";
  Value part = (*parts)[at < 0 ? at + count : at];
  return im.setResult(node, im.create<nn::IdentityOp>(node, part));
}

LogicalResult importSlice(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (im.opset < 10) {
    starts = im.intsAttr(node, "starts").value_or(SmallVector<int64_t>());
    ends = im.intsAttr(node, "ends").value_or(SmallVector<int64_t>());
    axes = im.intsAttr(node, "axes").value_or(SmallVector<int64_t>());
  } else {
    FailureOr<SmallVector<int64_t>> s = im.constantInts(node, 1, "starts");
    FailureOr<SmallVector<int64_t>> e = im.constantInts(node, 2, "ends");
    if (failed(s) || failed(e))
      return failure();
    starts = *s;
    ends = *e;
    for (int index : {3, 4}) {
      if (node.input_size() <= index || node.input(index).empty())
        continue;
      FailureOr<SmallVector<int64_t>> v =
          im.constantInts(node, index, index == 3 ? "axes" : "steps");
      if (failed(v))
        return failure();
      (index == 3 ? axes : steps) = *v;
    }
  }
  if (axes.empty())
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts.size()));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return im.error(node) << "starts, ends, axes and steps differ in length";

  SmallVector<int64_t> outStarts(rank, 0), outSteps(rank, 1);
  SmallVector<int64_t> shape(type.getShape());
  for (size_t i = 0; i < starts.size(); ++i) {
    FailureOr<int64_t> axis = im.normalizeAxis(node, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = type.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return im.error(node) << "step is zero";
    // Clamp as the ONNX spec says: [0, dim] for positive steps,
    // [-1, dim - 1] for negative ones.
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v += dim;
      return std::min(std::max(v, lo), hi);
    };
    int64_t start, end;
    if (step > 0) {
      start = clamp(starts[i], 0, dim);
      end = clamp(ends[i], 0, dim);
    } else {
      start = clamp(starts[i], -1, dim - 1);
      end = clamp(ends[i], -1, dim - 1);
    }
    int64_t size = step > 0
                       ? std::max<int64_t>(0, (end - start + step - 1) / step)
                       : std::max<int64_t>(0, (start - end - step - 1) / -step);
    outStarts[*axis] = size > 0 ? start : 0;
    outSteps[*axis] = step;
    shape[*axis] = size;
  }
  return im.setResult(
      node, im.create<nn::SliceOp>(
                node, RankedTensorType::get(shape, type.getElementType()), *x,
                im.builder.getDenseI64ArrayAttr(outStarts),
                im.builder.getDenseI64ArrayAttr(outSteps)));
}

LogicalResult importExpand(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<SmallVector<int64_t>> shape =
      im.constantInts(node, 1, "the target shape");
  if (failed(x) || failed(shape))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  FailureOr<SmallVector<int64_t>> result =
      nn::broadcastShapes(type.getShape(), *shape);
  if (failed(result))
    return im.error(node) << "cannot broadcast " << type << " to the shape ["
                          << llvm::make_range(shape->begin(), shape->end())
                          << "]";
  return im.setResult(
      node,
      im.create<nn::ExpandOp>(
          node, RankedTensorType::get(*result, type.getElementType()), *x));
}

/// A constant i64 tensor.
Value constantInts(GraphImporter &im, const onnx::NodeProto &node,
                   ArrayRef<int64_t> values, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, im.builder.getI64Type());
  return nn::ConstantOp::create(im.builder, im.loc(node),
                                DenseElementsAttr::get(type, values));
}

/// Tile: x reshaped to [1, d0, 1, d1, ...], expanded to [r0, d0, r1, d1,
/// ...] and reshaped to [r0 d0, r1 d1, ...]; the adjoint sums the copies.
LogicalResult importTile(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  FailureOr<SmallVector<int64_t>> repeats = im.constantInts(node, 1, "repeats");
  if (failed(x) || failed(repeats))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  if (static_cast<int64_t>(repeats->size()) != type.getRank())
    return im.error(node) << "repeats has " << repeats->size()
                          << " entries for a rank-" << type.getRank()
                          << " input";
  SmallVector<int64_t> split, expanded, result;
  for (auto [r, d] : llvm::zip(*repeats, type.getShape())) {
    if (r < 0)
      return im.error(node) << "repeats must not be negative";
    split.append({1, d});
    expanded.append({r, d});
    result.push_back(r * d);
  }
  Type element = type.getElementType();
  FailureOr<Value> y = reshapeTo(im, node, *x, split);
  if (failed(y))
    return failure();
  y = im.create<nn::ExpandOp>(node, RankedTensorType::get(expanded, element),
                              *y);
  if (failed(y))
    return failure();
  return im.setResult(node, reshapeTo(im, node, *y, result));
}

/// Pad (opsets 2-19): modes constant, reflect, edge and wrap. Per padded
/// axis, constant padding concatenates splats of the value; the other modes
/// gather the padded axis with compile-time indices. Negative pads crop.
LogicalResult importPad(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto type = cast<RankedTensorType>(x->getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> pads;
  if (im.opset < 11) {
    pads = im.intsAttr(node, "pads").value_or(SmallVector<int64_t>());
  } else {
    FailureOr<SmallVector<int64_t>> given = im.constantInts(node, 1, "pads");
    if (failed(given))
      return failure();
    pads = *given;
  }
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (im.opset >= 18 && node.input_size() > 3 && !node.input(3).empty()) {
    FailureOr<SmallVector<int64_t>> given = im.constantInts(node, 3, "axes");
    if (failed(given))
      return failure();
    FailureOr<SmallVector<int64_t>> normalized =
        im.normalizeAxes(node, *given, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
  }
  int64_t n = axes.size();
  if (static_cast<int64_t>(pads.size()) != 2 * n)
    return im.error(node) << "pads has " << pads.size() << " entries for " << n
                          << " axes";
  std::string mode = im.stringAttr(node, "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return im.error(node) << "unknown mode '" << mode << "'";
  double value = im.opset < 11 ? im.floatAttr(node, "value", 0.0f) : 0.0;
  if (im.opset >= 11 && node.input_size() > 2 && !node.input(2).empty()) {
    FailureOr<double> given = im.constantScalar(node, 2, "the constant value");
    if (failed(given))
      return failure();
    value = *given;
  }
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Value y = *x;
  for (int64_t i = 0; i < n; ++i) {
    int64_t axis = axes[i], before = pads[i], after = pads[n + i];
    if (before == 0 && after == 0)
      continue;
    auto yType = cast<RankedTensorType>(y.getType());
    int64_t length = yType.getDimSize(axis);
    // Crop first (negative pads), then pad what is left.
    int64_t cropBefore = std::max<int64_t>(0, -before);
    int64_t cropAfter = std::max<int64_t>(0, -after);
    if (cropBefore + cropAfter >= length)
      return im.error(node) << "pads crop all of axis " << axis;
    if (cropBefore || cropAfter) {
      FailureOr<Value> cropped = sliceAxis(im, node, y, axis, cropBefore,
                                           length - cropBefore - cropAfter);
      if (failed(cropped))
        return failure();
      y = *cropped;
      length -= cropBefore + cropAfter;
      yType = cast<RankedTensorType>(y.getType());
    }
    before = std::max<int64_t>(0, before);
    after = std::max<int64_t>(0, after);
    if (before == 0 && after == 0)
      continue;
    if (mode == "constant") {
      y = padAxis(b, loc, y, axis, before, after, value);
      continue;
    }
    if (mode == "reflect" && (before >= length || after >= length))
      return im.error(node)
             << "reflect pads must be smaller than the axis (" << length << ")";
    SmallVector<int64_t> indices;
    for (int64_t j = -before; j < length + after; ++j) {
      int64_t k = j;
      if (mode == "edge")
        k = std::clamp<int64_t>(j, 0, length - 1);
      else if (mode == "wrap")
        k = ((j % length) + length) % length;
      else if (j < 0)
        k = -j;
      else if (j >= length)
        k = 2 * (length - 1) - j;
      indices.push_back(k);
    }
    FailureOr<Value> gathered = im.create<nn::GatherOp>(
        node, y, indexVector(b, loc, indices), b.getI64IntegerAttr(axis));
    if (failed(gathered))
      return failure();
    y = *gathered;
  }
  if (y == *x)
    return im.setResult(node, im.create<nn::IdentityOp>(node, y));
  im.setOutput(node, 0, y);
  return success();
}

LogicalResult importShape(GraphImporter &im, const onnx::NodeProto &node) {
  // Shapes are static: Shape is a constant.
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x->getType()).getShape();
  int64_t rank = shape.size();
  auto bound = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t start = bound(im.intAttr(node, "start", 0));
  int64_t end = bound(im.intAttr(node, "end", rank));
  SmallVector<int64_t> dims(shape.begin() + start,
                            shape.begin() + std::max(start, end));
  im.setOutput(
      node, 0,
      constantInts(im, node, dims, {static_cast<int64_t>(dims.size())}));
  return success();
}

LogicalResult importSize(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t n = cast<RankedTensorType>(x->getType()).getNumElements();
  im.setOutput(node, 0, constantInts(im, node, {n}, {}));
  return success();
}

LogicalResult importConstantOfShape(GraphImporter &im,
                                    const onnx::NodeProto &node) {
  FailureOr<SmallVector<int64_t>> shape = im.constantInts(node, 0, "the shape");
  if (failed(shape))
    return failure();
  if (!withinElementLimit(*shape))
    return im.error(node) << "the shape has a negative extent or more than "
                             "2^40 elements";
  Attribute value = im.builder.getF32FloatAttr(0.0f);
  if (const onnx::AttributeProto *attr = im.attribute(node, "value")) {
    FailureOr<DenseElementsAttr> v = decodeTensor(
        attr->t(), im.builder.getContext(), im.modelPath, im.loc(node));
    if (failed(v))
      return failure();
    if (v->getNumElements() != 1)
      return im.error(node) << "value must hold one element";
    value = *v->getValues<Attribute>().begin();
  }
  auto type = RankedTensorType::get(*shape, cast<TypedAttr>(value).getType());
  im.setOutput(node, 0,
               nn::ConstantOp::create(im.builder, im.loc(node),
                                      SplatElementsAttr::get(type, value)));
  return success();
}

} // namespace

void onnx_import::addShapeHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Reshape", 5, importReshape, {1}});
  list.push_back({"Flatten", 1, importFlatten});
  list.push_back({"Transpose", 1, importTranspose});
  list.push_back({"Constant", 1, importConstant});
  list.push_back({"Squeeze", 1, importSqueeze, {1}});
  list.push_back({"Unsqueeze", 1, importUnsqueeze, {1}});
  list.push_back({"Concat", 4, importConcat});
  list.push_back({"Split", 2, importSplit, {1}});
  list.push_back({"SplitToSequence", 11, importSplitToSequence, {1}});
  list.push_back({"SequenceAt", 11, importSequenceAt, {1}});
  list.push_back({"Slice", 1, importSlice, {1, 2, 3, 4}});
  list.push_back({"Expand", 8, importExpand, {1}});
  list.push_back({"Shape", 1, importShape, {0}});
  list.push_back({"Size", 1, importSize, {0}});
  list.push_back({"ConstantOfShape", 9, importConstantOfShape, {0}});
  list.push_back({"Tile", 6, importTile, {1}});
  list.push_back({"Pad", 2, importPad, {1, 2, 3}});
}
