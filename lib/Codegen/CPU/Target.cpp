//===- Target.cpp - the CPU target ------------------------------*- C++ -*-===//

#include "accrue/Codegen/Target.h"

#include "accrue/Codegen/CPU/Pipelines.h"
#include "accrue/Dialect/Train/Utils/MemoryEstimate.h"

#include "accrue-runtime/Settings.h"

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
  void bindSettings(SettingTable &table,
                    LoweringOptions &options) const override {
    CPULoweringOptions &cpu = options.cpu;
    table.flag("vectorize",
               "Register-tile and vectorize contractions (off: scalar loops, "
               "for comparison)",
               cpu.vectorize);
    table.flag("parallel",
               "Run large kernels on all cores (OpenMP; off: one thread, no "
               "libomp)",
               cpu.parallel);
    table.integer("vector_bits",
                  "The target's vector register width for the contraction "
                  "kernels (512, 256 or 128; default: the target CPU's in "
                  "accrue-compile, 512 in pipelines)",
                  cpu.vectorBits);
    table.integer("l2_bytes",
                  "The target CPU's L2 cache per core in bytes, which orders "
                  "the contraction kernels' blocks (default: the compiling "
                  "machine's when compiling for it, else 2 MiB)",
                  cpu.l2Bytes);
    table.flag(
        "bf16_dot",
        "Contractions of bf16 operands (--precision bf16) on AVX512-BF16's "
        "vdpbf16ps, accumulating in f32 (default: when the target CPU has "
        "it; off: on operands widened to f32)",
        [&cpu](bool on) { cpu.bf16Dot = on; }, /*defaultTrue=*/true);
  }
  std::optional<std::string>
  validate(const LoweringOptions &options) const override {
    if (std::optional<int64_t> bits = options.cpu.vectorBits;
        bits && *bits != 128 && *bits != 256 && *bits != 512)
      return settingRef("vector_bits") + " must be 128, 256 or 512, not " +
             std::to_string(*bits);
    if (std::optional<int64_t> bytes = options.cpu.l2Bytes;
        bytes && (*bytes < (64 << 10) || *bytes > (1ll << 30)))
      return settingRef("l2_bytes") +
             " must be between 65536 (64 KiB) and 1073741824 (1 GiB), not " +
             std::to_string(*bytes);
    return std::nullopt;
  }
  std::optional<std::string>
  resolveForHost(LoweringOptions &options,
                 const HostCodeOptions &host) const override {
    // The vector kernels' blocks fit the registers of the CPU compiled for.
    if (!options.cpu.vectorBits)
      options.cpu.vectorBits = vectorRegisterBits(host);
    if (!options.cpu.l2Bytes)
      options.cpu.l2Bytes = l2CacheBytes(host);
    bool hasBF16 = hasCPUFeature(host, "avx512bf16");
    if (options.cpu.bf16Dot.value_or(false) && !hasBF16)
      return settingRef("bf16_dot") +
             " needs a target CPU with AVX512-BF16; '" + host.cpu +
             "' has none";
    if (!options.cpu.bf16Dot)
      options.cpu.bf16Dot = hasBF16;
    return std::nullopt;
  }
  void
  buildBufferizationPipeline(OpPassManager &pm,
                             const LoweringOptions &options) const override {
    cpu::buildCPUBufferizationPipeline(pm, options);
  }
  void buildToLLVMPipeline(OpPassManager &pm,
                           const LoweringOptions &options) const override {
    cpu::buildCPUToLLVMPipeline(pm, options);
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
