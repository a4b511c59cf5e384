//===- SafetensorsFuzzer.cpp - the checkpoint reader on any bytes -*- C++ -*-=//
//
// Checkpoints are safetensors files: any bytes either read as tensors whose
// sizes agree with their shapes (and string metadata) or are refused with
// the reader's error.
//
//===----------------------------------------------------------------------===//

#include "Arrays.h"
#include "Fuzz.h"

#include "accrue-runtime/Error.h"

using namespace accrue::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  std::map<std::string, std::string> metadata;
  try {
    checkArrays(parseSafetensors(bytes, "fuzz.safetensors", &metadata));
  } catch (const Error &) {
  }
  return 0;
}
