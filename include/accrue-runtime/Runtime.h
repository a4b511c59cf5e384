//===- Runtime.h - Accrue's runtime (no MLIR/LLVM) --------------*- C++ -*-===//
//
// Loads a compiled training step (step.so + step.json), owns its flat arenas
// and drives it over a dataset. Depends on libc, libdl and zlib only, so a
// compiled step deploys to machines without a compiler. Errors are thrown as
// accrue::rt::Error with a one-line message.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_RUNTIME_H
#define ACCRUE_RUNTIME_RUNTIME_H

#include "accrue-runtime/Arrays.h"
#include "accrue-runtime/Collectives.h"
#include "accrue-runtime/Error.h"
#include "accrue-runtime/Manifest.h"
#include "accrue-runtime/Session.h"
#include "accrue-runtime/StepABI.h"
#include "accrue-runtime/Trainer.h"

#endif // ACCRUE_RUNTIME_RUNTIME_H
