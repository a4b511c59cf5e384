//===- HostCode.h - the step's host code as a shared library ---*- C++ -*-===//
//
// From a module in the LLVM dialect to LLVM IR, an object file and a shared
// library that the runtime loads: every target's step is host code (the CPU
// kernels themselves, or a device step's launches). Every function with
// llvm.emit_c_interface also gets a packed entry point `_mlir_<name>(void
// **args)` (the calling convention of mlir::ExecutionEngine::invokePacked):
// args[i] points to the i-th argument of the lowered function, with each memref
// expanded into (allocated, aligned, offset, sizes..., strides...).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_COMMON_HOSTCODE_H
#define ACCRUE_CODEGEN_COMMON_HOSTCODE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace accrue {

/// The machine the host code is compiled for.
struct HostCodeOptions {
  /// "host" (the compiling machine's CPU and features) or an LLVM CPU name
  /// such as "x86-64-v3".
  std::string cpu = "host";
  /// LLVM optimization level, 0 to 3.
  unsigned optLevel = 3;
  /// LLVM's loop and SLP vectorizers (off for code that is only glue).
  bool llvmVectorize = true;
};

/// The widest vector registers of the target CPU, in bits: 512 with
/// AVX-512, 256 with AVX, else 128.
int64_t vectorRegisterBits(const HostCodeOptions &options);

/// The L2 cache per core of the target CPU in bytes, where it is the
/// compiling machine's ("host") and the C library can say; else none.
std::optional<int64_t> l2CacheBytes(const HostCodeOptions &options);

/// Whether the target CPU has LLVM subtarget feature `feature` ("avx512bf16").
bool hasCPUFeature(const HostCodeOptions &options, llvm::StringRef feature);

/// Translates an LLVM-dialect module to optimized LLVM IR for the target,
/// with packed entry points added.
llvm::FailureOr<std::unique_ptr<llvm::Module>>
translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &context,
                  const HostCodeOptions &options);

/// Writes `module` as a position-independent object file.
llvm::LogicalResult writeObjectFile(llvm::Module &module,
                                    const HostCodeOptions &options,
                                    llvm::StringRef path, std::string &error);

/// Links an object file into a shared library with ld.lld at `lldPath`.
llvm::LogicalResult linkSharedLibrary(llvm::StringRef objectPath,
                                      llvm::StringRef outputPath,
                                      llvm::StringRef lldPath,
                                      std::string &error);

/// JIT-compiles an LLVM-dialect module in this process (for tests and tools
/// that run code directly). Each function `f` is callable as
/// `engine->invokePacked("f", args)` with the packed convention above.
llvm::FailureOr<std::unique_ptr<mlir::ExecutionEngine>>
createJIT(mlir::ModuleOp module, const HostCodeOptions &options);

} // namespace accrue

#endif // ACCRUE_CODEGEN_COMMON_HOSTCODE_H
