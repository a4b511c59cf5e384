//===- EmulateKernels.cpp - run kernels as host loops -----------*- C++ -*-===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAEMULATEKERNELS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;

namespace {

struct CudaEmulateKernelsPass
    : public accrue::cuda::impl::CudaEmulateKernelsBase<
          CudaEmulateKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk(
        [&](gpu::LaunchOp launch) { launches.push_back(launch); });
    for (gpu::LaunchOp launch : launches) {
      if (failed(emulate(launch)))
        return signalPassFailure();
    }
  }

  /// Blocks, then threads, z outermost; the body runs once per thread.
  LogicalResult emulate(gpu::LaunchOp launch) {
    if (launch.getAsyncToken() || !launch.getWorkgroupAttributions().empty())
      return launch.emitError("cannot emulate an asynchronous kernel or one "
                              "with shared memory");
    OpBuilder b(launch);
    Location loc = launch.getLoc();
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    SmallVector<Value> extents{grid.z,  grid.y,  grid.x,
                               block.z, block.y, block.x};
    gpu::KernelDim3 blockIds = launch.getBlockIds();
    gpu::KernelDim3 threadIds = launch.getThreadIds();
    SmallVector<Value> ids{blockIds.z,  blockIds.y,  blockIds.x,
                           threadIds.z, threadIds.y, threadIds.x};
    IRMapping mapping;
    gpu::KernelDim3 gridArgs = launch.getGridSize();
    gpu::KernelDim3 blockArgs = launch.getBlockSize();
    for (auto [arg, value] :
         llvm::zip(SmallVector<Value>{gridArgs.x, gridArgs.y, gridArgs.z,
                                      blockArgs.x, blockArgs.y, blockArgs.z},
                   SmallVector<Value>{grid.x, grid.y, grid.z, block.x, block.y,
                                      block.z}))
      mapping.map(arg, value);
    Block &body = launch.getBody().front();
    std::function<void(OpBuilder &, unsigned)> nest = [&](OpBuilder &nb,
                                                          unsigned level) {
      if (level == ids.size()) {
        for (Operation &op : body.without_terminator())
          nb.clone(op, mapping);
        return;
      }
      scf::ForOp::create(nb, loc, zero, extents[level], one, ValueRange{},
                         [&](OpBuilder &lb, Location, Value iv, ValueRange) {
                           mapping.map(ids[level], iv);
                           nest(lb, level + 1);
                           scf::YieldOp::create(lb, loc);
                         });
    };
    nest(b, 0);
    launch.erase();
    return success();
  }
};

} // namespace
