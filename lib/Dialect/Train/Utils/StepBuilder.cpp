//===- StepBuilder.cpp - build a whole-batch training step ------*- C++ -*-===//

#include "accrue/Dialect/Train/Utils/StepBuilder.h"
#include "accrue/Dialect/Train/Utils/IndexChecks.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// The forward function's arguments by role.
struct ForwardArgs {
  SmallVector<unsigned> params, batch, buffers;
  std::optional<unsigned> step, sampleIndex;
  /// A buffer argument -> the forward's result with its new value.
  DenseMap<unsigned, unsigned> bufferUpdate;
};

/// The step's arguments and results, and where each argument is.
struct StepSignature {
  SmallVector<Type> inputs;
  SmallVector<DictionaryAttr> inputAttrs;
  SmallVector<Type> results;
  SmallVector<DictionaryAttr> resultAttrs;
  unsigned numStates = 0, firstBatch = 0, lr = 0, valid = 0;
  std::optional<unsigned> bufferArena, lossScale, sampleBase;
};

/// The forward's arguments by role, and the arenas' layout they make.
LogicalResult classifyForward(func::FuncOp forward, const StepOptions &options,
                              ForwardArgs &args, StepLayout &layout) {
  FunctionType fwdType = forward.getFunctionType();
  // Parameters and batch inputs of the forward function, by role.
  SmallVector<unsigned> &paramArgs = args.params, &batchArgs = args.batch,
                        &bufferArgs = args.buffers;
  std::optional<unsigned> &stepArg = args.step,
                          &sampleIndexArg = args.sampleIndex;
  for (unsigned i = 0; i < fwdType.getNumInputs(); ++i) {
    std::optional<AccrueArgRole> role = getArgRole(forward, i);
    auto name = forward.getArgAttrOfType<StringAttr>(i, StepAttrs::kName);
    if (!role || !name)
      return forward.emitError("argument #")
             << i << " has no train.role/train.name";
    switch (*role) {
    case ACCRUE_ROLE_PARAMS:
    case ACCRUE_ROLE_BUFFERS: {
      // A slice of the parameter arena or of the buffer arena.
      bool param = *role == ACCRUE_ROLE_PARAMS;
      auto type = dyn_cast<RankedTensorType>(fwdType.getInput(i));
      if (!type || !type.getElementType().isF32() || !type.hasStaticShape())
        return forward.emitError(param ? "parameter '" : "buffer '")
               << name.getValue() << "' must be a static f32 tensor";
      int64_t &size = param ? layout.arenaSize : layout.buffersSize;
      ArenaSlot slot;
      slot.name = name.getValue().str();
      slot.shape.assign(type.getShape().begin(), type.getShape().end());
      slot.numElements = type.getNumElements();
      slot.offset = size;
      size += llvm::alignTo(slot.numElements, kArenaAlignment);
      (param ? layout.params : layout.buffers).push_back(slot);
      (param ? paramArgs : bufferArgs).push_back(i);
      break;
    }
    case ACCRUE_ROLE_BATCH:
      batchArgs.push_back(i);
      break;
    case ACCRUE_ROLE_STEP:
      stepArg = i;
      break;
    case ACCRUE_ROLE_SAMPLE_BASE:
      sampleIndexArg = i;
      break;
    default:
      return forward.emitError("argument #")
             << i << " has role '" << accrueArgRoleName(*role)
             << "', which a forward function cannot take";
    }
  }
  if (paramArgs.empty())
    return forward.emitError("the model has no trainable parameters");
  if (batchArgs.empty())
    return forward.emitError("the model has no batch inputs");
  // Results after the loss are the buffers' new values (train.tied names
  // the buffer), one each.
  DenseMap<unsigned, unsigned> &bufferUpdate = args.bufferUpdate;
  for (unsigned r = 1; r < fwdType.getNumResults(); ++r) {
    auto tiedTo = forward.getResultAttrOfType<IntegerAttr>(r, StepAttrs::kTied);
    if (!tiedTo || !llvm::is_contained(bufferArgs, tiedTo.getInt()) ||
        !bufferUpdate.try_emplace(tiedTo.getInt(), r).second ||
        fwdType.getResult(r) != fwdType.getInput(tiedTo.getInt()))
      return forward.emitError("result #")
             << r << " must be the new value of a buffer argument "
             << "(train.tied naming one, of its type, once)";
  }
  for (unsigned i : bufferArgs)
    if (!bufferUpdate.count(i))
      return forward.emitError("buffer argument #")
             << i << " has no result with its new value";
  if (options.dataParallel)
    layout.arenaSize += ACCRUE_RESERVED_TAIL;
  layout.arenaSize = std::max<int64_t>(layout.arenaSize, kArenaAlignment);
  return success();
}

/// The step's signature: its arguments in the contract's order (arenas,
/// batch inputs, lr, step, valid samples, loss scale and streak, sample
/// base) and its results (the arenas it updates, then the metrics).
StepSignature buildSignature(MLIRContext *ctx, func::FuncOp forward,
                             const ForwardArgs &args, StepLayout &layout,
                             const StepOptions &options) {
  FunctionType fwdType = forward.getFunctionType();
  const SmallVector<unsigned> &batchArgs = args.batch;
  const std::optional<unsigned> &sampleIndexArg = args.sampleIndex;
  StepSignature sig;
  OpBuilder b(ctx);
  auto arena = RankedTensorType::get({layout.arenaSize}, b.getF32Type());
  SmallVector<Type> &inputs = sig.inputs;
  SmallVector<DictionaryAttr> &inputAttrs = sig.inputAttrs;
  auto argAttrs = [&](AccrueArgRole role, StringRef name) {
    return getArgRoleAttrs(ctx, role, name);
  };
  inputs.push_back(arena);
  inputAttrs.push_back(argAttrs(ACCRUE_ROLE_PARAMS, "params"));
  inputs.push_back(arena);
  inputAttrs.push_back(argAttrs(ACCRUE_ROLE_ACCUMULATOR, "grads"));
  unsigned &numStates = sig.numStates;
  numStates = options.optimizer ? options.optimizer.getNumStates() : 0;
  for (unsigned s = 0; s < numStates; ++s) {
    std::string stateName = options.optimizer.getStateName(s).str();
    layout.stateNames.push_back(stateName);
    inputs.push_back(arena);
    inputAttrs.push_back(argAttrs(ACCRUE_ROLE_STATE, stateName));
  }
  std::optional<unsigned> &bufferArenaIndex = sig.bufferArena;
  if (!layout.buffers.empty()) {
    bufferArenaIndex = inputs.size();
    inputs.push_back(
        RankedTensorType::get({layout.buffersSize}, b.getF32Type()));
    inputAttrs.push_back(argAttrs(ACCRUE_ROLE_BUFFERS, "buffers"));
  }
  sig.firstBatch = inputs.size();
  // The ranges the batch inputs' values must lie in travel with their
  // attributes to the manifest.
  annotateIndexChecks(forward);
  for (unsigned i : batchArgs) {
    auto type = cast<RankedTensorType>(fwdType.getInput(i));
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = ShapedType::kDynamic;
    inputs.push_back(RankedTensorType::get(shape, type.getElementType()));
    inputAttrs.push_back(forward.getArgAttrDict(i));
  }
  sig.lr = inputs.size();
  inputs.push_back(b.getF32Type());
  inputAttrs.push_back(argAttrs(ACCRUE_ROLE_LR, "lr"));
  inputs.push_back(b.getI64Type());
  inputAttrs.push_back(argAttrs(ACCRUE_ROLE_STEP, "step"));
  // How many of the batch inputs' samples are real (a partial last window is
  // padded to whole micro-batches).
  sig.valid = inputs.size();
  inputs.push_back(b.getI64Type());
  inputAttrs.push_back(argAttrs(ACCRUE_ROLE_VALID_SAMPLES, "valid_samples"));
  // The loss scale the backward starts from, and the finite steps in a row
  // before this one (GradScaler's rule for the next scale).
  std::optional<unsigned> &lossScaleIndex = sig.lossScale;
  if (options.lossScale) {
    layout.hasLossScale = true;
    lossScaleIndex = inputs.size();
    inputs.push_back(b.getF32Type());
    inputAttrs.push_back(argAttrs(ACCRUE_ROLE_LOSS_SCALE, "loss_scale"));
    inputs.push_back(b.getI64Type());
    inputAttrs.push_back(
        argAttrs(ACCRUE_ROLE_LOSS_SCALE_STREAK, "loss_scale_streak"));
  }
  // The global index of the effective batch's first sample (for
  // training-mode Dropout's mask).
  std::optional<unsigned> &sampleBaseIndex = sig.sampleBase;
  if (sampleIndexArg) {
    layout.hasSampleBase = true;
    sampleBaseIndex = inputs.size();
    inputs.push_back(b.getI64Type());
    inputAttrs.push_back(argAttrs(ACCRUE_ROLE_SAMPLE_BASE, "sample_base"));
  }

  SmallVector<Type> &results = sig.results;
  SmallVector<DictionaryAttr> &resultAttrs = sig.resultAttrs;
  auto tied = [&](unsigned index) {
    return b.getDictionaryAttr(
        b.getNamedAttr(StepAttrs::kTied, b.getI64IntegerAttr(index)));
  };
  auto metric = [&](StringRef name) {
    return b.getDictionaryAttr(
        b.getNamedAttr(StepAttrs::kMetric, b.getStringAttr(name)));
  };
  if (options.optimizer) {
    results.push_back(arena);
    resultAttrs.push_back(tied(0));
  }
  results.push_back(arena);
  resultAttrs.push_back(tied(1));
  for (unsigned s = 0; s < numStates; ++s) {
    results.push_back(arena);
    resultAttrs.push_back(tied(2 + s));
  }
  if (bufferArenaIndex) {
    results.push_back(inputs[*bufferArenaIndex]);
    resultAttrs.push_back(tied(*bufferArenaIndex));
  }
  results.push_back(b.getF32Type());
  resultAttrs.push_back(metric(accrueMetricName(ACCRUE_METRIC_LOSS)));
  results.push_back(b.getF32Type());
  resultAttrs.push_back(metric(accrueMetricName(ACCRUE_METRIC_GRAD_NORM)));
  if (options.lossScale) {
    results.push_back(b.getF32Type());
    resultAttrs.push_back(
        metric(accrueMetricName(ACCRUE_METRIC_NEXT_LOSS_SCALE)));
    results.push_back(b.getF32Type());
    resultAttrs.push_back(
        metric(accrueMetricName(ACCRUE_METRIC_LOSS_SCALE_STREAK)));
  }
  return sig;
}

/// The step's body: the one-big-batch semantics over the arenas.
void buildBody(OpBuilder &b, Location loc, func::FuncOp step,
               func::FuncOp forward, const ForwardArgs &args,
               const StepSignature &sig, const StepLayout &layout,
               const StepOptions &options) {
  FunctionType fwdType = forward.getFunctionType();
  Block *entry = &step.getBody().front();
  const SmallVector<unsigned> &paramArgs = args.params, &batchArgs = args.batch,
                              &bufferArgs = args.buffers;
  const std::optional<unsigned> &stepArg = args.step,
                                &sampleIndexArg = args.sampleIndex;
  const DenseMap<unsigned, unsigned> &bufferUpdate = args.bufferUpdate;
  unsigned numStates = sig.numStates, firstBatch = sig.firstBatch,
           lrIndex = sig.lr, validIndex = sig.valid;
  const std::optional<unsigned> &bufferArenaIndex = sig.bufferArena,
                                &lossScaleIndex = sig.lossScale,
                                &sampleBaseIndex = sig.sampleBase;
  // The whole-batch semantics.
  SmallVector<int64_t> offsets;
  SmallVector<Type> viewTypes;
  for (const ArenaSlot &slot : layout.params) {
    offsets.push_back(slot.offset);
    viewTypes.push_back(RankedTensorType::get(slot.shape, b.getF32Type()));
  }
  Value params = entry->getArgument(0), accumulator = entry->getArgument(1);
  auto unpack = UnpackOp::create(b, loc, viewTypes, params, offsets);
  SmallVector<Value> callArgs(fwdType.getNumInputs());
  for (auto [view, index] : llvm::zip(unpack.getViews(), paramArgs))
    callArgs[index] = view;
  for (auto [n, index] : llvm::enumerate(batchArgs))
    callArgs[index] = entry->getArgument(firstBatch + n);
  SmallVector<int64_t> bufferOffsets;
  if (bufferArenaIndex) {
    SmallVector<Type> bufferTypes;
    for (const ArenaSlot &slot : layout.buffers) {
      bufferOffsets.push_back(slot.offset);
      bufferTypes.push_back(RankedTensorType::get(slot.shape, b.getF32Type()));
    }
    auto buffers =
        UnpackOp::create(b, loc, bufferTypes,
                         entry->getArgument(*bufferArenaIndex), bufferOffsets);
    for (auto [view, index] : llvm::zip(buffers.getViews(), bufferArgs))
      callArgs[index] = view;
  }
  auto scalarTensor = [&](Value v) -> Value {
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, v.getType()), v);
  };
  if (stepArg)
    callArgs[*stepArg] = scalarTensor(entry->getArgument(lrIndex + 1));
  if (sampleIndexArg)
    callArgs[*sampleIndexArg] =
        scalarTensor(entry->getArgument(*sampleBaseIndex));
  SmallVector<Type> vgTypes(fwdType.getResults());
  llvm::append_range(vgTypes, viewTypes);
  SmallVector<int64_t> wrt;
  for (unsigned i = 0; i < paramArgs.size(); ++i)
    wrt.push_back(paramArgs[i]);
  auto vg = ValueAndGradOp::create(
      b, loc, vgTypes, forward.getSymName(), callArgs,
      entry->getArgument(validIndex),
      lossScaleIndex ? entry->getArgument(*lossScaleIndex) : Value(), wrt,
      b.getI64IntegerAttr(options.microBatch), options.lossDivisor);
  Value grads =
      AccumulateOp::create(b, loc, accumulator, vg.getGradients(), offsets);
  Value norm = GlobalNormOp::create(b, loc, grads);
  Value loss = tensor::ExtractOp::create(b, loc, vg.getResult(0));
  // The buffers' new values go back into their arena whatever the update
  // does (PyTorch updates running statistics in the forward, also in a step
  // that a gradient overflow skips).
  Value newBuffers;
  if (bufferArenaIndex) {
    SmallVector<Value> values;
    for (unsigned index : bufferArgs)
      values.push_back(vg.getResult(bufferUpdate.lookup(index)));
    newBuffers = StoreOp::create(b, loc, entry->getArgument(*bufferArenaIndex),
                                 values, bufferOffsets);
  }

  SmallVector<Value> returned;
  if (options.optimizer) {
    Value g = grads;
    if (options.maxNorm) {
      Value coef = ClipCoefficientOp::create(
          b, loc, norm, b.getF32FloatAttr(*options.maxNorm));
      g = ScaleOp::create(b, loc, g, coef);
    }
    SmallVector<Value> states;
    for (unsigned s = 0; s < numStates; ++s)
      states.push_back(entry->getArgument(2 + s));
    auto update =
        UpdateOp::create(b, loc, params, g, states, entry->getArgument(lrIndex),
                         entry->getArgument(lrIndex + 1), options.optimizer,
                         options.lossScale ? b.getUnitAttr() : UnitAttr());
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    Value reset = linalg::FillOp::create(b, loc, zero, grads).getResult(0);
    returned.push_back(update.getNewParams());
    returned.push_back(reset);
    llvm::append_range(returned, update.getNewStates());
  } else {
    returned.push_back(grads);
  }
  if (newBuffers)
    returned.push_back(newBuffers);
  returned.push_back(loss);
  returned.push_back(norm);
  if (options.lossScale) {
    // After the update, which skips the step on an overflow.
    auto next =
        NextLossScaleOp::create(b, loc, entry->getArgument(*lossScaleIndex),
                                entry->getArgument(*lossScaleIndex + 1), norm,
                                b.getF64FloatAttr(options.lossScaleGrowth),
                                b.getF64FloatAttr(options.lossScaleBackoff),
                                b.getI64IntegerAttr(options.lossScaleInterval));
    returned.push_back(next.getNextScale());
    // (A metric is an f32: exact for the streaks an interval <= 2^24 allows.)
    returned.push_back(
        arith::SIToFPOp::create(b, loc, b.getF32Type(), next.getNextStreak()));
  }
  func::ReturnOp::create(b, loc, returned);
}

} // namespace

FailureOr<StepLayout> train::buildTrainStep(ModuleOp module,
                                            func::FuncOp forward,
                                            const StepOptions &options) {
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<TrainDialect, linalg::LinalgDialect, arith::ArithDialect>();
  OpBuilder b(ctx);
  Location loc = forward.getLoc();
  ForwardArgs args;
  StepLayout layout;
  if (failed(classifyForward(forward, options, args, layout)))
    return failure();
  StepSignature sig = buildSignature(ctx, forward, args, layout, options);
  b.setInsertionPointToEnd(module.getBody());
  auto step = func::FuncOp::create(b, loc, ACCRUE_STEP_FUNCTION,
                                   b.getFunctionType(sig.inputs, sig.results));
  step.setAllArgAttrs(sig.inputAttrs);
  step.setAllResultAttrs(sig.resultAttrs);
  step->setAttr(StepAttrs::kStep, b.getUnitAttr());
  b.setInsertionPointToStart(step.addEntryBlock());

  buildBody(b, loc, step, forward, args, sig, layout, options);
  return layout;
}
