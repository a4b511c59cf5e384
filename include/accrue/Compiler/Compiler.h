//===- Compiler.h - compile an ONNX model into a training step --*- C++ -*-===//
//
// The library entry point behind accrue-compile (and, later, the C API and
// Python): import, build the whole-batch step, run the pipelines, and write
// the artifact.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_COMPILER_COMPILER_H
#define ACCRUE_COMPILER_COMPILER_H

#include "accrue/Codegen/Common/HostCode.h"
#include "accrue/Import/ONNX/Importer.h"
#include "accrue/Pipelines/Options.h"

#include "accrue-runtime/Manifest.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace accrue {

class SettingTable;

/// Optimizer hyperparameters, with PyTorch's names and defaults.
struct OptimizerOptions {
  /// The optimizer (onnx-adam is ONNX's preview training Adam: alpha =
  /// beta1, beta = beta2, norm_coefficient = weight decay; none computes
  /// gradients only). Unset: the optimizer of the model's
  /// TrainingInfoProto with its hyperparameters, else AdamW.
  std::optional<AccrueOptimizer> kind;
  /// Unset: the model's TrainingInfoProto's constant R, else 1e-3.
  std::optional<double> lr;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double beta1 = 0.9;
  double beta2 = 0.999;
  /// Unset: the optimizer's default (1e-8 Adam/AdamW, 1e-10 Adagrad, 1e-6
  /// ONNX Adam).
  std::optional<double> eps;
  /// Adagrad's learning-rate decay.
  double lrDecay = 0.0;
  /// ONNX Adam's norm_coefficient_post.
  double postWeightDecay = 0.0;
  /// Unset: the optimizer's default (0 for SGD and Adam, 0.01 for AdamW).
  std::optional<double> weightDecay;
  /// Global-norm clipping threshold; unset means no clipping.
  std::optional<double> clipNorm;
};

/// What to produce.
enum class EmitKind {
  /// The imported model with its whole-batch step (input of the pipeline).
  Import,
  /// The step on buffers: linalg after one-shot bufferization, before the
  /// lowering to LLVM (where its memory traffic is easiest to read).
  Linalg,
  /// The module after the whole pipeline (LLVM dialect).
  MLIR,
  /// LLVM IR.
  LLVM,
  /// The artifact directory.
  Artifact,
};

/// Loss scaling (the runtime keeps the scale; these are its settings).
struct LossScaleOptions {
  /// A fixed scale, or GradScaler's dynamic rule.
  AccrueLossScaleMode mode = ACCRUE_LOSS_SCALE_NONE;
  /// The static scale, or the dynamic scale's initial value.
  double scale = 65536.0;
  double growth = 2.0;
  double backoff = 0.5;
  int64_t interval = 2000;
};

/// Parses the loss_scale setting: none | static:S |
/// dynamic[:init=S,growth=G,backoff=B,interval=N]. The message of a
/// failure names the setting (settingRef).
llvm::FailureOr<LossScaleOptions> parseLossScale(llvm::StringRef text,
                                                 std::string &error);

struct CompilerOptions {
  /// Path of the ONNX model; loss and freeze settings. (Its micro-batch is
  /// set for each import: the step's or a memory probe's.)
  onnx_import::ImportOptions import;
  /// Samples per micro-batch. Required unless `memoryBudget` chooses it.
  std::optional<int64_t> microBatch;
  /// Default number of micro-batches per optimizer step (recorded in the
  /// manifest; the compiled step takes any number at run time).
  int64_t accumulationSteps = 1;
  OptimizerOptions optimizer;
  LossScaleOptions lossScale;
  CompileOptions pipeline;
  /// The machine the step's host code is compiled for (--target-cpu).
  HostCodeOptions host;
  EmitKind emit = EmitKind::Artifact;
  /// Artifact directory, or the file for textual output ("-" for stdout).
  std::string output;
  /// The linker (ld.lld); empty means the one found at configure time.
  std::string lldPath;
  /// Choose the micro-batch (and K) so that the planned peak fits this many
  /// bytes; with `effectiveBatch`, K = E / (b ranks).
  std::optional<int64_t> memoryBudget;
  std::optional<int64_t> effectiveBatch;
  /// Data-parallel ranks G the effective batch is spread over.
  int64_t ranks = 1;
  /// Print the memory plan ("text" or "json"; empty: do not print). The
  /// plan is also recorded in step.json when made.
  std::string plan;
  /// Print the kernel report of a CUDA step ("text" or "json"; empty: do
  /// not make one). Also recorded in step.json.
  std::string kernelReport;
  /// Apply MLIR's command-line options for pass managers and timing
  /// (--mlir-timing, --mlir-print-ir-after, ...): only for tools that
  /// registered them.
  bool commandLineOptions = false;
};

/// The settings of a compilation (accrue-compile's flags, the C API's and
/// Python's keywords), bound to `options`: the pipeline's settings
/// (bindPipelineSettings) and the model, optimizer, loss scaling, target
/// and output. The model path and the output are not among them.
void bindCompilerSettings(SettingTable &table, CompilerOptions &options);

/// Checks the values of `options` and their combinations; the message of a
/// failure names the setting (settingRef).
std::optional<std::string> validateOptions(const CompilerOptions &options);

/// What a compilation made besides its output.
struct CompileResult {
  /// The memory plan, when `plan` asked for one (also in step.json).
  std::optional<rt::MemoryPlan> plan;
  /// The kernel report (JSON text), when `kernelReport` asked for one.
  std::optional<std::string> kernelReport;
};

/// Runs the whole compilation. Errors (bad options naming the setting, bad
/// models naming the node) go to the context's diagnostic handler, with
/// settings as settingRefs (accrue-runtime/Settings.h) for the host to
/// spell; on failure nothing is left at `options.output`. Prints nothing.
llvm::LogicalResult compileModel(mlir::MLIRContext &context,
                                 const CompilerOptions &options,
                                 CompileResult *result = nullptr);

/// The memory plan as a table a person reads at a glance
/// (`accrue-compile --plan`).
void printMemoryPlan(llvm::raw_ostream &os, const rt::MemoryPlan &plan);
/// Prints a kernel report (CompileResult::kernelReport) as a table and the
/// kernels that look slow.
void printKernelReport(llvm::raw_ostream &os, llvm::StringRef json);

} // namespace accrue

#endif // ACCRUE_COMPILER_COMPILER_H
