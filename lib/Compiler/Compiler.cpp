//===- Compiler.cpp - compile an ONNX model into a training step -*- C++
//-*-===//

#include "accrue/Compiler/Compiler.h"

#include "Artifact.h"

#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Utils/MemoryEstimate.h"
#include "accrue/Dialect/Train/Utils/StepBuilder.h"
#include "accrue/InitAllDialects.h"
#include "accrue/Codegen/CPU/Pipelines.h"
#include "accrue/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>

#ifndef ACCRUE_DEFAULT_LLD
#define ACCRUE_DEFAULT_LLD "ld.lld"
#endif

using namespace mlir;
using namespace accrue;

namespace {

/// Checks option values; errors name the flag.
LogicalResult validate(MLIRContext &ctx, const CompilerOptions &options) {
  Location loc = UnknownLoc::get(&ctx);
  const OptimizerOptions &opt = options.optimizer;
  if (options.import.microBatch < 1)
    return emitError(loc) << "--micro-batch must be >= 1, got "
                          << options.import.microBatch;
  if (options.accumulationSteps < 1)
    return emitError(loc) << "--accumulation-steps must be >= 1, got "
                          << options.accumulationSteps;
  if (!opt.name.empty() &&
      !llvm::is_contained(
          {"sgd", "adam", "adamw", "adagrad", "onnx-adam", "none"}, opt.name))
    return emitError(loc) << "--optimizer must be sgd, adam, adamw, adagrad, "
                             "onnx-adam or none, not '"
                          << opt.name << "'";
  auto finite = [](double v) { return std::isfinite(v); };
  if (opt.lr && (!finite(*opt.lr) || *opt.lr < 0))
    return emitError(loc) << "--lr must be a finite, non-negative number";
  if (!finite(opt.momentum) || opt.momentum < 0)
    return emitError(loc) << "--momentum must be >= 0";
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
    return emitError(loc)
           << "--nesterov needs --momentum > 0 and zero --dampening";
  if (!(opt.beta1 >= 0 && opt.beta1 < 1))
    return emitError(loc) << "--beta1 must be in [0, 1)";
  if (!(opt.beta2 >= 0 && opt.beta2 < 1))
    return emitError(loc) << "--beta2 must be in [0, 1)";
  if (opt.eps && (!(*opt.eps > 0) || !finite(*opt.eps)))
    return emitError(loc) << "--eps must be positive";
  if (!(opt.lrDecay >= 0) || !finite(opt.lrDecay))
    return emitError(loc) << "--lr-decay must be >= 0";
  if (opt.weightDecay && (!finite(*opt.weightDecay) || *opt.weightDecay < 0))
    return emitError(loc) << "--weight-decay must be >= 0";
  if (opt.clipNorm && !(*opt.clipNorm > 0 && finite(*opt.clipNorm)))
    return emitError(loc) << "--clip-norm must be positive";
  if (opt.clipNorm && opt.name == "none")
    return emitError(loc) << "--clip-norm needs an optimizer; --optimizer none "
                             "only computes gradients";
  const std::string &collectives = options.pipeline.train.collectives;
  if (collectives != "none" && collectives != "deferred" &&
      collectives != "per-micro-batch")
    return emitError(loc) << "--collectives must be deferred or "
                             "per-micro-batch, not '"
                          << collectives << "'";
  const std::string &precision = options.pipeline.train.precision;
  if (precision != "fp32" && precision != "bf16" && precision != "fp16")
    return emitError(loc) << "--precision must be fp32, bf16 or fp16, not '"
                          << precision << "'";
  const std::string &norm = options.pipeline.train.lossNormalization;
  if (norm != "exact" && norm != "per-micro-batch")
    return emitError(loc) << "--loss-normalization must be exact or "
                             "per-micro-batch, not '"
                          << norm << "'";
  if (options.output.empty())
    return emitError(loc) << "-o: an output is required";
  return success();
}

train::OptimizerAttrInterface buildOptimizer(MLIRContext &ctx,
                                             const OptimizerOptions &opt) {
  auto f = [](double v) { return llvm::APFloat(v); };
  if (opt.name == "sgd")
    return train::SGDAttr::get(&ctx, f(opt.momentum), f(opt.dampening),
                               opt.nesterov, f(opt.weightDecay.value_or(0.0)));
  if (opt.name == "adam")
    return train::AdamAttr::get(&ctx, f(opt.beta1), f(opt.beta2),
                                f(opt.eps.value_or(1e-8)),
                                f(opt.weightDecay.value_or(0.0)));
  if (opt.name == "adamw")
    return train::AdamWAttr::get(&ctx, f(opt.beta1), f(opt.beta2),
                                 f(opt.eps.value_or(1e-8)),
                                 f(opt.weightDecay.value_or(0.01)));
  if (opt.name == "adagrad")
    return train::AdagradAttr::get(&ctx, f(opt.lrDecay),
                                   f(opt.weightDecay.value_or(0.0)),
                                   f(opt.eps.value_or(1e-10)));
  if (opt.name == "onnx-adam")
    return train::OnnxAdamAttr::get(
        &ctx, f(opt.beta1), f(opt.beta2), f(opt.eps.value_or(1e-6)),
        f(opt.weightDecay.value_or(0.0)), f(opt.postWeightDecay));
  return {};
}

/// Fills what the options leave to the model: the optimizer of its
/// TrainingInfoProto (with that optimizer's hyperparameters) and its
/// learning rate, else AdamW at 1e-3.
void resolveOptimizer(OptimizerOptions &opt,
                      const onnx_import::ImportedModel &model) {
  if (opt.name.empty() && model.optimizer) {
    const onnx_import::ImportedOptimizer &from = *model.optimizer;
    opt.name = from.name;
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
  if (opt.name.empty())
    opt.name = "adamw";
  if (!opt.lr)
    opt.lr = 1e-3;
}

/// Writes `text` to `path` ("-" is stdout).
LogicalResult writeText(MLIRContext &ctx, StringRef path,
                        llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return emitError(UnknownLoc::get(&ctx))
           << "cannot write '" << path << "': " << ec.message();
  write(out.os());
  out.keep();
  return success();
}

/// Moves the finished temporary directory into place, replacing an earlier
/// artifact. Refuses to replace a directory that is not an artifact.
LogicalResult installDirectory(MLIRContext &ctx, StringRef tmp,
                               StringRef target) {
  Location loc = UnknownLoc::get(&ctx);
  if (llvm::sys::fs::exists(target)) {
    SmallString<256> manifest(target);
    llvm::sys::path::append(manifest, "step.json");
    bool empty = true;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(target, ec), end;
         !ec && it != end; it.increment(ec))
      empty = false;
    if (!llvm::sys::fs::is_directory(target) ||
        (!empty && !llvm::sys::fs::exists(manifest)))
      return emitError(loc) << "-o '" << target
                            << "' exists and is not an Accrue artifact; "
                               "refusing to replace it";
    std::string old =
        (target + ".old-" + std::to_string(llvm::sys::Process::getProcessId()))
            .str();
    if (llvm::sys::fs::rename(target, old))
      return emitError(loc) << "cannot replace '" << target << "'";
    llvm::sys::fs::remove_directories(old);
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, target))
    return emitError(loc) << "cannot create '" << target
                          << "': " << ec.message();
  return success();
}

} // namespace

FailureOr<LossScaleOptions> accrue::parseLossScale(StringRef text,
                                                   std::string &error) {
  LossScaleOptions options;
  auto fail = [&](const Twine &why) {
    error = ("--loss-scale '" + text + "': " + why +
             " (expected none, static:S or dynamic[:init=S,growth=G,"
             "backoff=B,interval=N])")
                .str();
    return failure();
  };
  auto [mode, rest] = text.split(':');
  options.mode = mode.str();
  if (mode == "none") {
    if (!rest.empty())
      return fail("none takes no settings");
    return options;
  }
  auto number = [&](StringRef digits, double &value) {
    return !digits.getAsDouble(value) && std::isfinite(value);
  };
  if (mode == "static") {
    if (!number(rest, options.scale) || !(options.scale > 0))
      return fail("static needs a positive scale");
    return options;
  }
  if (mode != "dynamic")
    return fail("unknown mode '" + mode + "'");
  SmallVector<StringRef> settings;
  if (!rest.empty())
    rest.split(settings, ',');
  for (StringRef setting : settings) {
    auto [key, value] = setting.split('=');
    double v;
    if (!number(value, v))
      return fail("'" + setting + "' is not KEY=NUMBER");
    if (key == "init")
      options.scale = v;
    else if (key == "growth")
      options.growth = v;
    else if (key == "backoff")
      options.backoff = v;
    else if (key == "interval")
      options.interval = static_cast<int64_t>(v);
    else
      return fail("unknown setting '" + key + "'");
  }
  if (!(options.scale > 0))
    return fail("init must be positive");
  if (!(options.growth > 1))
    return fail("growth must exceed 1");
  if (!(options.backoff > 0 && options.backoff < 1))
    return fail("backoff must be in (0, 1)");
  if (options.interval < 1)
    return fail("interval must be >= 1");
  return options;
}

LogicalResult accrue::compileModel(MLIRContext &ctx,
                                   const CompilerOptions &options) {
  if (failed(validate(ctx, options)))
    return failure();
  DialectRegistry registry;
  registerAllDialects(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
  // --mlir-timing reports every phase, passes included.
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope root = timing.getRootScope();
  TimingScope phase = root.nest("import ONNX and build the step");

  auto buffer = llvm::MemoryBuffer::getFile(options.import.modelPath,
                                            /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(UnknownLoc::get(&ctx))
           << "cannot read '" << options.import.modelPath
           << "': " << buffer.getError().message();
  StringRef bytes = (*buffer)->getBuffer();
  FailureOr<onnx_import::ImportedModel> model =
      onnx_import::importModel(&ctx, bytes, options.import);
  if (failed(model))
    return failure();
  ModuleOp module = *model->module;

  train::StepOptions stepOptions;
  stepOptions.microBatch = options.import.microBatch;
  CompilerOptions resolved = options;
  resolveOptimizer(resolved.optimizer, *model);
  if (resolved.optimizer.name == "none" && resolved.optimizer.clipNorm)
    return emitError(UnknownLoc::get(&ctx))
           << "--clip-norm needs an optimizer; --optimizer none only computes "
              "gradients";
  stepOptions.optimizer = buildOptimizer(ctx, resolved.optimizer);
  stepOptions.maxNorm = resolved.optimizer.clipNorm;
  stepOptions.lossScale = resolved.lossScale.mode != "none";
  stepOptions.dataParallel = options.pipeline.train.collectives != "none";
  if (stepOptions.lossScale && resolved.optimizer.name == "none")
    return emitError(UnknownLoc::get(&ctx))
           << "--loss-scale needs an optimizer: with --optimizer none "
              "nothing skips an overflowing step";
  FailureOr<train::StepLayout> layout =
      train::buildTrainStep(module, model->forward, stepOptions);
  if (failed(layout))
    return failure();
  if (options.emit == EmitKind::Import)
    return writeText(ctx, options.output, [&](llvm::raw_ostream &os) {
      module.print(os);
      os << "\n";
    });

  // The same passes as buildCompilePipeline, in three runs so the step can
  // be measured once bufferized.
  auto runPasses = [&](StringRef name,
                       function_ref<void(OpPassManager &)> build) {
    phase.stop();
    phase = root.nest(name);
    PassManager pm(&ctx);
    build(pm);
    pm.enableTiming(phase);
    return failed(applyPassManagerCLOptions(pm)) || failed(pm.run(module))
               ? failure()
               : success();
  };
  if (failed(runPasses("train passes",
                       [&](OpPassManager &pm) {
                         buildTrainPipeline(pm, options.pipeline.train);
                       })) ||
      failed(runPasses("bufferize", [&](OpPassManager &pm) {
        cpu::buildCPUBufferizationPipeline(pm, options.pipeline.cpu);
      })))
    return failure();
  std::optional<int64_t> activationBytes;
  bool partialWindows = false;
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn->hasAttr(train::StepAttrs::kStep)) {
      activationBytes = train::estimateMicroStepPeakBytes(fn);
      partialWindows = fn->hasAttr(train::StepAttrs::kPartialWindows);
    }
  if (options.emit == EmitKind::Linalg)
    return writeText(ctx, options.output, [&](llvm::raw_ostream &os) {
      module.print(os);
      os << "\n";
    });

  // The vector kernels' blocks fit the target's registers.
  CPULoweringOptions lowering = options.pipeline.cpu;
  lowering.vectorBits = cpu::vectorRegisterBits(options.target);
  if (failed(runPasses("lower to LLVM dialect", [&](OpPassManager &pm) {
        cpu::buildCPUToLLVMPipeline(pm, lowering);
      })))
    return failure();
  if (options.emit == EmitKind::MLIR)
    return writeText(ctx, options.output, [&](llvm::raw_ostream &os) {
      module.print(os);
      os << "\n";
    });

  phase.stop();
  phase = root.nest("translate to LLVM IR");
  llvm::LLVMContext llvmContext;
  FailureOr<std::unique_ptr<llvm::Module>> llvmModule =
      cpu::translateToLLVMIR(module, llvmContext, options.target);
  if (failed(llvmModule))
    return failure();
  if (options.emit == EmitKind::LLVM)
    return writeText(ctx, options.output, [&](llvm::raw_ostream &os) {
      (*llvmModule)->print(os, nullptr);
    });

  // The artifact, built in a temporary directory next to the target.
  Location loc = UnknownLoc::get(&ctx);
  std::string tmp = options.output + ".tmp-" +
                    std::to_string(llvm::sys::Process::getProcessId());
  llvm::sys::fs::remove_directories(tmp);
  if (std::error_code ec = llvm::sys::fs::create_directories(tmp))
    return emitError(loc) << "cannot create '" << tmp << "': " << ec.message();
  auto fail = [&](const std::string &message) {
    llvm::sys::fs::remove_directories(tmp);
    return emitError(loc) << message;
  };
  auto file = [&](StringRef name) {
    SmallString<256> path(tmp);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };

  ArtifactInfo info{&resolved, &*model, *layout, activationBytes,
                    partialWindows};
  std::string error;
  std::string object = file("step.o");
  std::string lld =
      options.lldPath.empty() ? ACCRUE_DEFAULT_LLD : options.lldPath;
  phase.stop();
  phase = root.nest("LLVM -O3 and code generation");
  if (failed(
          cpu::writeObjectFile(**llvmModule, options.target, object, error)))
    return fail(error);
  phase.stop();
  phase = root.nest("link and write the artifact");
  if (failed(cpu::linkSharedLibrary(object, file("step.so"), lld, error)) ||
      failed(writeInitialParameters(info, file("init.safetensors"), error)) ||
      failed(writeExportableModel(bytes, info, file("model.onnx"), error)))
    return fail(error);
  llvm::sys::fs::remove(object);
  std::error_code ec;
  {
    llvm::raw_fd_ostream json(file("step.json"), ec);
    if (ec)
      return fail("cannot write step.json: " + ec.message());
    json << llvm::formatv("{0:2}", buildManifest(info)) << "\n";
    llvm::raw_fd_ostream header(file("step.h"), ec);
    if (ec)
      return fail("cannot write step.h: " + ec.message());
    header << buildHeader(info);
  }
  if (failed(installDirectory(ctx, tmp, options.output))) {
    llvm::sys::fs::remove_directories(tmp);
    return failure();
  }
  return success();
}
