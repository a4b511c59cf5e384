//===- Artifact.cpp - write the files of a compiled step --------*- C++ -*-===//

#include "Artifact.h"

#include "accrue/Codegen/Target.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstring>
#include <fstream>

using namespace mlir;
using namespace accrue;

/// The runtime's dtype of a step argument's element type.
static std::optional<rt::DType> runtimeDType(Type type) {
  if (type.isF32())
    return ACCRUE_DTYPE_FLOAT32;
  if (type.isF64())
    return ACCRUE_DTYPE_FLOAT64;
  if (type.isF16())
    return ACCRUE_DTYPE_FLOAT16;
  if (type.isInteger(64))
    return ACCRUE_DTYPE_INT64;
  if (type.isInteger(32))
    return ACCRUE_DTYPE_INT32;
  if (type.isInteger(1))
    return ACCRUE_DTYPE_BOOL;
  if (type.isInteger(8))
    return ACCRUE_DTYPE_UINT8;
  return std::nullopt;
}

/// The optimizer as the manifest records it, with the hyperparameters its
/// compiled rule uses.
static rt::OptimizerSpec optimizerSpec(const OptimizerOptions &opt) {
  rt::OptimizerSpec spec;
  spec.kind = *opt.kind;
  spec.lr = opt.lr.value_or(1e-3);
  std::map<std::string, double> &h = spec.hyperparameters;
  switch (spec.kind) {
  case ACCRUE_OPTIMIZER_SGD:
    h = {{"momentum", opt.momentum},
         {"dampening", opt.dampening},
         {"nesterov", opt.nesterov ? 1.0 : 0.0}};
    break;
  case ACCRUE_OPTIMIZER_ADAM:
  case ACCRUE_OPTIMIZER_ADAMW:
    h = {{"beta1", opt.beta1},
         {"beta2", opt.beta2},
         {"eps", opt.eps.value_or(1e-8)}};
    break;
  case ACCRUE_OPTIMIZER_ADAGRAD:
    h = {{"lr_decay", opt.lrDecay}, {"eps", opt.eps.value_or(1e-10)}};
    break;
  case ACCRUE_OPTIMIZER_ONNX_ADAM:
    h = {{"alpha", opt.beta1},
         {"beta", opt.beta2},
         {"epsilon", opt.eps.value_or(1e-6)},
         {"norm_coefficient_post", opt.postWeightDecay}};
    break;
  case ACCRUE_OPTIMIZER_NONE:
    break;
  }
  if (opt.weightDecay)
    h["weight_decay"] = *opt.weightDecay;
  return spec;
}

FailureOr<rt::Manifest>
accrue::buildManifest(ModuleOp module, const CompilerOptions &options,
                      const onnx_import::ImportedModel &model,
                      const train::StepLayout &layout) {
  auto step = module.lookupSymbol<func::FuncOp>(ACCRUE_STEP_FUNCTION);
  auto abi = step ? step->getAttrOfType<ArrayAttr>(train::StepAttrs::kABI)
                  : ArrayAttr();
  if (!abi || abi.size() != step.getNumArguments())
    return emitError(module.getLoc())
           << "the module has no finalized @" << ACCRUE_STEP_FUNCTION
           << " (run train-finalize-step-abi)";

  rt::Manifest m;
  m.target = options.pipeline.target;
  Target::get(m.target).describe(m, options.pipeline);
  for (auto [entry, type] : llvm::zip(abi, step.getArgumentTypes())) {
    auto dict = cast<DictionaryAttr>(entry);
    rt::ArgSpec arg;
    // The train dialect verified the entries.
    arg.role =
        dict.getAs<train::ArgRoleAttr>(train::StepAttrs::kRole).getValue();
    arg.name = cast<StringAttr>(dict.get(train::StepAttrs::kName)).str();
    if (auto fields = dict.getAs<ArrayAttr>(train::StepAttrs::kFields))
      for (Attribute field : fields)
        arg.fields.push_back(cast<StringAttr>(field).str());
    if (auto checks = dict.getAs<ArrayAttr>(train::StepAttrs::kIndexChecks))
      for (auto check : checks.getAsRange<DictionaryAttr>()) {
        rt::IndexCheck &c = arg.indexChecks.emplace_back();
        c.low = check.getAs<IntegerAttr>("low").getInt();
        c.high = check.getAs<IntegerAttr>("high").getInt();
        if (auto ignore = check.getAs<IntegerAttr>("ignore"))
          c.ignore = ignore.getInt();
        c.what = check.getAs<StringAttr>("what").str();
      }
    Type element = type;
    arg.kind = ACCRUE_ARG_SCALAR;
    if (auto memref = dyn_cast<MemRefType>(type)) {
      arg.kind = ACCRUE_ARG_BUFFER;
      element = memref.getElementType();
      for (int64_t d : memref.getShape())
        arg.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    }
    std::optional<rt::DType> dtype = runtimeDType(element);
    if (!dtype)
      return step.emitError("argument '")
             << arg.name << "' has element type " << element
             << ", which the runtime cannot pass";
    arg.dtype = *dtype;
    m.args.push_back(std::move(arg));
  }
  for (const train::ArenaSlot &slot : layout.params)
    m.params.push_back({slot.name, slot.shape, slot.offset, slot.numElements});
  for (const train::ArenaSlot &slot : layout.buffers)
    m.buffers.push_back({slot.name, slot.shape, slot.offset, slot.numElements});
  m.arenaSize = layout.arenaSize;
  m.loss = model.lossName;
  m.lossNormalization = options.pipeline.train.lossNormalization;
  m.precision = options.pipeline.train.precision;
  m.collectives = options.pipeline.train.collectives;
  m.shardOptimizer = options.pipeline.train.shardOptimizer;
  m.shardGradients = options.pipeline.train.shardGradients;
  auto microBatch =
      step->getAttrOfType<IntegerAttr>(train::StepAttrs::kMicroBatch);
  if (!microBatch)
    return step.emitError("the step has no micro-batch loop (run "
                          "train-microbatch)");
  m.microBatch = microBatch.getInt();
  m.accumulationSteps = options.accumulationSteps;
  m.effectiveBatch = options.effectiveBatch;
  m.optimizer = optimizerSpec(options.optimizer);
  m.clipNorm = options.optimizer.clipNorm;
  m.partialWindows = step->hasAttr(train::StepAttrs::kPartialWindows);
  const LossScaleOptions &scaling = options.lossScale;
  m.lossScaling.mode = scaling.mode;
  if (scaling.mode != ACCRUE_LOSS_SCALE_NONE) {
    m.lossScaling.init = scaling.scale;
    m.lossScaling.growth = scaling.growth;
    m.lossScaling.backoff = scaling.backoff;
    m.lossScaling.interval = scaling.interval;
  }
  return m;
}

void accrue::embedFingerprint(llvm::Module &module,
                              const rt::Manifest &manifest) {
  auto *i64 = llvm::Type::getInt64Ty(module.getContext());
  new llvm::GlobalVariable(module, i64, /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i64, manifest.fingerprint()),
                           ACCRUE_STEP_FINGERPRINT_SYMBOL);
}

std::string accrue::buildHeader(const rt::Manifest &manifest) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "/* Generated by accrue-compile: the calling convention of "
     << manifest.library << ".\n"
     << " * Call " << manifest.entry
     << "(args), where args[i] points to the i-th\n"
        " * lowered argument; each buffer is a memref descriptor expanded\n"
        " * into (allocated, aligned, offset, sizes[rank], strides[rank]),\n"
        " * in the order of \"args\" in "
     << ACCRUE_FILE_MANIFEST
     << ". Arenas are updated in\n"
        " * place; the accumulator must be zero before each step. */\n"
        "#ifndef ACCRUE_STEP_H\n#define ACCRUE_STEP_H\n#include <stdint.h>\n\n"
        "#define ACCRUE_STEP_ARENA_SIZE "
     << manifest.arenaSize << "\n#define ACCRUE_STEP_MICRO_BATCH "
     << manifest.microBatch << "\n#define ACCRUE_STEP_NUM_STATES "
     << manifest.stateNames().size() << "\n#define ACCRUE_STEP_FINGERPRINT 0x"
     << rt::fingerprintText(manifest.fingerprint())
     << "ull\n\n/* Arguments, in order. */\n";
  for (auto [i, arg] : llvm::enumerate(manifest.args)) {
    os << "/* " << i << ": " << accrueArgRoleName(arg.role) << " '" << arg.name
       << "' " << rt::dtypeName(arg.dtype) << "[";
    llvm::interleave(
        arg.shape, os,
        [&](int64_t d) {
          os << (d < 0 ? std::string("N") : std::to_string(d));
        },
        ", ");
    os << "] */\n";
  }
  os << "\n/* Parameter offsets (elements) in the arenas. */\n";
  for (auto [i, param] : llvm::enumerate(manifest.params)) {
    os << "#define ACCRUE_PARAM_" << i << "_OFFSET " << param.offset << " /* "
       << param.name << " [";
    llvm::interleave(param.shape, os, ", ");
    os << "] */\n";
  }
  if (!manifest.buffers.empty()) {
    os << "\n/* Buffer (running statistics) offsets (elements) in the buffer "
          "arena\n * of ACCRUE_STEP_BUFFERS_SIZE floats, which the step "
          "updates in place. */\n#define ACCRUE_STEP_BUFFERS_SIZE "
       << manifest.buffersSize() << "\n";
    for (auto [i, buffer] : llvm::enumerate(manifest.buffers)) {
      os << "#define ACCRUE_BUFFER_" << i << "_OFFSET " << buffer.offset
         << " /* " << buffer.name << " [";
      llvm::interleave(buffer.shape, os, ", ");
      os << "] */\n";
    }
  }
  os << "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
     << "void " << manifest.entry << "(void **args);\n"
     << "extern const uint64_t " << ACCRUE_STEP_FINGERPRINT_SYMBOL << ";\n";
  if (manifest.dataParallel())
    os << "\n/* Data parallelism: the host provides this. Once per optimizer\n"
          " * step (per micro-batch with collectives=per-micro-batch) the\n"
          " * step calls it on one buffer, the gradient accumulator whose\n"
          " * tail holds the loss sum and count; it must sum the buffer over\n"
          " * all ranks in place (accrue-train does it with MPI_Allreduce). "
          "*/\n"
          "#ifndef ACCRUE_BUFFER_DEFINED /* as in accrue-runtime/StepABI.h */\n"
          "#define ACCRUE_BUFFER_DEFINED\n"
          "typedef struct AccrueBuffer {\n  float *allocated;\n"
          "  float *aligned;\n  int64_t offset;\n  int64_t size;\n"
          "  int64_t stride;\n} AccrueBuffer;\n#endif\n"
       << "void " << ACCRUE_ALL_REDUCE_SYMBOL
       << "(struct AccrueBuffer *buffer);\n";
  os << "#ifdef __cplusplus\n}\n#endif\n#endif\n";
  return text;
}

LogicalResult
accrue::writeInitialParameters(const onnx_import::ImportedModel &model,
                               StringRef path, std::string &error) {
  std::vector<rt::TensorRef> tensors;
  for (const auto *list : {&model.parameters, &model.buffers})
    for (const onnx_import::ImportedParameter &param : *list)
      tensors.push_back({param.name, ACCRUE_DTYPE_FLOAT32, param.shape,
                         param.values(), param.bytes.size()});
  return success(
      rt::writeSafetensors(path.str(), tensors, {{"format", "pt"}}, error));
}

LogicalResult accrue::writeExportableModel(onnx_import::ImportedModel &imported,
                                           StringRef path, std::string &error) {
  // The parameters' bytes move back into the model for the write and out
  // again after it: nothing is copied, and the model streams to the file.
  onnx::ModelProto &model = *imported.proto;
  llvm::StringMap<onnx_import::ImportedParameter *> params;
  for (auto *list : {&imported.parameters, &imported.buffers})
    for (onnx_import::ImportedParameter &param : *list)
      params[param.name] = &param;
  SmallVector<std::pair<onnx::TensorProto *, std::string *>> moved;
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    auto it = params.find(init.name());
    if (it == params.end())
      continue;
    init.clear_float_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.mutable_raw_data()->swap(it->second->bytes);
    moved.push_back({&init, &it->second->bytes});
  }
  llvm::scope_exit restore([&] {
    for (auto [init, bytes] : moved)
      init->mutable_raw_data()->swap(*bytes);
  });
  std::ofstream os(path.str(), std::ios::binary | std::ios::trunc);
  if (!os) {
    error = "cannot write '" + path.str() + "': " + std::strerror(errno);
    return failure();
  }
  if (!model.SerializeToOstream(&os) || !os.flush()) {
    error = "cannot write '" + path.str() + "'" +
            (errno ? std::string(": ") + std::strerror(errno) : "");
    return failure();
  }
  return success();
}
