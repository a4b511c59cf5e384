//===- Options.h - how a step is lowered for its target ---------*- C++ -*-===//
//
// Plain, typed option structs of the targets (Target.h). Each target
// declares its settings once (Target::bindSettings, in a SettingTable that
// every tool binds); the enumerations are the step contract's
// (accrue-runtime/StepABI.h).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_OPTIONS_H
#define ACCRUE_CODEGEN_OPTIONS_H

#include "accrue-runtime/StepABI.h"

#include <cstdint>
#include <optional>
#include <string>

namespace accrue {

/// How a tensor-level step is lowered for the CPU.
struct CPULoweringOptions {
  /// Register-tile and vectorize contractions (vectorize-contractions).
  bool vectorize = true;
  /// Run large kernels on all cores: scf.parallel loops lowered to OpenMP
  /// (the step then links libomp; results do not depend on the thread
  /// count).
  bool parallel = true;
  /// The target's vector register width in bits; sizes the kernels' blocks
  /// (rows of 2 registers, dot products over one register). Unset:
  /// accrue-compile asks the target CPU, accrue-opt takes 512.
  std::optional<int64_t> vectorBits;
  /// Contractions whose operands are both bf16 (--precision bf16) read them
  /// as bf16 and multiply pairs of them with AVX512-BF16's `vdpbf16ps`,
  /// accumulating in f32 (else they read copies widened to f32). Unset:
  /// accrue-compile asks the target CPU, accrue-opt takes false.
  std::optional<bool> bf16Dot;
  /// The target CPU's L2 cache per core in bytes; an outer product keeps in
  /// half of it the panel (a block of k by all of m or n) that its blocks
  /// of C read again. Unset: accrue-compile reads the compiling machine's
  /// when compiling for it, else (and in accrue-opt) 2 MiB.
  std::optional<int64_t> l2Bytes;

  int64_t vectorBitsOrDefault() const { return vectorBits.value_or(512); }
  int64_t l2BytesOrDefault() const { return l2Bytes.value_or(2 << 20); }
  bool bf16DotOrDefault() const { return bf16Dot.value_or(false); }
};

/// How a tensor-level step is lowered for NVIDIA GPUs.
struct CUDALoweringOptions {
  /// GPU architectures to generate PTX for ("sm_80,sm_90"); the runtime
  /// loads the newest one the device runs.
  std::string archs = "sm_80,sm_90";
  /// The CUDA toolkit (libdevice, ptxas). Empty: CUDA_HOME, /usr/local/cuda,
  /// or the nvidia-cuda-nvcc Python package next to the compiler.
  std::string toolkit;
  /// The counting emulator (target cuda-emulated): the kernels report every
  /// global access to the runtime, which profiles them and checks them for
  /// races and out-of-bounds accesses.
  bool countAccesses = false;
  /// Row groups (cuda-group-rows): a LayerNorm's or a softmax's warp
  /// reductions and the row maps between them as one kernel of a block
  /// per row.
  bool rowGroups = true;
};

/// Where a step runs and how it is lowered there.
struct LoweringOptions {
  /// The CPU, an NVIDIA GPU, or the CUDA pipeline emulated on the CPU (for
  /// testing without a GPU).
  AccrueTarget target = ACCRUE_TARGET_CPU;
  /// Fuse chains of elementwise linalg ops before bufferization (every
  /// target).
  bool fuseElementwise = true;
  CPULoweringOptions cpu;
  CUDALoweringOptions cuda;
};

} // namespace accrue

#endif // ACCRUE_CODEGEN_OPTIONS_H
