//===- ResizeHandlers.cpp - import Resize -----------------------*- C++ -*-===//
//
// Resize (opsets 10-19) as Gathers with compile-time indices, one axis at a
// time.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include <cmath>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

/// Resize (opsets 10-19), modes nearest and linear: separable, one axis at a
/// time. Each resized axis becomes Gathers with compile-time indices (and,
/// for linear, a blend with compile-time weights), so the adjoint is the
/// Gathers' scatter-add. Source coordinates follow ONNX's
/// coordinate_transformation_mode and nearest_mode; sources outside the
/// input take its edge, as ONNX's reference does.
LogicalResult importResize(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank();
  // Scales and sizes: input 1 (opset 10) or inputs 2 and 3.
  int scalesIndex = im.opset < 11 ? 1 : 2, sizesIndex = 3;
  auto present = [&](int i) {
    return i < node.input_size() && !node.input(i).empty();
  };
  auto floats = [&](int i) -> FailureOr<SmallVector<double>> {
    FailureOr<DenseElementsAttr> attr =
        im.constantInput(node, i, i == scalesIndex ? "scales" : "sizes");
    if (failed(attr))
      return failure();
    SmallVector<double> v;
    if (attr->getElementType().isInteger()) {
      for (const APInt &a : attr->getValues<APInt>())
        v.push_back(static_cast<double>(a.getSExtValue()));
    } else {
      for (const APFloat &a : attr->getValues<APFloat>())
        v.push_back(a.convertToDouble());
    }
    return v;
  };
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (std::optional<SmallVector<int64_t>> given = im.intsAttr(node, "axes")) {
    FailureOr<SmallVector<int64_t>> normalized =
        im.normalizeAxes(node, *given, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
  }
  SmallVector<double> scales(rank, 1.0);
  SmallVector<int64_t> sizes(type.getShape());
  // An empty scales tensor means "use sizes".
  FailureOr<SmallVector<double>> givenScales =
      present(scalesIndex) ? floats(scalesIndex) : SmallVector<double>();
  if (failed(givenScales))
    return failure();
  if (!givenScales->empty()) {
    SmallVector<double> *v = &*givenScales;
    if (v->size() != axes.size())
      return im.error(node) << "scales has " << v->size() << " entries for "
                            << axes.size() << " axes";
    for (auto [axis, scale] : llvm::zip(axes, *v)) {
      if (!(scale > 0))
        return im.error(node) << "scales must be positive";
      scales[axis] = scale;
      sizes[axis] =
          static_cast<int64_t>(std::floor(type.getDimSize(axis) * scale));
    }
  } else if (present(sizesIndex)) {
    FailureOr<SmallVector<double>> v = floats(sizesIndex);
    if (failed(v))
      return failure();
    if (v->size() != axes.size())
      return im.error(node) << "sizes has " << v->size() << " entries for "
                            << axes.size() << " axes";
    if (im.stringAttr(node, "keep_aspect_ratio_policy", "stretch") != "stretch")
      return im.error(node) << "keep_aspect_ratio_policy other than stretch "
                               "is not supported";
    for (auto [axis, size] : llvm::zip(axes, *v)) {
      sizes[axis] = static_cast<int64_t>(size);
      scales[axis] = size / type.getDimSize(axis);
    }
  } else {
    return im.error(node) << "needs scales or sizes";
  }
  std::string mode = im.stringAttr(node, "mode", "nearest");
  std::string transform =
      im.stringAttr(node, "coordinate_transformation_mode",
                    im.opset < 11 ? "asymmetric" : "half_pixel");
  std::string nearest =
      im.stringAttr(node, "nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear")
    return im.error(node) << "mode '" << mode
                          << "' is not supported (nearest and linear are)";
  if (im.intAttr(node, "antialias", 0) != 0)
    return im.error(node) << "antialias is not supported";
  if (transform != "half_pixel" && transform != "pytorch_half_pixel" &&
      transform != "align_corners" && transform != "asymmetric" &&
      transform != "half_pixel_symmetric")
    return im.error(node) << "coordinate_transformation_mode '" << transform
                          << "' is not supported";
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" &&
      nearest != "floor" && nearest != "ceil")
    return im.error(node) << "unknown nearest_mode '" << nearest << "'";

  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type element = type.getElementType();
  Value y = *x;
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t in = type.getDimSize(axis), out = sizes[axis];
    if (out == in && scales[axis] == 1.0)
      continue;
    if (out <= 0)
      return im.error(node) << "gives an empty dimension " << axis;
    double s = scales[axis];
    // The resized length before rounding down (when scales are given), as
    // ONNX's formulas use it.
    double length = givenScales->empty() ? double(out) : in * s;
    SmallVector<int64_t> first, second;
    SmallVector<double> weights;
    for (int64_t i = 0; i < out; ++i) {
      double c;
      if (transform == "align_corners")
        c = length == 1 ? 0.0 : i * double(in - 1) / (length - 1);
      else if (transform == "asymmetric")
        c = i / s;
      else if (transform == "pytorch_half_pixel")
        c = length > 1 ? (i + 0.5) / s - 0.5 : 0.0;
      else if (transform == "half_pixel_symmetric")
        c = in / 2.0 * (1.0 - out / (s * in)) + (i + 0.5) / s - 0.5;
      else
        c = (i + 0.5) / s - 0.5;
      auto clampIndex = [&](double v) {
        return std::clamp<int64_t>(static_cast<int64_t>(v), 0, in - 1);
      };
      if (mode == "nearest") {
        double f = std::floor(c), r;
        if (nearest == "floor")
          r = f;
        else if (nearest == "ceil")
          r = std::ceil(c);
        else if (c - f == 0.5)
          r = nearest == "round_prefer_floor" ? f : f + 1;
        else
          r = std::round(c);
        first.push_back(clampIndex(r));
      } else {
        double f = std::floor(c);
        first.push_back(clampIndex(f));
        second.push_back(clampIndex(f + 1));
        weights.push_back(c - f);
      }
    }
    auto gather = [&](ArrayRef<int64_t> indices) {
      return nn::GatherOp::create(b, loc, y, indexVector(b, loc, indices),
                                  b.getI64IntegerAttr(axis))
          .getResult();
    };
    if (mode == "nearest") {
      y = gather(first);
      continue;
    }
    // Linear: lo + t (hi - lo), t broadcast along the axis.
    SmallVector<int64_t> weightShape(rank - axis, 1);
    weightShape[0] = out;
    SmallVector<float> w(weights.begin(), weights.end());
    Value t = nn::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get(weightShape, element),
                               ArrayRef<float>(w)));
    Value lo = gather(first), hi = gather(second);
    y = nnb.add(lo, nnb.mul(t, nnb.sub(hi, lo)));
  }
  return im.setResult(node, im.finishOp(nn::IdentityOp::create(b, loc, y)));
}

} // namespace

void onnx_import::addResizeHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Resize", 10, importResize, {1, 2, 3}});
}
