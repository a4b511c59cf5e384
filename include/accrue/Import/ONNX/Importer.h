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

#include "accrue-runtime/StepABI.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <optional>

#include <memory>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace accrue::onnx_import {

/// What the imported function is for.
enum class ImportMode {
  /// `@forward(params..., batch inputs...) -> loss`: float initializers are
  /// trainable parameters, graph inputs batch inputs whose dimension 0 is
  /// the micro-batch, the result the scalar loss.
  Training,
  /// `@forward(inputs...) -> (outputs...)` marked as a step with one output
  /// buffer per graph output: every initializer is a constant, inputs keep
  /// their declared (static) shapes. For running a graph forward (ONNX's
  /// node tests, evaluating an exported model).
  Inference,
};

/// What to import and how to specialize it.
struct ImportOptions {
  ImportMode mode = ImportMode::Training;
  /// Size of dimension 0 of every batch input (the micro-batch).
  int64_t microBatch = 1;
  /// Name of the graph output holding the loss; empty means the only scalar
  /// float output.
  std::string lossName;
  /// Float initializers whose name matches this regex (full match) stay
  /// constants instead of becoming trainable parameters. Empty: none.
  std::string freezeRegex;
  /// Refuse operators that make accumulation differ from one big batch
  /// (BatchNormalization in training mode) instead of warning.
  bool strict = false;
  /// Seed of training-mode Dropout nodes without a seed attribute.
  int64_t dropoutSeed = 0;
  /// Path of the model, for locations and external data.
  std::string modelPath;
  /// Copy the initial values of parameters into the result (off for
  /// imports that only look at the graph).
  bool loadParameterValues = true;
  /// Values (serialized TensorProtos) of graph inputs that feed only
  /// compile-time-constant operands (shapes, axes, exponents): those inputs
  /// become constants. Inputs used as data stay arguments. ONNX's node tests
  /// feed such values as inputs.
  std::map<std::string, std::string> inputValues;
};

/// A trainable parameter and its initial value (f32, row-major).
struct ImportedParameter {
  std::string name;
  std::vector<int64_t> shape;
  /// The initial values' bytes (moved out of the model's TensorProto, not
  /// copied: a model's parameters are most of its file).
  std::string bytes;
  const float *values() const {
    return reinterpret_cast<const float *>(bytes.data());
  }
  size_t numValues() const { return bytes.size() / sizeof(float); }
};

/// A graph input; in training mode `shape[0]` is the micro-batch size.
struct ImportedInput {
  std::string name;
  std::vector<int64_t> shape;
  /// "f32", "f16", "bf16", "f64", "i64", "i32" or "bool".
  std::string dtype;
};

/// The optimizer of a model's TrainingInfoProto (ONNX's preview training
/// domain), expressed as accrue-compile's optimizer flags would.
struct ImportedOptimizer {
  /// The node, for messages.
  std::string nodeName;
  /// ONNX Adam, SGD (ONNX Momentum) or Adagrad.
  AccrueOptimizer kind = ACCRUE_OPTIMIZER_ONNX_ADAM;
  /// The learning rate R, when it is a constant of the algorithm.
  std::optional<double> lr;
  /// Named hyperparameters in the compiler's terms: beta1, beta2, eps,
  /// weight_decay, post_weight_decay, momentum, dampening, nesterov,
  /// lr_decay.
  std::map<std::string, double> params;
};

/// The result of importing a model.
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// `@forward` inside `module`.
  mlir::func::FuncOp forward;
  std::vector<ImportedParameter> parameters;
  /// Tensors the forward updates and nothing trains (the running statistics
  /// of training-mode BatchNormalization), with their initial values.
  std::vector<ImportedParameter> buffers;
  std::vector<ImportedInput> inputs;
  /// Training: the loss. Inference: every graph output, in order.
  std::vector<ImportedInput> outputs;
  std::string lossName;
  /// Training: the optimizer the model's TrainingInfoProto runs, if any.
  std::optional<ImportedOptimizer> optimizer;
  /// The parsed model, without the parameters' data (moved into
  /// `parameters`), for writing the exportable model.
  std::shared_ptr<onnx::ModelProto> proto;
};

/// The contents of a TensorProto: element type, shape and little-endian
/// bytes (one byte per element for bool).
struct TensorData {
  mlir::Type elementType;
  llvm::SmallVector<int64_t> shape;
  std::string bytes;
  int64_t numElements() const;
};

/// Reads a TensorProto's data from raw_data, its typed fields or external
/// data next to `modelPath`, checking it against the shape. Emits an error
/// at `loc` on failure. With `steal`, raw_data moves out of `tensor` (left
/// empty) instead of being copied.
llvm::FailureOr<TensorData> readTensorData(const onnx::TensorProto &tensor,
                                           mlir::MLIRContext *context,
                                           llvm::StringRef modelPath,
                                           mlir::Location loc,
                                           onnx::TensorProto *steal = nullptr);

/// Parses a serialized TensorProto (a .pb file of ONNX's backend tests) and
/// reads its data; emits an error at `loc` on failure.
llvm::FailureOr<TensorData> readTensorProtoBytes(llvm::StringRef bytes,
                                                 mlir::MLIRContext *context,
                                                 mlir::Location loc);

/// Whether the importer handles `opType` of the default domain at `opset`.
bool isSupportedOperator(llvm::StringRef domain, llvm::StringRef opType,
                         int64_t opset);

/// An ONNX model parsed once and imported as often as its user needs: the
/// compiler imports it at the micro-batch of the step and at the next size
/// (to see how a loss's constant divisor depends on it), the memory planner
/// at each size it probes. The file is read once.
class ModelSource {
public:
  /// Parses the file at `path` in chunks (its bytes are never all in
  /// memory besides the parsed model); a missing, unreadable or malformed
  /// file is an error naming it.
  static llvm::FailureOr<ModelSource> readFile(mlir::MLIRContext *context,
                                               llvm::StringRef path);
  /// Parses the serialized ModelProto in `bytes`; `path` names it in
  /// messages and locates its external data.
  static llvm::FailureOr<ModelSource> parse(mlir::MLIRContext *context,
                                            llvm::StringRef bytes,
                                            llvm::StringRef path);

  /// Imports the model as `options` say (its modelPath is the source's).
  /// With `loadParameterValues` the parameters' data moves out of the
  /// source into the result, which is possible once; imports that only
  /// look at the graph can follow. On failure, emits one error (naming the
  /// ONNX node, input or output at fault).
  llvm::FailureOr<ImportedModel> import(mlir::MLIRContext *context,
                                        const ImportOptions &options);

  llvm::StringRef getPath() const { return path; }

  // One owner of the parsed model (and of whether its values were taken).
  ModelSource(ModelSource &&) = default;
  ModelSource &operator=(ModelSource &&) = default;
  ModelSource(const ModelSource &) = delete;
  ModelSource &operator=(const ModelSource &) = delete;

private:
  ModelSource(std::shared_ptr<onnx::ModelProto> model, llvm::StringRef path)
      : model(std::move(model)), path(path.str()) {}

  std::shared_ptr<onnx::ModelProto> model;
  std::string path;
  bool valuesTaken = false;
};

/// Imports the serialized ModelProto in `bytes`. On failure, emits one error
/// (naming the ONNX node, input or output at fault) through the context's
/// diagnostic engine and returns failure.
llvm::FailureOr<ImportedModel> importModel(mlir::MLIRContext *context,
                                           llvm::StringRef bytes,
                                           const ImportOptions &options);

/// Parses `options.modelPath` straight from the file (no copy of its bytes
/// in memory besides the parsed model) and imports it; a missing or
/// unreadable file is an error.
llvm::FailureOr<ImportedModel> importModelFile(mlir::MLIRContext *context,
                                               const ImportOptions &options);

} // namespace accrue::onnx_import

#endif // ACCRUE_IMPORT_ONNX_IMPORTER_H
