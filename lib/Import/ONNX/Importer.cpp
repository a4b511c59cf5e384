//===- Importer.cpp - ONNX model importer -----------------------*- C++ -*-===//

#include "accrue/Import/ONNX/Importer.h"

#include "GraphImporter.h"

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

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

/// The default-domain opset the model imports, or 0.
int64_t defaultOpset(const onnx::ModelProto &model) {
  for (const auto &opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx")
      return opset.version();
  return 0;
}

/// Chooses the graph output that holds the loss.
FailureOr<std::string> chooseLoss(const onnx::GraphProto &graph,
                                  const ImportOptions &options, Location loc) {
  if (!options.lossName.empty()) {
    for (const auto &output : graph.output())
      if (output.name() == options.lossName)
        return options.lossName;
    std::string names;
    for (const auto &output : graph.output())
      names += (names.empty() ? "'" : ", '") + output.name() + "'";
    return emitError(loc) << "--loss '" << options.lossName
                          << "' is not a graph output (outputs: " << names
                          << ")";
  }
  // The only float output whose declared shape is a scalar (or, without
  // shape information, the only float output).
  SmallVector<std::string> scalars, floats;
  for (const auto &output : graph.output()) {
    const auto &type = output.type().tensor_type();
    if (type.elem_type() != onnx::TensorProto::FLOAT)
      continue;
    floats.push_back(output.name());
    if (type.has_shape() && type.shape().dim_size() == 0)
      scalars.push_back(output.name());
  }
  if (scalars.size() == 1)
    return scalars.front();
  if (scalars.empty() && floats.size() == 1)
    return floats.front();
  auto diag = emitError(loc);
  if (scalars.empty() && floats.empty())
    diag << "the graph has no float output to use as the loss";
  else
    diag << "cannot tell which output is the loss ("
         << (scalars.empty() ? floats.size() : scalars.size())
         << " candidates); name it with --loss";
  return diag;
}

} // namespace

FailureOr<ImportedModel>
onnx_import::importModel(MLIRContext *context, StringRef bytes,
                         const ImportOptions &options) {
  context->loadDialect<nn::NNDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(
      context, options.modelPath.empty() ? "<model>" : options.modelPath, 0, 0);

  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return emitError(fileLoc) << "not a valid ONNX model: the protobuf does "
                                 "not parse (truncated or not ONNX)";
  if (!model.has_graph() || model.graph().node_size() == 0)
    return emitError(fileLoc) << "not an ONNX model: it has no graph";
  int64_t opset = defaultOpset(model);
  if (opset == 0)
    return emitError(fileLoc) << "the model imports no opset of the default "
                                 "ONNX domain (truncated file?)";
  const onnx::GraphProto &graph = model.graph();

  FailureOr<std::string> lossName = chooseLoss(graph, options, fileLoc);
  if (failed(lossName))
    return failure();

  // Only the nodes the loss depends on are imported.
  llvm::StringMap<int> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string &out : graph.node(i).output())
      if (!out.empty())
        producer[out] = i;
  llvm::SetVector<int> needed;
  llvm::StringSet<> neededNames;
  SmallVector<std::string> worklist{*lossName};
  while (!worklist.empty()) {
    std::string name = worklist.pop_back_val();
    if (!neededNames.insert(name).second)
      continue;
    auto it = producer.find(name);
    if (it == producer.end() || !needed.insert(it->second))
      continue;
    for (const std::string &in : graph.node(it->second).input())
      if (!in.empty())
        worklist.push_back(in);
  }
  SmallVector<int> order(needed.begin(), needed.end());
  llvm::sort(order);

  // Handlers, and which initializers feed compile-time-constant inputs.
  llvm::StringSet<> regularUse;
  DenseMap<int, const OpRegistration *> handlers;
  OpBuilder builder(context);
  GraphImporter importer(builder, opset, options.modelPath);
  for (int i : order) {
    const onnx::NodeProto &node = graph.node(i);
    importer.nameNode(node, i);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return importer.error(node) << "operators of domain '" << node.domain()
                                  << "' are not supported";
    const OpRegistration *reg = lookupHandler(node.op_type(), opset);
    if (!reg)
      return importer.error(node) << "unsupported operator " << node.op_type()
                                  << " (opset " << opset << ")";
    handlers[i] = reg;
    for (int j = 0; j < node.input_size(); ++j)
      if (!llvm::is_contained(reg->constantInputs, j))
        regularUse.insert(node.input(j));
  }

  std::optional<llvm::Regex> freeze;
  if (!options.freezeRegex.empty()) {
    freeze.emplace("^(" + options.freezeRegex + ")$");
    std::string err;
    if (!freeze->isValid(err))
      return emitError(fileLoc) << "--freeze: invalid regex '"
                                << options.freezeRegex << "': " << err;
  }

  ImportedModel result;
  result.lossName = *lossName;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  SmallVector<const onnx::TensorProto *> paramProtos;
  for (const auto &init : graph.initializer()) {
    initializers[init.name()] = &init;
    if (!neededNames.contains(init.name()))
      continue;
    bool trainable = init.data_type() == onnx::TensorProto::FLOAT &&
                     regularUse.contains(init.name()) &&
                     !(freeze && freeze->match(init.name()));
    if (trainable)
      paramProtos.push_back(&init);
  }

  // Signature: parameters, then batch inputs.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  Builder b(context);
  auto attrs = [&](StringRef role, StringRef name) {
    return b.getDictionaryAttr(
        {b.getNamedAttr(train::StepAttrs::kRole, b.getStringAttr(role)),
         b.getNamedAttr(train::StepAttrs::kName, b.getStringAttr(name))});
  };
  SmallVector<DenseElementsAttr> paramValues;
  for (const onnx::TensorProto *proto : paramProtos) {
    Location loc =
        NameLoc::get(b.getStringAttr("initializer:" + proto->name()), fileLoc);
    FailureOr<DenseElementsAttr> value =
        decodeTensor(*proto, context, options.modelPath, loc);
    if (failed(value))
      return failure();
    paramValues.push_back(*value);
    argTypes.push_back(value->getType());
    argAttrs.push_back(attrs("param", proto->name()));
  }
  for (const auto &input : graph.input()) {
    if (initializers.count(input.name()) || !neededNames.contains(input.name()))
      continue;
    Location loc =
        NameLoc::get(b.getStringAttr("input:" + input.name()), fileLoc);
    const auto &tensorType = input.type().tensor_type();
    Type element = convertElementType(context, tensorType.elem_type());
    if (!element)
      return emitError(loc)
             << "graph input '" << input.name()
             << "' has unsupported element type " << tensorType.elem_type();
    if (!tensorType.has_shape() || tensorType.shape().dim_size() == 0)
      return emitError(loc) << "graph input '" << input.name()
                            << "' has no batch dimension (dimension 0)";
    SmallVector<int64_t> shape;
    for (int d = 0; d < tensorType.shape().dim_size(); ++d) {
      const auto &dim = tensorType.shape().dim(d);
      if (d == 0) {
        if (dim.has_dim_value() && dim.dim_value() != options.microBatch)
          return emitError(loc)
                 << "graph input '" << input.name()
                 << "' has a static batch dimension of " << dim.dim_value()
                 << ", but the micro-batch is " << options.microBatch
                 << "; export the model with a dynamic batch axis or "
                    "compile with --micro-batch "
                 << dim.dim_value();
        shape.push_back(options.microBatch);
        continue;
      }
      if (!dim.has_dim_value() || dim.dim_value() <= 0)
        return emitError(loc)
               << "graph input '" << input.name() << "' dimension " << d
               << " is not static"
               << (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "")
               << "; only the batch dimension may be symbolic";
      shape.push_back(dim.dim_value());
    }
    argTypes.push_back(RankedTensorType::get(shape, element));
    argAttrs.push_back(attrs("batch", input.name()));
    result.inputs.push_back({input.name(),
                             std::vector<int64_t>(shape.begin(), shape.end()),
                             dtypeName(element)});
  }

  result.module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(result.module->getBody());
  auto forward = func::FuncOp::create(
      builder, fileLoc, "forward",
      builder.getFunctionType(argTypes,
                              RankedTensorType::get({}, builder.getF32Type())));
  forward.setPrivate();
  forward.setAllArgAttrs(argAttrs);
  Block *entry = forward.addEntryBlock();
  builder.setInsertionPointToStart(entry);

  for (auto [i, attr] : llvm::enumerate(argAttrs))
    importer.define(cast<StringAttr>(attr.get(train::StepAttrs::kName)),
                    entry->getArgument(i));
  // Initializers that are not parameters are constants.
  for (const auto &init : graph.initializer()) {
    if (!neededNames.contains(init.name()) || importer.lookup(init.name()))
      continue;
    Location loc =
        NameLoc::get(b.getStringAttr("initializer:" + init.name()), fileLoc);
    FailureOr<DenseElementsAttr> value =
        decodeTensor(init, context, options.modelPath, loc);
    if (failed(value))
      return failure();
    importer.define(init.name(), nn::ConstantOp::create(builder, loc, *value));
  }

  for (int i : order) {
    const onnx::NodeProto &node = graph.node(i);
    if (failed(handlers[i]->handler(importer, node)))
      return failure();
  }

  Value loss = importer.lookup(*lossName);
  if (!loss)
    return emitError(fileLoc)
           << "loss '" << *lossName << "' is not computed by any node";
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || lossType.getRank() != 0 ||
      !lossType.getElementType().isF32())
    return emitError(loss.getLoc())
           << "the loss '" << *lossName << "' has type " << loss.getType()
           << ", but a loss must be a scalar (tensor<f32>); reduce it with "
              "ReduceMean or ReduceSum";
  func::ReturnOp::create(builder, fileLoc, loss);

  for (auto [proto, value] : llvm::zip(paramProtos, paramValues)) {
    ImportedParameter param;
    param.name = proto->name();
    auto type = cast<RankedTensorType>(value.getType());
    param.shape.assign(type.getShape().begin(), type.getShape().end());
    auto values = value.getValues<float>();
    param.values.assign(values.begin(), values.end());
    result.parameters.push_back(std::move(param));
  }
  result.forward = forward;
  return result;
}

FailureOr<ImportedModel>
onnx_import::importModelFile(MLIRContext *context,
                             const ImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(options.modelPath,
                                            /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(UnknownLoc::get(context))
           << "cannot read '" << options.modelPath
           << "': " << buffer.getError().message();
  return importModel(context, (*buffer)->getBuffer(), options);
}
