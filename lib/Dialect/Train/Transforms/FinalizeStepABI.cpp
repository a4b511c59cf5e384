//===- FinalizeStepABI.cpp - the artifact calling convention ----*- C++ -*-===//
//
// A training step is built on tensors: it takes parameters, accumulators and
// optimizer state and returns their new values. The artifact updates them in
// place instead. This pass turns every tensor argument into a memref read
// through `bufferization.to_tensor restrict writable`, writes each tied
// result back into its argument with `materialize_in_destination` (a no-op
// once one-shot bufferization has placed the update in that buffer), and
// stores scalar results into a trailing metrics buffer. The roles of the
// final arguments are recorded as one `train.abi` attribute, from which the
// artifact's manifest is written.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINFINALIZESTEPABI
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

LogicalResult finalize(func::FuncOp step) {
  if (!step.getBody().hasOneBlock())
    return step.emitError("a training step must have a single block");
  Block &entry = step.getBody().front();
  FunctionType type = step.getFunctionType();
  MLIRContext *ctx = step.getContext();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Location loc = step.getLoc();

  // The contract, argument by argument: what the manifest will say.
  SmallVector<Attribute> abi;
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    std::optional<AccrueArgRole> role = getArgRole(step, i);
    auto name = step.getArgAttrOfType<StringAttr>(i, StepAttrs::kName);
    if (!role || !name)
      return step.emitError("argument #")
             << i << " needs a known train.role and a train.name: a host "
             << "could not tell what to pass";
    NamedAttrList entry = getArgRoleAttrs(ctx, *role, name.getValue());
    if (auto checks =
            step.getArgAttrOfType<ArrayAttr>(i, StepAttrs::kIndexChecks))
      entry.set(StepAttrs::kIndexChecks, checks);
    abi.push_back(entry.getDictionary(ctx));
  }

  // Tensor arguments become memrefs.
  SmallVector<Type> inputs;
  for (BlockArgument arg : entry.getArguments()) {
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    if (!tensor) {
      inputs.push_back(arg.getType());
      continue;
    }
    auto memref = MemRefType::get(tensor.getShape(), tensor.getElementType());
    auto toTensor = bufferization::ToTensorOp::create(
        b, loc, tensor, arg, /*restrict=*/true, /*writable=*/true);
    arg.replaceAllUsesExcept(toTensor, toTensor);
    arg.setType(memref);
    inputs.push_back(memref);
  }
  step.setType(b.getFunctionType(inputs, type.getResults()));

  // Results: tied ones go back into their argument, other tensors into an
  // output argument each, f32 scalars into one trailing metrics buffer,
  // named by their train.metric.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  SmallVector<Value> outputs(type.getNumResults());
  SmallVector<Attribute> fields;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    if (auto tied =
            step.getResultAttrOfType<IntegerAttr>(i, StepAttrs::kTied)) {
      int64_t index = tied.getInt();
      if (index < 0 || index >= static_cast<int64_t>(inputs.size()) ||
          !isa<MemRefType>(inputs[index]))
        return step.emitError("result #")
               << i << " is tied to argument #" << index
               << ", which is not a tensor argument";
      continue;
    }
    if (auto tensor = dyn_cast<RankedTensorType>(value.getType())) {
      if (!tensor.hasStaticShape())
        return step.emitError("result #")
               << i << " must have a static shape, not " << tensor;
      auto memref = MemRefType::get(tensor.getShape(), tensor.getElementType());
      unsigned index = step.getNumArguments();
      if (failed(
              step.insertArgument(index, memref, b.getDictionaryAttr({}), loc)))
        return failure();
      outputs[i] = entry.getArgument(index);
      auto name = step.getResultAttrOfType<StringAttr>(i, StepAttrs::kName);
      abi.push_back(getArgRoleAttrs(ctx, ACCRUE_ROLE_OUTPUT,
                                    name ? name.getValue()
                                         : ("result" + Twine(i)).str()));
      continue;
    }
    auto metric = step.getResultAttrOfType<StringAttr>(i, StepAttrs::kMetric);
    if (!value.getType().isF32() || !metric)
      return step.emitError("result #")
             << i << " must be a tensor, or an f32 metric (train.metric), "
             << "not " << value.getType();
    fields.push_back(metric);
  }
  Value metrics;
  if (!fields.empty()) {
    unsigned index = step.getNumArguments();
    if (failed(step.insertArgument(
            index,
            MemRefType::get({static_cast<int64_t>(fields.size())},
                            b.getF32Type()),
            b.getDictionaryAttr({}), loc)))
      return failure();
    metrics = entry.getArgument(index);
    NamedAttrList metricsABI =
        getArgRoleAttrs(ctx, ACCRUE_ROLE_METRICS, "metrics").getValue();
    metricsABI.set(StepAttrs::kFields, b.getArrayAttr(fields));
    abi.push_back(metricsABI.getDictionary(ctx));
  }

  b.setInsertionPoint(ret);
  unsigned numStored = 0;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    Value dest = outputs[i];
    if (auto tied = step.getResultAttrOfType<IntegerAttr>(i, StepAttrs::kTied))
      dest = entry.getArgument(tied.getInt());
    if (dest) {
      bufferization::MaterializeInDestinationOp::create(
          b, ret.getLoc(), TypeRange{}, value, dest, /*restrict=*/true,
          /*writable=*/true);
      continue;
    }
    Value index = arith::ConstantIndexOp::create(b, ret.getLoc(), numStored++);
    memref::StoreOp::create(b, ret.getLoc(), value, metrics, index);
  }
  func::ReturnOp::create(b, ret.getLoc());
  ret.erase();
  llvm::BitVector allResults(type.getNumResults(), true);
  if (failed(step.eraseResults(allResults)))
    return failure();
  // The roles now live in train.abi, in the lowered argument order.
  step.removeArgAttrsAttr();
  step->setAttr(StepAttrs::kABI, b.getArrayAttr(abi));
  step->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  return success();
}

struct TrainFinalizeStepABIPass
    : public train::impl::TrainFinalizeStepABIBase<TrainFinalizeStepABIPass> {
  using Base::Base;
  void runOnOperation() override {
    for (auto step : getOperation().getOps<func::FuncOp>())
      if (step->hasAttr(StepAttrs::kStep) && failed(finalize(step)))
        return signalPassFailure();
  }
};

} // namespace
