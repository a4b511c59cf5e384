//===- Pipelines.cpp - the CPU lowering pipelines ---------------*- C++ -*-===//

#include "accrue/Codegen/CPU/Pipelines.h"

#include "accrue/Codegen/CPU/ContractionKernels.h"
#include "accrue/Codegen/CPU/Passes.h"
#include "accrue/Codegen/Common/Passes.h"
#include "accrue/Conversion/Passes.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace accrue::cpu {

void buildCPUBufferizationPipeline(OpPassManager &pm,
                                   const LoweringOptions &lowering) {
  const CPULoweringOptions &options = lowering.cpu;
  {
    ConvertNNToLinalgOptions nnToLinalg;
    nnToLinalg.decodeLabelsOnce = true;
    pm.addNestedPass<func::FuncOp>(createConvertNNToLinalg(nnToLinalg));
  }
  pm.addNestedPass<func::FuncOp>(createConvertTrainToLinalg());
  pm.addPass(createCanonicalizerPass());
  bool bf16Dot = options.vectorize && options.bf16DotOrDefault();
  if (bf16Dot) {
    // Before fusion, which would merge a bf16 product's widened inputs
    // into the ops that produced them.
    FoldIntoContractionsOptions widenings;
    widenings.vectorBits = options.vectorBitsOrDefault();
    widenings.bf16Dot = true;
    widenings.layouts = false;
    pm.addPass(createFoldIntoContractions(widenings));
  }
  if (lowering.fuseElementwise)
    pm.addPass(accrue::createFuseElementwise({/*recomputeCasts=*/false,
                                              /*sharedProducers=*/true}));
  if (options.vectorize) {
    pm.addPass(createCollapseShortLoops());
    FoldIntoContractionsOptions fold;
    fold.vectorBits = options.vectorBitsOrDefault();
    fold.bf16Dot = bf16Dot;
    pm.addPass(createFoldIntoContractions(fold));
    pm.addPass(createMergeContractionDims());
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After CSE, which leaves one transpose or cast of a weight per
  // micro-batch body: it runs once per step.
  pm.addNestedPass<func::FuncOp>(accrue::createHoistLoopInvariants());
  pm.addPass(createDuplicateSharedFills());
  // Accumulators carried by scf.for stay in place; temporaries of a
  // micro-step are allocated and freed inside the loop, so peak memory
  // depends on the micro-batch size, not on the number of steps.
  // After the last CSE: recomputed ops stay apart from their forward copies.
  pm.addNestedPass<func::FuncOp>(train::createTrainStripRecomputeBarriers());
  // A result inserted into a slice of a larger tensor (a scan step's
  // output into the stacked one) is computed in that slice, not in a
  // temporary copied there.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  {
    // A scan's loop yields each step's new carries, fresh buffers (the
    // previous ones are freed).
    bufferization::OneShotBufferizePassOptions bufferize;
    bufferize.allowReturnAllocsFromLoops = true;
    pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  }
  {
    AccumulateInPlaceOptions inPlace;
    // Only the vector kernels know to start a marked contraction from zeros.
    inPlace.foldZeroFills = options.vectorize;
    pm.addNestedPass<func::FuncOp>(createAccumulateInPlace(inPlace));
  }
  pm.addNestedPass<func::FuncOp>(createForwardCopiedResults());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addNestedPass<func::FuncOp>(createFreeAtLastUse());
  pm.addPass(createExpandStridedCopies());
}

void buildCPUToLLVMPipeline(OpPassManager &pm,
                            const LoweringOptions &lowering) {
  const CPULoweringOptions &options = lowering.cpu;
  // bf16/f16 arithmetic and math run in f32, rounded back after each op.
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  pm.addPass(math::createMathExtendToSupportedTypes());
  // One function per micro-batch body and per loop nest: LLVM's loop passes
  // are superlinear in the number of loops in a function.
  pm.addPass(train::createTrainOutlineMicrobatch());
  pm.addPass(createOutlineKernels());
  {
    TileTransposesOptions tile;
    tile.parallel = options.parallel;
    pm.addNestedPass<func::FuncOp>(createTileTransposes(tile));
  }
  if (options.vectorize) {
    VectorizeContractionsOptions vectorize;
    ContractionTiles tiles = contractionTilesFor(options.vectorBitsOrDefault());
    vectorize.tileM = tiles.m;
    vectorize.tileN = tiles.n;
    vectorize.tileK = tiles.k;
    vectorize.dotWidth = tiles.dotWidth;
    vectorize.dotTileM = tiles.dotM;
    vectorize.dotTileN = tiles.dotN;
    vectorize.packA = tiles.packA;
    vectorize.packB = tiles.packB;
    vectorize.fuseMTail = tiles.fuseMTail;
    vectorize.l2Bytes = options.l2BytesOrDefault();
    vectorize.parallel = options.parallel;
    vectorize.bf16Dot = options.bf16DotOrDefault();
    pm.addNestedPass<func::FuncOp>(createVectorizeContractions(vectorize));
  }
  if (options.parallel) {
    // Parallel dimensions become scf.parallel loops; the outermost ones
    // with enough work run on OpenMP's threads, the rest stay sequential.
    pm.addPass(createConvertLinalgToParallelLoopsPass());
    pm.addNestedPass<func::FuncOp>(createScheduleParallelLoops());
  } else {
    pm.addPass(createConvertLinalgToLoopsPass());
  }
  // A short innermost loop hides the loop around it from LLVM's vectorizer.
  pm.addNestedPass<func::FuncOp>(createUnrollShortLoops());
  if (options.parallel)
    pm.addPass(createConvertSCFToOpenMPPass());
  {
    ApproximateMathOptions approximate;
    approximate.ops = {"math.exp", "math.log", "math.tanh", "math.erf"};
    pm.addPass(createApproximateMath(approximate));
  }
  {
    // The bf16 kernels' vdpbf16ps (x86vector.avx512.dot).
    ConvertVectorToLLVMPassOptions vectorToLLVM;
    vectorToLLVM.x86Vector = options.vectorize && options.bf16DotOrDefault();
    pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  }
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  // After the memref lowering: scf-to-openmp puts each parallel iteration
  // in a memref.alloca_scope, which must hold one block until it is gone.
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createAttachLoopAnnotations());
  if (options.parallel)
    pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void buildCPULoweringPipeline(OpPassManager &pm,
                              const LoweringOptions &options) {
  buildCPUBufferizationPipeline(pm, options);
  buildCPUToLLVMPipeline(pm, options);
}

} // namespace accrue::cpu
