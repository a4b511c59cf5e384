//===- Artifact.h - write the files of a compiled step ----------*- C++ -*-===//

#ifndef ACCRUE_LIB_COMPILER_ARTIFACT_H
#define ACCRUE_LIB_COMPILER_ARTIFACT_H

#include "accrue/Compiler/Compiler.h"
#include "accrue/Dialect/Train/Utils/StepBuilder.h"

#include "llvm/Support/JSON.h"

namespace accrue {

/// Everything the manifest records.
struct ArtifactInfo {
  const CompilerOptions *options;
  const onnx_import::ImportedModel *model;
  train::StepLayout layout;
  /// Estimated peak bytes of temporaries of one micro-step.
  std::optional<int64_t> activationBytes;
  /// The step masks padded samples out of the loss (see
  /// train::StepAttrs::kPartialWindows).
  bool partialWindows = false;
};

/// The step.json manifest.
llvm::json::Value buildManifest(const ArtifactInfo &info);

/// The step.h header for C hosts.
std::string buildHeader(const ArtifactInfo &info);

/// Writes the initial parameters as safetensors (F32, layout order).
llvm::LogicalResult writeInitialParameters(const ArtifactInfo &info,
                                           llvm::StringRef path,
                                           std::string &error);

/// Writes a copy of the ONNX model whose trainable initializers hold their
/// data as little-endian raw_data inline, so the runtime can export trained
/// values by overwriting those bytes without a protobuf library.
llvm::LogicalResult writeExportableModel(llvm::StringRef modelBytes,
                                         const ArtifactInfo &info,
                                         llvm::StringRef path,
                                         std::string &error);

} // namespace accrue

#endif // ACCRUE_LIB_COMPILER_ARTIFACT_H
