//===- Target.cpp - the CUDA target -----------------------------*- C++ -*-===//

#include "accrue/Codegen/Target.h"

#include "accrue/Codegen/CUDA/CUDATarget.h"
#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/PTXLint.h"
#include "accrue/Codegen/CUDA/Pipelines.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "accrue-runtime/Settings.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace accrue;

namespace {

class CUDATarget final : public Target {
public:
  StringRef name() const override { return "cuda"; }
  StringRef description() const override {
    return "Lower an explicit training step for NVIDIA GPUs (target=cuda, "
           "the default here) or for testing on the CPU "
           "(target=cuda-emulated)";
  }
  LoweringOptions ownOptions(LoweringOptions options) const override {
    if (options.target == ACCRUE_TARGET_CPU)
      options.target = ACCRUE_TARGET_CUDA;
    return options;
  }
  void bindSettings(SettingTable &table,
                    LoweringOptions &options) const override {
    table.text("cuda_arch",
               "GPU architectures to generate PTX for, comma-separated "
               "(sm_80,sm_90)",
               options.cuda.archs);
    table.text("cuda_toolkit",
               "The CUDA toolkit with libdevice and ptxas (default: "
               "CUDA_HOME, /usr/local/cuda, or the nvidia-cuda-nvcc Python "
               "package)",
               options.cuda.toolkit);
    table.flag("count_accesses",
               "Count the emulated kernels' memory accesses (target "
               "cuda-emulated): a run checks them for races and "
               "out-of-bounds accesses, naming the ONNX node, and can write "
               "their profile (sectors per warp request, unique bytes, the "
               "longest chain of a thread)",
               options.cuda.countAccesses);
    table.flag("row_groups",
               "Run the row reductions of a LayerNorm or a softmax and the "
               "elementwise ops between them as one kernel of a block per "
               "row (off: a kernel each)",
               options.cuda.rowGroups);
  }
  std::optional<std::string>
  validate(const LoweringOptions &options) const override {
    SmallVector<StringRef> archs;
    StringRef(options.cuda.archs).split(archs, ',', -1, /*KeepEmpty=*/false);
    if (archs.empty())
      return settingRef("cuda_arch") + " needs at least one architecture";
    for (StringRef arch : archs) {
      unsigned version;
      if (!arch.consume_front("sm_") || arch.getAsInteger(10, version) ||
          version < 60)
        return settingRef("cuda_arch") +
               " expects architectures like sm_80 or sm_90 (sm_60 or "
               "newer), not '" +
               options.cuda.archs + "'";
    }
    if (options.cuda.countAccesses &&
        options.target != ACCRUE_TARGET_CUDA_EMULATED)
      return settingRef("count_accesses") +
             " counts the accesses of emulated kernels: it needs " +
             settingRef("target") + " cuda-emulated";
    return std::nullopt;
  }
  std::optional<std::string>
  checkToolchain(const LoweringOptions &options) const override {
    // The emulation runs the kernels as host code: no libdevice needed.
    if (options.target != ACCRUE_TARGET_CUDA ||
        cuda::findToolkit(options.cuda.toolkit))
      return std::nullopt;
    return "no CUDA toolkit with libdevice (nvvm/libdevice/libdevice.10.bc)" +
           (options.cuda.toolkit.empty()
                ? std::string(" in CUDA_HOME, /usr/local/cuda or the "
                              "nvidia-cuda-nvcc Python package")
                : " at '" + options.cuda.toolkit + "'") +
           "; " + settingRef("target") +
           " cuda needs one (scripts/setup installs it), or set " +
           settingRef("cuda_toolkit");
  }
  // An elementwise kernel's time is its bytes: recomputing a GELU's erf in
  // the backward costs nothing next to storing and reloading it.
  bool recomputesFusedElementwise() const override { return true; }
  void
  buildBufferizationPipeline(OpPassManager &pm,
                             const LoweringOptions &options) const override {
    // The manifest describes the step with its workspace and kernels.
    cuda::buildCUDABufferizationPipeline(pm, options);
    cuda::buildCUDAKernelPipeline(pm, options);
  }
  void buildToLLVMPipeline(OpPassManager &pm,
                           const LoweringOptions &options) const override {
    cuda::buildCUDAToLLVMPipeline(pm, options);
  }
  std::optional<int64_t> activationBytes(func::FuncOp step) const override {
    // Every temporary is a view of the planned workspace.
    if (std::optional<BlockArgument> workspace =
            train::getArgWithRole(step, ACCRUE_ROLE_WORKSPACE))
      if (auto memref = dyn_cast<MemRefType>(workspace->getType());
          memref && memref.getRank() == 1)
        return memref.getDimSize(0);
    return 0;
  }
  void describe(rt::Manifest &manifest,
                const LoweringOptions &options) const override {
    manifest.countedAccesses = options.cuda.countAccesses;
    if (options.target != ACCRUE_TARGET_CUDA)
      return;
    SmallVector<StringRef> archs;
    StringRef(options.cuda.archs).split(archs, ',', -1, /*KeepEmpty=*/false);
    for (StringRef arch : archs)
      manifest.cudaArchs.push_back(arch.str());
  }
  std::optional<std::string>
  kernelReport(func::FuncOp step, const rt::Manifest &manifest) const override {
    // Arena accesses name their parameter.
    auto parameterAt = [&manifest](int64_t offset,
                                   int64_t count) -> std::string {
      for (const rt::ParamSpec &param : manifest.params)
        if (offset >= param.offset &&
            offset + count <= param.offset + param.numel)
          return param.name;
      return "";
    };
    cuda::KernelReport report =
        cuda::buildKernelReport(step, manifest.accumulationSteps, parameterAt);
    std::string text;
    llvm::raw_string_ostream os(text);
    os << report.toJson();
    return text;
  }
  void lintKernels(std::string &report,
                   const std::map<std::string, std::string> &files,
                   const LoweringOptions &options) const override {
    // The newest architecture's PTX: what a current GPU runs.
    const std::string *ptx = nullptr;
    std::string arch;
    unsigned newest = 0;
    for (const auto &[name, text] : files) {
      StringRef version = name;
      unsigned v;
      if (version.consume_front("kernels.sm_") &&
          version.consume_back(".ptx") && !version.getAsInteger(10, v) &&
          v >= newest) {
        newest = v, ptx = &text;
        arch = "sm_" + std::to_string(v);
      }
    }
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(report);
    if (!ptx || !parsed || !parsed->getAsObject()) {
      llvm::consumeError(parsed.takeError());
      return;
    }
    std::string ptxas;
    if (std::optional<std::string> toolkit =
            cuda::findToolkit(options.cuda.toolkit)) {
      llvm::SmallString<256> path(*toolkit);
      llvm::sys::path::append(path, "bin", "ptxas");
      if (llvm::sys::fs::can_execute(path))
        ptxas = std::string(path);
    }
    cuda::addPTXLint(*parsed->getAsObject(), arch, *ptx, ptxas);
    report.clear();
    llvm::raw_string_ostream os(report);
    os << *parsed;
  }
  HostCodeOptions hostCode(const HostCodeOptions &requested,
                           const LoweringOptions &options) const override {
    // A CUDA step's host code is launch glue: one long block of argument
    // packing and calls, on which O3's vectorizers spend minutes (quadratic
    // in the block) and instruction selection seconds, for nothing. (The
    // emulation's host code is its kernels.)
    HostCodeOptions host = requested;
    if (options.target != ACCRUE_TARGET_CUDA)
      return host;
    host.optLevel = 0;
    host.llvmVectorize = false;
    return host;
  }
  FailureOr<std::map<std::string, std::string>>
  extractFiles(ModuleOp module, const LoweringOptions &options) const override {
    std::map<std::string, std::string> files;
    if (options.target != ACCRUE_TARGET_CUDA)
      return files;
    // One PTX bundle stays in step.so; each architecture's PTX in a file.
    FailureOr<std::map<std::string, std::string>> ptx =
        cuda::bundleKernels(module);
    if (failed(ptx))
      return failure();
    for (const auto &[arch, text] : *ptx)
      files["kernels." + arch + ".ptx"] = text;
    return files;
  }
};

} // namespace

const Target &cuda::getTarget() {
  static const CUDATarget target;
  return target;
}
