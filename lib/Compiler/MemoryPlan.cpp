//===- MemoryPlan.cpp - the step's memory plan and the batch it fits --===//
//
// The plan: the arenas and batch inputs of the step, plus activations per
// sample and fixed, measured on the bufferized step at two micro-batch
// sizes (probes: the parsed model imported again at that size, without
// parameter values). --memory-budget and --effective-batch choose the
// micro-batch and K from it.
//
//===----------------------------------------------------------------------===//

#include "MemoryPlan.h"

#include "accrue/Codegen/Target.h"
#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Utils/MemoryEstimate.h"
#include "accrue/Pipelines/Pipelines.h"
#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace accrue;

namespace {

/// Bytes for people: 1.5 MiB, 12.0 GiB.
std::string bytesText(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit ? "%.1f %s" : "%.0f %s", value,
                units[unit]);
  return text;
}

/// The step of a model compiled at micro-batch `b` as far as memory goes:
/// its arena layout, the batch-input bytes of one sample, and the peak
/// bytes of one micro-batch's temporaries. The model is imported again at
/// that size (without parameter values; the file is not read again), its
/// step built and bufferized for the CPU, then measured like the
/// artifact's.
struct StepProbe {
  train::StepLayout layout;
  int64_t inputPerSample = 0;
  int64_t activationPeak = 0;
};

FailureOr<StepProbe> probeStep(MLIRContext &ctx, StepSource &source,
                               const CompilerOptions &options, int64_t b) {
  // Its warnings are the main compile's.
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &d) {
    return success(d.getSeverity() != DiagnosticSeverity::Error);
  });
  FailureOr<StepSource::Imported> imported =
      source.import(options, b, /*parameterValues=*/false);
  if (failed(imported))
    return failure();
  CompilerOptions &other = imported->resolved;
  onnx_import::ImportedModel *model = &imported->model;
  StepProbe probe;
  FailureOr<train::StepLayout> layout =
      train::buildTrainStep(*model->module, model->forward, imported->step);
  if (failed(layout))
    return failure();
  probe.layout = *layout;
  func::FuncOp forward = model->forward;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (train::getArgRole(forward, i) == ACCRUE_ROLE_BATCH) {
      auto type = cast<RankedTensorType>(forward.getArgument(i).getType());
      probe.inputPerSample +=
          type.getNumElements() / b *
          std::max<int64_t>(type.getElementTypeBitWidth() / 8, 1);
    }
  // Measured as the artifact's step is: bufferized by its target.
  const Target &target = Target::get(other.pipeline.target);
  PassManager pm(&ctx);
  buildTrainPipeline(pm, other.pipeline);
  if (std::optional<std::string> error =
          target.resolveForHost(other.pipeline, other.host)) {
    emitError(UnknownLoc::get(&ctx)) << *error;
    return failure();
  }
  target.buildBufferizationPipeline(pm, other.pipeline);
  if (failed(pm.run(*model->module)))
    return failure();
  auto step = model->module->lookupSymbol<func::FuncOp>(ACCRUE_STEP_FUNCTION);
  std::optional<int64_t> peak =
      step ? target.activationBytes(step) : std::nullopt;
  if (!peak)
    return failure();
  probe.activationPeak = *peak;
  return probe;
}

/// The parts of a plan that do not depend on the micro-batch: the arenas
/// of `probe`'s step and its batch inputs per sample. A sharded optimizer
/// state (and, under stage 2, accumulator) is the largest rank's shard
/// (rank 0's) at `ranks` ranks.
rt::MemoryPlan planArenas(const StepProbe &probe,
                          const CompilerOptions &options) {
  rt::MemoryPlan plan;
  int64_t arena = probe.layout.arenaSize * int64_t(sizeof(float));
  plan.params = plan.gradients = arena;
  int64_t begin = 0, state = probe.layout.arenaSize;
  if (options.pipeline.train.shardOptimizer)
    accrueShard(probe.layout.arenaSize, 0, options.ranks, &begin, &state);
  if (options.pipeline.train.shardGradients)
    plan.gradients = state * int64_t(sizeof(float));
  plan.optimizerState = static_cast<int64_t>(probe.layout.stateNames.size()) *
                        state * int64_t(sizeof(float));
  plan.buffers = probe.layout.buffersSize * int64_t(sizeof(float));
  plan.inputPerSample = probe.inputPerSample;
  return plan;
}

/// Activations per sample and fixed, from the peaks at b and 2b.
void fitActivations(rt::MemoryPlan &plan, int64_t x, int64_t atX, int64_t y,
                    int64_t atY) {
  plan.activationPerSample =
      std::max<int64_t>((atY - atX + (y - x) - 1) / (y - x), 0);
  plan.activationFixed =
      std::max<int64_t>(atX - x * plan.activationPerSample, 0);
}

} // namespace

FailureOr<rt::MemoryPlan>
accrue::buildMemoryPlan(MLIRContext &ctx, StepSource &source,
                        const CompilerOptions &options,
                        const rt::Manifest &manifest) {
  int64_t b = manifest.microBatch;
  std::optional<int64_t> atB = manifest.activationBytes;
  FailureOr<StepProbe> at2B = probeStep(ctx, source, options, 2 * b);
  if (!atB || failed(at2B))
    return emitError(UnknownLoc::get(&ctx))
           << "cannot measure the step's activation memory for the plan";
  rt::MemoryPlan plan = planArenas(*at2B, options);
  plan.microBatch = b;
  plan.accumulationSteps = manifest.accumulationSteps;
  fitActivations(plan, b, *atB, 2 * b, at2B->activationPeak);
  return plan;
}

FailureOr<CompilerOptions> accrue::chooseBatch(MLIRContext &ctx,
                                               StepSource &source,
                                               const CompilerOptions &options) {
  CompilerOptions chosen = options;
  chosen.memoryBudget.reset();
  int64_t ranks = options.ranks;
  std::optional<int64_t> share;
  if (options.effectiveBatch)
    share = rt::effectiveBatchShare(*options.effectiveBatch, ranks);
  auto stepsFor = [&](int64_t b) {
    return share ? rt::accumulationStepsFor(*options.effectiveBatch, b, ranks)
                 : options.accumulationSteps;
  };
  if (!options.memoryBudget) {
    // An effective batch at the given micro-batch.
    chosen.accumulationSteps = stepsFor(*options.microBatch);
    return chosen;
  }
  if (!Target::get(options.pipeline.target).plansMemory())
    return emitError(UnknownLoc::get(&ctx))
           << settingRef("memory_budget") << " plans CPU steps only for now";
  int64_t budget = *options.memoryBudget;
  // The plan of a step compiled with `variant`'s settings, and the largest
  // micro-batch that fits the budget with it (0: none).
  auto largestFitting = [&](const CompilerOptions &variant)
      -> FailureOr<std::pair<rt::MemoryPlan, int64_t>> {
    FailureOr<StepProbe> one = probeStep(ctx, source, variant, 1);
    FailureOr<StepProbe> two = probeStep(ctx, source, variant, 2);
    if (failed(one) || failed(two))
      return emitError(UnknownLoc::get(&ctx))
             << "cannot measure the step's memory for "
             << settingRef("memory_budget");
    rt::MemoryPlan plan = planArenas(*one, variant);
    fitActivations(plan, 1, one->activationPeak, 2, two->activationPeak);
    auto largest = [&](int64_t below) -> int64_t {
      int64_t most =
          share ? *share
                : std::max<int64_t>(
                      (budget - plan.staticBytes()) /
                          std::max<int64_t>(plan.activationPerSample, 1),
                      1);
      for (int64_t b = std::min({most, below, int64_t(1) << 24}); b >= 1; --b)
        if (plan.peakBytes(b, stepsFor(b)) <= budget)
          return b;
      return 0;
    };
    int64_t b = largest(INT64_MAX);
    // A line through b = 1 and 2 can underestimate a large b (buffers
    // whose liveness changes with b): the step at b is probed, and the line
    // refitted through 1 and b until the probe fits.
    for (int tries = 0; b > 2 && tries < 4; ++tries) {
      FailureOr<StepProbe> atB = probeStep(ctx, source, variant, b);
      if (failed(atB))
        return failure();
      fitActivations(plan, 1, one->activationPeak, b, atB->activationPeak);
      if (plan.peakBytes(b, stepsFor(b)) <= budget)
        break;
      b = largest(b - 1);
    }
    return std::make_pair(plan, b);
  };
  FailureOr<std::pair<rt::MemoryPlan, int64_t>> fit = largestFitting(options);
  if (failed(fit))
    return failure();
  // --recompute auto: recomputation only when it lets a larger micro-batch
  // fit (it costs about one more forward).
  std::string recompute;
  if (options.pipeline.train.recomputeAuto) {
    CompilerOptions kept = options;
    kept.pipeline.train.recomputeSegments = false;
    FailureOr<std::pair<rt::MemoryPlan, int64_t>> without =
        largestFitting(kept);
    if (failed(without))
      return failure();
    if (without->second >= fit->second) {
      fit = without;
      chosen.pipeline.train.recomputeSegments = false;
      recompute = "; no recomputation (it would not fit a larger one)";
    } else {
      recompute =
          "; recomputing the segments between the forward's cuts "
          "(without: " +
          (without->second ? "micro-batch " + std::to_string(without->second)
                           : std::string("none fits")) +
          ")";
    }
  }
  auto &[plan, best] = *fit;
  if (!best) {
    int64_t need = plan.peakBytes(1, stepsFor(1));
    return emitError(UnknownLoc::get(&ctx))
           << settingRef("memory_budget") << " " << bytesText(budget)
           << " does not fit even micro-batch 1, which needs "
           << bytesText(need) << " (" << bytesText(need - budget)
           << " more): parameters, gradients and optimizer state take "
           << bytesText(plan.staticBytes()) << ", one sample's activations "
           << bytesText(plan.activationFixed + plan.activationPerSample)
           << ", the step's inputs "
           << bytesText(stepsFor(1) * plan.inputPerSample)
           << (options.pipeline.train.recomputeAuto ||
                       !options.pipeline.train.recomputeNodes.empty() ||
                       plan.staticBytes() + stepsFor(1) * plan.inputPerSample >=
                           budget
                   ? ""
                   : "; " + settingRef("recompute") +
                         " auto may need less (it keeps fewer activations)");
  }
  // The same number of micro-batches with the least padding (a smaller b
  // fits too: the peak grows with b).
  if (share)
    best = llvm::divideCeilSigned(*share, stepsFor(best));
  chosen.microBatch = best;
  chosen.accumulationSteps = stepsFor(best);
  int64_t k = chosen.accumulationSteps;
  std::string effective;
  if (options.effectiveBatch) {
    effective = " (E = " + std::to_string(*options.effectiveBatch) + " over " +
                std::to_string(ranks) + " rank(s)";
    if (int64_t padded = best * k * ranks - *options.effectiveBatch)
      effective += "; " + std::to_string(padded) + " padded row(s) per step";
    effective += ")";
  }
  emitRemark(UnknownLoc::get(&ctx))
      << settingRef("memory_budget") << " " << bytesText(budget)
      << ": micro-batch " << best << ", " << k << " accumulation step(s)"
      << effective << recompute << "; planned peak "
      << bytesText(plan.peakBytes(best, k)) << " (static "
      << bytesText(plan.staticBytes()) << ", activations "
      << bytesText(plan.activationFixed) << " + b x "
      << bytesText(plan.activationPerSample) << ")";
  return chosen;
}

void accrue::printMemoryPlan(llvm::raw_ostream &os,
                             const rt::MemoryPlan &plan) {
  int64_t b = plan.microBatch, k = plan.accumulationSteps;
  auto row = [&](StringRef what, int64_t bytes, StringRef note = "") {
    os << llvm::format("  %-34s %12s", what.str().c_str(),
                       bytesText(bytes).c_str());
    if (!note.empty())
      os << "  " << note;
    os << "\n";
  };
  os << "Memory plan (CPU; E = b x K x G samples per optimizer step, "
        "M = fixed + b x A):\n";
  row("parameters", plan.params);
  row("gradient accumulator (fp32)", plan.gradients);
  row("optimizer state", plan.optimizerState);
  if (plan.buffers)
    row("buffers (running statistics)", plan.buffers);
  row("static total", plan.staticBytes());
  row("activations per sample (A)", plan.activationPerSample);
  row("activations, fixed", plan.activationFixed);
  row("batch inputs per sample", plan.inputPerSample,
      "(a step holds b x K samples)");
  os << "  micro-batch b = " << b << ", accumulation steps K = " << k
     << ": E = " << b * k << " x G ranks\n";
  row("peak at b", plan.peakBytes(b, k),
      "= static + fixed + b x A + b x K x inputs");
}
