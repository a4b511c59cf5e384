//===- Pipelines.cpp - the CUDA lowering pipelines --------------*- C++ -*-===//

#include "accrue/Codegen/CUDA/Pipelines.h"

#include "accrue/Codegen/CPU/Passes.h"
#include "accrue/Codegen/CPU/Pipelines.h"
#include "accrue/Codegen/CUDA/Passes.h"
#include "accrue/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace accrue::cuda {

void buildCUDABufferizationPipeline(OpPassManager &pm,
                                    const CompileOptions &options) {
  pm.addNestedPass<func::FuncOp>(createCudaDeviceScalars());
  pm.addNestedPass<func::FuncOp>(createConvertNNToLinalg());
  pm.addNestedPass<func::FuncOp>(createConvertTrainToLinalg());
  pm.addPass(createCanonicalizerPass());
  if (options.cpu.fuseElementwise)
    pm.addPass(cpu::createFuseElementwise());
  pm.addNestedPass<func::FuncOp>(createCudaTensorizeScalars());
  pm.addNestedPass<func::FuncOp>(createCudaSplitReductions());
  // The scalar glue is now rank-0 elementwise ops: fuse its chains.
  if (options.cpu.fuseElementwise)
    pm.addPass(cpu::createFuseElementwise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // No deallocation: every temporary becomes a view of the workspace.
  pm.addPass(bufferization::createOneShotBufferizePass());
  pm.addPass(createCanonicalizerPass());
}

void buildCUDAKernelPipeline(OpPassManager &pm, const CompileOptions &) {
  pm.addNestedPass<func::FuncOp>(createCudaPlanWorkspace());
  pm.addNestedPass<func::FuncOp>(createCudaFormKernels());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createCudaVerifyDeviceAccess());
}

void buildCUDAToLLVMPipeline(OpPassManager &pm,
                             const CompileOptions &options) {
  if (options.target == ACCRUE_TARGET_CUDA_EMULATED) {
    pm.addPass(createCudaEmulateKernels());
    CPULoweringOptions host = options.cpu;
    host.vectorize = false;
    cpu::buildCPUToLLVMPipeline(pm, host);
    return;
  }
}

void buildCUDALoweringPipeline(OpPassManager &pm,
                               const CompileOptions &options) {
  buildCUDABufferizationPipeline(pm, options);
  buildCUDAKernelPipeline(pm, options);
  buildCUDAToLLVMPipeline(pm, options);
}

} // namespace accrue::cuda
