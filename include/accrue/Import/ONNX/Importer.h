//===- Importer.h - ONNX model importer -------------------------*- C++ -*-===//
//
// Reads an ONNX ModelProto whose graph computes a scalar loss and builds
// `func.func @forward(params..., batch inputs...) -> tensor<f32>` of nn ops.
// Float initializers become trainable parameters (function arguments, with
// their initial values returned alongside), other initializers constants;
// graph inputs are batch inputs whose dimension 0 is the micro-batch.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_IMPORT_ONNX_IMPORTER_H
#define ACCRUE_IMPORT_ONNX_IMPORTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace accrue::onnx_import {

/// What to import and how to specialize it.
struct ImportOptions {
  /// Size of dimension 0 of every batch input (the micro-batch).
  int64_t microBatch = 1;
  /// Name of the graph output holding the loss; empty means the only scalar
  /// float output.
  std::string lossName;
  /// Float initializers whose name matches this regex (full match) stay
  /// constants instead of becoming trainable parameters. Empty: none.
  std::string freezeRegex;
  /// Path of the model, for locations and external data.
  std::string modelPath;
};

/// A trainable parameter and its initial value (f32, row-major).
struct ImportedParameter {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// A batch input of the graph; `shape[0]` is the micro-batch size.
struct ImportedInput {
  std::string name;
  std::vector<int64_t> shape;
  /// "f32", "f16", "bf16", "f64", "i64", "i32" or "bool".
  std::string dtype;
};

/// The result of importing a model.
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// `@forward` inside `module`.
  mlir::func::FuncOp forward;
  std::vector<ImportedParameter> parameters;
  std::vector<ImportedInput> inputs;
  std::string lossName;
};

/// Imports the serialized ModelProto in `bytes`. On failure, emits one error
/// (naming the ONNX node, input or output at fault) through the context's
/// diagnostic engine and returns failure.
llvm::FailureOr<ImportedModel> importModel(mlir::MLIRContext *context,
                                           llvm::StringRef bytes,
                                           const ImportOptions &options);

/// Reads `path` and imports it; a missing or unreadable file is an error.
llvm::FailureOr<ImportedModel> importModelFile(mlir::MLIRContext *context,
                                               const ImportOptions &options);

} // namespace accrue::onnx_import

#endif // ACCRUE_IMPORT_ONNX_IMPORTER_H
