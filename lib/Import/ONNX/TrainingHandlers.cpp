//===- TrainingHandlers.cpp - ONNX's preview training optimizers -*- C++
//-*-===//
//
// Adam, Momentum and Adagrad of the ai.onnx.preview.training domain, outside
// a TrainingInfoProto (as ONNX's node tests use them): one train.update per
// optimized tensor, with the optimizer attribute that encodes the operator's
// formula, so an artifact's optimizer and these operators share one
// implementation. ONNX's update count T is the number of updates conducted
// before this one; train.update's step is 1-based, so step = T + 1.
//
// Momentum is torch.optim.SGD's momentum rule (alpha = momentum, beta =
// 1 - dampening, norm_coefficient = weight_decay); Adagrad is
// torch.optim.Adagrad's (decay_factor = lr_decay).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

/// Applies `optimizer` to each group of inputs R, T, X..., G..., S1..., S2...
/// (`numStates` state groups) and binds X_new..., S1_new..., S2_new....
LogicalResult importOptimizer(GraphImporter &im, const onnx::NodeProto &node,
                              train::OptimizerAttrInterface optimizer,
                              unsigned numStates) {
  if (im.training)
    return im.error(node)
           << "an optimizer is not differentiable and cannot be part of a "
              "loss; training graphs carry their optimizer in a "
              "TrainingInfoProto";
  unsigned groups = 2 + numStates;
  int numInputs = node.input_size();
  if (numInputs < 2 + static_cast<int>(groups) || (numInputs - 2) % groups)
    return im.error(node) << "expects R, T and " << groups
                          << " inputs per optimized tensor, got " << numInputs
                          << " inputs";
  unsigned n = (numInputs - 2) / groups;
  if (node.output_size() != static_cast<int>(n * (1 + numStates)))
    return im.error(node) << "expects " << n * (1 + numStates) << " outputs";
  OpBuilder &b = im.builder;
  Location loc = im.loc(node);
  FailureOr<Value> r = im.input(node, 0), t = im.input(node, 1);
  if (failed(r) || failed(t))
    return failure();
  auto rType = cast<RankedTensorType>(r->getType());
  auto tType = cast<RankedTensorType>(t->getType());
  if (rType.getNumElements() != 1 || !isa<FloatType>(rType.getElementType()))
    return im.error(node) << "the learning rate R must be a float scalar";
  if (tType.getNumElements() != 1 || !tType.getElementType().isInteger(64))
    return im.error(node) << "the update count T must be an int64 scalar";
  auto scalar = [&](Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    Value flat = nn::NNBuilder(b, loc).reshape(
        v, RankedTensorType::get({}, type.getElementType()));
    return tensor::ExtractOp::create(b, loc, flat).getResult();
  };
  Value lr = scalar(*r);
  if (!lr.getType().isF32())
    lr = lr.getType().getIntOrFloatBitWidth() > 32
             ? arith::TruncFOp::create(b, loc, b.getF32Type(), lr).getResult()
             : arith::ExtFOp::create(b, loc, b.getF32Type(), lr).getResult();
  Value step = arith::AddIOp::create(
      b, loc, scalar(*t),
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1)));

  for (unsigned i = 0; i < n; ++i) {
    SmallVector<Value> operands;
    for (unsigned g = 0; g < groups; ++g) {
      FailureOr<Value> v = im.input(node, 2 + g * n + i);
      if (failed(v))
        return failure();
      operands.push_back(*v);
    }
    auto type = cast<RankedTensorType>(operands[0].getType());
    if (!type.getElementType().isF32())
      return im.error(node) << "optimizes f32 tensors only, not " << type;
    for (Value v : operands)
      if (v.getType() != type)
        return im.error(node)
               << "tensor " << i << "'s gradient and states must have its type "
               << type;
    nn::NNBuilder nnb(b, loc);
    auto flat = RankedTensorType::get({type.getNumElements()}, b.getF32Type());
    SmallVector<Value> flats;
    for (Value v : operands)
      flats.push_back(nnb.reshape(v, flat));
    auto update = train::UpdateOp::create(
        b, loc, flats[0], flats[1], ArrayRef<Value>(flats).drop_front(2), lr,
        step, optimizer, /*skip_nonfinite=*/UnitAttr());
    im.setOutput(node, i, nnb.reshape(update.getNewParams(), type));
    for (unsigned s = 0; s < numStates; ++s)
      im.setOutput(node, (1 + s) * n + i,
                   nnb.reshape(update.getNewStates()[s], type));
  }
  return success();
}

/// The train optimizer attribute with `opt`'s hyperparameters: the
/// operator's own formula (ONNX Adam, torch's SGD with momentum, Adagrad).
train::OptimizerAttrInterface optimizerAttr(MLIRContext *ctx,
                                            const ImportedOptimizer &opt) {
  auto param = [&](StringRef name) {
    return llvm::APFloat(opt.params.at(name.str()));
  };
  switch (opt.kind) {
  case ACCRUE_OPTIMIZER_ONNX_ADAM:
    return train::OnnxAdamAttr::get(ctx, param("beta1"), param("beta2"),
                                    param("eps"), param("weight_decay"),
                                    param("post_weight_decay"));
  case ACCRUE_OPTIMIZER_SGD:
    return train::SGDAttr::get(ctx, param("momentum"), param("dampening"),
                               opt.params.at("nesterov") != 0,
                               param("weight_decay"));
  case ACCRUE_OPTIMIZER_ADAGRAD:
    return train::AdagradAttr::get(ctx, param("lr_decay"),
                                   param("weight_decay"), param("eps"));
  default:
    llvm_unreachable("readOptimizerNode makes these three only");
  }
}

LogicalResult importOptimizerNode(GraphImporter &im,
                                  const onnx::NodeProto &node) {
  FailureOr<ImportedOptimizer> opt = readOptimizerNode(node, im.loc(node));
  if (failed(opt))
    return failure();
  return importOptimizer(im, node, optimizerAttr(im.builder.getContext(), *opt),
                         opt->kind == ACCRUE_OPTIMIZER_ONNX_ADAM ? 2 : 1);
}

} // namespace

FailureOr<ImportedOptimizer>
onnx_import::readOptimizerNode(const onnx::NodeProto &node, Location loc) {
  auto attribute = [&](StringRef name) -> const onnx::AttributeProto * {
    for (const auto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  };
  // ONNX's attributes are floats: read as float, then widened.
  auto f = [&](StringRef name, float fallback) {
    const onnx::AttributeProto *a = attribute(name);
    return static_cast<double>(a ? a->f() : fallback);
  };
  ImportedOptimizer opt;
  opt.nodeName = node.name();
  if (node.op_type() == "Adam") {
    opt.kind = ACCRUE_OPTIMIZER_ONNX_ADAM;
    opt.params = {{"beta1", f("alpha", 0.9f)},
                  {"beta2", f("beta", 0.999f)},
                  {"eps", f("epsilon", 1e-6f)},
                  {"weight_decay", f("norm_coefficient", 0.0f)},
                  {"post_weight_decay", f("norm_coefficient_post", 0.0f)}};
  } else if (node.op_type() == "Momentum") {
    const onnx::AttributeProto *mode = attribute("mode");
    std::string name = mode ? mode->s() : "standard";
    if (name != "standard" && name != "nesterov")
      return emitError(loc) << "Momentum: unknown mode '" << name << "'";
    if (f("alpha", 0.0f) == 0.0)
      return emitError(loc)
             << "Momentum: alpha = 0 (no momentum) is not supported";
    opt.kind = ACCRUE_OPTIMIZER_SGD;
    opt.params = {{"momentum", f("alpha", 0.0f)},
                  {"dampening", 1.0 - f("beta", 1.0f)},
                  {"nesterov", name == "nesterov" ? 1.0 : 0.0},
                  {"weight_decay", f("norm_coefficient", 0.0f)}};
  } else if (node.op_type() == "Adagrad") {
    opt.kind = ACCRUE_OPTIMIZER_ADAGRAD;
    opt.params = {{"lr_decay", f("decay_factor", 0.0f)},
                  {"eps", f("epsilon", 0.0f)},
                  {"weight_decay", f("norm_coefficient", 0.0f)}};
  } else {
    return emitError(loc) << "training operator " << node.op_type()
                          << " is not supported";
  }
  return opt;
}

void onnx_import::addTrainingHandlers(std::vector<OpRegistration> &list) {
  for (const char *op : {"Adam", "Momentum", "Adagrad"})
    list.push_back({op, 1, importOptimizerNode, {}, kTrainingDomain});
}
