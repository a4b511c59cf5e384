//===- InitAllPasses.h - register Accrue's passes ---------------*- C++ -*-===//

#ifndef ACCRUE_INITALLPASSES_H
#define ACCRUE_INITALLPASSES_H

namespace accrue {

/// Registers Accrue's passes and pipelines with the global pass registry
/// (for accrue-opt).
void registerAllPasses();

} // namespace accrue

#endif // ACCRUE_INITALLPASSES_H
