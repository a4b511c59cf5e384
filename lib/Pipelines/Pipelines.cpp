//===- Pipelines.cpp - Accrue's pass pipelines ------------------*- C++ -*-===//

#include "accrue/Pipelines/Pipelines.h"

#include "accrue/Codegen/Target.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"
#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"

#include <deque>

using namespace mlir;

namespace accrue {

void buildTrainPipeline(OpPassManager &pm,
                        const CompileOptions &compileOptions) {
  const TrainPipelineOptions &options = compileOptions.train;
  train::TrainMicrobatchOptions microbatch;
  microbatch.normalization = options.lossNormalization;
  // A data-parallel step sums each micro-batch's gradients over the ranks,
  // as a step graph would; train-defer-collectives then moves that sum after
  // the loop unless the naive placement is asked for.
  microbatch.collectives = options.collectives == ACCRUE_COLLECTIVES_NONE
                               ? ACCRUE_COLLECTIVES_NONE
                               : ACCRUE_COLLECTIVES_PER_MICRO_BATCH;
  if (options.precision != ACCRUE_PRECISION_FP32) {
    train::TrainMixedPrecisionOptions mixed;
    mixed.precision = options.precision;
    pm.addPass(train::createTrainMixedPrecision(mixed));
  }
  pm.addPass(train::createTrainMicrobatch(microbatch));
  if (options.collectives == ACCRUE_COLLECTIVES_DEFERRED)
    pm.addPass(train::createTrainDeferCollectives());
  {
    train::TrainAutodiffOptions autodiff;
    autodiff.recomputeSegments = options.recomputeSegments;
    autodiff.recomputeNodes = options.recomputeNodes;
    autodiff.recomputeElementwise =
        Target::get(compileOptions.target).recomputesFusedElementwise();
    pm.addPass(train::createTrainAutodiff(autodiff));
  }
  pm.addPass(createInlinerPass());
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.fuseOptimizer)
    pm.addNestedPass<func::FuncOp>(train::createTrainFuseClipOptimizer());
  if (options.shardOptimizer) {
    train::TrainShardOptimizerOptions shard;
    shard.gradients = options.shardGradients;
    pm.addNestedPass<func::FuncOp>(train::createTrainShardOptimizer(shard));
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(train::createTrainFinalizeStepABI());
}

void buildLoweringPipeline(OpPassManager &pm, const CompileOptions &options) {
  Target::get(options.target).buildLoweringPipeline(pm, options);
}

void buildCompilePipeline(OpPassManager &pm, const CompileOptions &options) {
  buildTrainPipeline(pm, options);
  buildLoweringPipeline(pm, options);
}

namespace {

/// The pipeline settings as PassOptions, only so that `accrue-opt --help`
/// lists them; values are read by SettingTable::readAll.
struct SettingsHelp : public PassPipelineOptions<SettingsHelp> {
  SettingsHelp() {
    CompileOptions defaults;
    SettingTable table;
    bindPipelineSettings(table, defaults);
    for (const Setting &setting : table.settings()) {
      std::string help = setting.help;
      if (!setting.choices.empty())
        help += " (" + llvm::join(setting.choices, ", ") + ")";
      // Options keep references to their name and help.
      StringRef name = texts.emplace_back(dashedSettingName(setting.name));
      options.push_back(std::make_unique<Option<std::string>>(
          *this, name, llvm::cl::desc(texts.emplace_back(help))));
    }
  }
  std::deque<std::string> texts;
  std::vector<std::unique_ptr<Option<std::string>>> options;
};

/// Registers a pipeline over CompileOptions whose options text is read by
/// the same settings table as accrue-compile's flags.
void registerCompilePipeline(
    StringRef name, StringRef description,
    std::function<void(OpPassManager &, const CompileOptions &)> build) {
  registerPassPipeline(
      name, description,
      [build, name = name.str()](
          OpPassManager &pm, StringRef text,
          function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompileOptions options;
        SettingTable table;
        bindPipelineSettings(table, options);
        std::optional<std::string> error = table.readAll(text);
        if (!error)
          error = validatePipelineOptions(options);
        if (error)
          return errorHandler(name + ": " +
                              renderSettings(*error, dashedSettingName));
        build(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> print) {
        print(SettingsHelp());
      });
}

} // namespace

void registerPipelines() {
  registerCompilePipeline(
      "accrue-train-pipeline",
      "What accrue-compile runs: train passes, then CPU lowering to LLVM",
      buildCompilePipeline);
  registerCompilePipeline(
      "accrue-train-transforms",
      "The train passes only (micro-batching through the step ABI)",
      [](OpPassManager &pm, const CompileOptions &options) {
        buildTrainPipeline(pm, options);
      });
  // One lowering per target, from the explicit step to the LLVM dialect.
  for (const Target *target : Target::all())
    registerCompilePipeline(
        ("accrue-lower-" + target->name()).str(), target->description(),
        [target](OpPassManager &pm, const CompileOptions &options) {
          target->buildLoweringPipeline(pm, target->ownOptions(options));
        });
}

} // namespace accrue
