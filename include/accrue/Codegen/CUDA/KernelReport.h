//===- KernelReport.h - what a CUDA step's kernels do -----------*- C++ -*-===//
//
// A static report of the kernels and GEMM calls of a bufferized CUDA step
// (after cuda-form-kernels, before outlining): per kernel its ONNX node,
// launches per micro-batch and per optimizer step, grid and block, the
// memory operations each thread runs in sequence, and for every global
// access its buffer, the address step between neighbouring threads, the
// 32-byte sectors one warp's request touches and the bytes the access's view
// spans. Read from the IR by evaluating the kernel's index arithmetic for
// the threads of the first warp at the first iteration of its loops: exact
// for the affine indexing the kernels are formed with, "indirect" where an
// address depends on data. accrue-compile --kernel-report prints it and
// records it in step.json.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CUDA_KERNELREPORT_H
#define ACCRUE_CODEGEN_CUDA_KERNELREPORT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace accrue::cuda {

/// How the threads of a warp reach memory in one access.
enum class AccessPattern {
  /// Neighbouring threads read neighbouring elements (or vectors).
  Coalesced,
  /// Neighbouring threads are further apart than one element.
  Strided,
  /// Every thread of the warp reads one address.
  Broadcast,
  /// The address depends on loaded data (a gather or scatter).
  Indirect,
  /// The kernel runs one thread.
  SingleThread,
};
llvm::StringRef accessPatternName(AccessPattern pattern);

struct KernelAccess {
  /// The step argument (its train.name), "constant" for a global, or
  /// "local" for memory the kernel allocates.
  std::string buffer;
  /// The parameter an arena access falls in, when known.
  std::string parameter;
  bool store = false;
  int64_t elementBytes = 0;
  /// Bytes one thread moves in one execution (a vector access: its width).
  int64_t accessBytes = 0;
  AccessPattern pattern = AccessPattern::Coalesced;
  /// Address step between thread x and x+1, in bytes (not for indirect or
  /// single-thread accesses).
  std::optional<int64_t> threadStrideBytes;
  /// 32-byte sectors the first warp's request touches, and the threads of
  /// that warp that take part.
  std::optional<int64_t> sectorsPerRequest;
  int64_t activeLanes = 0;
  /// Executions per thread (the trip counts of the loops around it).
  int64_t executions = 1;
  /// Bytes of the view it reads or writes (-1: a dynamic shape).
  int64_t footprintBytes = 0;
  /// The accessed view's byte range within its buffer, when static.
  std::optional<int64_t> viewOffsetBytes;

  /// Bytes the warp uses of those its sectors move (1 when coalesced).
  std::optional<double> sectorEfficiency() const;
};

struct KernelInfo {
  /// The kernel's name in the PTX (k<N>_<what it computes>).
  std::string name;
  /// The ONNX node it comes from ("update" for the optimizer's pass).
  std::string node;
  /// Launches in one micro-batch's loop body, and outside it per step.
  int64_t launchesPerMicroBatch = 0, launchesPerStepOutside = 0;
  /// -1 where dynamic.
  int64_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  /// The largest product of loop trip counts a thread runs (1: no loop).
  int64_t tripCount = 1;
  /// Global loads and stores one thread (the first) runs in sequence.
  int64_t memoryOpsPerThread = 0;
  /// Integer divisions and remainders by values the kernel takes from
  /// outside (its parameters once outlined): run-time divisions on the GPU.
  int64_t parameterDivisions = 0;
  /// Whether a loop of the kernel has a trip count this report cannot
  /// evaluate (counted as one iteration).
  bool unknownTrip = false;
  /// Whether its threads loop over the grid (a streaming kernel).
  bool gridStride = false;
  /// Whether it runs in every micro-batch but reads only what no
  /// micro-batch changes (parameters, constants): its result is the same
  /// each time.
  bool loopInvariant = false;
  std::vector<KernelAccess> accesses;

  int64_t threads() const;
  /// Bytes of the distinct views it accesses.
  int64_t footprintBytes() const;
  /// The lowest sector efficiency of its accesses, if any has one.
  std::optional<double> sectorEfficiency() const;
  int64_t launchesPerStep(int64_t accumulationSteps) const {
    return launchesPerMicroBatch * accumulationSteps + launchesPerStepOutside;
  }
};

struct GemmCall {
  std::string node;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t launchesPerMicroBatch = 0, launchesPerStepOutside = 0;
  /// The element types of A and B as the step contract spells them.
  std::string inputType;
  /// The precision they are multiplied in: bf16 or f16 for f32 inputs
  /// that hold such values (cuBLASLt's fast 16-bit compute), else
  /// inputType.
  std::string multiplyType;
  /// D's: f32, or the bf16 or f16 it rounds its f32 sum to.
  std::string outputType;
  /// What else the call computes: none, or the bias gradient (the sums over
  /// K) of A ("bias_gradient_a") or of B ("bias_gradient_b").
  std::string epilogue = "none";
  int64_t launchesPerStep(int64_t accumulationSteps) const {
    return launchesPerMicroBatch * accumulationSteps + launchesPerStepOutside;
  }
};

struct KernelReport {
  /// Micro-batches per optimizer step the per-step counts assume.
  int64_t accumulationSteps = 1;
  std::vector<KernelInfo> kernels;
  std::vector<GemmCall> gemms;

  llvm::json::Value toJson() const;
};

/// The ONNX node a location names (its first NameLoc), or "".
std::string nodeOf(mlir::Location loc);

/// The name of kernel `index` (in the order of the step's gpu.launch ops)
/// in the PTX: k<index>_<the tag cuda-form-kernels put on `loc`>.
std::string kernelName(mlir::Location loc, unsigned index);

/// The ONNX node kernel `launch` computes: the tag cuda-form-kernels put on
/// it, else the first node its location names, else "step" (the step's own
/// code: clipping, scaling).
std::string kernelNode(mlir::gpu::LaunchOp launch);

/// A memref or vector load or store: the memref, its indices, whether it
/// stores, and the elements it moves (a vector access: its lanes).
struct GlobalAccess {
  mlir::Operation *op;
  mlir::Value memref;
  mlir::ValueRange indices;
  bool store;
  int64_t width;
};
/// `op` as a load or store, if it is one.
std::optional<GlobalAccess> asGlobalAccess(mlir::Operation *op);

/// The buffer `memref` is a view of: the step argument, global or
/// allocation at the start of its chain of views.
mlir::Value viewRoot(mlir::Value memref);

/// Whether `memref` is (a view of) memory `launch` allocates for itself:
/// registers or its workgroup (shared) memory, not global memory.
bool isKernelLocal(mlir::gpu::LaunchOp launch, mlir::Value memref);

/// The global loads and stores of `launch` (memref and vector loads and
/// stores of memory it does not allocate itself), in program order: the
/// report's `accesses` and the counting emulator's access sites
/// (cuda-emulate-kernels{count-accesses}) are numbered by it.
llvm::SmallVector<GlobalAccess> globalAccesses(mlir::gpu::LaunchOp launch);

/// The parameter that elements [offset, offset + count) of an arena
/// argument lie in ("" when they span several).
using ParameterAt = std::function<std::string(int64_t offset, int64_t count)>;

/// The report of `step`'s gpu.launch ops and accrue_gemm calls, counting
/// `accumulationSteps` micro-batches per optimizer step.
KernelReport buildKernelReport(mlir::func::FuncOp step,
                               int64_t accumulationSteps,
                               const ParameterAt &parameterAt = nullptr);

/// The report as accrue-compile --kernel-report prints it: totals, the
/// kernels by launches per step, then what looks slow.
std::string renderKernelReport(const llvm::json::Value &report);

} // namespace accrue::cuda

#endif // ACCRUE_CODEGEN_CUDA_KERNELREPORT_H
