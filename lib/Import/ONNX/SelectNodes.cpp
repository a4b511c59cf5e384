//===- SelectNodes.cpp - what an ONNX import takes --------------*- C++ -*-===//
//
// The steps of ModelImporter that decide what a model's import takes: its
// training information (the loss, the trained tensors, the optimizer), the
// outputs, the nodes those need (each checked against the handlers and
// the opsets), and the names they read.
//
//===----------------------------------------------------------------------===//

#include "ModelImporter.h"

#include "accrue-runtime/Settings.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::onnx_import;

/// A TrainingInfoProto (ONNX's training algorithm) names the loss and the
/// tensors to train through a Gradient node, and its optimizer node gives
/// the optimizer: Adam, Momentum or Adagrad of ai.onnx.preview.training.
/// The algorithm graph itself is not imported: Accrue builds the
/// accumulated step from the same information.
LogicalResult ModelImporter::readTrainingInfo() {
  if (!training() || model.training_info_size() == 0)
    return success();
  if (model.training_info_size() > 1)
    return emitError(fileLoc) << "the model has " << model.training_info_size()
                              << " TrainingInfoProtos; Accrue runs one";
  const onnx::GraphProto &algorithm = model.training_info(0).algorithm();
  const onnx::NodeProto *gradient = nullptr, *optimizer = nullptr;
  auto where = [&](const onnx::NodeProto &node) {
    return namedLoc("node", node.name().empty() ? node.op_type() : node.name());
  };
  for (const onnx::NodeProto &node : algorithm.node()) {
    if (node.domain() != kTrainingDomain)
      continue;
    if (node.op_type() == "Gradient") {
      if (gradient)
        return emitError(where(node))
               << "the training algorithm has more than one Gradient node";
      gradient = &node;
    } else if (llvm::is_contained({"Adam", "Momentum", "Adagrad"},
                                  node.op_type())) {
      if (optimizer)
        return emitError(where(node))
               << "the training algorithm has more than one optimizer node";
      optimizer = &node;
    } else {
      return emitError(where(node))
             << "training operator " << node.op_type() << " is not supported";
    }
  }
  if (!gradient)
    return emitError(fileLoc) << "the TrainingInfoProto's algorithm has no "
                                 "ai.onnx.preview.training.Gradient node";
  auto attribute = [](const onnx::NodeProto &node,
                      StringRef name) -> const onnx::AttributeProto * {
    for (const auto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  };
  const onnx::AttributeProto *xs = attribute(*gradient, "xs");
  const onnx::AttributeProto *y = attribute(*gradient, "y");
  if (!xs || !y || y->s().empty())
    return emitError(where(*gradient)) << "Gradient needs attributes xs and y";
  trainingInfoLoss = y->s();
  trainable.emplace();
  for (const std::string &x : xs->strings())
    trainable->insert(x);

  if (!optimizer)
    return success();
  FailureOr<ImportedOptimizer> read =
      readOptimizerNode(*optimizer, where(*optimizer));
  if (failed(read))
    return failure();
  ImportedOptimizer opt = std::move(*read);
  // The learning rate: a constant R of the algorithm or of the model.
  if (optimizer->input_size() > 0) {
    const onnx::TensorProto *r = nullptr;
    for (const auto &init : algorithm.initializer())
      if (init.name() == optimizer->input(0))
        r = &init;
    for (const auto &init : model.graph().initializer())
      if (!r && init.name() == optimizer->input(0))
        r = &init;
    if (r) {
      FailureOr<TensorData> data = readTensorData(
          *r, context, options.modelPath, namedLoc("initializer", r->name()));
      if (failed(data))
        return failure();
      if (data->numElements() == 1 && data->elementType.isF32()) {
        float value;
        std::memcpy(&value, data->bytes.data(), sizeof value);
        opt.lr = value;
      } else if (data->numElements() == 1 && data->elementType.isF64()) {
        double value;
        std::memcpy(&value, data->bytes.data(), sizeof value);
        opt.lr = value;
      }
    }
  }
  result.optimizer = std::move(opt);
  return success();
}

LogicalResult ModelImporter::chooseOutputs() {
  const onnx::GraphProto &graph = model.graph();
  if (!training()) {
    for (const auto &output : graph.output())
      outputNames.push_back(output.name());
    return success();
  }
  if (options.lossName.empty() && !trainingInfoLoss.empty()) {
    outputNames.push_back(trainingInfoLoss);
    return success();
  }
  if (!options.lossName.empty()) {
    for (const auto &output : graph.output())
      if (output.name() == options.lossName) {
        outputNames.push_back(options.lossName);
        return success();
      }
    std::string names;
    for (const auto &output : graph.output())
      names += (names.empty() ? "'" : ", '") + output.name() + "'";
    return emitError(fileLoc)
           << settingRef("loss") << " '" << options.lossName
           << "' is not a graph output (outputs: " << names << ")";
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
  if (scalars.size() == 1 || (scalars.empty() && floats.size() == 1)) {
    outputNames.push_back(scalars.empty() ? floats.front() : scalars.front());
    return success();
  }
  auto diag = emitError(fileLoc);
  if (scalars.empty() && floats.empty())
    diag << "the graph has no float output to use as the loss";
  else
    diag << "cannot tell which output is the loss ("
         << (scalars.empty() ? floats.size() : scalars.size())
         << " candidates); name it with " << settingRef("loss");
  return diag;
}

LogicalResult ModelImporter::checkNames() {
  const onnx::GraphProto &graph = model.graph();
  // Every name is defined once: by a graph input, an initializer (which may
  // give a graph input of the same name its default), or one node output.
  llvm::StringMap<std::string> definedBy;
  llvm::StringSet<> inputs;
  for (const auto &input : graph.input())
    if (!inputs.insert(input.name()).second)
      return emitError(namedLoc("input", input.name()))
             << "two graph inputs have this name";
  for (const auto &init : graph.initializer())
    if (!definedBy.try_emplace(init.name(), "an initializer").second)
      return emitError(namedLoc("initializer", init.name()))
             << "two initializers have this name";
  for (const auto &input : graph.input())
    definedBy.try_emplace(input.name(), "a graph input");
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    std::string name = node.name().empty()
                           ? node.op_type() + "_" + std::to_string(i)
                           : node.name();
    for (const std::string &out : node.output()) {
      if (out.empty())
        continue;
      auto [it, inserted] = definedBy.try_emplace(out, "node '" + name + "'");
      if (!inserted)
        return emitError(NameLoc::get(builder.getStringAttr(name), fileLoc))
               << node.op_type() << ": output '" << out
               << "' is already defined by " << it->second
               << " (ONNX names each value once)";
    }
  }
  return success();
}

LogicalResult ModelImporter::sliceAndCheckNodes() {
  const onnx::GraphProto &graph = model.graph();
  if (failed(checkNames()))
    return failure();
  // Only the nodes the outputs depend on are imported.
  llvm::StringMap<int> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string &out : graph.node(i).output())
      if (!out.empty())
        producer[out] = i;
  llvm::SetVector<int> needed;
  SmallVector<std::string> worklist(outputNames.begin(), outputNames.end());
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
  order.assign(needed.begin(), needed.end());
  llvm::sort(order);

  graphImporter =
      std::make_unique<GraphImporter>(builder, opset, options.modelPath);
  for (int i : order) {
    const onnx::NodeProto &node = graph.node(i);
    graphImporter->nameNode(node, i);
    StringRef domain = node.domain();
    if (domain == "ai.onnx")
      domain = "";
    int64_t version = importedOpset(model, domain);
    if (version == 0)
      return graphImporter->error(node)
             << "the model does not import the operator set '"
             << (domain.empty() ? "ai.onnx" : domain) << "'";
    if (!domain.empty() && domain != kTrainingDomain)
      return graphImporter->error(node)
             << "operators of domain '" << domain << "' are not supported";
    const OpRegistration *reg = lookupHandler(domain, node.op_type(), version);
    if (!reg)
      return graphImporter->error(node)
             << "unsupported operator " << node.op_type() << " ("
             << (domain.empty() ? "" : domain.str() + " ") << "opset "
             << version << ")";
    handlers[i] = reg;
    if (training() && domain.empty() &&
        node.op_type() == "BatchNormalization" &&
        isTrainingBatchNorm(node, version))
      for (int j = 3; j < std::min(node.input_size(), 5); ++j)
        bufferNames.insert(node.input(j));
    // A training-mode Dropout needs the optimizer step and the global index
    // of the micro-batch's first sample for its mask.
    if (training() && node.op_type() == "Dropout" && node.input_size() > 2 &&
        !node.input(2).empty())
      needsRandomContext = true;
    for (int j = 0; j < node.input_size(); ++j)
      if (!llvm::is_contained(reg->constantInputs, j))
        regularUse.insert(node.input(j));
  }
  return success();
}
