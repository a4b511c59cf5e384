//===- NpzFuzzer.cpp - the .npz reader on arbitrary bytes -------*- C++ -*-===//
//
// Training data comes from strangers: any bytes either read as arrays whose
// sizes agree with their shapes or are refused with the reader's error.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "accrue-runtime/Arrays.h"
#include "accrue-runtime/Error.h"

#include <cstdlib>

using namespace accrue::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  try {
    for (const auto &[name, array] : parseNpz(bytes, "fuzz.npz")) {
      size_t elements = 1;
      for (int64_t dim : array.shape) {
        if (dim < 0)
          std::abort();
        elements *= static_cast<size_t>(dim);
      }
      if (array.data.size() != elements * dtypeSize(array.dtype))
        std::abort();
    }
  } catch (const Error &) {
  }
  return 0;
}
