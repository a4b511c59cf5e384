//===- Pipelines.cpp - the CUDA lowering pipelines --------------*- C++ -*-===//

#include "accrue/Codegen/CUDA/Pipelines.h"

#include "accrue/Codegen/CUDA/CUDATarget.h"
#include "accrue/Codegen/CUDA/Passes.h"
#include "accrue/Codegen/Common/Passes.h"
#include "accrue/Codegen/Target.h"
#include "accrue/Conversion/Passes.h"
#include "accrue/Dialect/NN/Transforms/Passes.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace accrue::cuda {

void buildCUDABufferizationPipeline(OpPassManager &pm,
                                    const LoweringOptions &options) {
  // Kernels are formed over straight-line code.
  pm.addNestedPass<func::FuncOp>(nn::createUnrollScans());
  pm.addNestedPass<func::FuncOp>(createCudaDeviceScalars());
  pm.addNestedPass<func::FuncOp>(createCudaDeviceLossScale());
  pm.addNestedPass<func::FuncOp>(createCudaSortGatherGrads());
  pm.addNestedPass<func::FuncOp>(createConvertNNToLinalg());
  pm.addNestedPass<func::FuncOp>(createConvertTrainToLinalg());
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCudaJoinSliceSums());
  // Before fusion, which would merge a product's widened inputs and its
  // rounding into their neighbours; again after CSE below.
  pm.addNestedPass<func::FuncOp>(createCudaFoldIntoContractions());
  if (options.fuseElementwise)
    pm.addPass(createFuseElementwise({/*recomputeCasts=*/true}));
  pm.addNestedPass<func::FuncOp>(createCudaTensorizeScalars());
  pm.addNestedPass<func::FuncOp>(createCudaSplitReductions());
  // The scalar glue is now rank-0 elementwise ops: fuse its chains.
  if (options.fuseElementwise)
    pm.addPass(createFuseElementwise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createCudaFoldIntoContractions());
  pm.addNestedPass<func::FuncOp>(createHoistLoopInvariants());
  // No deallocation: every temporary becomes a view of the workspace.
  // After the last CSE on tensors: recomputed ops stay apart from their
  // forward copies (the CSE after bufferization merges no linalg op: they
  // have memory effects there).
  pm.addNestedPass<func::FuncOp>(train::createTrainStripRecomputeBarriers());
  pm.addPass(bufferization::createOneShotBufferizePass());
  // Identical views merge, so that a copy bufferization leaves between two
  // views of the same elements (an insert_slice of what was computed in
  // place: col2im's window adds) copies a view onto itself, which
  // canonicalization erases.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCudaContractionsToGemm());
  pm.addPass(createCanonicalizerPass());
}

void buildCUDAKernelPipeline(OpPassManager &pm,
                             const LoweringOptions &options) {
  if (options.fuseElementwise) {
    pm.addNestedPass<func::FuncOp>(createCudaFuseKernels());
    if (options.cuda.rowGroups)
      pm.addNestedPass<func::FuncOp>(createCudaGroupRows());
  }
  pm.addNestedPass<func::FuncOp>(createCudaPlanWorkspace());
  pm.addNestedPass<func::FuncOp>(createCudaFormKernels());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createCudaVerifyDeviceAccess());
}

void buildCUDAToLLVMPipeline(OpPassManager &pm,
                             const LoweringOptions &options) {
  if (options.target == ACCRUE_TARGET_CUDA_EMULATED) {
    // The kernels become host loops, lowered as the CPU target lowers its
    // step (without its vector kernels: no contraction is left).
    pm.addPass(createCudaEmulateKernels({options.cuda.countAccesses}));
    LoweringOptions host = options;
    host.cpu.vectorize = false;
    cpu::getTarget().buildToLLVMPipeline(pm, host);
    return;
  }
  // Kernels: one module, bf16/f16 arithmetic in f32 (rounded after each
  // op, as on the CPU), NVVM for every architecture. Constants and index
  // arithmetic on them move into the kernels first, so that they are not
  // kernel parameters: divisions by them become multiplications and loops
  // over them can be unrolled.
  pm.addNestedPass<func::FuncOp>(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createCudaMergeKernelModules());
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16"};
  emulate.targetTypeStr = "f32";
  kernels.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  kernels.addPass(math::createMathExtendToSupportedTypes());
  kernels.addPass(memref::createExpandStridedMetadataPass());
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createSCFToControlFlowPass());
  SmallVector<StringRef> archs;
  StringRef(options.cuda.archs).split(archs, ',', -1, /*KeepEmpty=*/false);
  for (StringRef arch : archs) {
    GpuNVVMAttachTargetOptions target;
    target.chip = arch.str();
    target.features = "+ptx80";
    target.optLevel = 3;
    pm.addPass(createGpuNVVMAttachTarget(target));
  }
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  // Host code: launches become calls of the runtime's mgpu* entries.
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  // PTX for every architecture (libdevice linked from the toolkit).
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath =
      findToolkit(options.cuda.toolkit).value_or(options.cuda.toolkit);
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void buildCUDALoweringPipeline(OpPassManager &pm,
                               const LoweringOptions &options) {
  buildCUDABufferizationPipeline(pm, options);
  buildCUDAKernelPipeline(pm, options);
  buildCUDAToLLVMPipeline(pm, options);
}

} // namespace accrue::cuda
