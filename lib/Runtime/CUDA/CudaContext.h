//===- CudaContext.h - the process's CUDA device and stream -----*- C++ -*-===//
//
// Private to the runtime: what the CUDA backend (CudaBackend.cpp) and the
// GEMMs of CUDA steps (CudaGemm.cpp) share.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_RUNTIME_CUDA_CUDACONTEXT_H
#define ACCRUE_LIB_RUNTIME_CUDA_CUDACONTEXT_H

#include "CUDA/CudaDriver.h"
#include "Gemm.h"

#include <cstdint>

namespace accrue::rt::cuda {

/// The device this process uses, its primary context and its stream.
struct Context {
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  /// The compute capability as an sm version (90 for 9.0).
  int sm = 0;
  int64_t synchronizations = 0;
  int64_t graphLaunches = 0;
  /// Whether a CUDA graph is capturing the stream (nothing may allocate).
  bool capturing = false;

  /// Chooses the device (ACCRUE_CUDA_DEVICE, else the MPI local rank, else
  /// 0) and starts its context and stream, once.
  static Context &get();
  /// The context if a CUDA backend started one.
  static Context *started;
};

/// The GEMM runner of CUDA steps: cuBLASLt on the step's stream.
void runGemmOnDevice(const GemmPlan &plan);
/// The device bytes cuBLASLt's workspace holds (0 before the first GEMM).
int64_t cublasLtWorkspaceBytes();

} // namespace accrue::rt::cuda

#endif // ACCRUE_LIB_RUNTIME_CUDA_CUDACONTEXT_H
