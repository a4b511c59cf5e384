//===- PTXLint.h - what the PTX of a CUDA step's kernels does ---*- C++ -*-===//
//
// The kernel report's second half, read from the generated PTX and from
// `ptxas -v`: per kernel the divisions and remainders by values that come
// only from its parameters (run-time divisions where a constant would do),
// whether it loops, its widest and narrowest global accesses, and, from
// ptxas, its registers, spills and the theoretical occupancy they allow.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CUDA_PTXLINT_H
#define ACCRUE_CODEGEN_CUDA_PTXLINT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>

namespace accrue::cuda {

struct PTXKernelLint {
  /// div/rem whose divisor derives from the kernel's parameters alone.
  int64_t parameterDivisions = 0;
  /// A backward branch: the kernel loops.
  bool loops = false;
  /// Bytes of its widest and narrowest global load or store (0: none).
  int64_t widestGlobalAccess = 0, narrowestGlobalAccess = 0;
  /// From ptxas -v.
  std::optional<int64_t> registers, spillBytes;
};

/// Every .entry of `ptx`, by name.
std::map<std::string, PTXKernelLint> lintPTX(llvm::StringRef ptx);

/// Registers and spill bytes (stores plus loads) of every entry, from
/// `ptxas -v` of `ptx` for `arch` ("sm_90"); an error message when ptxas
/// cannot run.
llvm::Expected<std::map<std::string, std::pair<int64_t, int64_t>>>
runPtxasVerbose(llvm::StringRef ptxas, llvm::StringRef arch,
                llvm::StringRef ptx);

/// The share of an SM's warp slots blocks of `blockThreads` threads using
/// `registers` each can fill on `arch` (no shared memory), from the
/// architecture's limits (the CUDA occupancy calculator's).
double theoreticalOccupancy(llvm::StringRef arch, int64_t blockThreads,
                            int64_t registers);

/// Adds the lint of `ptx` (compiled for `arch`, with ptxas at `ptxas` when
/// not empty) to the kernel report `report` (KernelReport::toJson): a
/// "ptx" object per kernel and "ptx_totals".
void addPTXLint(llvm::json::Object &report, llvm::StringRef arch,
                llvm::StringRef ptx, llvm::StringRef ptxas);

} // namespace accrue::cuda

#endif // ACCRUE_CODEGEN_CUDA_PTXLINT_H
