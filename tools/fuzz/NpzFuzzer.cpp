//===- NpzFuzzer.cpp - the .npz reader on arbitrary bytes -------*- C++ -*-===//
//
// Training data comes from strangers: any bytes either read as arrays whose
// sizes agree with their shapes or are refused with the reader's error.
//
//===----------------------------------------------------------------------===//

#include "Arrays.h"
#include "Fuzz.h"

#include "accrue-runtime/Error.h"

using namespace accrue::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  try {
    checkArrays(parseNpz(bytes, "fuzz.npz"));
  } catch (const Error &) {
  }
  return 0;
}
