//===- StepSource.h - the model a compilation builds steps from -*- C++ -*-===//
//
// Private to the compiler library. The ONNX file is read and parsed once
// per compilation; the step and the memory planner's probes import it at
// the micro-batch each needs, and what the step takes from the model (its
// optimizer, how its loss's constant divisor scales) is decided once.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_COMPILER_STEPSOURCE_H
#define ACCRUE_LIB_COMPILER_STEPSOURCE_H

#include "accrue/Compiler/Compiler.h"
#include "accrue/Dialect/Train/Utils/StepBuilder.h"
#include "accrue/Import/ONNX/Importer.h"

#include <map>
#include <optional>

namespace accrue {

/// Fills what the options leave to the model: the optimizer of its
/// TrainingInfoProto (with that optimizer's hyperparameters) and its
/// learning rate, else AdamW at 1e-3.
void resolveOptimizer(OptimizerOptions &opt,
                      const onnx_import::ImportedModel &model);

class StepSource {
public:
  /// Reads and parses the model at `path` (an error names the file).
  static llvm::FailureOr<StepSource> open(mlir::MLIRContext &ctx,
                                          llvm::StringRef path);

  /// The model imported at one micro-batch and the step it asks for.
  struct Imported {
    onnx_import::ImportedModel model;
    /// The compilation's options, the optimizer resolved from the model.
    CompilerOptions resolved;
    train::StepOptions step;
  };

  /// Imports the model at micro-batch `b` as `options` say; without
  /// `parameterValues` only its graph (the parameters' shapes), which is
  /// all a memory probe needs. The values can be taken once.
  llvm::FailureOr<Imported> import(const CompilerOptions &options, int64_t b,
                                   bool parameterValues);

private:
  StepSource(mlir::MLIRContext &ctx, onnx_import::ModelSource source)
      : ctx(&ctx), source(std::move(source)) {}

  /// How the constant divisor of `model`'s loss (imported at b) scales with
  /// the micro-batch, from the model imported again at b + 1; once per b.
  train::LossDivisorAttr lossDivisor(const onnx_import::ImportedModel &model,
                                     const onnx_import::ImportOptions &import);

  mlir::MLIRContext *ctx;
  onnx_import::ModelSource source;
  /// lossDivisor's answers, by micro-batch.
  std::map<int64_t, train::LossDivisorAttr> divisors;
};

} // namespace accrue

#endif // ACCRUE_LIB_COMPILER_STEPSOURCE_H
