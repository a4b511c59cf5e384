//===- accrue-compile.cpp - compile an ONNX model to a step -----*- C++ -*-===//
//
// Binds command-line flags to accrue::CompilerOptions and calls
// accrue::compileModel.
//
//===----------------------------------------------------------------------===//

#include "accrue/Compiler/Compiler.h"
#include "accrue/Compiler/Diagnostics.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

using namespace llvm;

namespace {
cl::OptionCategory category("accrue-compile options");

cl::opt<std::string> model(cl::Positional, cl::desc("<model.onnx>"),
                           cl::Required, cl::cat(category));
cl::opt<std::string> output("o",
                            cl::desc("Output artifact directory (or file "
                                     "for --emit import|mlir|llvm; - is "
                                     "stdout)"),
                            cl::Required, cl::cat(category));
cl::opt<int64_t> microBatch("micro-batch", cl::desc("Samples per micro-batch"),
                            cl::Required, cl::cat(category));
cl::opt<int64_t> accumulationSteps(
    "accumulation-steps",
    cl::desc("Micro-batches per optimizer step (default for accrue-train)"),
    cl::init(1), cl::cat(category));
cl::opt<std::string> optimizer("optimizer",
                               cl::desc("sgd, adam, adamw, adagrad, onnx-adam "
                                        "or none (default: the model's "
                                        "TrainingInfoProto, else adamw)"),
                               cl::cat(category));
cl::opt<double> lr("lr",
                   cl::desc("Learning rate (default: the model's "
                            "TrainingInfoProto, else 1e-3)"),
                   cl::cat(category));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(0.0),
                         cl::cat(category));
cl::opt<double> dampening("dampening", cl::desc("SGD dampening"), cl::init(0.0),
                          cl::cat(category));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                       cl::cat(category));
cl::opt<double> lrDecay("lr-decay", cl::desc("Adagrad learning-rate decay"),
                        cl::init(0.0), cl::cat(category));
cl::opt<double> beta1("beta1", cl::desc("Adam beta1 (ONNX Adam alpha)"),
                      cl::init(0.9),
                      cl::cat(category));
cl::opt<double> beta2("beta2", cl::desc("Adam beta2 (ONNX Adam beta)"),
                      cl::init(0.999),
                      cl::cat(category));
cl::opt<double> eps("eps",
                    cl::desc("Epsilon (default: 1e-8 adam/adamw, 1e-10 "
                             "adagrad, 1e-6 onnx-adam)"),
                    cl::cat(category));
cl::opt<double> weightDecay("weight-decay",
                            cl::desc("Weight decay (default: 0.01 for adamw, "
                                     "0 otherwise)"),
                            cl::cat(category));
cl::opt<double> clipNorm("clip-norm",
                         cl::desc("Clip the global gradient L2 norm to this"),
                         cl::cat(category));
cl::opt<std::string> precision(
    "precision",
    cl::desc("Compute precision: fp32 (default), bf16 or fp16 (parameters, "
             "gradients and optimizer state stay fp32)"),
    cl::init("fp32"), cl::cat(category));
cl::opt<bool> dataParallel(
    "data-parallel",
    cl::desc("Sum gradients over the ranks of `mpirun -np G accrue-train` "
             "once per optimizer step"),
    cl::cat(category));
cl::opt<std::string> collectives(
    "collectives",
    cl::desc("With --data-parallel: deferred (default; one all-reduce after "
             "the micro-batch loop) or per-micro-batch (one per micro-batch, "
             "for comparison)"),
    cl::init("deferred"), cl::cat(category));
cl::opt<std::string> lossScale(
    "loss-scale",
    cl::desc("none (default), static:S or dynamic[:init=65536,growth=2,"
             "backoff=0.5,interval=2000]"),
    cl::init("none"), cl::cat(category));
cl::opt<std::string> loss("loss", cl::desc("Name of the loss output"),
                          cl::cat(category));
cl::opt<std::string> freeze("freeze",
                            cl::desc("Regex of initializers not to train"),
                            cl::cat(category));
cl::opt<std::string> lossNormalization(
    "loss-normalization",
    cl::desc("exact (default) or per-micro-batch (mean of means)"),
    cl::init("exact"), cl::cat(category));
cl::opt<bool> noFuseOptimizer(
    "no-fuse-optimizer",
    cl::desc("Keep clipping and the optimizer as separate passes"),
    cl::cat(category));
cl::opt<bool> noVectorize(
    "no-vectorize",
    cl::desc("Keep contractions as scalar loops (no register-blocked vector "
             "kernels; for comparison)"),
    cl::cat(category));
cl::opt<std::string> emit("emit",
                          cl::desc("import, linalg, mlir, llvm or artifact "
                                   "(default)"),
                          cl::init("artifact"), cl::cat(category));
cl::opt<std::string> targetCpu("target-cpu",
                               cl::desc("host (default) or an LLVM CPU name"),
                               cl::init("host"), cl::cat(category));
cl::opt<std::string> lld("lld", cl::desc("Path of ld.lld"), cl::cat(category));
cl::opt<bool> strict("strict",
                     cl::desc("Refuse operators that make accumulation "
                              "differ from one big batch (BatchNormalization "
                              "in training mode) instead of warning"),
                     cl::cat(category));
cl::opt<int64_t> seed("seed",
                      cl::desc("Seed of training-mode Dropout nodes without "
                               "a seed attribute"),
                      cl::init(0), cl::cat(category));
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // --mlir-print-debuginfo and friends, for --emit import|mlir.
  mlir::registerAsmPrinterCLOptions();
  // --mlir-timing and friends, to see where compile time goes.
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Compile an ONNX model with a loss into an "
                              "accumulated training step\n");
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  accrue::OneLineDiagnosticHandler diagnostics(&context, "accrue-compile");

  accrue::CompilerOptions options;
  options.import.modelPath = model;
  options.import.microBatch = microBatch;
  options.import.lossName = loss;
  options.import.freezeRegex = freeze;
  options.import.strict = strict;
  options.import.dropoutSeed = seed;
  options.accumulationSteps = accumulationSteps;
  if (optimizer.getNumOccurrences())
    options.optimizer.name = optimizer;
  if (lr.getNumOccurrences())
    options.optimizer.lr = lr;
  options.optimizer.momentum = momentum;
  options.optimizer.dampening = dampening;
  options.optimizer.nesterov = nesterov;
  options.optimizer.beta1 = beta1;
  options.optimizer.beta2 = beta2;
  if (eps.getNumOccurrences())
    options.optimizer.eps = eps;
  options.optimizer.lrDecay = lrDecay;
  if (weightDecay.getNumOccurrences())
    options.optimizer.weightDecay = weightDecay;
  if (clipNorm.getNumOccurrences())
    options.optimizer.clipNorm = clipNorm;
  std::string scaleError;
  FailureOr<accrue::LossScaleOptions> scaling =
      accrue::parseLossScale(lossScale, scaleError);
  if (failed(scaling)) {
    errs() << "accrue-compile: error: " << scaleError << "\n";
    return 1;
  }
  options.lossScale = *scaling;
  options.pipeline.train.lossNormalization = lossNormalization;
  options.pipeline.train.precision = precision;
  options.pipeline.train.collectives =
      dataParallel ? std::string(collectives) : std::string("none");
  options.pipeline.train.fuseOptimizer = !noFuseOptimizer;
  options.pipeline.cpu.vectorize = !noVectorize;
  options.target.cpu = targetCpu;
  options.output = output;
  options.lldPath = lld;
  if (emit == "import") {
    options.emit = accrue::EmitKind::Import;
  } else if (emit == "linalg") {
    options.emit = accrue::EmitKind::Linalg;
  } else if (emit == "mlir") {
    options.emit = accrue::EmitKind::MLIR;
  } else if (emit == "llvm") {
    options.emit = accrue::EmitKind::LLVM;
  } else if (emit == "artifact") {
    options.emit = accrue::EmitKind::Artifact;
  } else {
    errs() << "accrue-compile: error: --emit must be import, linalg, mlir, "
              "llvm or artifact, not '"
           << emit << "'\n";
    return 1;
  }
  return mlir::failed(accrue::compileModel(context, options)) ? 1 : 0;
}
