//===- Target.cpp - the CPU target ------------------------------*- C++ -*-===//

#include "accrue/Codegen/Target.h"

#include "accrue/Codegen/CPU/Pipelines.h"
#include "accrue/Dialect/Train/Utils/MemoryEstimate.h"

using namespace mlir;
using namespace accrue;

namespace {

class CPUTarget final : public Target {
public:
  StringRef name() const override { return "cpu"; }
  StringRef description() const override {
    return "Lower an explicit training step to LLVM for the CPU";
  }
  LoweringOptions ownOptions(LoweringOptions options) const override {
    options.target = ACCRUE_TARGET_CPU;
    return options;
  }
  void resolveForHost(LoweringOptions &options,
                      const HostCodeOptions &host) const override {
    // The vector kernels' blocks fit the registers of the CPU compiled for.
    if (!options.cpu.vectorBits)
      options.cpu.vectorBits = vectorRegisterBits(host);
  }
  void buildBufferizationPipeline(OpPassManager &pm,
                                  const LoweringOptions &options) const override {
    cpu::buildCPUBufferizationPipeline(pm, options.cpu);
  }
  void buildToLLVMPipeline(OpPassManager &pm,
                           const LoweringOptions &options) const override {
    cpu::buildCPUToLLVMPipeline(pm, options.cpu);
  }
  std::optional<int64_t> activationBytes(func::FuncOp step) const override {
    return train::estimateMicroStepPeakBytes(step);
  }
  bool plansMemory() const override { return true; }
};

} // namespace

const Target &cpu::getTarget() {
  static const CPUTarget target;
  return target;
}
