//===- Importer.cpp - ONNX model importer -----------------------*- C++ -*-===//
//
// ModelSource: parsing a model and importing it, the steps of
// ModelImporter (ModelImporter.h) in order; which outputs and nodes an
// import takes is SelectNodes.cpp.
//
//===----------------------------------------------------------------------===//

#include "accrue/Import/ONNX/Importer.h"

#include "ModelImporter.h"

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "accrue-runtime/Settings.h"

#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/unknown_field_set.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <tuple>
#include <unistd.h>

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

namespace {

std::string dtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isF64())
    return "f64";
  if (type.isInteger(64))
    return "i64";
  if (type.isInteger(32))
    return "i32";
  return "bool";
}

/// The newest default-domain opset whose operator changes the handlers
/// know (ONNX 1.23). From 22 to 28 the operators Accrue imports gained
/// element types (bf16, 4-, 6- and 8-bit floats, 2-bit integers) and
/// changed meaning only in Attention (24, 25), Range's stash_type (27) and
/// Mod of floats without fmod (28), which the handlers follow.
constexpr int64_t kNewestOpset = 28;

} // namespace

int64_t onnx_import::importedOpset(const onnx::ModelProto &model,
                                   StringRef domain) {
  for (const auto &opset : model.opset_import()) {
    StringRef d = opset.domain() == "ai.onnx" ? "" : StringRef(opset.domain());
    if (d == domain)
      return opset.version();
  }
  return 0;
}

Location onnx_import::modelFileLoc(MLIRContext *context, StringRef path) {
  return FileLineColLoc::get(context, path.empty() ? "<model>" : path, 0, 0);
}

LogicalResult ModelImporter::check() {
  if (!model.has_graph() || model.graph().node_size() == 0)
    return emitError(fileLoc) << "not an ONNX model: it has no graph";
  opset = importedOpset(model, "");
  if (model.opset_import_size() == 0)
    return emitError(fileLoc) << "the model imports no opset of the default "
                                 "ONNX domain (truncated file?)";
  if (opset > kNewestOpset)
    emitWarning(fileLoc) << "the model imports opset " << opset
                         << "; Accrue knows opsets up to " << kNewestOpset
                         << " and imports its operators with those semantics";
  return success();
}

FailureOr<RankedTensorType>
ModelImporter::inputType(const onnx::ValueInfoProto &input) {
  Location loc = namedLoc("input", input.name());
  const auto &tensorType = input.type().tensor_type();
  Type element = convertElementType(context, tensorType.elem_type());
  if (!element)
    return emitError(loc) << "graph input '" << input.name()
                          << "' has unsupported element type "
                          << onnx::TensorProto::DataType_Name(
                                 static_cast<onnx::TensorProto::DataType>(
                                     tensorType.elem_type()));
  if (!tensorType.has_shape())
    return emitError(loc) << "graph input '" << input.name()
                          << "' has no shape";
  if (training() && tensorType.shape().dim_size() == 0)
    return emitError(loc) << "graph input '" << input.name()
                          << "' has no batch dimension (dimension 0)";
  SmallVector<int64_t> shape;
  for (int d = 0; d < tensorType.shape().dim_size(); ++d) {
    const auto &dim = tensorType.shape().dim(d);
    if (training() && d == 0) {
      if (dim.has_dim_value() && dim.dim_value() != options.microBatch)
        return emitError(loc)
               << "graph input '" << input.name()
               << "' has a static batch dimension of " << dim.dim_value()
               << ", but the micro-batch is " << options.microBatch
               << "; export the model with a dynamic batch axis or "
                  "compile with "
               << settingRef("micro_batch") << " " << dim.dim_value();
      shape.push_back(options.microBatch);
      continue;
    }
    if (!dim.has_dim_value() || dim.dim_value() < 0)
      return emitError(loc)
             << "graph input '" << input.name() << "' dimension " << d
             << " is not static"
             << (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "")
             << (training() ? "; only the batch dimension may be symbolic"
                            : "");
    shape.push_back(dim.dim_value());
  }
  if (!withinElementLimit(shape))
    return emitError(loc) << "graph input '" << input.name()
                          << "' has more than 2^40 elements per micro-batch";
  return RankedTensorType::get(shape, element);
}

namespace {

/// What PyTorch 2's exporter says each initializer is: the
/// `pkg.torch.export.graph_signature.InputSpec.kind` entry (PARAMETER,
/// BUFFER, CONSTANT_TENSOR, ...) of the ValueInfoProto it writes for it
/// (in the graph's value_info or inputs). Its `metadata_props` (field 4,
/// ONNX 1.16) is newer than the schema the importer is built with, where
/// it arrives as an unknown field; a schema that knows it is read by name.
llvm::StringMap<std::string> exportedKinds(const onnx::GraphProto &graph) {
  static constexpr llvm::StringLiteral kKind =
      "pkg.torch.export.graph_signature.InputSpec.kind";
  llvm::StringMap<std::string> kinds;
  auto read = [&](const onnx::ValueInfoProto &info) {
    auto take = [&](const onnx::StringStringEntryProto &entry) {
      if (entry.key() == kKind)
        kinds[info.name()] = entry.value();
    };
    const google::protobuf::Descriptor *descriptor = info.GetDescriptor();
    if (const google::protobuf::FieldDescriptor *field =
            descriptor->FindFieldByName("metadata_props")) {
      const google::protobuf::Reflection *reflection = info.GetReflection();
      for (int i = 0, n = reflection->FieldSize(info, field); i < n; ++i)
        take(static_cast<const onnx::StringStringEntryProto &>(
            reflection->GetRepeatedMessage(info, field, i)));
      return;
    }
    const google::protobuf::UnknownFieldSet &unknown = info.unknown_fields();
    for (int i = 0; i < unknown.field_count(); ++i) {
      const google::protobuf::UnknownField &field = unknown.field(i);
      onnx::StringStringEntryProto entry;
      if (field.number() == 4 &&
          field.type() ==
              google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
          entry.ParseFromString(field.length_delimited()))
        take(entry);
    }
  };
  for (const auto &info : graph.value_info())
    read(info);
  for (const auto &info : graph.input())
    read(info);
  return kinds;
}

} // namespace

/// Warns where one trainable initializer feeds the same input of several
/// nodes of one type (every LayerNormalization's scale): what an export
/// that merged initializers equal at initialization (PyTorch 2's
/// optimize=True) leaves, training them as one parameter. Weight tying
/// (an embedding and the output layer) feeds different operators and is
/// not warned about.
void ModelImporter::warnMergedParameters(
    ArrayRef<const onnx::TensorProto *> params) {
  llvm::StringSet<> trained;
  for (const onnx::TensorProto *param : params)
    trained.insert(param->name());
  // (initializer, operator, input) -> the nodes reading it there.
  std::map<std::tuple<std::string, std::string, int>, int> readers;
  for (const auto &node : model.graph().node()) {
    // Only the nodes the loss needs.
    if (llvm::none_of(node.output(), [&](const std::string &output) {
          return neededNames.contains(output);
        }))
      continue;
    for (int i = 0; i < node.input_size(); ++i)
      if (trained.contains(node.input(i)))
        ++readers[{node.input(i), node.op_type(), i}];
  }
  for (const auto &[key, count] : readers) {
    if (count < 2)
      continue;
    const auto &[name, op, input] = key;
    emitWarning(namedLoc("initializer", name))
        << "feeds input " << input << " of " << count << " " << op
        << " nodes, trained as one parameter: if these were separate "
           "parameters, the export merged initializers that were equal "
           "(torch.onnx.export's optimize=True); export with optimize=False";
  }
}

LogicalResult ModelImporter::buildSignature() {
  const onnx::GraphProto &graph = model.graph();
  // Initializers the exporter marks as other than parameters (a rotary
  // embedding's inverse frequencies, a bias of final logits registered as
  // a buffer) are constants, as --freeze would make them.
  llvm::StringMap<std::string> kinds = exportedKinds(graph);
  SmallVector<std::string> notParameters;
  std::optional<llvm::Regex> freeze;
  if (!options.freezeRegex.empty()) {
    freeze.emplace("^(" + options.freezeRegex + ")$");
    std::string err;
    if (!freeze->isValid(err))
      return emitError(fileLoc) << settingRef("freeze") << ": invalid regex '"
                                << options.freezeRegex << "': " << err;
  }
  for (const auto &init : graph.initializer()) {
    initializers[init.name()] = &init;
    // A TrainingInfoProto's list of what to train, where there is one,
    // overrules the marks.
    auto kind = kinds.find(init.name());
    bool marked =
        !trainable && kind != kinds.end() && kind->second != "PARAMETER";
    if (training() && neededNames.contains(init.name()) &&
        init.data_type() == onnx::TensorProto::FLOAT &&
        regularUse.contains(init.name()) &&
        !(freeze && freeze->match(init.name())) &&
        (!trainable || trainable->contains(init.name()))) {
      if (!marked) {
        paramProtos.push_back(&init);
        continue;
      }
      notParameters.push_back(init.name() + " (" + kind->second + ")");
      continue;
    }
    if (training() && neededNames.contains(init.name()) &&
        init.data_type() == onnx::TensorProto::FLOAT &&
        bufferNames.contains(init.name()) && !regularUse.contains(init.name()))
      bufferProtos.push_back(&init);
  }
  warnMergedParameters(paramProtos);
  if (!notParameters.empty())
    emitRemark(fileLoc) << notParameters.size()
                        << " initializer(s) the exporter marks as not "
                           "parameters stay constant: "
                        << llvm::join(notParameters, ", ");

  // Parameters and buffers (training only): their data moves out of the
  // model into the result (most of a model's bytes; never copied).
  auto take = [&](const onnx::TensorProto *proto,
                  bool trained) -> FailureOr<ImportedParameter> {
    Location loc = namedLoc("initializer", proto->name());
    ImportedParameter tensor;
    tensor.name = proto->name();
    if (!options.loadParameterValues) {
      for (int64_t d : proto->dims()) {
        if (d < 0)
          return emitError(loc)
                 << "tensor '" << proto->name() << "' has a negative dimension";
        tensor.shape.push_back(d);
      }
      return tensor;
    }
    FailureOr<TensorData> data =
        readTensorData(*proto, context, options.modelPath, loc,
                       const_cast<onnx::TensorProto *>(proto));
    if (failed(data))
      return failure();
    // A parameter that starts non-finite trains to NaN.
    const float *values = reinterpret_cast<const float *>(data->bytes.data());
    for (int64_t i = 0, n = data->numElements(); trained && i < n; ++i)
      if (!std::isfinite(values[i]))
        return emitError(loc) << "the trainable tensor holds "
                              << (std::isnan(values[i]) ? "NaN" : "an infinity")
                              << " at element " << i;
    tensor.shape.assign(data->shape.begin(), data->shape.end());
    tensor.bytes = std::move(data->bytes);
    return tensor;
  };
  for (const onnx::TensorProto *proto : paramProtos) {
    FailureOr<ImportedParameter> param = take(proto, /*trained=*/true);
    if (failed(param))
      return failure();
    if (llvm::is_contained(param->shape, 0))
      return emitError(namedLoc("initializer", proto->name()))
             << "a trainable tensor with a zero dimension has nothing to "
                "train (freeze it with "
             << settingRef("freeze") << " or remove it)";
    argTypes.push_back(
        RankedTensorType::get(param->shape, builder.getF32Type()));
    result.parameters.push_back(std::move(*param));
  }
  // Buffers: their initial values go into the artifact beside the
  // parameters'.
  for (const onnx::TensorProto *proto : bufferProtos) {
    FailureOr<ImportedParameter> buffer = take(proto, /*trained=*/false);
    if (failed(buffer))
      return failure();
    argTypes.push_back(
        RankedTensorType::get(buffer->shape, builder.getF32Type()));
    result.buffers.push_back(std::move(*buffer));
  }
  // Graph inputs that are not initializers.
  for (const auto &input : graph.input()) {
    if (initializers.count(input.name()) || !neededNames.contains(input.name()))
      continue;
    if (!regularUse.contains(input.name()) &&
        options.inputValues.count(input.name())) {
      constantInputs.push_back(&input);
      continue;
    }
    FailureOr<RankedTensorType> type = inputType(input);
    if (failed(type))
      return failure();
    inputProtos.push_back(&input);
    argTypes.push_back(*type);
    result.inputs.push_back(
        {input.name(),
         std::vector<int64_t>(type->getShape().begin(), type->getShape().end()),
         dtypeName(type->getElementType())});
  }
  if (needsRandomContext) {
    auto i64 = RankedTensorType::get({}, builder.getI64Type());
    argTypes.append({i64, i64});
  }
  return success();
}

LogicalResult ModelImporter::importBody() {
  const onnx::GraphProto &graph = model.graph();
  GraphImporter &importer = *graphImporter;
  auto argAttrs = [&](AccrueArgRole role, StringRef name) {
    return train::getArgRoleAttrs(context, role, name);
  };
  // Parameters are views of the parameter arena; graph inputs are the
  // batch (in inference mode too); Dropout's random context is the
  // optimizer step and the index of the batch's first sample.
  SmallVector<DictionaryAttr> attrs;
  for (const ImportedParameter &param : result.parameters)
    attrs.push_back(argAttrs(ACCRUE_ROLE_PARAMS, param.name));
  for (const ImportedParameter &buffer : result.buffers)
    attrs.push_back(argAttrs(ACCRUE_ROLE_BUFFERS, buffer.name));
  for (const onnx::ValueInfoProto *input : inputProtos)
    attrs.push_back(argAttrs(ACCRUE_ROLE_BATCH, input->name()));
  if (needsRandomContext) {
    attrs.push_back(argAttrs(ACCRUE_ROLE_STEP, "step"));
    attrs.push_back(argAttrs(ACCRUE_ROLE_SAMPLE_BASE, "sample_base"));
  }

  // The function returns the loss (training) or every output (inference);
  // result types are known once the body is imported.
  result.module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(result.module->getBody());
  auto forward = func::FuncOp::create(builder, fileLoc, "forward",
                                      builder.getFunctionType(argTypes, {}));
  forward.setAllArgAttrs(attrs);
  Block *entry = forward.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  unsigned numNamed = attrs.size() - (needsRandomContext ? 2 : 0);
  for (unsigned i = 0; i < numNamed; ++i)
    importer.define(cast<StringAttr>(attrs[i].get(train::StepAttrs::kName)),
                    entry->getArgument(i));
  importer.training = training();
  importer.strict = options.strict;
  importer.dropoutSeed = options.dropoutSeed;
  if (needsRandomContext) {
    importer.stepArg = entry->getArgument(attrs.size() - 2);
    importer.sampleBaseArg = entry->getArgument(attrs.size() - 1);
  }

  // Initializers that are not parameters are constants.
  for (const auto &init : graph.initializer()) {
    if (!neededNames.contains(init.name()) || importer.lookup(init.name()))
      continue;
    Location loc = namedLoc("initializer", init.name());
    FailureOr<DenseElementsAttr> value =
        decodeTensor(init, context, options.modelPath, loc);
    if (failed(value))
      return failure();
    importer.define(init.name(), nn::ConstantOp::create(builder, loc, *value));
  }

  // Graph inputs given as values for constant operands.
  for (const onnx::ValueInfoProto *input : constantInputs) {
    Location loc = namedLoc("input", input->name());
    FailureOr<TensorData> data = readTensorProtoBytes(
        options.inputValues.at(input->name()), context, loc);
    if (failed(data))
      return failure();
    auto type = RankedTensorType::get(data->shape, data->elementType);
    DenseElementsAttr value;
    if (data->elementType.isInteger(1)) {
      SmallVector<bool> bits;
      for (char c : data->bytes)
        bits.push_back(c != 0);
      value = DenseElementsAttr::get(type, ArrayRef<bool>(bits));
    } else {
      value = DenseElementsAttr::getFromRawBuffer(
          type, ArrayRef<char>(data->bytes.data(), data->bytes.size()));
    }
    importer.define(input->name(), nn::ConstantOp::create(builder, loc, value));
  }

  for (int i : order)
    if (failed(handlers[i]->handler(importer, graph.node(i))))
      return failure();

  SmallVector<Value> results;
  for (const std::string &name : outputNames) {
    Value value = importer.lookup(name);
    if (!value && !importer.unsupportedReason(name).empty())
      return emitError(fileLoc)
             << "output '" << name << "': " << importer.unsupportedReason(name);
    if (!value)
      return emitError(fileLoc)
             << "output '" << name << "' is not computed by any node";
    results.push_back(value);
  }
  if (training()) {
    auto lossType = dyn_cast<RankedTensorType>(results[0].getType());
    if (!lossType || lossType.getRank() != 0 ||
        !lossType.getElementType().isF32())
      return emitError(results[0].getLoc())
             << "the loss '" << outputNames[0] << "' has type "
             << results[0].getType()
             << ", but a loss must be a scalar (tensor<f32>); reduce it with "
                "ReduceMean or ReduceSum";
    forward.setPrivate();
    // The buffers' new values follow the loss.
    for (unsigned i = 0; i < result.buffers.size(); ++i) {
      unsigned arg = result.parameters.size() + i;
      Value update = importer.bufferUpdates.lookup(arg);
      results.push_back(update ? update : entry->getArgument(arg));
    }
  } else {
    forward->setAttr(train::StepAttrs::kStep, builder.getUnitAttr());
    for (auto [name, value] : llvm::zip(outputNames, results)) {
      auto type = cast<RankedTensorType>(value.getType());
      result.outputs.push_back(
          {name,
           std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
           dtypeName(type.getElementType())});
    }
  }
  func::ReturnOp::create(builder, fileLoc, results);
  // Folding shape subgraphs leaves their constants behind; drop what nothing
  // uses, last op first so chains go in one sweep.
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(forward.front())))
    if (isOpTriviallyDead(&op))
      op.erase();
  forward.setType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  if (training())
    for (unsigned i = 0; i < result.buffers.size(); ++i)
      forward.setResultAttr(
          1 + i, train::StepAttrs::kTied,
          builder.getI64IntegerAttr(result.parameters.size() + i));
  result.forward = forward;
  result.lossName = training() ? outputNames[0] : "";
  return success();
}

FailureOr<ImportedModel> ModelImporter::run() {
  context->loadDialect<nn::NNDialect, train::TrainDialect, func::FuncDialect,
                       arith::ArithDialect, tensor::TensorDialect>();
  if (failed(check()) || failed(readTrainingInfo()) ||
      failed(chooseOutputs()) || failed(sliceAndCheckNodes()) ||
      failed(buildSignature()) || failed(importBody()))
    return failure();
  result.proto = parsed;
  return std::move(result);
}

namespace {

/// The error of a model that does not parse.
LogicalResult notAModel(MLIRContext *context, StringRef path) {
  return emitError(modelFileLoc(context, path))
         << "not a valid ONNX model: the protobuf does not parse (truncated "
            "or not ONNX)";
}

} // namespace

FailureOr<ModelSource> ModelSource::parse(MLIRContext *context, StringRef bytes,
                                          StringRef path) {
  auto model = std::make_shared<onnx::ModelProto>();
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return notAModel(context, path);
  return ModelSource(std::move(model), path);
}

FailureOr<ModelSource> ModelSource::readFile(MLIRContext *context,
                                             StringRef path) {
  std::string name = path.str();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return emitError(UnknownLoc::get(context))
           << "cannot read '" << path << "': " << std::strerror(errno);
  // Parsed from the file in chunks: the model's bytes are never all in
  // memory besides the parsed model.
  auto model = std::make_shared<onnx::ModelProto>();
  google::protobuf::io::FileInputStream stream(fd);
  bool parsed = model->ParseFromZeroCopyStream(&stream);
  int error = stream.GetErrno();
  ::close(fd);
  if (!parsed && error)
    return emitError(UnknownLoc::get(context))
           << "cannot read '" << path << "': " << std::strerror(error);
  if (!parsed)
    return notAModel(context, path);
  return ModelSource(std::move(model), path);
}

FailureOr<ImportedModel> ModelSource::import(MLIRContext *context,
                                             const ImportOptions &options) {
  ImportOptions own = options;
  own.modelPath = path;
  if (own.loadParameterValues && valuesTaken)
    return emitError(modelFileLoc(context, path))
           << "the model's parameter values were already imported";
  valuesTaken |= own.loadParameterValues;
  return ModelImporter(context, own, model).run();
}

FailureOr<ImportedModel>
onnx_import::importModel(MLIRContext *context, StringRef bytes,
                         const ImportOptions &options) {
  FailureOr<ModelSource> source =
      ModelSource::parse(context, bytes, options.modelPath);
  if (failed(source))
    return failure();
  return source->import(context, options);
}

FailureOr<ImportedModel>
onnx_import::importModelFile(MLIRContext *context,
                             const ImportOptions &options) {
  FailureOr<ModelSource> source =
      ModelSource::readFile(context, options.modelPath);
  if (failed(source))
    return failure();
  return source->import(context, options);
}
