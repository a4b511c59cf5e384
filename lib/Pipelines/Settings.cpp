//===- Settings.cpp - the settings of the compile pipeline ------*- C++ -*-===//

#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

#include "accrue/Codegen/Target.h"

#include "llvm/Support/Regex.h"

using namespace llvm;
using namespace accrue;

void accrue::bindPipelineSettings(SettingTable &table,
                                  CompileOptions &options) {
  TrainPipelineOptions &train = options.train;
  table.choice("target",
               "Where the step runs: the CPU, an NVIDIA GPU (cuda), or the "
               "CUDA pipeline run serially on the CPU (cuda-emulated, for "
               "testing without a GPU)",
               options.target, accrueTargetName, accrueTargetCount());
  table.choice("loss_normalization",
               "How a mean-reduced loss is normalized over micro-batches: "
               "exact (sum and count, divided once) or per-micro-batch "
               "(mean of means, for comparison)",
               train.lossNormalization, accrueLossNormalizationName,
               accrueLossNormalizationCount());
  table.flag("fuse_optimizer",
             "Fuse normalization, clipping, the optimizer and the "
             "accumulator reset into one pass",
             train.fuseOptimizer);
  table.choice("precision",
               "Compute precision (parameters, gradients and optimizer "
               "state stay fp32)",
               train.precision, accruePrecisionName, accruePrecisionCount());
  table.choice("collectives",
               "Data-parallel gradient sums: none, deferred (one all-reduce "
               "per optimizer step, after the micro-batch loop) or "
               "per-micro-batch (for comparison)",
               train.collectives, accrueCollectivesName,
               accrueCollectivesCount());
  table.flag("data_parallel",
             "Sum gradients over the ranks of `mpirun -np G accrue-train` "
             "(collectives=deferred unless given)",
             [&train](bool on) {
               if (!on)
                 train.collectives = ACCRUE_COLLECTIVES_NONE;
               else if (train.collectives == ACCRUE_COLLECTIVES_NONE)
                 train.collectives = ACCRUE_COLLECTIVES_DEFERRED;
             });
  table.flag("shard_optimizer",
             "ZeRO stage 1: each data-parallel rank keeps and updates 1/G "
             "of the optimizer state (the gradients reduce-scattered, the "
             "parameters all-gathered); needs data_parallel",
             train.shardOptimizer);
  table.flag("shard_gradients",
             "ZeRO stage 2: shard_optimizer, and each data-parallel rank "
             "keeps 1/G of the gradient accumulator between micro-batches "
             "(each gradient reduce-scattered as the backward computes it: "
             "collectives per micro-batch and parameter); CPU target",
             [&train](bool on) {
               train.shardGradients = on;
               if (on)
                 train.shardOptimizer = true;
             });
  table.custom(
      "recompute",
      "Activation recomputation in the backward: none, auto (keep the "
      "forward's cuts, recompute the segments between them; under "
      "--memory-budget only when it allows a larger micro-batch), or a "
      "regex of ONNX node names",
      Setting::Kind::Text,
      [&train](StringRef value) -> std::optional<std::string> {
        train.recomputeSegments = value == "auto";
        train.recomputeAuto = value == "auto";
        train.recomputeNodes.clear();
        if (value == "none" || value == "auto")
          return std::nullopt;
        std::string error;
        if (value.empty() ||
            !llvm::Regex("^(" + value.str() + ")$").isValid(error))
          return settingRef("recompute") +
                 " must be none, auto or a regex of ONNX node names, not '" +
                 value.str() + "'" + (error.empty() ? "" : ": " + error);
        train.recomputeNodes = value.str();
        return std::nullopt;
      });
  table.flag("fuse_elementwise",
             "Fuse elementwise linalg ops before bufferization",
             options.fuseElementwise);
  // Then each target's own.
  for (const Target *target : Target::all())
    target->bindSettings(table, options);
}

std::optional<std::string>
accrue::validatePipelineOptions(const CompileOptions &options) {
  const TrainPipelineOptions &train = options.train;
  if (train.shardOptimizer) {
    std::string flag = settingRef(train.shardGradients ? "shard_gradients"
                                                       : "shard_optimizer");
    if (train.collectives != ACCRUE_COLLECTIVES_DEFERRED)
      return flag + " needs " + settingRef("data_parallel") +
             " with one all-reduce per optimizer step (collectives=deferred)";
    if (!train.fuseOptimizer)
      return flag + " needs " + settingRef("fuse_optimizer");
    // Stage 1 runs on every target; stage 2's per-gradient reduce-scatter
    // adds into the shard on the host.
    if (train.shardGradients && options.target != ACCRUE_TARGET_CPU)
      return flag + " is implemented for the cpu target only, not '" +
             accrueTargetName(options.target) + "'";
  }
  for (const Target *target : Target::all())
    if (std::optional<std::string> error = target->validate(options))
      return error;
  return std::nullopt;
}
