//===- Libraries.h - loading optional libraries with dlopen -----*- C++ -*-===//
//
// The runtime links none of the libraries a run may need (Open MPI, Gloo's
// shim, the CUDA driver, cuBLASLt, NCCL); it loads them with dlopen when a
// run needs them, trying candidate names in order.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_RUNTIME_LIBRARIES_H
#define ACCRUE_LIB_RUNTIME_LIBRARIES_H

#include <dlfcn.h>

#include <string>
#include <vector>

namespace accrue::rt {

/// The first of `names` that dlopen loads with `flags`, or null, with each
/// failure's message appended to `errors` (" a; b; ...").
inline void *openFirst(const std::vector<std::string> &names, int flags,
                       std::string &errors) {
  for (const std::string &name : names) {
    if (void *library = ::dlopen(name.c_str(), flags))
      return library;
    errors += (errors.empty() ? " " : "; ") + std::string(::dlerror());
  }
  return nullptr;
}

} // namespace accrue::rt

#endif // ACCRUE_LIB_RUNTIME_LIBRARIES_H
