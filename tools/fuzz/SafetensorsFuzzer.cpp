//===- SafetensorsFuzzer.cpp - the checkpoint reader on any bytes -*- C++ -*-=//
//
// Checkpoints are safetensors files: any bytes either read as tensors whose
// sizes agree with their shapes (and string metadata) or are refused with
// the reader's error.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "accrue-runtime/Arrays.h"
#include "accrue-runtime/Error.h"

#include <cstdlib>

using namespace accrue::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  std::map<std::string, std::string> metadata;
  std::map<std::string, Array> arrays;
  try {
    arrays = parseSafetensors(bytes, "fuzz.safetensors", &metadata);
  } catch (const Error &) {
    return 0;
  }
  for (const auto &[name, array] : arrays) {
    size_t elements = 1;
    for (int64_t dim : array.shape) {
      if (dim < 0)
        std::abort();
      elements *= static_cast<size_t>(dim);
    }
    if (array.data.size() != elements * dtypeSize(array.dtype))
      std::abort();
  }
  return 0;
}
