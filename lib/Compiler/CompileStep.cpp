//===- CompileStep.cpp - the phases from a model to an artifact -*- C++ -*-===//
//
// compileModel runs one list of phases, the same for every target (the
// target says what runs inside them): import the model and build the step,
// the train passes, bufferization, the step's contract and memory, lowering
// to the LLVM dialect, translation to LLVM IR, code generation, and the
// artifact. `--emit` stops after the phase whose output it names.
//
//===----------------------------------------------------------------------===//

#include "accrue/Compiler/Compiler.h"

#include "Artifact.h"
#include "MemoryPlan.h"
#include "StepSource.h"

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/Target.h"
#include "accrue/InitAllDialects.h"
#include "accrue/Pipelines/Pipelines.h"

#include "accrue-runtime/Settings.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"

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

/// One step on its way from the model to the artifact: what the phases
/// have made so far.
class StepCompilation {
public:
  StepCompilation(MLIRContext &ctx, StepSource &source,
                  const CompilerOptions &options, CompileResult *result)
      : ctx(ctx), source(source), options(options), result(result),
        target(Target::get(options.pipeline.target)) {}

  /// Runs the phases in order, each timed (--mlir-timing), up to the one
  /// whose output `--emit` asks for, and writes that output.
  LogicalResult run();

private:
  // The phases, in order.
  LogicalResult importAndBuildStep();
  LogicalResult runTrainPasses();
  LogicalResult bufferize();
  LogicalResult describeStep();
  LogicalResult lowerToLLVMDialect();
  LogicalResult translateToLLVMIR();
  LogicalResult generateCode();
  LogicalResult writeArtifact();

  /// Runs the pass pipeline `build` adds on the module.
  LogicalResult runPasses(function_ref<void(OpPassManager &)> build);
  /// The file `name` of the artifact being written.
  std::string artifactFile(StringRef name) const;

  MLIRContext &ctx;
  StepSource &source;
  const CompilerOptions &options;
  CompileResult *result;
  const Target &target;
  DefaultTimingManager timing;
  std::optional<TimingScope> phase;

  /// The model and the step (its optimizer resolved from the model).
  std::optional<StepSource::Imported> imported;
  ModuleOp module;
  train::StepLayout layout;
  /// The target's settings, resolved for the host.
  CompileOptions lowering;
  std::optional<rt::Manifest> manifest;
  std::map<std::string, std::string> targetFiles;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule;
  /// The artifact's temporary directory (next to the output).
  std::string tmp;
};

LogicalResult StepCompilation::run() {
  struct Phase {
    const char *name;
    LogicalResult (StepCompilation::*run)();
    /// The --emit that stops after this phase (Artifact: none does).
    EmitKind stop;
  };
  static const Phase phases[] = {
      {"import ONNX and build the step", &StepCompilation::importAndBuildStep,
       EmitKind::Import},
      {"train passes", &StepCompilation::runTrainPasses, EmitKind::Artifact},
      {"bufferize", &StepCompilation::bufferize, EmitKind::Artifact},
      {"describe the step", &StepCompilation::describeStep, EmitKind::Linalg},
      {"lower to LLVM dialect", &StepCompilation::lowerToLLVMDialect,
       EmitKind::MLIR},
      {"translate to LLVM IR", &StepCompilation::translateToLLVMIR,
       EmitKind::LLVM},
      {"LLVM -O3 and code generation", &StepCompilation::generateCode,
       EmitKind::Artifact},
      {"link and write the artifact", &StepCompilation::writeArtifact,
       EmitKind::Artifact},
  };
  if (options.commandLineOptions)
    applyDefaultTimingManagerCLOptions(timing);
  TimingScope root = timing.getRootScope();
  for (const Phase &p : phases) {
    phase.emplace(root.nest(p.name));
    LogicalResult done = (this->*p.run)();
    phase.reset();
    if (failed(done))
      return failure();
    if (p.stop == options.emit && options.emit != EmitKind::Artifact)
      break;
  }
  if (options.emit == EmitKind::LLVM)
    return writeText(ctx, options.output, [&](llvm::raw_ostream &os) {
      llvmModule->print(os, nullptr);
    });
  if (options.emit != EmitKind::Artifact)
    return writeText(ctx, options.output, [&](llvm::raw_ostream &os) {
      module.print(os);
      os << "\n";
    });
  return success();
}

LogicalResult
StepCompilation::runPasses(function_ref<void(OpPassManager &)> build) {
  PassManager pm(&ctx);
  build(pm);
  pm.enableTiming(*phase);
  if (options.commandLineOptions && failed(applyPassManagerCLOptions(pm)))
    return failure();
  return pm.run(module);
}

std::string StepCompilation::artifactFile(StringRef name) const {
  SmallString<256> path(tmp);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

LogicalResult StepCompilation::importAndBuildStep() {
  FailureOr<StepSource::Imported> model =
      source.import(options, *options.microBatch, /*parameterValues=*/true);
  if (failed(model))
    return failure();
  imported = std::move(*model);
  module = *imported->model.module;
  // The model may say which optimizer it trains with.
  if (std::optional<std::string> error = validateOptions(imported->resolved))
    return emitError(UnknownLoc::get(&ctx)) << *error;
  FailureOr<train::StepLayout> built =
      train::buildTrainStep(module, imported->model.forward, imported->step);
  if (failed(built))
    return failure();
  layout = *built;
  return success();
}

LogicalResult StepCompilation::runTrainPasses() {
  // From here on the target's tools are needed (a CUDA toolkit).
  if (std::optional<std::string> missing =
          target.checkToolchain(options.pipeline))
    return emitError(UnknownLoc::get(&ctx)) << *missing;
  lowering = options.pipeline;
  if (std::optional<std::string> error =
          target.resolveForHost(lowering, options.host))
    return emitError(UnknownLoc::get(&ctx)) << *error;
  return runPasses(
      [&](OpPassManager &pm) { buildTrainPipeline(pm, lowering); });
}

LogicalResult StepCompilation::bufferize() {
  return runPasses([&](OpPassManager &pm) {
    target.buildBufferizationPipeline(pm, lowering);
  });
}

LogicalResult StepCompilation::describeStep() {
  // The contract of the finished step, from its IR.
  FailureOr<rt::Manifest> described =
      buildManifest(module, imported->resolved, imported->model, layout);
  if (failed(described))
    return failure();
  manifest = std::move(*described);
  if (options.effectiveBatch)
    if (std::optional<std::string> problem = manifest->effectiveBatchProblem(
            *options.effectiveBatch, options.accumulationSteps, options.ranks))
      return emitError(UnknownLoc::get(&ctx)) << *problem;
  auto step = module.lookupSymbol<func::FuncOp>(ACCRUE_STEP_FUNCTION);
  if (step)
    manifest->activationBytes = target.activationBytes(step);
  // The counting emulator's profile names accesses by the report's.
  if (!options.kernelReport.empty() || lowering.cuda.countAccesses) {
    std::optional<std::string> report =
        step ? target.kernelReport(step, *manifest) : std::nullopt;
    if (!report)
      return emitError(UnknownLoc::get(&ctx))
             << settingRef("kernel_report")
             << " reports the kernels of CUDA steps (target cuda or "
                "cuda-emulated)";
    manifest->kernelReport = *report;
    if (result && !options.kernelReport.empty())
      result->kernelReport = *report;
  }
  if (options.plan.empty())
    return success();
  if (!target.plansMemory())
    return emitError(UnknownLoc::get(&ctx))
           << settingRef("plan") << " plans CPU steps only for now";
  FailureOr<rt::MemoryPlan> plan =
      buildMemoryPlan(ctx, source, imported->resolved, *manifest);
  if (failed(plan))
    return failure();
  manifest->memoryPlan = *plan;
  if (result)
    result->plan = *plan;
  return success();
}

LogicalResult StepCompilation::lowerToLLVMDialect() {
  return runPasses(
      [&](OpPassManager &pm) { target.buildToLLVMPipeline(pm, lowering); });
}

LogicalResult StepCompilation::translateToLLVMIR() {
  // The target's own files first (CUDA: each architecture's PTX; what stays
  // in the host code is bundled).
  FailureOr<std::map<std::string, std::string>> files =
      target.extractFiles(module, lowering);
  if (failed(files))
    return failure();
  targetFiles = std::move(*files);
  if (manifest->kernelReport) {
    target.lintKernels(*manifest->kernelReport, targetFiles, lowering);
    if (result && !options.kernelReport.empty())
      result->kernelReport = manifest->kernelReport;
  }
  HostCodeOptions host = target.hostCode(options.host, lowering);
  FailureOr<std::unique_ptr<llvm::Module>> translated =
      accrue::translateToLLVMIR(module, llvmContext, host);
  if (failed(translated))
    return failure();
  llvmModule = std::move(*translated);
  embedFingerprint(*llvmModule, *manifest);
  return success();
}

LogicalResult StepCompilation::generateCode() {
  // The artifact is built in a temporary directory next to the output.
  tmp = options.output + ".tmp-" +
        std::to_string(llvm::sys::Process::getProcessId());
  llvm::sys::fs::remove_directories(tmp);
  if (std::error_code ec = llvm::sys::fs::create_directories(tmp))
    return emitError(UnknownLoc::get(&ctx))
           << "cannot create '" << tmp << "': " << ec.message();
  // (Code generation at the requested level, also for a device step.)
  std::string error;
  if (failed(writeObjectFile(*llvmModule, options.host, artifactFile("step.o"),
                             error))) {
    llvm::sys::fs::remove_directories(tmp);
    return emitError(UnknownLoc::get(&ctx)) << error;
  }
  return success();
}

LogicalResult StepCompilation::writeArtifact() {
  auto fail = [&](const std::string &message) {
    llvm::sys::fs::remove_directories(tmp);
    return emitError(UnknownLoc::get(&ctx)) << message;
  };
  std::string error;
  std::string object = artifactFile("step.o");
  std::string lld =
      options.lldPath.empty() ? ACCRUE_DEFAULT_LLD : options.lldPath;
  const onnx_import::ImportedModel &model = imported->model;
  if (failed(linkSharedLibrary(object, artifactFile(manifest->library), lld,
                               error)) ||
      failed(
          writeInitialParameters(model, artifactFile(manifest->init), error)) ||
      failed(writeExportableModel(imported->model,
                                  artifactFile(manifest->model), error)) ||
      failed(writeTextFile(artifactFile(ACCRUE_FILE_HEADER),
                           buildHeader(*manifest), error)))
    return fail(error);
  std::vector<std::string> written = {manifest->library, manifest->init,
                                      manifest->model, ACCRUE_FILE_HEADER};
  for (const auto &[name, text] : targetFiles) {
    written.push_back(name);
    if (failed(writeTextFile(artifactFile(name), text, error)))
      return fail(error);
  }
  // The manifest last, with the size and checksum of every file before it:
  // the runtime checks them before it maps or reads anything.
  for (const std::string &name : written)
    if (!rt::recordFile(artifactFile(name), manifest->files[name], error))
      return fail(error);
  if (failed(writeTextFile(artifactFile(ACCRUE_FILE_MANIFEST),
                           manifest->toJson(), error)))
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
                                   const CompilerOptions &options,
                                   CompileResult *result) {
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
  CompilerOptions chosen = options;
  if (options.memoryBudget || options.effectiveBatch) {
    FailureOr<CompilerOptions> fitted = chooseBatch(ctx, *source, options);
    if (failed(fitted))
      return failure();
    chosen = std::move(*fitted);
  }
  return StepCompilation(ctx, *source, chosen, result).run();
}

void accrue::printKernelReport(llvm::raw_ostream &os, StringRef json) {
  llvm::Expected<llvm::json::Value> report = llvm::json::parse(json);
  if (!report) {
    llvm::consumeError(report.takeError());
    return;
  }
  os << cuda::renderKernelReport(*report);
}
