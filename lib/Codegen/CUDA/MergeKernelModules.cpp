//===- MergeKernelModules.cpp - one gpu.module per step ---------*- C++ -*-===//

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/IR/SymbolTable.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAMERGEKERNELMODULES
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;

namespace {

struct CudaMergeKernelModulesPass
    : public accrue::cuda::impl::CudaMergeKernelModulesBase<
          CudaMergeKernelModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(top.getOps<gpu::GPUModuleOp>());
    if (modules.size() < 2)
      return;
    OpBuilder b = OpBuilder::atBlockBegin(top.getBody());
    auto merged = gpu::GPUModuleOp::create(b, top.getLoc(), "kernels");
    SymbolTable mergedSymbols(merged);
    // Kernel functions take their module's (unique) name.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp module : modules) {
      for (Operation &op :
           llvm::make_early_inc_range(module.getBody()->without_terminator())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (auto kernel = dyn_cast<gpu::GPUFuncOp>(op)) {
          std::string name =
              accrue::cuda::kernelName(kernel.getLoc(), renamed.size());
          renamed[{module.getNameAttr(), kernel.getNameAttr()}] =
              b.getStringAttr(name);
          kernel.setName(name);
        } else if (symbol) {
          // Constant globals come once per kernel that reads them.
          if (Operation *existing =
                  mergedSymbols.lookup(symbol.getNameAttr())) {
            auto global = dyn_cast<memref::GlobalOp>(op);
            auto other = dyn_cast<memref::GlobalOp>(existing);
            if (!global || !other || global.getType() != other.getType() ||
                global.getInitialValueAttr() != other.getInitialValueAttr()) {
              op.emitError("two kernels define different '")
                  << symbol.getName() << "'";
              return signalPassFailure();
            }
            op.erase();
            continue;
          }
        }
        op.moveBefore(merged.getBody(), merged.getBody()->end());
        if (symbol)
          mergedSymbols.insert(&op);
      }
    }
    // Launches name the merged module.
    top.walk([&](gpu::LaunchFuncOp launch) {
      StringAttr name = renamed.lookup(
          {launch.getKernelModuleName(), launch.getKernelName()});
      launch.setKernelAttr(SymbolRefAttr::get(b.getContext(), "kernels",
                                              {FlatSymbolRefAttr::get(name)}));
    });
    for (gpu::GPUModuleOp module : modules)
      module.erase();
  }
};

} // namespace
