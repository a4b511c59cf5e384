//===- Target.h - what a target does with a training step -------*- C++ -*-===//
//
// A target is one folder of lib/Codegen (CPU, CUDA) behind this interface:
// its pipelines from the step on tensors to buffers and from buffers to the
// LLVM dialect, the files it adds to the artifact, how it measures a
// micro-batch's memory, and how the host code around it is compiled. The
// compiler driver and the pipeline registry look a target up from the step
// contract's enum and never branch on which one they have.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_TARGET_H
#define ACCRUE_CODEGEN_TARGET_H

#include "accrue-runtime/Manifest.h"
#include "accrue-runtime/SettingTable.h"
#include "accrue/Codegen/Common/HostCode.h"
#include "accrue/Codegen/Options.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <optional>
#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace accrue {

/// A device a training step is compiled for (see above).
class Target {
public:
  virtual ~Target();

  /// The target that compiles for `kind` (one serves cuda and
  /// cuda-emulated: the emulation is its pipeline lowered for the CPU).
  static const Target &get(AccrueTarget kind);
  /// Every target, each once.
  static llvm::ArrayRef<const Target *> all();

  /// Its name in pipeline names: accrue-opt's `accrue-lower-<name>`, and
  /// what that pipeline does.
  virtual llvm::StringRef name() const = 0;
  virtual llvm::StringRef description() const = 0;
  /// `options` with its `target` set to this target's default kind where it
  /// names another target (what `accrue-lower-<name>` runs by default).
  virtual LoweringOptions ownOptions(LoweringOptions options) const = 0;

  /// Declares this target's settings (its part of `options`) in `table`,
  /// which every tool binds (accrue-compile's flags, accrue-opt's pipeline
  /// options, the C API and Python by name).
  virtual void bindSettings(SettingTable &table,
                            LoweringOptions &options) const {}
  /// Checks the values of this target's settings; the message of a failure
  /// names the setting (settingRef).
  virtual std::optional<std::string>
  validate(const LoweringOptions &options) const {
    return std::nullopt;
  }

  /// What this machine lacks to compile for `options.target` (a CUDA
  /// toolkit), as a message naming the setting; nothing when it can.
  virtual std::optional<std::string>
  checkToolchain(const LoweringOptions &options) const {
    return std::nullopt;
  }
  /// Fills in what `options` leaves to the machine compiled for (the CPU's
  /// vector width); accrue-opt keeps its documented defaults instead. A
  /// setting the target CPU cannot honour is an error naming it.
  virtual std::optional<std::string>
  resolveForHost(LoweringOptions &options, const HostCodeOptions &host) const {
    return std::nullopt;
  }

  /// The step on tensors (nn, train, linalg) to the step on buffers, ready
  /// to be described (the manifest is written from it) and measured.
  virtual void
  buildBufferizationPipeline(mlir::OpPassManager &pm,
                             const LoweringOptions &options) const = 0;
  /// The bufferized step to the LLVM dialect (device code to binaries).
  virtual void buildToLLVMPipeline(mlir::OpPassManager &pm,
                                   const LoweringOptions &options) const = 0;
  /// Both.
  void buildLoweringPipeline(mlir::OpPassManager &pm,
                             const LoweringOptions &options) const;

  /// The peak bytes of one micro-batch's temporaries of the bufferized
  /// step (the manifest's activation_bytes).
  virtual std::optional<int64_t>
  activationBytes(mlir::func::FuncOp step) const = 0;
  /// Whether accrue-compile's memory planner (--plan, --memory-budget)
  /// plans steps of this target.
  virtual bool plansMemory() const { return false; }
  /// Whether the backward recomputes the elementwise ops that fusion keeps
  /// in registers instead of having the forward store their results
  /// (train-autodiff's recompute-elementwise): where elementwise kernels
  /// are bound by the bytes they move, as on a GPU.
  virtual bool recomputesFusedElementwise() const { return false; }

  /// How the host code of its steps is compiled, from what was asked.
  virtual HostCodeOptions hostCode(const HostCodeOptions &requested,
                                   const LoweringOptions &options) const {
    return requested;
  }
  /// Records in the manifest what the runtime needs to know of this
  /// target's compile (CUDA: the architectures step.so has PTX for).
  virtual void describe(rt::Manifest &manifest,
                        const LoweringOptions &options) const {}
  /// The report of the bufferized step's device kernels (accrue-compile
  /// --kernel-report) as a JSON object's text, counting the manifest's
  /// accumulation steps per optimizer step; nothing for a target without
  /// kernels.
  virtual std::optional<std::string>
  kernelReport(mlir::func::FuncOp step, const rt::Manifest &manifest) const {
    return std::nullopt;
  }
  /// Adds what the target's files (extractFiles) say of its kernels to the
  /// kernel report `report` (CUDA: the PTX lint of the newest
  /// architecture, with ptxas' registers and spills).
  virtual void lintKernels(std::string &report,
                           const std::map<std::string, std::string> &files,
                           const LoweringOptions &options) const {}
  /// Files the target adds to the artifact, by name, taken from the module
  /// in the LLVM dialect before it is translated (CUDA: each
  /// architecture's PTX; the module keeps what step.so embeds).
  virtual llvm::FailureOr<std::map<std::string, std::string>>
  extractFiles(mlir::ModuleOp module, const LoweringOptions &options) const {
    return std::map<std::string, std::string>();
  }
};

namespace cpu {
/// The CPU target (lib/Codegen/CPU).
const Target &getTarget();
} // namespace cpu

namespace cuda {
/// The CUDA target (lib/Codegen/CUDA): NVIDIA GPUs, or the same pipeline
/// emulated on the CPU.
const Target &getTarget();
} // namespace cuda

} // namespace accrue

#endif // ACCRUE_CODEGEN_TARGET_H
