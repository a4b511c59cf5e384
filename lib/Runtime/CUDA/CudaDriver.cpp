//===- CudaDriver.cpp - the CUDA driver API, loaded at run time -*- C++ -*-===//

#include "CUDA/CudaDriver.h"

#include "accrue-runtime/Error.h"

#include "Libraries.h"

#include <cstdlib>
#include <dlfcn.h>
#include <glob.h>

using namespace accrue::rt;
using namespace accrue::rt::cuda;

namespace {

/// Folders of Python environments where NVIDIA's wheels keep libraries:
/// <site-packages>/nvidia/<package>/lib.
std::vector<std::string> pythonLibraryFolders() {
  std::vector<std::string> patterns;
  for (const char *variable : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char *prefix = std::getenv(variable))
      patterns.push_back(std::string(prefix) +
                         "/lib/python3*/site-packages/nvidia/*/lib");
  if (const char *path = std::getenv("PYTHONPATH")) {
    std::string entries = path;
    size_t start = 0;
    while (start <= entries.size()) {
      size_t end = entries.find(':', start);
      std::string entry = entries.substr(start, end - start);
      if (!entry.empty())
        patterns.push_back(entry + "/nvidia/*/lib");
      if (end == std::string::npos)
        break;
      start = end + 1;
    }
  }
  if (const char *home = std::getenv("HOME"))
    patterns.push_back(std::string(home) +
                       "/.local/lib/python3*/site-packages/nvidia/*/lib");
  for (const char *root : {"/usr/local/lib", "/usr/lib", "/opt/conda/lib"})
    for (const char *kind : {"site-packages", "dist-packages"})
      patterns.push_back(std::string(root) + "/python3*/" + kind +
                         "/nvidia/*/lib");
  patterns.push_back("/usr/lib/python3/dist-packages/nvidia/*/lib");
  std::vector<std::string> folders;
  for (const std::string &pattern : patterns) {
    glob_t found;
    if (::glob(pattern.c_str(), 0, nullptr, &found) == 0)
      for (size_t i = 0; i < found.gl_pathc; ++i)
        folders.push_back(found.gl_pathv[i]);
    ::globfree(&found);
  }
  return folders;
}

} // namespace

void *accrue::rt::cuda::openLibrary(const char *variable,
                                    const std::vector<std::string> &sonames,
                                    const std::string &what) {
  std::vector<std::string> tries;
  if (const char *override = std::getenv(variable); override && *override) {
    tries.push_back(override);
  } else {
    tries = sonames;
    for (const std::string &folder : pythonLibraryFolders())
      for (const std::string &soname : sonames)
        tries.push_back(folder + "/" + soname);
  }
  std::string errors;
  if (void *library = openFirst(tries, RTLD_NOW | RTLD_GLOBAL, errors))
    return library;
  throw Error(what + " could not be loaded (set " + variable +
              " to its path):" + errors);
}

void *accrue::rt::cuda::requireSymbol(void *library, const char *name,
                                      const std::string &what,
                                      const char *hint) {
  void *address = ::dlsym(library, name);
  if (!address)
    throw Error(what + " has no '" + name + "'" + hint);
  return address;
}

const Driver &accrue::rt::cuda::driver() {
  static const Driver loaded = [] {
    void *library =
        openLibrary("ACCRUE_CUDA_DRIVER", {"libcuda.so.1", "libcuda.so"},
                    "the CUDA driver (libcuda.so.1, from the NVIDIA driver; "
                    "is this a machine with an NVIDIA GPU?)");
    Driver d;
    auto bind = [&](auto &function, const char *name) {
      bindSymbol(library, function, name, "the CUDA driver",
                 " (Accrue needs CUDA 12 or later)");
    };
    bind(d.init, "cuInit");
    bind(d.deviceGetCount, "cuDeviceGetCount");
    bind(d.deviceGet, "cuDeviceGet");
    bind(d.deviceGetAttribute, "cuDeviceGetAttribute");
    bind(d.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(d.ctxSetCurrent, "cuCtxSetCurrent");
    bind(d.streamCreate, "cuStreamCreate");
    bind(d.streamSynchronize, "cuStreamSynchronize");
    bind(d.memAlloc, "cuMemAlloc_v2");
    bind(d.memFree, "cuMemFree_v2");
    bind(d.memAllocHost, "cuMemAllocHost_v2");
    bind(d.memFreeHost, "cuMemFreeHost");
    bind(d.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    bind(d.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    bind(d.memsetD8Async, "cuMemsetD8Async");
    bind(d.moduleLoadData, "cuModuleLoadData");
    bind(d.moduleUnload, "cuModuleUnload");
    bind(d.moduleGetFunction, "cuModuleGetFunction");
    bind(d.launchKernel, "cuLaunchKernel");
    bind(d.streamBeginCapture, "cuStreamBeginCapture_v2");
    bind(d.streamEndCapture, "cuStreamEndCapture");
    bind(d.graphInstantiate, "cuGraphInstantiateWithFlags");
    bind(d.graphLaunch, "cuGraphLaunch");
    bind(d.graphExecDestroy, "cuGraphExecDestroy");
    bind(d.graphDestroy, "cuGraphDestroy");
    bind(d.eventCreate, "cuEventCreate");
    bind(d.eventRecord, "cuEventRecord");
    bind(d.eventSynchronize, "cuEventSynchronize");
    bind(d.eventDestroy, "cuEventDestroy_v2");
    bind(d.streamWaitEvent, "cuStreamWaitEvent");
    bind(d.getErrorString, "cuGetErrorString");
    return d;
  }();
  return loaded;
}

void accrue::rt::cuda::check(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return;
  const char *text = nullptr;
  if (driver().getErrorString(result, &text) != CUDA_SUCCESS || !text)
    text = "unknown error";
  throw Error(std::string(what) + ": " + text + " (CUDA error " +
              std::to_string(result) + ")");
}
