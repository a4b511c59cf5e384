//===- CudaDriver.h - the CUDA driver API, loaded at run time ---*- C++ -*-===//
//
// The part of the CUDA driver API (libcuda.so.1) the runtime uses, declared
// here from NVIDIA's documented signatures so that the runtime builds and
// links without the CUDA toolkit: the library is opened with dlopen when a
// CUDA step runs. `_v2` entry points are the ones the 64-bit API exports.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_RUNTIME_CUDA_CUDADRIVER_H
#define ACCRUE_LIB_RUNTIME_CUDA_CUDADRIVER_H

#include <cstddef>
#include <string>
#include <vector>

namespace accrue::rt::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;
using CUevent = struct CUevent_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;

/// The driver's entry points.
struct Driver {
  CUresult (*init)(unsigned flags);
  CUresult (*deviceGetCount)(int *count);
  CUresult (*deviceGet)(CUdevice *device, int ordinal);
  CUresult (*deviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*primaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*ctxSetCurrent)(CUcontext context);
  CUresult (*streamCreate)(CUstream *stream, unsigned flags);
  CUresult (*streamSynchronize)(CUstream stream);
  CUresult (*memAlloc)(CUdeviceptr *pointer, size_t bytes);
  CUresult (*memFree)(CUdeviceptr pointer);
  CUresult (*memAllocHost)(void **pointer, size_t bytes);
  CUresult (*memFreeHost)(void *pointer);
  CUresult (*memcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes,
                              CUstream stream);
  CUresult (*memcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes,
                              CUstream stream);
  CUresult (*memsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes,
                            CUstream stream);
  CUresult (*moduleLoadData)(CUmodule *module, const void *image);
  CUresult (*moduleUnload)(CUmodule module);
  CUresult (*moduleGetFunction)(CUfunction *function, CUmodule module,
                                const char *name);
  CUresult (*launchKernel)(CUfunction function, unsigned gridX, unsigned gridY,
                           unsigned gridZ, unsigned blockX, unsigned blockY,
                           unsigned blockZ, unsigned sharedBytes,
                           CUstream stream, void **params, void **extra);
  CUresult (*streamBeginCapture)(CUstream stream, int mode);
  CUresult (*streamEndCapture)(CUstream stream, CUgraph *graph);
  CUresult (*graphInstantiate)(CUgraphExec *exec, CUgraph graph,
                               unsigned long long flags);
  CUresult (*graphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*graphExecDestroy)(CUgraphExec exec);
  CUresult (*graphDestroy)(CUgraph graph);
  CUresult (*eventCreate)(CUevent *event, unsigned flags);
  CUresult (*eventRecord)(CUevent event, CUstream stream);
  CUresult (*eventSynchronize)(CUevent event);
  CUresult (*eventDestroy)(CUevent event);
  CUresult (*streamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*getErrorString)(CUresult error, const char **text);
};

/// The driver, loaded on first use from ACCRUE_CUDA_DRIVER or libcuda.so.1.
/// Throws rt::Error naming what is missing.
const Driver &driver();

/// Throws rt::Error "<what>: <the driver's message>" unless `result` is
/// CUDA_SUCCESS.
void check(CUresult result, const char *what);

/// A library of the CUDA toolkit or NCCL opened with dlopen: `variable`'s
/// value if set, else each of `sonames` on the loader's path, else the same
/// names in the nvidia/*/lib folders of Python environments (where the
/// cuBLAS and NCCL wheels keep them). Throws rt::Error listing the tries.
void *openLibrary(const char *variable, const std::vector<std::string> &sonames,
                  const std::string &what);

/// The address of `name` in `library`; throws rt::Error "<what> has no
/// '<name>'<hint>" when it is missing.
void *requireSymbol(void *library, const char *name, const std::string &what,
                    const char *hint = "");

/// Binds the function pointer `function` to `name` in `library`.
template <typename Function>
void bindSymbol(void *library, Function &function, const char *name,
                const std::string &what, const char *hint = "") {
  function =
      reinterpret_cast<Function>(requireSymbol(library, name, what, hint));
}

} // namespace accrue::rt::cuda

#endif // ACCRUE_LIB_RUNTIME_CUDA_CUDADRIVER_H
