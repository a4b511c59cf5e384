//===- NeuralHandlers.cpp - import softmax, norms, dropout ------*- C++ -*-===//
//
// Softmax, LogSoftmax and Dropout map to nn ops; the normalizations
// (Layer-, Batch-, Instance-, Group- and LpNormalization) are built from nn
// reductions and elementwise ops, so their VJPs come from the parts.
// Training-mode BatchNormalization also returns its running statistics'
// new values (the forward's buffers). Convolutions, pooling and Resize are
// in WindowHandlers.cpp.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "accrue-runtime/Settings.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

template <typename OpTy>
LogicalResult importSoftmax(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank();
  bool legacy = im.opset < 13;
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", legacy ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  if (!legacy || *axis == rank - 1)
    return im.setResult(
        node, im.create<OpTy>(node, *x, im.builder.getI64IntegerAttr(*axis)));
  // Opsets 1-12 normalize the input coerced to 2-D at the axis.
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < *axis ? rows : cols) *= type.getDimSize(d);
  auto flat = RankedTensorType::get({rows, cols}, type.getElementType());
  FailureOr<Value> reshaped = im.create<nn::ReshapeOp>(node, flat, *x);
  if (failed(reshaped))
    return failure();
  FailureOr<Value> soft =
      im.create<OpTy>(node, *reshaped, im.builder.getI64IntegerAttr(1));
  if (failed(soft))
    return failure();
  return im.setResult(node, im.create<nn::ReshapeOp>(node, type, *soft));
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// x normalized over `axes`: (x - mean) / sqrt(variance + epsilon), the
/// biased variance, as LayerNormalization and the others define it.
struct Normalized {
  Value value, mean, invStd;
};
Normalized normalizeOver(nn::NNBuilder &nnb, Value x, ArrayRef<int64_t> axes,
                         double epsilon) {
  OpBuilder &b = nnb.b;
  Location loc = nnb.loc;
  Type element = typeOf(x).getElementType();
  Value mean = nn::ReduceMeanOp::create(b, loc, x, axes, /*keepdims=*/true);
  Value centered = nnb.sub(x, mean);
  Value variance = nn::ReduceMeanOp::create(b, loc, nnb.mul(centered, centered),
                                            axes, /*keepdims=*/true);
  Value invStd =
      nnb.div(nnb.scalar(element, 1.0),
              nn::SqrtOp::create(
                  b, loc, nnb.add(variance, nnb.scalar(element, epsilon))));
  return {nnb.mul(centered, invStd), mean, invStd};
}

/// The type a normalization of 16-bit floats computes its statistics in:
/// its stash_type (f32 by default), as ONNX's function bodies (and
/// PyTorch) do; an input of 32 or 64 bits keeps its own type (never
/// narrowed to a stash of f32).
Type stashType(GraphImporter &im, const onnx::NodeProto &node, Type element) {
  if (element.getIntOrFloatBitWidth() >= 32)
    return element;
  Type stash = convertElementType(
      im.builder.getContext(),
      static_cast<int32_t>(im.intAttr(node, "stash_type", 1)));
  if (!stash || !isa<FloatType>(stash) ||
      stash.getIntOrFloatBitWidth() <= element.getIntOrFloatBitWidth())
    return element;
  return stash;
}

/// `x` converted to element type `element` (itself if it has it).
Value castTo(nn::NNBuilder &nnb, Value x, Type element) {
  RankedTensorType type = typeOf(x);
  if (type.getElementType() == element)
    return x;
  return nn::CastOp::create(nnb.b, nnb.loc, type.clone(element), x);
}

LogicalResult importLayerNormalization(GraphImporter &im,
                                       const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0), scale = im.input(node, 1);
  FailureOr<Value> bias = im.optionalInput(node, 2);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = type.getShape().drop_front(*axis);
  if (failed(im.requireBroadcastsTo(node, 1, *scale, normalized)) ||
      (*bias && failed(im.requireBroadcastsTo(node, 2, *bias, normalized))))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type stash = stashType(im, node, type.getElementType());
  Normalized n =
      normalizeOver(nnb, castTo(nnb, *x, stash),
                    llvm::to_vector(llvm::seq<int64_t>(*axis, type.getRank())),
                    im.floatAttr(node, "epsilon", 1e-5f));
  Value y = nnb.mul(castTo(nnb, n.value, type.getElementType()), *scale);
  if (*bias)
    y = nnb.add(y, *bias);
  FailureOr<Value> result = im.finishOp(nn::IdentityOp::create(b, loc, y));
  if (failed(result))
    return failure();
  im.setOutput(node, 0, *result);
  im.setOutput(node, 1, n.mean);
  im.setOutput(node, 2, n.invStd);
  return success();
}

/// Hardmax (opset 13): 1 at the first maximum along the axis, 0 elsewhere.
/// Its gradient is zero, so it trains nothing.
LogicalResult importHardmax(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  if (!isa<FloatType>(type.getElementType()))
    return im.error(node) << "expects a floating-point input, got " << type;
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Value first = nn::ArgMaxOp::create(b, loc, *x, b.getI64IntegerAttr(*axis),
                                     b.getBoolAttr(true), b.getBoolAttr(false));
  SmallVector<int64_t> rangeShape(type.getRank(), 1);
  rangeShape[*axis] = type.getDimSize(*axis);
  Value positions = nnb.reshape(
      indexVector(b, loc,
                  llvm::to_vector(llvm::seq<int64_t>(0, rangeShape[*axis]))),
      RankedTensorType::get(rangeShape, b.getI64Type()));
  return im.setResult(
      node, im.create<nn::CastOp>(
                node, type, nn::EqualOp::create(b, loc, first, positions)));
}

/// RMSNormalization (opset 23, LLaMA's norm): x / sqrt(mean(x^2) + epsilon)
/// over the axes from `axis` on, times the scale; 16-bit inputs in their
/// stash type, as LayerNormalization's.
LogicalResult importRMSNormalization(GraphImporter &im,
                                     const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0), scale = im.input(node, 1);
  if (failed(x) || failed(scale))
    return failure();
  if (!isa<FloatType>(typeOf(*x).getElementType()) ||
      typeOf(*scale).getElementType() != typeOf(*x).getElementType())
    return im.error(node) << "expects a floating-point input and a scale of "
                             "its type, got "
                          << x->getType() << " and " << scale->getType();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  if (failed(im.requireBroadcastsTo(node, 1, *scale,
                                    type.getShape().drop_front(*axis))))
    return failure();
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type element = stashType(im, node, type.getElementType());
  Value xs = castTo(nnb, *x, element);
  Value meanSquare = nn::ReduceMeanOp::create(
      b, loc, nnb.mul(xs, xs),
      llvm::to_vector(llvm::seq<int64_t>(*axis, type.getRank())),
      /*keepdims=*/true);
  Value invRms = nnb.div(
      nnb.scalar(element, 1.0),
      nn::SqrtOp::create(
          b, loc,
          nnb.add(meanSquare,
                  nnb.scalar(element, im.floatAttr(node, "epsilon", 1e-5f)))));
  return im.setResult(
      node, im.create<nn::MulOp>(
                node, castTo(nnb, nnb.mul(xs, invRms), type.getElementType()),
                *scale));
}

/// InstanceNormalization: each (sample, channel) normalized over its spatial
/// dimensions, then scaled and shifted per channel.
LogicalResult importInstanceNormalization(GraphImporter &im,
                                          const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0), scale = im.input(node, 1),
                   bias = im.input(node, 2);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank();
  if (rank < 3)
    return im.error(node) << "needs an input of rank >= 3 ([N, C, D1, ...])";
  for (int i = 1; i < 3; ++i)
    if (typeOf(i == 1 ? *scale : *bias).getShape() !=
        ArrayRef<int64_t>{type.getDimSize(1)})
      return im.error(node) << "input " << i << " ('" << node.input(i)
                            << "') must have shape [" << type.getDimSize(1)
                            << "], one value per channel";
  nn::NNBuilder nnb(im.builder, im.loc(node));
  Normalized n =
      normalizeOver(nnb, *x, llvm::to_vector(llvm::seq<int64_t>(2, rank)),
                    im.floatAttr(node, "epsilon", 1e-5f));
  return im.setResult(node,
                      im.create<nn::AddOp>(
                          node, nnb.mul(n.value, perChannel(nnb, *scale, rank)),
                          perChannel(nnb, *bias, rank)));
}

/// GroupNormalization (opsets 18 and 21): the channels of each sample split
/// into num_groups groups, each normalized over its channels and spatial
/// dimensions. Scale and bias hold one value per channel (opset 21) or per
/// group (opset 18); both are accepted by their shape.
LogicalResult importGroupNormalization(GraphImporter &im,
                                       const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0), scale = im.input(node, 1),
                   bias = im.input(node, 2);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank();
  int64_t groups = im.intAttr(node, "num_groups", 0);
  if (rank < 2)
    return im.error(node) << "needs an input of rank >= 2 ([N, C, ...])";
  int64_t channels = type.getDimSize(1);
  if (groups <= 0 || channels % groups != 0)
    return im.error(node) << "num_groups (" << groups
                          << ") must be positive and divide the " << channels
                          << " channels";
  int64_t spatial = 1;
  for (int64_t d = 2; d < rank; ++d)
    spatial *= type.getDimSize(d);
  // [N, G, C/G, S]: statistics over the last two dimensions.
  Type element = type.getElementType();
  auto grouped = RankedTensorType::get(
      {type.getDimSize(0), groups, channels / groups, spatial}, element);
  FailureOr<Value> g = im.create<nn::ReshapeOp>(node, grouped, *x);
  if (failed(g))
    return failure();
  nn::NNBuilder nnb(im.builder, im.loc(node));
  // Opset 21 adds stash_type (16-bit inputs' statistics in f32).
  Type stash = im.opset >= 21 ? stashType(im, node, element) : element;
  Normalized n = normalizeOver(nnb, castTo(nnb, *g, stash), {2, 3},
                               im.floatAttr(node, "epsilon", 1e-5f));
  n.value = castTo(nnb, n.value, element);
  // Scale and bias as [G, C/G, 1] (per channel) or [G, 1, 1] (per group).
  auto affine = [&](int i, Value v) -> FailureOr<Value> {
    int64_t size = typeOf(v).getNumElements();
    if (typeOf(v).getRank() != 1 || (size != channels && size != groups))
      return im.error(node) << "input " << i << " ('" << node.input(i)
                            << "') must have shape [" << channels
                            << "] (one value per channel) or [" << groups
                            << "] (one per group)";
    return nnb.reshape(
        v, RankedTensorType::get(
               {groups, size == channels ? channels / groups : 1, 1}, element));
  };
  FailureOr<Value> s = affine(1, *scale), t = affine(2, *bias);
  if (failed(s) || failed(t))
    return failure();
  Value y = nnb.add(nnb.mul(n.value, *s), *t);
  return im.setResult(node, im.create<nn::ReshapeOp>(node, type, y));
}

/// LpNormalization: x divided by its L1 or L2 norm along one axis; a zero
/// vector stays zero (ONNX 1.23's reference: 0, not 0 / 0), through a norm
/// of 1 where it is 0, taken before the square root so that the gradient
/// has no 0 x inf either.
LogicalResult importLpNormalization(GraphImporter &im,
                                    const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axis =
      im.normalizeAxis(node, im.intAttr(node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  int64_t p = im.intAttr(node, "p", 2);
  if (p != 1 && p != 2)
    return im.error(node) << "p must be 1 or 2, not " << p;
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  SmallVector<int64_t> axes{*axis};
  Value sum = nn::ReduceSumOp::create(
      b, loc, p == 1 ? Value(nn::AbsOp::create(b, loc, *x)) : nnb.mul(*x, *x),
      axes, /*keepdims=*/true);
  Type element = type.getElementType();
  Value zero = nn::EqualOp::create(b, loc, sum, nnb.scalar(element, 0.0));
  Value safe = nn::WhereOp::create(b, loc, zero, nnb.scalar(element, 1.0), sum);
  Value norm = p == 1 ? safe : Value(nn::SqrtOp::create(b, loc, safe));
  return im.setResult(node, im.create<nn::DivOp>(node, *x, norm));
}

} // namespace

Value onnx_import::perChannel(nn::NNBuilder &nnb, Value v, int64_t rank) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape{type.getDimSize(0)};
  shape.append(rank - 2, 1);
  return nnb.reshape(v, RankedTensorType::get(shape, type.getElementType()));
}

bool onnx_import::isTrainingBatchNorm(const onnx::NodeProto &node,
                                      int64_t opset) {
  // Opset 14 on: training_mode. Opsets 9-13: the running statistics are
  // outputs in training mode only. Before 9: is_test.
  if (opset >= 14)
    return GraphImporter::intAttr(node, "training_mode", 0) != 0;
  bool runningOutputs = node.output_size() > 1 && !node.output(1).empty();
  if (opset >= 9)
    return runningOutputs;
  return runningOutputs && GraphImporter::intAttr(node, "is_test", 0) == 0;
}

namespace {

LogicalResult importBatchNormalization(GraphImporter &im,
                                       const onnx::NodeProto &node) {
  SmallVector<Value> in;
  for (int i = 0; i < 5; ++i) {
    FailureOr<Value> v = im.input(node, i);
    if (failed(v))
      return failure();
    in.push_back(*v);
  }
  Value x = in[0], scale = in[1], bias = in[2], mean = in[3], var = in[4];
  RankedTensorType type = typeOf(x);
  int64_t rank = type.getRank();
  if (rank < 2)
    return im.error(node) << "needs an input of rank >= 2";
  // Scale, bias, mean and variance hold one value per channel.
  for (int i = 1; i < 5; ++i)
    if (typeOf(in[i]).getShape() != ArrayRef<int64_t>{type.getDimSize(1)})
      return im.error(node) << "input " << i << " ('" << node.input(i)
                            << "') must have shape [" << type.getDimSize(1)
                            << "], one value per channel";
  bool training = isTrainingBatchNorm(node, im.opset);
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  nn::NNBuilder nnb(b, loc);
  Type element = type.getElementType();
  double epsilon = im.floatAttr(node, "epsilon", 1e-5f);
  Value eps = nnb.scalar(element, epsilon);

  Value useMean = perChannel(nnb, mean, rank),
        useVar = perChannel(nnb, var, rank);
  Value batchMean, batchVar;
  if (training) {
    if (im.strict)
      return im.error(node)
             << "in training mode, each micro-batch is normalized with its "
                "own statistics, so accumulated steps differ from one big "
                "batch ("
             << settingRef("strict") << ")";
    if (im.training)
      emitWarning(loc)
          << "BatchNormalization in training mode normalizes each "
             "micro-batch with its own statistics; gradient accumulation is "
             "not equivalent to one big batch for this model (the running "
             "mean and variance are updated once per micro-batch, as "
             "PyTorch does)";
    SmallVector<int64_t> axes{0};
    llvm::append_range(axes, llvm::seq<int64_t>(2, rank));
    batchMean = nn::ReduceMeanOp::create(b, loc, x, axes, /*keepdims=*/true);
    Value centered = nnb.sub(x, batchMean);
    batchVar = nn::ReduceMeanOp::create(b, loc, nnb.mul(centered, centered),
                                        axes, /*keepdims=*/true);
    useMean = batchMean;
    useVar = batchVar;
  }
  Value normalized = nnb.div(nnb.sub(x, useMean),
                             nn::SqrtOp::create(b, loc, nnb.add(useVar, eps)));
  Value y = nnb.add(nnb.mul(normalized, perChannel(nnb, scale, rank)),
                    perChannel(nnb, bias, rank));
  FailureOr<Value> result = im.finishOp(nn::IdentityOp::create(b, loc, y));
  if (failed(result))
    return failure();
  im.setOutput(node, 0, *result);
  if (training) {
    // running = input * momentum + current * (1 - momentum).
    double momentum = im.floatAttr(node, "momentum", 0.9f);
    // `correction` scales the batch statistic (see below).
    auto running = [&](Value input, Value current, double correction) {
      Value flat = nnb.reshape(current, typeOf(input));
      return nnb.add(
          nnb.mul(input, nnb.scalar(element, momentum)),
          nnb.mul(flat, nnb.scalar(element, (1.0 - momentum) * correction)));
    };
    Value newMean = running(mean, batchMean, 1.0);
    im.setOutput(node, 1, newMean);
    im.setOutput(node, 2, running(var, batchVar, 1.0));
    // The model's running statistics (buffer arguments) are updated the way
    // PyTorch's BatchNorm updates them, which differs from the outputs
    // above in one point: the variance is the unbiased one, n / (n - 1)
    // times the batch's (ONNX momentum m is PyTorch's 1 - momentum).
    auto bufferArg = [](Value input) -> std::optional<unsigned> {
      auto arg = dyn_cast<BlockArgument>(input);
      auto function =
          arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp())
              : FunctionOpInterface();
      if (!function || train::getArgRole(function, arg.getArgNumber()) !=
                           ACCRUE_ROLE_BUFFERS)
        return std::nullopt;
      return arg.getArgNumber();
    };
    if (std::optional<unsigned> arg = bufferArg(mean))
      im.bufferUpdates[*arg] = newMean;
    if (std::optional<unsigned> arg = bufferArg(var)) {
      int64_t n = type.getNumElements() / type.getDimSize(1);
      im.bufferUpdates[*arg] =
          running(var, batchVar, n > 1 ? double(n) / double(n - 1) : 1.0);
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

LogicalResult importDropout(GraphImporter &im, const onnx::NodeProto &node) {
  FailureOr<Value> x = im.input(node, 0);
  if (failed(x))
    return failure();
  double ratio = 0.5;
  bool training = false;
  if (im.opset >= 12) {
    if (node.input_size() > 1 && !node.input(1).empty()) {
      FailureOr<double> r = im.constantScalar(node, 1, "the ratio");
      if (failed(r))
        return failure();
      ratio = *r;
    }
    if (node.input_size() > 2 && !node.input(2).empty()) {
      FailureOr<double> t = im.constantScalar(node, 2, "training_mode");
      if (failed(t))
        return failure();
      training = *t != 0;
    }
  } else {
    ratio = im.floatAttr(node, "ratio", 0.5f);
  }
  if (!(ratio >= 0 && ratio < 1))
    return im.error(node) << "ratio " << ratio << " is outside [0, 1)";
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  RankedTensorType type = typeOf(*x);
  if (!training || ratio == 0) {
    // Inference: the identity, and a mask of ones.
    im.setOutput(node, 0, *x);
    auto maskType = RankedTensorType::get(type.getShape(), b.getI1Type());
    im.setOutput(
        node, 1,
        nn::ConstantOp::create(
            b, loc, SplatElementsAttr::get(maskType, b.getBoolAttr(true))));
    return success();
  }
  if (!im.training || !im.stepArg)
    return im.error(node) << "training-mode Dropout outside a training step is "
                             "not supported (its mask is random)";
  (void)im.unsupportedOutput(node, 1, "mask");
  return im.setResult(
      node,
      im.create<nn::DropoutOp>(
          node, *x, im.stepArg, im.sampleBaseArg, b.getF64FloatAttr(ratio),
          b.getI64IntegerAttr(im.intAttr(node, "seed", im.dropoutSeed)),
          b.getI64IntegerAttr(im.dropoutCount++)));
}

} // namespace

void onnx_import::addNeuralHandlers(std::vector<OpRegistration> &list) {
  list.push_back({"Softmax", 1, importSoftmax<nn::SoftmaxOp>});
  list.push_back({"LogSoftmax", 1, importSoftmax<nn::LogSoftmaxOp>});
  list.push_back({"Hardmax", 13, importHardmax});
  list.push_back({"LayerNormalization", 17, importLayerNormalization});
  list.push_back({"RMSNormalization", 23, importRMSNormalization});
  list.push_back({"BatchNormalization", 7, importBatchNormalization, {3, 4}});
  list.push_back({"InstanceNormalization", 6, importInstanceNormalization});
  list.push_back({"GroupNormalization", 18, importGroupNormalization});
  list.push_back({"LpNormalization", 1, importLpNormalization});
  list.push_back({"Dropout", 7, importDropout, {1, 2}});
}
