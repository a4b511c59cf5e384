//===- Pipelines.cpp - Accrue's pass pipelines ------------------*- C++ -*-===//

#include "accrue/Pipelines/Pipelines.h"

#include "accrue/Codegen/CPU/Pipelines.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace accrue {

void buildTrainPipeline(OpPassManager &pm,
                        const TrainPipelineOptions &options) {
  train::TrainMicrobatchOptions microbatch;
  microbatch.normalization = options.lossNormalization;
  // A data-parallel step sums each micro-batch's gradients over the ranks,
  // as a step graph would; train-defer-collectives then moves that sum after
  // the loop unless the naive placement is asked for.
  microbatch.collectives =
      options.collectives == "none" ? "none" : "per-micro-batch";
  if (options.precision != "fp32") {
    train::TrainMixedPrecisionOptions mixed;
    mixed.precision = options.precision;
    pm.addPass(train::createTrainMixedPrecision(mixed));
  }
  pm.addPass(train::createTrainMicrobatch(microbatch));
  if (options.collectives == "deferred")
    pm.addPass(train::createTrainDeferCollectives());
  pm.addPass(train::createTrainAutodiff());
  pm.addPass(createInlinerPass());
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.fuseOptimizer)
    pm.addNestedPass<func::FuncOp>(train::createTrainFuseClipOptimizer());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(train::createTrainFinalizeStepABI());
}

void buildCompilePipeline(OpPassManager &pm, const CompileOptions &options) {
  buildTrainPipeline(pm, options.train);
  cpu::buildCPULoweringPipeline(pm, options.cpu);
}

namespace {
/// accrue-opt's spelling of CompileOptions.
struct CompilePipelineCLOptions
    : public PassPipelineOptions<CompilePipelineCLOptions> {
  PassOptions::Option<std::string> lossNormalization{
      *this, "loss-normalization", llvm::cl::desc("exact or per-micro-batch"),
      llvm::cl::init("exact")};
  PassOptions::Option<bool> fuseOptimizer{
      *this, "fuse-optimizer",
      llvm::cl::desc("Fuse clipping and the optimizer into one update"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> precision{
      *this, "precision", llvm::cl::desc("fp32, bf16 or fp16"),
      llvm::cl::init("fp32")};
  PassOptions::Option<std::string> collectives{
      *this, "collectives",
      llvm::cl::desc("none, deferred or per-micro-batch"),
      llvm::cl::init("none")};
  PassOptions::Option<bool> fuseElementwise{
      *this, "fuse-elementwise",
      llvm::cl::desc("Fuse elementwise linalg ops before bufferization"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> vectorize{
      *this, "vectorize",
      llvm::cl::desc("Register-tile and vectorize contractions"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> vectorBits{
      *this, "vector-bits",
      llvm::cl::desc("The target's vector register width (512, 256, 128)"),
      llvm::cl::init(512)};

  CompileOptions toOptions() const {
    CompileOptions options;
    options.train.lossNormalization = lossNormalization;
    options.train.fuseOptimizer = fuseOptimizer;
    options.train.precision = precision;
    options.train.collectives = collectives;
    options.cpu.fuseElementwise = fuseElementwise;
    options.cpu.vectorize = vectorize;
    options.cpu.vectorBits = vectorBits;
    return options;
  }
};
} // namespace

void registerPipelines() {
  PassPipelineRegistration<CompilePipelineCLOptions>(
      "accrue-train-pipeline",
      "What accrue-compile runs: train passes, then CPU lowering to LLVM",
      [](OpPassManager &pm, const CompilePipelineCLOptions &cl) {
        buildCompilePipeline(pm, cl.toOptions());
      });
  PassPipelineRegistration<CompilePipelineCLOptions>(
      "accrue-train-transforms",
      "The train passes only (micro-batching through the step ABI)",
      [](OpPassManager &pm, const CompilePipelineCLOptions &cl) {
        buildTrainPipeline(pm, cl.toOptions().train);
      });
  PassPipelineRegistration<CompilePipelineCLOptions>(
      "accrue-lower-cpu", "Lower an explicit training step to LLVM for the CPU",
      [](OpPassManager &pm, const CompilePipelineCLOptions &cl) {
        cpu::buildCPULoweringPipeline(pm, cl.toOptions().cpu);
      });
}

} // namespace accrue
