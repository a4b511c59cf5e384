//===- TrainAttrs.td - train attributes --------------------*- tablegen -*-===//
//
// Optimizers as attributes, with PyTorch's definitions and defaults (see
// SEMANTICS.md).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_TRAIN_IR_TRAINATTRS_TD
#define ACCRUE_DIALECT_TRAIN_IR_TRAINATTRS_TD

include "accrue/Dialect/Train/IR/TrainBase.td"
include "accrue/Dialect/Train/IR/TrainInterfaces.td"

// A hyperparameter, kept in double precision like the Python float PyTorch
// keeps.
class Train_HyperParameter<string default>
    : DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(" # default # ")"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = "$_printer.printFloat($_self)";
}

// A required double-precision number.
class Train_Float<string desc> : AttrParameter<"::llvm::APFloat", desc> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = "$_printer.printFloat($_self)";
}

class Train_FlagParameter : DefaultValuedParameter<"bool", "false"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<bool> {
    if (::mlir::succeeded($_parser.parseOptionalKeyword("true")))
      return true;
    if ($_parser.parseKeyword("false"))
      return ::mlir::failure();
    return false;
  }() }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

def Train_SGDAttr : Train_Attr<"SGD", "sgd", [
    DeclareAttrInterfaceMethods<Train_OptimizerAttrInterface>]> {
  let summary = "torch.optim.SGD";
  let description = [{
    `g += weight_decay * p`; with momentum `buf = g` at step 1, else
    `buf = momentum * buf + (1 - dampening) * g`; `g = g + momentum * buf`
    if nesterov else `buf`; `p -= lr * g`. Keeps one state buffer
    (`momentum_buffer`) when momentum is non-zero, none otherwise.
  }];
  let parameters = (ins
    Train_HyperParameter<"0.0">:$momentum,
    Train_HyperParameter<"0.0">:$dampening,
    Train_FlagParameter<>:$nesterov,
    Train_HyperParameter<"0.0">:$weight_decay);
  let assemblyFormat = "`<` struct(params) `>`";
}

class Train_AdamAttrBase<string name, string mnemonic, string defaultWd>
    : Train_Attr<name, mnemonic, [
        DeclareAttrInterfaceMethods<Train_OptimizerAttrInterface>]> {
  let parameters = (ins
    Train_HyperParameter<"0.9">:$beta1,
    Train_HyperParameter<"0.999">:$beta2,
    Train_HyperParameter<"1e-8">:$eps,
    Train_HyperParameter<defaultWd>:$weight_decay);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Train_AdamAttr : Train_AdamAttrBase<"Adam", "adam", "0.0"> {
  let summary = "torch.optim.Adam";
  let description = [{
    `g += weight_decay * p`; `m = b1*m + (1-b1)*g`; `v = b2*v + (1-b2)*g^2`;
    `p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)`. States:
    `exp_avg`, `exp_avg_sq`.
  }];
}

def Train_AdamWAttr : Train_AdamAttrBase<"AdamW", "adamw", "0.01"> {
  let summary = "torch.optim.AdamW";
  let description = [{
    `p *= 1 - lr * weight_decay` first, then Adam's update without the
    `weight_decay * p` term. States: `exp_avg`, `exp_avg_sq`.
  }];
}

def Train_AdagradAttr : Train_Attr<"Adagrad", "adagrad", [
    DeclareAttrInterfaceMethods<Train_OptimizerAttrInterface>]> {
  let summary = "torch.optim.Adagrad, which is also ONNX's Adagrad";
  let description = [{
    `clr = lr / (1 + (t-1) * lr_decay)`; `g += weight_decay * p`;
    `sum += g^2`; `p -= clr * g / (sqrt(sum) + eps)`. State: `sum`
    (starting at zero). ONNX's `ai.onnx.preview.training.Adagrad` is the
    same rule with `T = t - 1`, `decay_factor = lr_decay`,
    `norm_coefficient = weight_decay` and `H = sum`.
  }];
  let parameters = (ins
    Train_HyperParameter<"0.0">:$lr_decay,
    Train_HyperParameter<"0.0">:$weight_decay,
    Train_HyperParameter<"1e-10">:$eps);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Train_OnnxAdamAttr : Train_Attr<"OnnxAdam", "onnx_adam", [
    DeclareAttrInterfaceMethods<Train_OptimizerAttrInterface>]> {
  let summary = "ONNX's ai.onnx.preview.training.Adam";
  let description = [{
    With `T = t - 1` updates conducted: `g += norm_coefficient * p`;
    `V = alpha*V + (1-alpha)*g`; `H = beta*H + (1-beta)*g^2`;
    `r = T > 0 ? lr * sqrt(1 - beta^T) / (1 - alpha^T) : lr`;
    `p = (1 - norm_coefficient_post) * (p - r * V / (sqrt(H) + epsilon))`.
    Unlike torch.optim.Adam, epsilon is added to the uncorrected root and
    the first update is not bias-corrected. States: `V`, `H`.
  }];
  let parameters = (ins
    Train_HyperParameter<"0.9">:$alpha,
    Train_HyperParameter<"0.999">:$beta,
    Train_HyperParameter<"1e-6">:$epsilon,
    Train_HyperParameter<"0.0">:$norm_coefficient,
    Train_HyperParameter<"0.0">:$norm_coefficient_post);
  let assemblyFormat = "`<` struct(params) `>`";
}

//===----------------------------------------------------------------------===//
// Loss normalization
//===----------------------------------------------------------------------===//

def Train_LossDivisorAttr : Train_Attr<"LossDivisor", "loss_divisor"> {
  let summary = "how a loss's constant divisor depends on the micro-batch";
  let description = [{
    On a `train.value_and_grad` whose callee's loss is `sum(x) / c` with a
    constant `c`: `per_sample = d > 0` says `c = d * b` at micro-batch `b`
    (a count, `x.sum() / x.shape[0]` folded at export: the loss is a mean
    with `d` elements per sample); `per_sample = 0` says `c` is the same at
    every `b` (a fixed scale: the loss is a sum). The graph alone cannot
    tell the two apart; the compiler imports the model at two sizes and
    compares (`train::classifyLossDivisor`). `train-microbatch` normalizes
    the loss accordingly; without the attribute it treats `c` as unknown.
  }];
  let parameters = (ins Train_Float<"elements of c per sample, or 0">:$per_sample);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether c does not depend on the micro-batch (the loss is a sum).
    bool isFixed() const { return getPerSample().isZero(); }
  }];
}

//===----------------------------------------------------------------------===//
// Step arguments
//===----------------------------------------------------------------------===//

def Train_ArgRoleAttr : Train_Attr<"ArgRole", "role"> {
  let summary = "what a step or forward argument holds";
  let description = [{
    `#train.role<params>`: the role of an argument of a training step (or of
    the forward function a step is built from), as the `train.role`
    argument attribute and in a finalized step's `train.abi`. The roles are
    the step contract's (`AccrueArgRole` in `accrue-runtime/StepABI.h`),
    spelled as there: params, accumulator, state, batch, lr, step,
    valid_samples, loss_scale, sample_base, metrics, output, workspace,
    loss_scale_streak, buffers.
  }];
  let parameters = (ins "AccrueArgRole":$value);
  let hasCustomAssemblyFormat = 1;
}

#endif // ACCRUE_DIALECT_TRAIN_IR_TRAINATTRS_TD
