//===- Arrays.h - what the array readers' fuzz targets check ----*- C++ -*-===//
//
// An array a reader accepts has non-negative dimensions and exactly the
// bytes its shape and dtype need; anything else is a finding (abort).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_TOOLS_FUZZ_ARRAYS_H
#define ACCRUE_TOOLS_FUZZ_ARRAYS_H

#include "accrue-runtime/Arrays.h"

#include <cstdlib>
#include <map>
#include <string>

inline void
checkArrays(const std::map<std::string, accrue::rt::Array> &arrays) {
  for (const auto &[name, array] : arrays) {
    size_t elements = 1;
    for (int64_t dim : array.shape) {
      if (dim < 0)
        std::abort();
      elements *= static_cast<size_t>(dim);
    }
    if (array.data.size() != elements * accrue::rt::dtypeSize(array.dtype))
      std::abort();
  }
}

#endif // ACCRUE_TOOLS_FUZZ_ARRAYS_H
