//===- WindowHandlers.cpp - import convolutions and pooling -----*- C++ -*-===//
//
// Ops over spatial windows of NCHW tensors: Conv and ConvTranspose (1-D as
// 2-D of height 1, 3-D as 2-D ones over depth slices), MaxPool (with its
// Indices output), AveragePool and the global poolings. Resize is in
// ResizeHandlers.cpp.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

//===----------------------------------------------------------------------===//
// Windows
//===----------------------------------------------------------------------===//

/// Resolved 2-D window attributes; pads are (top, left, bottom, right).
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

/// Reads kernel/strides/dilations/pads/auto_pad (and ceil_mode for
/// pooling) for a 2-D input [N, C, H, W] or a 3-D one [N, C, D, H, W]
/// (three entries each, pads (front, top, left, back, bottom, right)). A
/// 1-D input [N, C, L] is treated as [N, C, 1, L] (see toWindowInput).
FailureOr<Window> resolveWindow(GraphImporter &im, const onnx::NodeProto &node,
                                RankedTensorType input,
                                ArrayRef<int64_t> kernel, bool pooling) {
  bool oneD = input.getRank() == 3;
  if (input.getRank() != 4 && input.getRank() != 5 && !oneD)
    return im.error(node) << "windows over " << input.getRank() - 2
                          << " dimensions are not supported (1-D, 2-D and "
                             "3-D only)";
  int64_t n = input.getRank() == 5 ? 3 : 2;
  auto attr = [&](StringRef name, SmallVector<int64_t> fallback) {
    SmallVector<int64_t> v = im.intsAttr(node, name).value_or(fallback);
    if (!oneD || v.size() != fallback.size() / 2)
      return v;
    // 1-D: prepend the unit height's entries.
    if (name == "pads")
      return SmallVector<int64_t>{0, v[0], 0, v[1]};
    return SmallVector<int64_t>{fallback[0], v[0]};
  };
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  if (oneD && w.kernel.size() == 1)
    w.kernel.insert(w.kernel.begin(), 1);
  w.strides = attr("strides", SmallVector<int64_t>(n, 1));
  w.dilations = attr("dilations", SmallVector<int64_t>(n, 1));
  w.pads = attr("pads", SmallVector<int64_t>(2 * n, 0));
  if (oneD)
    input = RankedTensorType::get(
        {input.getDimSize(0), input.getDimSize(1), 1, input.getDimSize(2)},
        input.getElementType());
  if (static_cast<int64_t>(w.kernel.size()) != n ||
      static_cast<int64_t>(w.strides.size()) != n ||
      static_cast<int64_t>(w.dilations.size()) != n ||
      static_cast<int64_t>(w.pads.size()) != 2 * n)
    return im.error(node) << "needs " << n << "-D kernel_shape, strides, "
                          << "dilations and " << 2 * n << " pads";
  std::string autoPad = im.stringAttr(node, "auto_pad", "NOTSET");
  for (int64_t d = 0; d < n; ++d) {
    int64_t size = input.getDimSize(2 + d);
    int64_t extent = w.dilations[d] * (w.kernel[d] - 1) + 1;
    if (autoPad == "VALID") {
      w.pads[d] = w.pads[n + d] = 0;
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = (size + w.strides[d] - 1) / w.strides[d];
      int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[d] + extent - size);
      int64_t small = total / 2, large = total - small;
      w.pads[d] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[n + d] = autoPad == "SAME_UPPER" ? large : small;
    } else if (autoPad != "NOTSET") {
      return im.error(node) << "unknown auto_pad '" << autoPad << "'";
    }
    if (pooling && im.intAttr(node, "ceil_mode", 0)) {
      // Rounding the output size up: windows may end in extra padding, but
      // the last one must start inside the input or its leading padding.
      int64_t padded = size + w.pads[d] + w.pads[n + d];
      int64_t out = (padded - extent + w.strides[d] - 1) / w.strides[d] + 1;
      if ((out - 1) * w.strides[d] >= size + w.pads[d])
        --out;
      int64_t extra = (out - 1) * w.strides[d] + extent - padded;
      if (extra > 0)
        w.pads[n + d] += extra;
    }
  }
  return w;
}

/// The height and width part of a 3-D window.
Window planeOf(const Window &w) {
  return {{w.kernel[1], w.kernel[2]},
          {w.strides[1], w.strides[2]},
          {w.pads[1], w.pads[2], w.pads[4], w.pads[5]},
          {w.dilations[1], w.dilations[2]}};
}

/// A 3-D window op as 2-D ones: x [N, C, D, H, W] padded along D with
/// `padValue` (pads from `w`), then for each kernel depth k the strided
/// depth slice [N, C, OD, H, W] as [N OD, C, H, W] for `plane`, which
/// returns [N OD, F, OH, OW]; the results combine with `combine` and come
/// back as [N, F, OD, OH, OW]. Every step keeps each sample's rows
/// together, so micro-batching follows it.
FailureOr<Value> byDepthSlices(
    GraphImporter &im, const onnx::NodeProto &node, Value x, const Window &w,
    double padValue,
    llvm::function_ref<FailureOr<Value>(Value slice, int64_t k)> plane,
    llvm::function_ref<Value(Value, Value)> combine) {
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  RankedTensorType type = typeOf(x);
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  int64_t h = type.getDimSize(3), wd = type.getDimSize(4);
  Type element = type.getElementType();
  x = padAxis(b, loc, x, 2, w.pads[0], w.pads[3], padValue);
  int64_t depth = typeOf(x).getDimSize(2);
  int64_t extent = w.dilations[0] * (w.kernel[0] - 1) + 1;
  if (depth < extent)
    return im.error(node) << "the kernel is deeper than the padded input";
  int64_t outDepth = (depth - extent) / w.strides[0] + 1;
  Value sum;
  for (int64_t k = 0; k < w.kernel[0]; ++k) {
    Value slice = nn::SliceOp::create(
        b, loc,
        RankedTensorType::get({batch, channels, outDepth, h, wd}, element), x,
        b.getDenseI64ArrayAttr({0, 0, k * w.dilations[0], 0, 0}),
        b.getDenseI64ArrayAttr({1, 1, w.strides[0], 1, 1}));
    slice = nn::TransposeOp::create(b, loc, slice,
                                    b.getDenseI64ArrayAttr({0, 2, 1, 3, 4}));
    slice = nnb.reshape(
        slice,
        RankedTensorType::get({batch * outDepth, channels, h, wd}, element));
    FailureOr<Value> part = plane(slice, k);
    if (failed(part))
      return failure();
    sum = sum ? combine(sum, *part) : *part;
  }
  RankedTensorType planeType = typeOf(sum);
  Value y = nnb.reshape(
      sum,
      RankedTensorType::get({batch, outDepth, planeType.getDimSize(1),
                             planeType.getDimSize(2), planeType.getDimSize(3)},
                            element));
  return Value(nn::TransposeOp::create(
      b, loc, y, b.getDenseI64ArrayAttr({0, 2, 1, 3, 4})));
}

/// A 1-D [N, C, L] value as [N, C, 1, L]; 2-D values as they are.
FailureOr<Value> toWindowInput(GraphImporter &im, const onnx::NodeProto &node,
                               Value x) {
  RankedTensorType type = typeOf(x);
  if (type.getRank() != 3)
    return x;
  return im.create<nn::ReshapeOp>(
      node,
      RankedTensorType::get(
          {type.getDimSize(0), type.getDimSize(1), 1, type.getDimSize(2)},
          type.getElementType()),
      x);
}

/// Undoes toWindowInput on a result.
FailureOr<Value> fromWindowResult(GraphImporter &im,
                                  const onnx::NodeProto &node, Value original,
                                  FailureOr<Value> result) {
  if (failed(result) || typeOf(original).getRank() != 3)
    return result;
  RankedTensorType type = typeOf(*result);
  return im.create<nn::ReshapeOp>(
      node,
      RankedTensorType::get(
          {type.getDimSize(0), type.getDimSize(1), type.getDimSize(3)},
          type.getElementType()),
      *result);
}

LogicalResult importConv(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0), weight = im.input(node, 1);
  FailureOr<Value> bias = im.optionalInput(node, 2);
  if (failed(x) || failed(weight) || failed(bias))
    return failure();
  RankedTensorType w = typeOf(*weight);
  if (w.getRank() != typeOf(*x).getRank())
    return im.error(node) << "weight rank differs from the input's";
  if (w.getRank() < 3)
    return im.error(node) << "needs an input and weight of rank >= 3 (N, C "
                             "and spatial dimensions)";
  SmallVector<int64_t> kernel(w.getShape().drop_front(2));
  FailureOr<Window> win = resolveWindow(im, node, typeOf(*x), kernel, false);
  if (succeeded(win) && w.getRank() == 5) {
    // 3-D: a 2-D convolution per kernel depth over depth slices, summed.
    OpBuilder &b = im.builder;
    nn::NNBuilder nnb(b, im.loc(node));
    Window plane = planeOf(*win);
    int64_t group = im.intAttr(node, "group", 1);
    FailureOr<Value> y = byDepthSlices(
        im, node, *x, *win, 0.0,
        [&](Value slice, int64_t k) -> FailureOr<Value> {
          Value wk = nnb.reshape(
              nn::SliceOp::create(
                  b, im.loc(node),
                  RankedTensorType::get({w.getDimSize(0), w.getDimSize(1), 1,
                                         w.getDimSize(3), w.getDimSize(4)},
                                        w.getElementType()),
                  *weight, b.getDenseI64ArrayAttr({0, 0, k, 0, 0}),
                  b.getDenseI64ArrayAttr({1, 1, 1, 1, 1})),
              RankedTensorType::get({w.getDimSize(0), w.getDimSize(1),
                                     w.getDimSize(3), w.getDimSize(4)},
                                    w.getElementType()));
          return im.create<nn::ConvOp>(node, slice, wk, Value(),
                                       b.getDenseI64ArrayAttr(plane.strides),
                                       b.getDenseI64ArrayAttr(plane.pads),
                                       b.getDenseI64ArrayAttr(plane.dilations),
                                       b.getI64IntegerAttr(group));
        },
        [&](Value a, Value c) { return nnb.add(a, c); });
    if (failed(y))
      return failure();
    if (*bias) {
      auto biasType =
          RankedTensorType::get({w.getDimSize(0), 1, 1, 1}, w.getElementType());
      y = nnb.add(*y, nnb.reshape(*bias, biasType));
    }
    return im.setResult(node, im.create<nn::IdentityOp>(node, *y));
  }
  FailureOr<Value> input = toWindowInput(im, node, *x);
  FailureOr<Value> filter = toWindowInput(im, node, *weight);
  if (failed(win) || failed(input) || failed(filter))
    return failure();
  Builder &b = im.builder;
  return im.setResult(
      node,
      fromWindowResult(im, node, *x,
                       im.create<nn::ConvOp>(
                           node, *input, *filter, *bias,
                           b.getDenseI64ArrayAttr(win->strides),
                           b.getDenseI64ArrayAttr(win->pads),
                           b.getDenseI64ArrayAttr(win->dilations),
                           b.getI64IntegerAttr(im.intAttr(node, "group", 1)))));
}

/// ConvTranspose (1-D and 2-D): nn.conv_grad_input applied to x, the
/// adjoint of the convolution whose weight is ConvTranspose's. Output sizes
/// and pads follow the ONNX definition: out = stride (in - 1) +
/// output_padding + dilation (kernel - 1) + 1 - pad_begin - pad_end, or
/// pads derived from output_shape / auto_pad.
/// A 3-D ConvTranspose as 2-D ones: for each kernel depth kd, the 2-D
/// transposed convolution of every input depth slice at once ([N D, C, H,
/// W]) with the weight's slice kd, spread along depth by the stride (zeros
/// between), shifted by kd times the dilation and summed; then cropped by
/// the depth pads (and padded with zeros where the output is longer).
/// `pads` are (front, top, left, back, bottom, right) after auto_pad and
/// output_shape, non-negative; `outSizes` the output's spatial sizes.
FailureOr<Value>
convTranspose3d(GraphImporter &im, const onnx::NodeProto &node, Value x,
                Value weight, int64_t group, ArrayRef<int64_t> strides,
                ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                ArrayRef<int64_t> outputPadding, ArrayRef<int64_t> outSizes) {
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  RankedTensorType xType = typeOf(x), w = typeOf(weight);
  Type element = xType.getElementType();
  int64_t n = xType.getDimSize(0), cin = xType.getDimSize(1),
          depth = xType.getDimSize(2), h = xType.getDimSize(3),
          wd = xType.getDimSize(4);
  int64_t cout = w.getDimSize(1) * group, kernelDepth = w.getDimSize(2);
  int64_t oh = outSizes[1], ow = outSizes[2], s = strides[0];
  int64_t spread = s * (depth - 1) + 1;
  int64_t full = spread + outputPadding[0] + dilations[0] * (kernelDepth - 1);
  // Every depth slice as a sample of its own, samples' rows together.
  Value planes =
      nnb.reshape(nn::TransposeOp::create(
                      b, loc, x, b.getDenseI64ArrayAttr({0, 2, 1, 3, 4})),
                  RankedTensorType::get({n * depth, cin, h, wd}, element));
  Value sum;
  for (int64_t kd = 0; kd < kernelDepth; ++kd) {
    Value filter = nn::SliceOp::create(
        b, loc,
        RankedTensorType::get({w.getDimSize(0), w.getDimSize(1), 1,
                               w.getDimSize(3), w.getDimSize(4)},
                              element),
        weight, b.getDenseI64ArrayAttr({0, 0, kd, 0, 0}),
        b.getDenseI64ArrayAttr({1, 1, 1, 1, 1}));
    filter = nnb.reshape(
        filter, RankedTensorType::get({w.getDimSize(0), w.getDimSize(1),
                                       w.getDimSize(3), w.getDimSize(4)},
                                      element));
    FailureOr<Value> t = im.create<nn::ConvGradInputOp>(
        node, RankedTensorType::get({n * depth, cout, oh, ow}, element), planes,
        filter, b.getDenseI64ArrayAttr({strides[1], strides[2]}),
        b.getDenseI64ArrayAttr({pads[1], pads[2], pads[4], pads[5]}),
        b.getDenseI64ArrayAttr({dilations[1], dilations[2]}),
        b.getI64IntegerAttr(group));
    if (failed(t))
      return failure();
    Value y = nnb.reshape(
        *t, RankedTensorType::get({n, depth, cout, oh, ow}, element));
    y = nn::TransposeOp::create(b, loc, y,
                                b.getDenseI64ArrayAttr({0, 2, 1, 3, 4}));
    if (s > 1) {
      // Depth d lands at d * s: s - 1 zeros after each slice.
      y = nnb.reshape(
          y, RankedTensorType::get({n, cout, depth, 1, oh, ow}, element));
      y = padAxis(b, loc, y, 3, 0, s - 1, 0.0);
      y = nnb.reshape(
          y, RankedTensorType::get({n, cout, depth * s, oh, ow}, element));
      y = nn::SliceOp::create(
          b, loc, RankedTensorType::get({n, cout, spread, oh, ow}, element), y,
          b.getDenseI64ArrayAttr({0, 0, 0, 0, 0}),
          b.getDenseI64ArrayAttr({1, 1, 1, 1, 1}));
    }
    int64_t shift = kd * dilations[0];
    y = padAxis(b, loc, y, 2, shift, full - spread - shift, 0.0);
    sum = sum ? nnb.add(sum, y) : y;
  }
  // The depth pads crop; an output longer than the windows reach gets
  // zeros.
  int64_t kept = std::min(outSizes[0], full - pads[0]);
  Value y = nn::SliceOp::create(
      b, loc, RankedTensorType::get({n, cout, kept, oh, ow}, element), sum,
      b.getDenseI64ArrayAttr({0, 0, pads[0], 0, 0}),
      b.getDenseI64ArrayAttr({1, 1, 1, 1, 1}));
  return padAxis(b, loc, y, 2, 0, outSizes[0] - kept, 0.0);
}

LogicalResult importConvTranspose(GraphImporter &im,
                                  const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0), weight = im.input(node, 1);
  FailureOr<Value> bias = im.optionalInput(node, 2);
  if (failed(x) || failed(weight) || failed(bias))
    return failure();
  RankedTensorType xType = typeOf(*x), w = typeOf(*weight);
  int64_t rank = xType.getRank();
  if (w.getRank() != rank)
    return im.error(node) << "weight rank differs from the input's";
  if (rank != 3 && rank != 4 && rank != 5)
    return im.error(node) << "windows over " << rank - 2
                          << " dimensions are not supported (1-D, 2-D and "
                             "3-D only)";
  int64_t spatial = rank - 2, group = im.intAttr(node, "group", 1);
  if (group <= 0 || xType.getDimSize(1) != w.getDimSize(0) ||
      w.getDimSize(0) % group != 0)
    return im.error(node) << "weight must be [C_in, C_out/group, k...] with "
                             "C_in = "
                          << xType.getDimSize(1) << " divisible by group "
                          << group;
  auto ints = [&](StringRef name,
                  int64_t fallback) -> FailureOr<SmallVector<int64_t>> {
    SmallVector<int64_t> v =
        im.intsAttr(node, name)
            .value_or(SmallVector<int64_t>(
                name == "pads" ? 2 * spatial : spatial, fallback));
    if (static_cast<int64_t>(v.size()) !=
        (name == "pads" ? 2 * spatial : spatial))
      return im.error(node)
             << "'" << name << "' must have "
             << (name == "pads" ? 2 * spatial : spatial) << " entries";
    return v;
  };
  FailureOr<SmallVector<int64_t>> strides = ints("strides", 1),
                                  dilations = ints("dilations", 1),
                                  pads = ints("pads", 0),
                                  outputPadding = ints("output_padding", 0);
  if (failed(strides) || failed(dilations) || failed(pads) ||
      failed(outputPadding))
    return failure();
  std::optional<SmallVector<int64_t>> outputShape =
      im.intsAttr(node, "output_shape");
  if (outputShape && static_cast<int64_t>(outputShape->size()) == rank)
    outputShape->erase(outputShape->begin(), outputShape->begin() + 2);
  if (outputShape && static_cast<int64_t>(outputShape->size()) != spatial)
    return im.error(node) << "'output_shape' must have " << spatial
                          << " spatial entries";
  std::string autoPad = im.stringAttr(node, "auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return im.error(node) << "unknown auto_pad '" << autoPad << "'";
  SmallVector<int64_t> outSizes;
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t in = xType.getDimSize(2 + d), s = (*strides)[d];
    int64_t extent = (*dilations)[d] * (w.getDimSize(2 + d) - 1) + 1;
    int64_t op = (*outputPadding)[d];
    if (s <= 0 || (*dilations)[d] <= 0 || op < 0 ||
        (op >= s && op >= (*dilations)[d]))
      return im.error(node) << "strides and dilations must be positive and "
                               "output_padding below the stride or the "
                               "dilation";
    int64_t &begin = (*pads)[d], &end = (*pads)[spatial + d];
    int64_t full = s * (in - 1) + op + extent;
    if (outputShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = outputShape ? (*outputShape)[d] : in * s;
      int64_t total = full - out;
      int64_t half = llvm::divideFloorSigned(total, 2);
      begin = autoPad == "SAME_UPPER" ? half : total - half;
      end = total - begin;
    } else if (autoPad == "VALID") {
      begin = end = 0;
    }
    // A negative end pad (an output_shape past what the windows reach)
    // appends zeros: fewer than a stride of them keep the forward
    // convolution's output size, as conv_grad_input needs.
    int64_t extra = end < 0 ? -end : 0;
    if (begin < 0 || extra >= s)
      return im.error(node) << "output_shape or pads that pad the output by "
                               "a stride or more, or at its start, are not "
                               "supported";
    end = std::max<int64_t>(end, 0);
    if (full - begin - end <= 0)
      return im.error(node) << "pads leave no output";
    outSizes.push_back(full - begin - end + extra);
  }
  if (spatial == 3) {
    FailureOr<Value> y =
        convTranspose3d(im, node, *x, *weight, group, *strides, *pads,
                        *dilations, *outputPadding, outSizes);
    if (failed(y))
      return failure();
    if (*bias) {
      nn::NNBuilder nnb(im.builder, im.loc(node));
      y = im.create<nn::AddOp>(node, *y, perChannel(nnb, *bias, 5));
    }
    return im.setResult(node, y);
  }
  // 2-D form: a 1-D ConvTranspose is one of height 1.
  auto twoD = [&](SmallVector<int64_t> v, int64_t unit) {
    if (spatial == 1)
      v.insert(v.begin(), unit);
    return v;
  };
  SmallVector<int64_t> convPads =
      spatial == 1 ? SmallVector<int64_t>{0, (*pads)[0], 0, (*pads)[1]} : *pads;
  FailureOr<Value> input = toWindowInput(im, node, *x);
  FailureOr<Value> filter = toWindowInput(im, node, *weight);
  if (failed(input) || failed(filter))
    return failure();
  SmallVector<int64_t> shape{xType.getDimSize(0), w.getDimSize(1) * group};
  llvm::append_range(shape, twoD(outSizes, 1));
  Type element = xType.getElementType();
  Builder &b = im.builder;
  FailureOr<Value> y = im.create<nn::ConvGradInputOp>(
      node, RankedTensorType::get(shape, element), *input, *filter,
      b.getDenseI64ArrayAttr(twoD(*strides, 1)),
      b.getDenseI64ArrayAttr(convPads),
      b.getDenseI64ArrayAttr(twoD(*dilations, 1)), b.getI64IntegerAttr(group));
  if (failed(y))
    return failure();
  if (*bias) {
    nn::NNBuilder nnb(im.builder, im.loc(node));
    y = im.create<nn::AddOp>(node, *y, perChannel(nnb, *bias, 4));
  }
  return im.setResult(node, fromWindowResult(im, node, *x, y));
}

LogicalResult importMaxPool(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  if (!isa<FloatType>(typeOf(*x).getElementType()))
    return im.error(node) << "max pooling of integers is not supported";
  auto kernel = im.intsAttr(node, "kernel_shape");
  if (!kernel)
    return im.error(node) << "needs kernel_shape";
  FailureOr<Window> win = resolveWindow(im, node, typeOf(*x), *kernel, true);
  if (succeeded(win) && typeOf(*x).getRank() == 5) {
    // 3-D: the maximum over kernel depths of 2-D poolings of depth slices
    // (padding at -infinity).
    (void)im.unsupportedOutput(node, 1, "Indices");
    OpBuilder &b = im.builder;
    Window plane = planeOf(*win);
    FailureOr<Value> y = byDepthSlices(
        im, node, *x, *win, -std::numeric_limits<double>::infinity(),
        [&](Value slice, int64_t) {
          return im.create<nn::MaxPoolOp>(
              node, slice, b.getDenseI64ArrayAttr(plane.kernel),
              b.getDenseI64ArrayAttr(plane.strides),
              b.getDenseI64ArrayAttr(plane.pads),
              b.getDenseI64ArrayAttr(plane.dilations));
        },
        [&](Value a, Value c) {
          return nn::MaxOp::create(b, im.loc(node), a, c).getResult();
        });
    if (failed(y))
      return failure();
    return im.setResult(node, im.create<nn::IdentityOp>(node, *y));
  }
  FailureOr<Value> input = toWindowInput(im, node, *x);
  if (failed(win) || failed(input))
    return failure();
  Builder &b = im.builder;
  FailureOr<Value> y =
      fromWindowResult(im, node, *x,
                       im.create<nn::MaxPoolOp>(
                           node, *input, b.getDenseI64ArrayAttr(win->kernel),
                           b.getDenseI64ArrayAttr(win->strides),
                           b.getDenseI64ArrayAttr(win->pads),
                           b.getDenseI64ArrayAttr(win->dilations)));
  if (failed(y))
    return failure();
  im.setOutput(node, 0, *y);
  if (node.output_size() > 1 && !node.output(1).empty()) {
    // Indices: flat positions in the input (for a 1-D input, its [N, C, 1,
    // L] view has the same flat positions).
    int64_t storageOrder = im.intAttr(node, "storage_order", 0);
    if (storageOrder != 0 && storageOrder != 1)
      return im.error(node)
             << "storage_order must be 0 or 1, got " << storageOrder;
    auto yType = typeOf(*y);
    SmallVector<int64_t> outShape(yType.getShape());
    if (outShape.size() == 3)
      outShape.insert(outShape.begin() + 2, 1);
    auto indicesType = RankedTensorType::get(outShape, b.getI64Type());
    Value indices = nn::MaxPoolIndicesOp::create(
        im.builder, im.loc(node), indicesType, *input,
        b.getDenseI64ArrayAttr(win->kernel),
        b.getDenseI64ArrayAttr(win->strides), b.getDenseI64ArrayAttr(win->pads),
        b.getDenseI64ArrayAttr(win->dilations),
        b.getI64IntegerAttr(storageOrder));
    if (outShape.size() != static_cast<size_t>(yType.getRank()))
      indices = nn::NNBuilder(im.builder, im.loc(node))
                    .reshape(indices, RankedTensorType::get(yType.getShape(),
                                                            b.getI64Type()));
    im.setOutput(node, 1, indices);
  }
  return success();
}

LogicalResult importAveragePool(GraphImporter &im,
                                const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  auto kernel = im.intsAttr(node, "kernel_shape");
  if (!kernel)
    return im.error(node) << "needs kernel_shape";
  if (auto dilations = im.intsAttr(node, "dilations"))
    if (llvm::any_of(*dilations, [](int64_t d) { return d != 1; }))
      return im.error(node) << "dilated average pooling is not supported";
  FailureOr<Window> plain = resolveWindow(im, node, typeOf(*x), *kernel, false);
  FailureOr<Window> win = resolveWindow(im, node, typeOf(*x), *kernel, true);
  FailureOr<Value> input = toWindowInput(im, node, *x);
  if (failed(plain) || failed(win) || failed(input))
    return failure();
  bool includePad = im.intAttr(node, "count_include_pad", 0) != 0;
  if (includePad && win->pads != plain->pads)
    return im.error(node) << "ceil_mode with count_include_pad is not "
                             "supported";
  if (typeOf(*x).getRank() == 5) {
    // 3-D: 2-D averages of depth slices, summed, divided by the number of
    // kernel depths (or, excluding padding, of those inside the input: the
    // count of a 3-D window is its depth count times its plane count).
    OpBuilder &b = im.builder;
    nn::NNBuilder nnb(b, im.loc(node));
    Window plane = planeOf(*win);
    FailureOr<Value> y = byDepthSlices(
        im, node, *x, *win, 0.0,
        [&](Value slice, int64_t) {
          return im.create<nn::AveragePoolOp>(
              node, slice, b.getDenseI64ArrayAttr(plane.kernel),
              b.getDenseI64ArrayAttr(plane.strides),
              b.getDenseI64ArrayAttr(plane.pads), b.getBoolAttr(includePad));
        },
        [&](Value a, Value c) { return nnb.add(a, c); });
    if (failed(y))
      return failure();
    RankedTensorType yType = typeOf(*y);
    int64_t depth = typeOf(*x).getDimSize(2), outDepth = yType.getDimSize(2);
    SmallVector<float> inverse;
    for (int64_t o = 0; o < outDepth; ++o) {
      int64_t count = 0;
      for (int64_t k = 0; k < win->kernel[0]; ++k) {
        int64_t at = o * win->strides[0] + k - win->pads[0];
        count += includePad ? (at < depth + plain->pads[3])
                            : (at >= 0 && at < depth);
      }
      inverse.push_back(1.0f / static_cast<float>(std::max<int64_t>(count, 1)));
    }
    auto scaleType =
        RankedTensorType::get({outDepth, 1, 1}, yType.getElementType());
    Value scale = nn::ConstantOp::create(
        b, im.loc(node),
        DenseElementsAttr::get(scaleType, ArrayRef<float>(inverse)));
    return im.setResult(node, im.create<nn::MulOp>(node, *y, scale));
  }
  if (win->kernel.size() != 2)
    return im.error(node) << "needs a 1-D or 2-D kernel_shape";
  Builder &b = im.builder;
  return im.setResult(
      node,
      fromWindowResult(im, node, *x,
                       im.create<nn::AveragePoolOp>(
                           node, *input, b.getDenseI64ArrayAttr(win->kernel),
                           b.getDenseI64ArrayAttr(win->strides),
                           b.getDenseI64ArrayAttr(win->pads),
                           b.getBoolAttr(includePad))));
}

template <typename OpTy>
LogicalResult importGlobalPool(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  if (rank < 3)
    return im.error(node) << "needs an input [N, C, d...]";
  return im.setResult(
      node, im.create<OpTy>(node, *x,
                            im.builder.getDenseI64ArrayAttr(
                                llvm::to_vector(llvm::seq<int64_t>(2, rank))),
                            im.builder.getBoolAttr(true)));
}

} // namespace

void onnx_import::addWindowHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Conv", 1, importConv});
  list.push_back({"ConvTranspose", 1, importConvTranspose});
  list.push_back({"MaxPool", 1, importMaxPool});
  list.push_back({"AveragePool", 1, importAveragePool});
  list.push_back({"GlobalAveragePool", 1, importGlobalPool<nn::ReduceMeanOp>});
  list.push_back({"GlobalMaxPool", 1, importGlobalPool<nn::ReduceMaxOp>});
}
