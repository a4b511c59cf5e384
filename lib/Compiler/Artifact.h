//===- Artifact.h - write the files of a compiled step ----------*- C++ -*-===//

#ifndef ACCRUE_LIB_COMPILER_ARTIFACT_H
#define ACCRUE_LIB_COMPILER_ARTIFACT_H

#include "accrue/Compiler/Compiler.h"
#include "accrue/Dialect/Train/Utils/StepBuilder.h"

#include "accrue-runtime/Manifest.h"

namespace llvm {
class Module;
} // namespace llvm

namespace accrue {

/// The manifest of a step: its arguments from the finalized step's
/// train.abi (after train-finalize-step-abi), the arena layout from the step
/// builder, the settings from the resolved options. Fails (with a
/// diagnostic) if the step has no contract.
llvm::FailureOr<rt::Manifest>
buildManifest(mlir::ModuleOp module, const CompilerOptions &options,
              const onnx_import::ImportedModel &model,
              const train::StepLayout &layout);

/// Defines ACCRUE_STEP_FINGERPRINT_SYMBOL in `module` (the host code of the
/// step): the fingerprint of `manifest`, which the runtime checks.
void embedFingerprint(llvm::Module &module, const rt::Manifest &manifest);

/// The step.h header for C hosts.
std::string buildHeader(const rt::Manifest &manifest);

/// Writes the initial parameters as safetensors (F32, layout order).
llvm::LogicalResult
writeInitialParameters(const onnx_import::ImportedModel &model,
                       llvm::StringRef path, std::string &error);

/// Writes a copy of the ONNX model whose trainable initializers hold their
/// data as little-endian raw_data inline, so the runtime can export trained
/// values by overwriting those bytes without a protobuf library.
llvm::LogicalResult writeExportableModel(onnx_import::ImportedModel &model,
                                         llvm::StringRef path,
                                         std::string &error);

} // namespace accrue

#endif // ACCRUE_LIB_COMPILER_ARTIFACT_H
