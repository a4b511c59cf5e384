//===- FinalizeStepABI.cpp - the artifact calling convention ----*- C++ -*-===//
//
// A training step is built on tensors: it takes parameters, accumulators and
// optimizer state and returns their new values. The artifact updates them in
// place instead. This pass turns every tensor argument into a memref read
// through `bufferization.to_tensor restrict writable`, writes each tied
// result back into its argument with `materialize_in_destination` (a no-op
// once one-shot bufferization has placed the update in that buffer), and
// stores scalar results into a trailing metrics buffer.
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
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Location loc = step.getLoc();

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

  // Results: tied ones go back into their argument; other tensors into a
  // new output argument each; f32 scalars into one trailing metrics buffer.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  SmallVector<Value> outputs(type.getNumResults());
  int64_t numMetrics = 0;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    if (step.getResultAttr(i, StepAttrs::kTied))
      continue;
    if (auto tensor = dyn_cast<RankedTensorType>(value.getType())) {
      if (!tensor.hasStaticShape())
        return step.emitError("result #")
               << i << " must have a static shape, not " << tensor;
      auto memref = MemRefType::get(tensor.getShape(), tensor.getElementType());
      unsigned index = step.getNumArguments();
      if (failed(step.insertArgument(index, memref, b.getDictionaryAttr({}),
                                     loc)))
        return failure();
      outputs[i] = entry.getArgument(index);
      continue;
    }
    if (!value.getType().isF32())
      return step.emitError("untied result #")
             << i << " must be a tensor or an f32 metric, not "
             << value.getType();
    ++numMetrics;
  }
  Value metrics;
  if (numMetrics) {
    unsigned index = step.getNumArguments();
    if (failed(step.insertArgument(
            index, MemRefType::get({numMetrics}, b.getF32Type()),
            b.getDictionaryAttr({}), loc)))
      return failure();
    metrics = entry.getArgument(index);
  }

  b.setInsertionPoint(ret);
  unsigned numStored = 0;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    Value dest = outputs[i];
    if (auto tied =
            step.getResultAttrOfType<IntegerAttr>(i, StepAttrs::kTied)) {
      dest = entry.getArgument(tied.getInt());
      if (!isa<MemRefType>(dest.getType()))
        return step.emitError("result #")
               << i << " is tied to argument #" << tied.getInt()
               << ", which is not a tensor";
    }
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
  // Roles and names are recorded in the artifact manifest; LLVM has no use
  // for them.
  step.removeArgAttrsAttr();
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
