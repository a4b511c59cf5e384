//===- Compiler.cpp - the settings of a compilation ------------*- C++ -*-===//
//
// The compiler's settings (bindCompilerSettings) and their checks
// (validateOptions, parseLossScale). The phases that use them are in
// CompileStep.cpp.
//
//===----------------------------------------------------------------------===//

#include "accrue/Compiler/Compiler.h"

#include "accrue/Pipelines/Settings.h"

#include "accrue-runtime/Settings.h"

#include <cmath>

using namespace mlir;
using namespace accrue;

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
    // (The step reports its streak, always below the interval, as an f32;
    // checked before the cast.)
    else if (key == "interval" && !(v >= 1 && v <= double(1 << 24)))
      return fail("interval must be in [1, 2^24]");
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
    return ref("loss_scale") + " needs an optimizer: with " + ref("optimizer") +
           " none nothing skips an overflowing step";
  if (std::optional<std::string> error =
          validatePipelineOptions(options.pipeline))
    return error;
  if (!options.kernelReport.empty() &&
      options.pipeline.target == ACCRUE_TARGET_CPU)
    return ref("kernel_report") +
           " reports the kernels of CUDA steps: it "
           "needs " +
           ref("target") + " cuda or cuda-emulated";
  if (options.output.empty())
    return ref("output") + ": an output is required";
  return std::nullopt;
}

/// "16GiB", "512MiB", "2GB", "1e9" as bytes (binary and decimal units).
static std::optional<int64_t> parseByteSize(StringRef text) {
  text = text.trim();
  size_t split = text.find_first_not_of("0123456789.eE+-");
  StringRef number = text.take_front(split),
            unit = text.drop_front(number.size()).trim();
  double value;
  if (number.empty() || number.getAsDouble(value))
    return std::nullopt;
  static const std::pair<const char *, double> units[] = {
      {"", 1},
      {"B", 1},
      {"KiB", 1024.0},
      {"MiB", 1048576.0},
      {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12}};
  for (auto [name, scale] : units)
    if (unit.equals_insensitive(name) && value * scale < 9e18)
      return static_cast<int64_t>(value * scale);
  return std::nullopt;
}

/// A report the compile prints and records in step.json: `--name` prints
/// text, `--name=json` JSON; `format` keeps which ("" when not asked).
static void bindReportFormat(SettingTable &table, const char *name,
                             const char *help, std::string &format) {
  Setting &setting = table.custom(
      name, help, Setting::Kind::Choice,
      [name, &format](StringRef value) -> std::optional<std::string> {
        if (value != "text" && value != "json")
          return settingRef(name) + " must be text or json, not '" +
                 value.str() + "'";
        format = value.str();
        return std::nullopt;
      });
  setting.choices = {"text", "json"};
  setting.implicitValue = "text";
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
            {"import", EmitKind::Import},
            {"linalg", EmitKind::Linalg},
            {"mlir", EmitKind::MLIR},
            {"llvm", EmitKind::LLVM},
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
                          "not '" +
                          value.str() + "'";
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
  bindReportFormat(table, "plan",
                   "Print the memory plan: parameter, gradient, "
                   "optimizer-state and activation bytes (per sample and "
                   "fixed) and the peak at the micro-batch; also recorded in "
                   "step.json",
                   options.plan);
  bindReportFormat(table, "kernel_report",
                   "Print the kernel report of a CUDA step: per kernel its "
                   "ONNX node, launches per step, grid and block, memory "
                   "operations per thread and how each access reaches "
                   "memory; GEMM calls. Also recorded in step.json",
                   options.kernelReport);
}
