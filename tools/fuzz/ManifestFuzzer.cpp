//===- ManifestFuzzer.cpp - step.json on arbitrary text ---------*- C++ -*-===//
//
// step.json is read before anything runs: any text either parses into a
// manifest or is refused with the runtime's error (never another exception).
// A parsed manifest prints back to text that parses to the same contract
// fingerprint.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "accrue-runtime/Error.h"
#include "accrue-runtime/Manifest.h"

#include <cstdlib>

using namespace accrue::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  Manifest manifest;
  try {
    manifest = Manifest::parse(text, "step.json");
  } catch (const Error &) {
    return 0;
  }
  Manifest again = Manifest::parse(manifest.toJson(), "step.json");
  if (again.fingerprint() != manifest.fingerprint())
    std::abort();
  return 0;
}
