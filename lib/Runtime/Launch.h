//===- Launch.h - which launcher started this run -------------*- C++ -*-===//
//
// A data-parallel run learns its rank, its world size and where its ranks
// meet from the launcher that started it: mpirun (Open MPI finds out
// itself), torchrun or srun (their environment variables). Private to the
// runtime (Collectives.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_LAUNCH_H
#define ACCRUE_RUNTIME_LAUNCH_H

#include <cstdint>
#include <optional>
#include <string>

namespace accrue::rt {

/// A run's place among its ranks as torchrun or srun describes it.
struct Launch {
  std::string launcher;
  int rank = 0, size = 1, localRank = 0;
  std::string host; // the rendezvous store's (MASTER_ADDR)
  int port = 0;     // (MASTER_PORT)
};

/// The launcher named by Collectives::setLauncher (accrue-train
/// --launcher); empty: ACCRUE_LAUNCHER, else detected.
std::string &chosenLauncher();

/// The first host of a Slurm node list: "gpu[03-05,07],cpu1" -> "gpu03",
/// "node[01-02]-ib" -> "node01-ib".
std::string firstHost(std::string list);

/// The launch torchrun or srun set up, or none (mpirun, or one process).
std::optional<Launch> detectLaunch();

/// Environment variable `name`, or null when it is unset or empty.
const char *nonEmptyEnv(const char *name);

/// The integer value of environment variable `name` (a one-line error
/// naming it when it is missing or not an integer in [low, high]).
int intVariable(const char *name, const std::string &launcher, int64_t low,
                int64_t high);

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_LAUNCH_H
