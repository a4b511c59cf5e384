//===- DeviceScalars.cpp - per-step scalars as device buffers ---*- C++ -*-===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/Train/IR/Train.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDADEVICESCALARS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;

namespace {

/// The roles whose values change from one optimizer step to the next.
bool changesEveryStep(AccrueArgRole role) {
  switch (role) {
  case ACCRUE_ROLE_LR:
  case ACCRUE_ROLE_STEP:
  case ACCRUE_ROLE_VALID_SAMPLES:
  case ACCRUE_ROLE_LOSS_SCALE:
  case ACCRUE_ROLE_LOSS_SCALE_STREAK:
  case ACCRUE_ROLE_SAMPLE_BASE:
    return true;
  default:
    return false;
  }
}

struct CudaDeviceScalarsPass
    : public accrue::cuda::impl::CudaDeviceScalarsBase<CudaDeviceScalarsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp step = getOperation();
    auto abi = step->getAttrOfType<ArrayAttr>(train::StepAttrs::kABI);
    if (!abi || step.isExternal())
      return;
    Block &entry = step.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    SmallVector<Type> inputs(step.getArgumentTypes());
    for (unsigned i = 0, e = abi.size(); i < e; ++i) {
      std::optional<AccrueArgRole> role = train::getArgRole(step, i);
      if (!role || !changesEveryStep(*role))
        continue;
      BlockArgument arg = entry.getArgument(i);
      Type type = arg.getType();
      if (!type.isIntOrFloat())
        continue;
      auto memref = MemRefType::get({}, type);
      auto tensor = RankedTensorType::get({}, type);
      Location loc = arg.getLoc();
      arg.setType(memref);
      Value loaded = bufferization::ToTensorOp::create(
          b, loc, tensor, arg, /*restrict=*/true, /*writable=*/false);
      Value scalar = tensor::ExtractOp::create(b, loc, loaded, ValueRange{});
      arg.replaceAllUsesExcept(scalar, loaded.getDefiningOp());
      inputs[i] = memref;
    }
    step.setType(FunctionType::get(&getContext(), inputs,
                                   step.getFunctionType().getResults()));
  }
};

} // namespace
