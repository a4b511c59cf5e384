//===- StepSource.cpp - the model a compilation builds steps from -===//

#include "StepSource.h"

#include "accrue/Dialect/Train/Utils/LossDivisor.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace accrue;

namespace {

train::OptimizerAttrInterface buildOptimizer(MLIRContext &ctx,
                                             const OptimizerOptions &opt) {
  auto f = [](double v) { return llvm::APFloat(v); };
  switch (*opt.kind) {
  case ACCRUE_OPTIMIZER_SGD:
    return train::SGDAttr::get(&ctx, f(opt.momentum), f(opt.dampening),
                               opt.nesterov, f(opt.weightDecay.value_or(0.0)));
  case ACCRUE_OPTIMIZER_ADAM:
    return train::AdamAttr::get(&ctx, f(opt.beta1), f(opt.beta2),
                                f(opt.eps.value_or(1e-8)),
                                f(opt.weightDecay.value_or(0.0)));
  case ACCRUE_OPTIMIZER_ADAMW:
    return train::AdamWAttr::get(&ctx, f(opt.beta1), f(opt.beta2),
                                 f(opt.eps.value_or(1e-8)),
                                 f(opt.weightDecay.value_or(0.01)));
  case ACCRUE_OPTIMIZER_ADAGRAD:
    return train::AdagradAttr::get(&ctx, f(opt.lrDecay),
                                   f(opt.weightDecay.value_or(0.0)),
                                   f(opt.eps.value_or(1e-10)));
  case ACCRUE_OPTIMIZER_ONNX_ADAM:
    return train::OnnxAdamAttr::get(
        &ctx, f(opt.beta1), f(opt.beta2), f(opt.eps.value_or(1e-6)),
        f(opt.weightDecay.value_or(0.0)), f(opt.postWeightDecay));
  case ACCRUE_OPTIMIZER_NONE:
    break;
  }
  return {};
}

/// The step that `options` (its optimizer resolved) asks for at
/// micro-batch `b`.
train::StepOptions stepOptionsFor(MLIRContext &ctx,
                                  const CompilerOptions &options, int64_t b) {
  train::StepOptions step;
  step.microBatch = b;
  step.optimizer = buildOptimizer(ctx, options.optimizer);
  step.maxNorm = options.optimizer.clipNorm;
  step.lossScale = options.lossScale.mode != ACCRUE_LOSS_SCALE_NONE;
  if (options.lossScale.mode == ACCRUE_LOSS_SCALE_DYNAMIC) {
    step.lossScaleGrowth = options.lossScale.growth;
    step.lossScaleBackoff = options.lossScale.backoff;
    step.lossScaleInterval = options.lossScale.interval;
  }
  step.dataParallel =
      options.pipeline.train.collectives != ACCRUE_COLLECTIVES_NONE;
  return step;
}

} // namespace

void accrue::resolveOptimizer(OptimizerOptions &opt,
                              const onnx_import::ImportedModel &model) {
  if (!opt.kind && model.optimizer) {
    const onnx_import::ImportedOptimizer &from = *model.optimizer;
    opt.kind = from.kind;
    auto param = [&](StringRef key, double fallback) {
      auto it = from.params.find(key.str());
      return it == from.params.end() ? fallback : it->second;
    };
    opt.beta1 = param("beta1", opt.beta1);
    opt.beta2 = param("beta2", opt.beta2);
    if (from.params.count("eps"))
      opt.eps = param("eps", 0);
    if (from.params.count("weight_decay"))
      opt.weightDecay = param("weight_decay", 0);
    opt.postWeightDecay = param("post_weight_decay", opt.postWeightDecay);
    opt.momentum = param("momentum", opt.momentum);
    opt.dampening = param("dampening", opt.dampening);
    opt.nesterov = param("nesterov", opt.nesterov) != 0;
    opt.lrDecay = param("lr_decay", opt.lrDecay);
    if (!opt.lr && from.lr)
      opt.lr = from.lr;
  }
  if (!opt.kind)
    opt.kind = ACCRUE_OPTIMIZER_ADAMW;
  if (!opt.lr)
    opt.lr = 1e-3;
}

FailureOr<StepSource> StepSource::open(MLIRContext &ctx, StringRef path) {
  FailureOr<onnx_import::ModelSource> source =
      onnx_import::ModelSource::readFile(&ctx, path);
  if (failed(source))
    return failure();
  return StepSource(ctx, std::move(*source));
}

train::LossDivisorAttr
StepSource::lossDivisor(const onnx_import::ImportedModel &model,
                        const onnx_import::ImportOptions &import) {
  auto [known, inserted] = divisors.try_emplace(import.microBatch);
  train::LossDivisorAttr &divisor = known->second;
  if (!inserted)
    return divisor;
  func::FuncOp forward = model.forward;
  Value loss = forward.front().getTerminator()->getOperand(0);
  if (!train::getConstantDivision(loss))
    return divisor;
  onnx_import::ImportOptions next = import;
  next.microBatch = import.microBatch + 1;
  next.loadParameterValues = false;
  FailureOr<onnx_import::ImportedModel> atNext;
  {
    // Whatever the second import says has been said by the first.
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    atNext = source.import(ctx, next);
  }
  if (succeeded(atNext))
    divisor = train::classifyLossDivisor(model.forward, atNext->forward,
                                         import.microBatch);
  return divisor;
}

FailureOr<StepSource::Imported>
StepSource::import(const CompilerOptions &options, int64_t b,
                   bool parameterValues) {
  onnx_import::ImportOptions import = options.import;
  import.microBatch = b;
  import.loadParameterValues = parameterValues;
  FailureOr<onnx_import::ImportedModel> model = source.import(ctx, import);
  if (failed(model))
    return failure();
  Imported result{std::move(*model), options, {}};
  // The model may say which optimizer it trains with.
  resolveOptimizer(result.resolved.optimizer, result.model);
  result.step = stepOptionsFor(*ctx, result.resolved, b);
  result.step.lossDivisor = lossDivisor(result.model, import);
  return result;
}
