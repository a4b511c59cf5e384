//===- VerifyDeviceAccess.cpp - host code never touches device memory -----===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/Train/IR/Train.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAVERIFYDEVICEACCESS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;

namespace {

/// The runtime entries host code may hand device buffers to.
bool isRuntimeEntry(StringRef callee) {
  return callee == ACCRUE_ALL_REDUCE_FUNCTION ||
         callee == ACCRUE_REDUCE_SCATTER_FUNCTION ||
         callee == ACCRUE_ALL_GATHER_FUNCTION ||
         callee.starts_with("accrue_gemm");
}

struct CudaVerifyDeviceAccessPass
    : public accrue::cuda::impl::CudaVerifyDeviceAccessBase<
          CudaVerifyDeviceAccessPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp step = getOperation();
    if (!step->hasAttr(accrue::train::StepAttrs::kABI))
      return;
    bool failedCheck = false;
    step.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<gpu::LaunchOp>(op))
        return WalkResult::skip();
      StringRef what;
      if (isa<memref::LoadOp, memref::StoreOp, affine::AffineLoadOp,
              affine::AffineStoreOp>(op))
        what = "reads or writes an element of a device buffer";
      else if (isa<memref::CopyOp, linalg::LinalgOp>(op))
        what = "computes on device buffers";
      else if (isa<memref::AllocOp, memref::AllocaOp>(op))
        what = "allocates memory while the step runs";
      else if (auto call = dyn_cast<func::CallOp>(op)) {
        bool buffers = llvm::any_of(call.getOperandTypes(), [](Type t) {
          return isa<MemRefType, UnrankedMemRefType>(t);
        });
        if (buffers && !isRuntimeEntry(call.getCallee()))
          what = "passes device buffers to a function that is not a kernel "
                 "or a runtime entry";
      } else if (op->getDialect() &&
                 op->getDialect()->getNamespace() == "vector")
        what = "computes on device buffers";
      if (what.empty())
        return WalkResult::advance();
      op->emitError("host code ")
          << what << " ('" << op->getName()
          << "'): on the GPU this would read device memory from the host or "
             "synchronize; it must run in a kernel";
      failedCheck = true;
      return WalkResult::skip();
    });
    if (failedCheck)
      signalPassFailure();
  }
};

} // namespace
