//===- ModelImporter.h - one ONNX model's import ----------------*- C++ -*-===//
//
// The importer's state for one model, shared by its steps: checking the
// model and choosing what to import (SelectNodes.cpp), then the signature
// and the body (Importer.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_IMPORT_ONNX_MODELIMPORTER_H
#define ACCRUE_LIB_IMPORT_ONNX_MODELIMPORTER_H

#include "GraphImporter.h"

#include "accrue/Import/ONNX/Importer.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accrue::onnx_import {

// A private header of the importer's sources (lib/Import/ONNX): its code
// reads as theirs does.
using namespace mlir;

/// The opset the model imports for `domain` ("" is the default domain), or
/// 0.
int64_t importedOpset(const onnx::ModelProto &model, StringRef domain);

/// Where messages about the model file as a whole point.
Location modelFileLoc(MLIRContext *context, StringRef path);

/// Imports one model; the steps of ModelSource::import in order.
class ModelImporter {
public:
  ModelImporter(MLIRContext *context, const ImportOptions &options,
                std::shared_ptr<onnx::ModelProto> parsed)
      : context(context), options(options), builder(context),
        fileLoc(modelFileLoc(context, options.modelPath)),
        parsed(std::move(parsed)), model(*this->parsed) {}

  FailureOr<ImportedModel> run();

private:
  bool training() const { return options.mode == ImportMode::Training; }
  Location namedLoc(StringRef kind, StringRef name) {
    return NameLoc::get(builder.getStringAttr(kind + ":" + name), fileLoc);
  }

  LogicalResult check();
  LogicalResult readTrainingInfo();
  LogicalResult chooseOutputs();
  LogicalResult checkNames();
  LogicalResult sliceAndCheckNodes();
  LogicalResult buildSignature();
  void warnMergedParameters(ArrayRef<const onnx::TensorProto *> params);
  LogicalResult importBody();

  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &input);

  MLIRContext *context;
  const ImportOptions &options;
  OpBuilder builder;
  Location fileLoc;

  /// The parsed model, shared with its source and the result. Only the
  /// parameters' data moves out of it (with loadParameterValues).
  std::shared_ptr<onnx::ModelProto> parsed;
  onnx::ModelProto &model;
  int64_t opset = 0;
  /// From a TrainingInfoProto's Gradient node: the loss and the tensors it
  /// differentiates (the only trainable initializers).
  std::string trainingInfoLoss;
  std::optional<llvm::StringSet<>> trainable;
  std::vector<std::string> outputNames;
  SmallVector<int> order;
  llvm::StringSet<> neededNames;
  DenseMap<int, const OpRegistration *> handlers;
  llvm::StringSet<> regularUse;
  SmallVector<const onnx::TensorProto *> paramProtos;
  /// Running statistics of training-mode BatchNormalization nodes: the
  /// forward updates them (buffers), nothing trains them.
  llvm::StringSet<> bufferNames;
  SmallVector<const onnx::TensorProto *> bufferProtos;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  SmallVector<const onnx::ValueInfoProto *> inputProtos;
  SmallVector<const onnx::ValueInfoProto *> constantInputs;
  SmallVector<Type> argTypes;
  std::unique_ptr<GraphImporter> graphImporter;
  bool needsRandomContext = false;
  ImportedModel result;
};

} // namespace accrue::onnx_import

#endif // ACCRUE_LIB_IMPORT_ONNX_MODELIMPORTER_H
