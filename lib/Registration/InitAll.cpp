//===- InitAll.cpp - register Accrue's dialects and passes ------*- C++ -*-===//

#include "accrue/InitAllDialects.h"
#include "accrue/InitAllPasses.h"

#include "accrue/Codegen/CPU/Passes.h"
#include "accrue/Codegen/CUDA/Passes.h"
#include "accrue/Codegen/Common/Passes.h"
#include "accrue/Conversion/Passes.h"
#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/NN/Transforms/Passes.h"
#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Transforms/BufferizableOpInterfaceImpl.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"
#include "accrue/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void accrue::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<nn::NNDialect, train::TrainDialect>();
  // Upstream dialects the pipelines produce, and every external interface
  // model (bufferization, inlining, conversion to LLVM, translation to LLVM
  // IR) they rely on.
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  train::registerBufferizableOpInterfaceExternalModels(registry);
}

void accrue::registerAllPasses() {
  mlir::registerAllPasses();
  nn::registerNNPasses();
  train::registerTrainPasses();
  registerConversionPasses();
  registerCommonCodegenPasses();
  cpu::registerCPUCodegenPasses();
  cuda::registerCUDACodegenPasses();
  registerPipelines();
}
