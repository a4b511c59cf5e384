//===- Launch.cpp - which launcher started this run -----------*- C++ -*-===//

#include "Launch.h"

#include "accrue-runtime/Error.h"

#include <cstdlib>

namespace accrue::rt {

std::string firstHost(std::string list) {
  size_t comma = list.find(',');
  size_t bracket = list.find('[');
  if (bracket == std::string::npos ||
      (comma != std::string::npos && comma < bracket))
    return list.substr(0, comma);
  std::string prefix = list.substr(0, bracket);
  std::string range = list.substr(bracket + 1);
  size_t end = range.find_first_of(",-]");
  // The name goes on after the brackets ("node[01-02]-ib" -> "node01-ib").
  size_t close = range.find(']');
  std::string suffix;
  if (close != std::string::npos) {
    suffix = range.substr(close + 1);
    suffix = suffix.substr(0, suffix.find(','));
  }
  return prefix + range.substr(0, end) + suffix;
}

std::string &chosenLauncher() {
  static std::string chosen;
  return chosen;
}

const char *nonEmptyEnv(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

int intVariable(const char *name, const std::string &launcher, int64_t low,
                int64_t high) {
  const char *value = nonEmptyEnv(name);
  if (!value)
    throw Error(launcher + "'s environment is incomplete: " + name +
                " is not set");
  char *end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  if (*end || parsed < low || parsed > high)
    throw Error(std::string(name) + "='" + value + "' is not an integer in [" +
                std::to_string(low) + ", " + std::to_string(high) + "]");
  return static_cast<int>(parsed);
}

std::optional<Launch> detectLaunch() {
  std::string launcher = chosenLauncher();
  if (launcher.empty() && nonEmptyEnv("ACCRUE_LAUNCHER"))
    launcher = nonEmptyEnv("ACCRUE_LAUNCHER");
  if (launcher.empty() || launcher == "auto") {
    // torchrun sets RANK and WORLD_SIZE (a MASTER_ADDR alone is not a
    // launch); srun sets its step's variables, which a batch script
    // running one process does not have.
    if (nonEmptyEnv("OMPI_COMM_WORLD_SIZE") || nonEmptyEnv("PMIX_RANK") ||
        nonEmptyEnv("PMI_SIZE"))
      launcher = "mpi";
    else if (nonEmptyEnv("RANK") || nonEmptyEnv("WORLD_SIZE"))
      launcher = "torchrun";
    else if (nonEmptyEnv("SLURM_PROCID") && nonEmptyEnv("SLURM_STEP_ID"))
      launcher = "slurm";
    else
      launcher = "mpi";
  }
  if (launcher == "mpi")
    return std::nullopt;
  Launch launch;
  launch.launcher = launcher;
  if (launcher == "torchrun") {
    launch.size = intVariable("WORLD_SIZE", launcher, 1, 1 << 20);
    launch.rank = intVariable("RANK", launcher, 0, launch.size - 1);
    launch.localRank = intVariable("LOCAL_RANK", launcher, 0, launch.size - 1);
    if (!nonEmptyEnv("MASTER_ADDR"))
      throw Error("torchrun's environment is incomplete: MASTER_ADDR is not "
                  "set");
    launch.host = nonEmptyEnv("MASTER_ADDR");
    launch.port = intVariable("MASTER_PORT", launcher, 1, 65535);
    // torchrun's own agent serves PyTorch's store on MASTER_PORT while its
    // workers run: Accrue's store takes the next port.
    if (nonEmptyEnv("TORCHELASTIC_USE_AGENT_STORE") &&
        std::string(nonEmptyEnv("TORCHELASTIC_USE_AGENT_STORE")) == "True")
      launch.port = launch.port % 65535 + 1;
  } else if (launcher == "slurm") {
    launch.size =
        intVariable(nonEmptyEnv("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS"
                                                        : "SLURM_NTASKS",
                    launcher, 1, 1 << 20);
    launch.rank = intVariable("SLURM_PROCID", launcher, 0, launch.size - 1);
    launch.localRank =
        intVariable("SLURM_LOCALID", launcher, 0, launch.size - 1);
    if (nonEmptyEnv("MASTER_ADDR")) {
      launch.host = nonEmptyEnv("MASTER_ADDR");
    } else {
      const char *nodes = nonEmptyEnv("SLURM_STEP_NODELIST");
      if (!nodes)
        nodes = nonEmptyEnv("SLURM_JOB_NODELIST");
      if (!nodes)
        throw Error("slurm's environment is incomplete: neither "
                    "SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set (or "
                    "set MASTER_ADDR)");
      launch.host = firstHost(nodes);
    }
    // One port per job where MASTER_PORT does not say.
    launch.port =
        nonEmptyEnv("MASTER_PORT")
            ? intVariable("MASTER_PORT", launcher, 1, 65535)
            : 29500 +
                  intVariable("SLURM_JOB_ID", launcher, 0, INT32_MAX) % 10000;
  } else {
    throw Error("unknown launcher '" + launcher +
                "' (ACCRUE_LAUNCHER or --launcher: auto, mpi, torchrun, "
                "slurm)");
  }
  if (nonEmptyEnv("ACCRUE_STORE_PORT"))
    launch.port = intVariable("ACCRUE_STORE_PORT", launcher, 1, 65535);
  // One process needs no collectives.
  if (launch.size == 1)
    return std::nullopt;
  return launch;
}

} // namespace accrue::rt
