//===- Target.cpp - what every target shares --------------------*- C++ -*-===//

#include "accrue/Codegen/Target.h"

using namespace mlir;
using namespace accrue;

Target::~Target() = default;

void Target::buildLoweringPipeline(OpPassManager &pm,
                                   const LoweringOptions &options) const {
  buildBufferizationPipeline(pm, options);
  buildToLLVMPipeline(pm, options);
}
