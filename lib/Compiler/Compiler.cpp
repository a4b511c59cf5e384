//===- Compiler.cpp - compile an ONNX model into a training step -===//

#include "accrue/Compiler/Compiler.h"

#include "Artifact.h"
#include "MemoryPlan.h"
#include "StepSource.h"

#include "accrue/Codegen/Target.h"
#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Utils/MemoryEstimate.h"
#include "accrue/Dialect/Train/Utils/StepBuilder.h"
#include "accrue/InitAllDialects.h"
#include "accrue/Pipelines/Pipelines.h"
#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

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

/// Writes `text` to `path` ("-" is stdout).
LogicalResult writeText(MLIRContext &ctx, StringRef path,
                        llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return emitError(UnknownLoc::get(&ctx))
           << "cannot write '" << path << "': " << ec.message();
  write(out.os());
  out.os().flush();
  if (std::error_code writeError = out.os().error()) {
    out.os().clear_error();
    return emitError(UnknownLoc::get(&ctx))
           << "cannot write '" << path << "': " << writeError.message();
  }
  out.keep();
  return success();
}

/// Writes `text` to the file `path`, reporting a failed write (a full disk)
/// in `error`.
LogicalResult writeTextFile(const std::string &path, StringRef text,
                            std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec) {
    os << text;
    os.close();
    ec = os.error();
    os.clear_error();
  }
  if (ec)
    error = "cannot write '" + path + "': " + ec.message();
  return failure(bool(ec));
}

/// Moves the finished temporary directory into place, replacing an earlier
/// artifact. Refuses to replace a directory that is not an artifact.
LogicalResult installDirectory(MLIRContext &ctx, StringRef tmp,
                               StringRef target) {
  Location loc = UnknownLoc::get(&ctx);
  if (llvm::sys::fs::exists(target)) {
    SmallString<256> manifest(target);
    llvm::sys::path::append(manifest, ACCRUE_FILE_MANIFEST);
    bool empty = true;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(target, ec), end;
         !ec && it != end; it.increment(ec))
      empty = false;
    if (!llvm::sys::fs::is_directory(target) ||
        (!empty && !llvm::sys::fs::exists(manifest)))
      return emitError(loc) << settingRef("output") << " '" << target
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
    error = (settingRef("loss_scale") + " '" + text + "': " + why +
             " (expected none, static:S or dynamic[:init=S,growth=G,"
             "backoff=B,interval=N])")
                .str();
    return failure();
  };
  auto [mode, rest] = text.split(':');
  if (accrueParseLossScaleMode(mode.str().c_str(), &options.mode) != 0)
    return fail("unknown mode '" + mode + "'");
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
  // (The step reports its streak, always below the interval, as an f32.)
  if (options.interval < 1 || options.interval > (int64_t(1) << 24))
    return fail("interval must be in [1, 2^24]");
  return options;
}

std::optional<std::string>
accrue::validateOptions(const CompilerOptions &options) {
  const OptimizerOptions &opt = options.optimizer;
  auto ref = [](const char *name) { return settingRef(name); };
  auto finite = [](double v) { return std::isfinite(v); };
  if (!options.microBatch && !options.memoryBudget)
    return ref("micro_batch") + " is required (or " + ref("memory_budget") +
           " to choose it)";
  if (options.microBatch && *options.microBatch < 1)
    return ref("micro_batch") + " must be >= 1, got " +
           std::to_string(*options.microBatch);
  if (options.accumulationSteps < 1)
    return ref("accumulation_steps") + " must be >= 1, got " +
           std::to_string(options.accumulationSteps);
  if (options.ranks < 1)
    return ref("ranks") + " must be >= 1, got " + std::to_string(options.ranks);
  if (options.effectiveBatch && *options.effectiveBatch < 1)
    return ref("effective_batch") + " must be >= 1, got " +
           std::to_string(*options.effectiveBatch);
  if (opt.lr && (!finite(*opt.lr) || *opt.lr < 0))
    return ref("lr") + " must be a finite, non-negative number";
  if (!finite(opt.momentum) || opt.momentum < 0)
    return ref("momentum") + " must be >= 0";
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
    return ref("nesterov") + " needs " + ref("momentum") + " > 0 and zero " +
           ref("dampening");
  if (!(opt.beta1 >= 0 && opt.beta1 < 1))
    return ref("beta1") + " must be in [0, 1)";
  if (!(opt.beta2 >= 0 && opt.beta2 < 1))
    return ref("beta2") + " must be in [0, 1)";
  if (opt.eps && (!(*opt.eps > 0) || !finite(*opt.eps)))
    return ref("eps") + " must be positive";
  if (!(opt.lrDecay >= 0) || !finite(opt.lrDecay))
    return ref("lr_decay") + " must be >= 0";
  if (opt.weightDecay && (!finite(*opt.weightDecay) || *opt.weightDecay < 0))
    return ref("weight_decay") + " must be >= 0";
  if (opt.clipNorm && !(*opt.clipNorm > 0 && finite(*opt.clipNorm)))
    return ref("clip_norm") + " must be positive";
  if (opt.clipNorm && opt.kind == ACCRUE_OPTIMIZER_NONE)
    return ref("clip_norm") + " needs an optimizer; " + ref("optimizer") +
           " none only computes gradients";
  if (options.lossScale.mode != ACCRUE_LOSS_SCALE_NONE &&
      opt.kind == ACCRUE_OPTIMIZER_NONE)
    return ref("loss_scale") + " needs an optimizer: with " +
           ref("optimizer") + " none nothing skips an overflowing step";
  if (std::optional<std::string> error =
          validatePipelineOptions(options.pipeline))
    return error;
  if (options.output.empty())
    return ref("output") + ": an output is required";
  return std::nullopt;
}

/// "16GiB", "512MiB", "2GB", "1e9" as bytes (binary and decimal units).
static std::optional<int64_t> parseByteSize(StringRef text) {
  text = text.trim();
  size_t split = text.find_first_not_of("0123456789.eE+-");
  StringRef number = text.take_front(split), unit = text.drop_front(
                                                  number.size()).trim();
  double value;
  if (number.empty() || number.getAsDouble(value))
    return std::nullopt;
  static const std::pair<const char *, double> units[] = {
      {"", 1},          {"B", 1},          {"KiB", 1024.0},
      {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},      {"MB", 1e6},       {"GB", 1e9},
      {"TB", 1e12}};
  for (auto [name, scale] : units)
    if (unit.equals_insensitive(name) && value * scale < 9e18)
      return static_cast<int64_t>(value * scale);
  return std::nullopt;
}

void accrue::bindCompilerSettings(SettingTable &table,
                                  CompilerOptions &options) {
  onnx_import::ImportOptions &import = options.import;
  OptimizerOptions &opt = options.optimizer;
  table.integer("micro_batch",
                "Samples per micro-batch (required unless memory_budget "
                "chooses it)",
                options.microBatch);
  table.integer("accumulation_steps",
                "Micro-batches per optimizer step (the default of "
                "accrue-train; the step takes any number at run time)",
                options.accumulationSteps);
  table.custom(
      "optimizer",
      "sgd, adam, adamw, adagrad, onnx-adam or none (default: the model's "
      "TrainingInfoProto, else adamw)",
      Setting::Kind::Choice,
      [&opt](StringRef value) -> std::optional<std::string> {
        AccrueOptimizer kind;
        if (accrueParseOptimizer(value.str().c_str(), &kind) != 0)
          return settingRef("optimizer") +
                 " must be sgd, adam, adamw, adagrad, onnx-adam or none, "
                 "not '" +
                 value.str() + "'";
        opt.kind = kind;
        return std::nullopt;
      });
  table.number("lr",
               "Learning rate (default: the model's TrainingInfoProto, else "
               "1e-3)",
               opt.lr);
  table.number("momentum", "SGD momentum", opt.momentum);
  table.number("dampening", "SGD dampening", opt.dampening);
  table.flag("nesterov", "SGD Nesterov momentum", opt.nesterov);
  table.number("lr_decay", "Adagrad learning-rate decay", opt.lrDecay);
  table.number("beta1", "Adam beta1 (ONNX Adam alpha)", opt.beta1);
  table.number("beta2", "Adam beta2 (ONNX Adam beta)", opt.beta2);
  table.number("eps",
               "Epsilon (default: 1e-8 adam/adamw, 1e-10 adagrad, 1e-6 "
               "onnx-adam)",
               opt.eps);
  table.number("weight_decay",
               "Weight decay (default: 0.01 for adamw, 0 otherwise)",
               opt.weightDecay);
  table.number("clip_norm", "Clip the global gradient L2 norm to this",
               opt.clipNorm);
  table.custom("loss_scale",
               "none (default), static:S or dynamic[:init=65536,growth=2,"
               "backoff=0.5,interval=2000]",
               Setting::Kind::Text,
               [&options](StringRef value) -> std::optional<std::string> {
                 std::string error;
                 FailureOr<LossScaleOptions> parsed =
                     parseLossScale(value, error);
                 if (failed(parsed))
                   return error;
                 options.lossScale = *parsed;
                 return std::nullopt;
               });
  bindPipelineSettings(table, options.pipeline);
  table.text("loss", "Name of the loss output", import.lossName);
  table.text("freeze", "Regex of initializers not to train",
             import.freezeRegex);
  table.flag("strict",
             "Refuse operators that make accumulation differ from one big "
             "batch (BatchNormalization in training mode) instead of "
             "warning",
             import.strict);
  table.integer("seed",
                "Seed of training-mode Dropout nodes without a seed "
                "attribute",
                import.dropoutSeed);
  table.custom(
      "emit", "import, linalg, mlir, llvm or artifact (default)",
      Setting::Kind::Choice,
      [&options](StringRef value) -> std::optional<std::string> {
        static const std::pair<const char *, EmitKind> kinds[] = {
            {"import", EmitKind::Import}, {"linalg", EmitKind::Linalg},
            {"mlir", EmitKind::MLIR},     {"llvm", EmitKind::LLVM},
            {"artifact", EmitKind::Artifact}};
        for (auto [name, kind] : kinds)
          if (value == name) {
            options.emit = kind;
            return std::nullopt;
          }
        return settingRef("emit") +
               " must be import, linalg, mlir, llvm or artifact, not '" +
               value.str() + "'";
      });
  table.text("target_cpu", "host (default) or an LLVM CPU name",
             options.host.cpu);
  table.text("lld", "Path of ld.lld", options.lldPath);
  table.custom("memory_budget",
               "Choose the micro-batch: the largest whose planned peak "
               "memory fits this many bytes (16GiB, 512MiB, 1e9; CPU)",
               Setting::Kind::Text,
               [&options](StringRef value) -> std::optional<std::string> {
                 std::optional<int64_t> bytes = parseByteSize(value);
                 if (!bytes || *bytes <= 0)
                   return settingRef("memory_budget") +
                          " must be a size such as 16GiB, 512MiB or 1e9, "
                          "not '" + value.str() + "'";
                 options.memoryBudget = *bytes;
                 return std::nullopt;
               });
  table.integer("effective_batch",
                "Samples per optimizer step over all ranks (E = b x K x G): "
                "sets the accumulation steps K",
                options.effectiveBatch);
  table.integer("ranks",
                "Data-parallel ranks G that --effective-batch is spread "
                "over (default 1)",
                options.ranks);
  Setting &plan = table.custom(
      "plan",
      "Print the memory plan: parameter, gradient, optimizer-state and "
      "activation bytes (per sample and fixed) and the peak at the "
      "micro-batch; also recorded in step.json",
      Setting::Kind::Choice,
      [&options](StringRef value) -> std::optional<std::string> {
        if (value != "text" && value != "json")
          return settingRef("plan") + " must be text or json, not '" +
                 value.str() + "'";
        options.plan = value.str();
        return std::nullopt;
      });
  plan.choices = {"text", "json"};
  plan.implicitValue = "text";
}

namespace {

/// compileModel once the micro-batch and K are known.
LogicalResult compileStep(MLIRContext &ctx, StepSource &source,
                          const CompilerOptions &options) {
  // --mlir-timing reports every phase, passes included.
  DefaultTimingManager timing;
  if (options.commandLineOptions)
    applyDefaultTimingManagerCLOptions(timing);
  TimingScope root = timing.getRootScope();
  TimingScope phase = root.nest("import ONNX and build the step");

  FailureOr<StepSource::Imported> imported =
      source.import(options, *options.microBatch, /*parameterValues=*/true);
  if (failed(imported))
    return failure();
  onnx_import::ImportedModel *model = &imported->model;
  ModuleOp module = *model->module;

  // The model may say which optimizer it trains with.
  const CompilerOptions &resolved = imported->resolved;
  if (std::optional<std::string> error = validateOptions(resolved))
    return emitError(UnknownLoc::get(&ctx)) << *error;
  FailureOr<train::StepLayout> layout =
      train::buildTrainStep(module, model->forward, imported->step);
  if (failed(layout))
    return failure();
  auto writeModule = [&] {
    return writeText(ctx, options.output, [&](llvm::raw_ostream &os) {
      module.print(os);
      os << "\n";
    });
  };
  if (options.emit == EmitKind::Import)
    return writeModule();

  // The passes of buildCompilePipeline, in three runs so the step can be
  // described and measured between them; the target says what runs.
  const Target &target = Target::get(options.pipeline.target);
  if (std::optional<std::string> missing =
          target.checkToolchain(options.pipeline))
    return emitError(UnknownLoc::get(&ctx)) << *missing;
  CompileOptions lowering = options.pipeline;
  target.resolveForHost(lowering, options.host);
  auto runPasses = [&](StringRef name,
                       function_ref<void(OpPassManager &)> build) {
    phase.stop();
    phase = root.nest(name);
    PassManager pm(&ctx);
    build(pm);
    pm.enableTiming(phase);
    if (options.commandLineOptions && failed(applyPassManagerCLOptions(pm)))
      return failure();
    return pm.run(module);
  };
  if (failed(runPasses("train passes", [&](OpPassManager &pm) {
        buildTrainPipeline(pm, lowering.train);
      })) ||
      failed(runPasses("bufferize", [&](OpPassManager &pm) {
        target.buildBufferizationPipeline(pm, lowering);
      })))
    return failure();
  // The contract of the finished step, from its IR.
  FailureOr<rt::Manifest> manifest =
      buildManifest(module, resolved, *model, *layout);
  if (failed(manifest))
    return failure();
  if (options.effectiveBatch)
    if (std::optional<std::string> problem = manifest->effectiveBatchProblem(
            *options.effectiveBatch, options.accumulationSteps, options.ranks))
      return emitError(UnknownLoc::get(&ctx)) << *problem;
  if (auto step = module.lookupSymbol<func::FuncOp>(ACCRUE_STEP_FUNCTION))
    manifest->activationBytes = target.activationBytes(step);
  if (!options.plan.empty()) {
    if (!target.plansMemory())
      return emitError(UnknownLoc::get(&ctx))
             << settingRef("plan") << " plans CPU steps only for now";
    FailureOr<rt::MemoryPlan> plan =
        buildMemoryPlan(ctx, source, resolved, *manifest);
    if (failed(plan))
      return failure();
    manifest->memoryPlan = *plan;
    if (options.plan == "json")
      llvm::outs() << rt::memoryPlanJsonText(*plan) << "\n";
    else
      printMemoryPlan(llvm::outs(), *plan);
    llvm::outs().flush();
  }
  if (options.emit == EmitKind::Linalg)
    return writeModule();

  if (failed(runPasses("lower to LLVM dialect", [&](OpPassManager &pm) {
        target.buildToLLVMPipeline(pm, lowering);
      })))
    return failure();
  if (options.emit == EmitKind::MLIR)
    return writeModule();
  FailureOr<std::map<std::string, std::string>> targetFiles =
      target.extractFiles(module, lowering);
  if (failed(targetFiles))
    return failure();

  phase.stop();
  phase = root.nest("translate to LLVM IR");
  llvm::LLVMContext llvmContext;
  HostCodeOptions host = target.hostCode(options.host, lowering);
  FailureOr<std::unique_ptr<llvm::Module>> llvmModule =
      translateToLLVMIR(module, llvmContext, host);
  if (failed(llvmModule))
    return failure();
  embedFingerprint(**llvmModule, *manifest);
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

  std::string error;
  std::string object = file("step.o");
  std::string lld =
      options.lldPath.empty() ? ACCRUE_DEFAULT_LLD : options.lldPath;
  phase.stop();
  phase = root.nest("LLVM -O3 and code generation");
  // (Code generation at the requested level, also for a device step.)
  if (failed(writeObjectFile(**llvmModule, options.host, object, error)))
    return fail(error);
  phase.stop();
  phase = root.nest("link and write the artifact");
  if (failed(linkSharedLibrary(object, file(manifest->library), lld, error)) ||
      failed(writeInitialParameters(*model, file(manifest->init), error)) ||
      failed(writeExportableModel(*model, file(manifest->model),
                                  error)) ||
      failed(writeTextFile(file(ACCRUE_FILE_HEADER), buildHeader(*manifest),
                           error)))
    return fail(error);
  std::vector<std::string> written = {manifest->library, manifest->init,
                                      manifest->model, ACCRUE_FILE_HEADER};
  for (const auto &[name, text] : *targetFiles) {
    written.push_back(name);
    if (failed(writeTextFile(file(name), text, error)))
      return fail(error);
  }
  // The manifest last, with the size and checksum of every file before it:
  // the runtime checks them before it maps or reads anything.
  for (const std::string &name : written)
    if (!rt::recordFile(file(name), manifest->files[name], error))
      return fail(error);
  if (failed(writeTextFile(file(ACCRUE_FILE_MANIFEST), manifest->toJson(),
                           error)))
    return fail(error);
  llvm::sys::fs::remove(object);
  if (failed(installDirectory(ctx, tmp, options.output))) {
    llvm::sys::fs::remove_directories(tmp);
    return failure();
  }
  return success();
}

} // namespace

LogicalResult accrue::compileModel(MLIRContext &ctx,
                                   const CompilerOptions &options) {
  if (std::optional<std::string> error = validateOptions(options))
    return emitError(UnknownLoc::get(&ctx)) << *error;
  DialectRegistry registry;
  registerAllDialects(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
  // The model is read once; every import of it below comes from `source`.
  FailureOr<StepSource> source =
      StepSource::open(ctx, options.import.modelPath);
  if (failed(source))
    return failure();
  if (!options.memoryBudget && !options.effectiveBatch)
    return compileStep(ctx, *source, options);
  FailureOr<CompilerOptions> chosen = chooseBatch(ctx, *source, options);
  if (failed(chosen))
    return failure();
  return compileStep(ctx, *source, *chosen);
}
