//===- Fuzz.h - libFuzzer entry points of Accrue's parsers ------*- C++ -*-===//
//
// Each fuzz target defines LLVMFuzzerTestOneInput. Built with
// ACCRUE_SANITIZE, a target links libFuzzer (accrue-fuzz-NAME); every build
// also links it with ReplayMain.cpp (accrue-replay-NAME), which runs saved
// inputs once each: the regression inputs the test suite replays.
//
// A target returns normally for every input the parser refuses with its own
// error; anything else (a crash, a sanitizer report, an exception that is
// not the parser's error, a hang, a leak) is a finding.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_TOOLS_FUZZ_FUZZ_H
#define ACCRUE_TOOLS_FUZZ_FUZZ_H

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif // ACCRUE_TOOLS_FUZZ_FUZZ_H
