//===- Collectives.cpp - data-parallel all-reduce over MPI or Gloo -*- C++
//-*-===//
//
// The runtime side of train.all_reduce. A data-parallel step calls
// ACCRUE_ALL_REDUCE_SYMBOL (StepABI.h) once per optimizer step, after its
// micro-batch loop, with one buffer: the gradient accumulator, whose tail
// holds the loss sum and count; the runtime sums it in place with one
// all-reduce (the CUDA backend's with NCCL, bootstrapped through the
// broadcast here).
//
// The launcher decides the engine (ACCRUE_LAUNCHER, accrue-train
// --launcher; detected from the environment by default, Launch.cpp): under
// mpirun, Open MPI; under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT) or srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the node
// list's first host), Gloo over TCP, its ranks meeting through a store rank
// 0 serves on MASTER_ADDR:MASTER_PORT (the next port under torchrun, whose
// agent holds that one; ACCRUE_STORE_PORT says otherwise). Both are loaded with
// dlopen when a data-parallel run starts (Gloo through libaccrue-gloo.so,
// GlooShim.h), so the runtime (and every single-process run) links neither.
// mpi.h gives the types and signatures only; its predefined handles
// (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are the addresses of library
// globals, looked up by name.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Collectives.h"

#include "accrue-runtime/Error.h"
#include "accrue-runtime/GlooShim.h"
#include "accrue-runtime/StepABI.h"

#include "Launch.h"
#include "Libraries.h"

#include <mpi.h>

#include <dlfcn.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

using namespace accrue::rt;

namespace {

/// The part of Open MPI the runtime uses, resolved from the loaded library.
struct Mpi {
  decltype(&MPI_Init) init;
  decltype(&MPI_Initialized) initialized;
  decltype(&MPI_Finalized) finalized;
  decltype(&MPI_Finalize) finalize;
  decltype(&MPI_Comm_rank) commRank;
  decltype(&MPI_Comm_size) commSize;
  decltype(&MPI_Allreduce) allreduce;
  decltype(&MPI_Reduce) reduce;
  decltype(&MPI_Allgatherv) allgatherv;
  decltype(&MPI_Bcast) bcast;
  decltype(&MPI_Abort) abort;
  MPI_Comm world;
  MPI_Datatype f32, i64, byte;
  MPI_Op sum, max;
};

/// Set once MPI is loaded and initialized; until then no run is parallel.
Mpi *loadedMpi = nullptr;

/// A device backend's reduce-to-owners and broadcast-from-owners of
/// consecutive segments (ZeRO on device buffers).
std::function<void(float *, const std::vector<int64_t> &)> &deviceScatter() {
  static std::function<void(float *, const std::vector<int64_t> &)> f;
  return f;
}
std::function<void(float *, const std::vector<int64_t> &)> &deviceGather() {
  static std::function<void(float *, const std::vector<int64_t> &)> f;
  return f;
}

/// The reducer of device buffers, if a device backend installed one.
std::function<void(float *, int64_t)> &deviceReducer() {
  static std::function<void(float *, int64_t)> reducer;
  return reducer;
}

/// Set in sanitizer builds (tools/sanitizer/SanitizerDefaults.c), absent
/// otherwise: a process that loads Open MPI is not leak-checked, because
/// Open MPI unloads its plugins at MPI_Finalize and their allocations can
/// then be neither attributed nor suppressed.
extern "C" __attribute__((weak)) int accrue_sanitizer_no_leak_check;

/// Loads Open MPI (ACCRUE_MPI_LIBRARY, else libmpi.so.40, Open MPI 4's
/// soname). RTLD_GLOBAL: Open MPI's own plugins resolve symbols against it.
Mpi loadMpi() {
  if (&accrue_sanitizer_no_leak_check)
    accrue_sanitizer_no_leak_check = 1;
  const char *override = std::getenv("ACCRUE_MPI_LIBRARY");
  std::vector<std::string> names;
  if (override && *override)
    names.push_back(override);
  else
    names = {"libmpi.so.40", "libmpi.so"};
  std::string errors;
  void *library = openFirst(names, RTLD_NOW | RTLD_GLOBAL, errors);
  if (!library)
    throw Error("this artifact is data-parallel and needs Open MPI, which "
                "could not be loaded (apt install openmpi-bin, or set "
                "ACCRUE_MPI_LIBRARY):" +
                errors);
  auto symbol = [&](const char *name) {
    void *address = ::dlsym(library, name);
    if (!address)
      throw Error(std::string("the MPI library has no '") + name +
                  "' (Accrue needs Open MPI 4 or later)");
    return address;
  };
  Mpi mpi;
  auto bind = [&](auto &function, const char *name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(
        symbol(name));
  };
  bind(mpi.init, "MPI_Init");
  bind(mpi.initialized, "MPI_Initialized");
  bind(mpi.finalized, "MPI_Finalized");
  bind(mpi.finalize, "MPI_Finalize");
  bind(mpi.commRank, "MPI_Comm_rank");
  bind(mpi.commSize, "MPI_Comm_size");
  bind(mpi.allreduce, "MPI_Allreduce");
  bind(mpi.reduce, "MPI_Reduce");
  bind(mpi.allgatherv, "MPI_Allgatherv");
  bind(mpi.bcast, "MPI_Bcast");
  bind(mpi.abort, "MPI_Abort");
  mpi.world = static_cast<MPI_Comm>(symbol("ompi_mpi_comm_world"));
  mpi.f32 = static_cast<MPI_Datatype>(symbol("ompi_mpi_float"));
  mpi.i64 = static_cast<MPI_Datatype>(symbol("ompi_mpi_long_long_int"));
  mpi.byte = static_cast<MPI_Datatype>(symbol("ompi_mpi_byte"));
  mpi.sum = static_cast<MPI_Op>(symbol("ompi_mpi_op_sum"));
  mpi.max = static_cast<MPI_Op>(symbol("ompi_mpi_op_max"));
  return mpi;
}

void check(int status, const char *what) {
  if (status != MPI_SUCCESS)
    throw Error(std::string("MPI: ") + what + " failed");
}

/// Calls `fn` on consecutive pieces of `data` that MPI's int counts can
/// describe.
template <typename Fn> void forEachChunk(float *data, int64_t count, Fn fn) {
  for (int64_t done = 0; done < count;) {
    int size = static_cast<int>(std::min<int64_t>(count - done, 1 << 30));
    fn(data + done, size);
    done += size;
  }
}

/// Whether MPI is loaded, initialized and not finalized.
Mpi *activeMpi() {
  if (!loadedMpi)
    return nullptr;
  int initialized = 0, finalized = 0;
  loadedMpi->initialized(&initialized);
  loadedMpi->finalized(&finalized);
  return initialized && !finalized ? loadedMpi : nullptr;
}

/// Gloo through libaccrue-gloo.so.
struct Gloo {
  AccrueGlooConnectFn connect;
  AccrueGlooAllReduceFn allReduce;
  AccrueGlooBroadcastFn broadcast;
  AccrueGlooReduceScatterFn reduceScatter;
  AccrueGlooAllGatherFn allGather;
  AccrueGlooCloseFn close;
  AccrueGloo *group = nullptr;
};

Gloo *loadedGloo = nullptr;

/// libaccrue-gloo.so: ACCRUE_GLOO_LIBRARY, else beside the program or
/// library holding the runtime (bin/../lib too), else the loader's path.
Gloo loadGloo() {
  std::vector<std::string> names;
  if (const char *chosen = nonEmptyEnv("ACCRUE_GLOO_LIBRARY")) {
    names.push_back(chosen);
  } else {
    Dl_info info;
    if (::dladdr(reinterpret_cast<void *>(&loadGloo), &info) &&
        info.dli_fname) {
      std::string dir = info.dli_fname;
      dir = dir.substr(0, dir.rfind('/') + 1);
      names.push_back(dir + "libaccrue-gloo.so");
      names.push_back(dir + "../lib/libaccrue-gloo.so");
    }
    names.push_back("libaccrue-gloo.so");
  }
  std::string errors;
  void *library = openFirst(names, RTLD_NOW | RTLD_LOCAL, errors);
  if (!library)
    throw Error("this run is launched without MPI and needs Gloo through "
                "libaccrue-gloo.so, which could not be loaded (Debian's "
                "libgloo-dev when building Accrue; or set "
                "ACCRUE_GLOO_LIBRARY):" +
                errors);
  auto symbol = [&](const char *name) {
    void *address = ::dlsym(library, name);
    if (!address)
      throw Error(std::string("libaccrue-gloo.so has no '") + name + "'");
    return address;
  };
  Gloo gloo;
  gloo.connect =
      reinterpret_cast<AccrueGlooConnectFn>(symbol(ACCRUE_GLOO_CONNECT));
  gloo.allReduce =
      reinterpret_cast<AccrueGlooAllReduceFn>(symbol(ACCRUE_GLOO_ALL_REDUCE));
  gloo.broadcast =
      reinterpret_cast<AccrueGlooBroadcastFn>(symbol(ACCRUE_GLOO_BROADCAST));
  gloo.reduceScatter = reinterpret_cast<AccrueGlooReduceScatterFn>(
      symbol(ACCRUE_GLOO_REDUCE_SCATTER));
  gloo.allGather =
      reinterpret_cast<AccrueGlooAllGatherFn>(symbol(ACCRUE_GLOO_ALL_GATHER));
  gloo.close = reinterpret_cast<AccrueGlooCloseFn>(symbol(ACCRUE_GLOO_CLOSE));
  return gloo;
}

/// The host this rank's transport listens on: ACCRUE_GLOO_HOST, else
/// empty, which the shim reads as the address its connection to the
/// store leaves from (the interface that reaches rank 0; the host name may
/// resolve to a loopback address).
std::string selfHost() {
  const char *chosen = nonEmptyEnv("ACCRUE_GLOO_HOST");
  return chosen ? chosen : "";
}

void checkGloo(int status, const char *message) {
  if (status)
    throw Error(message);
}

} // namespace

namespace {
std::optional<Collectives::Host> &hostCollectives() {
  static std::optional<Collectives::Host> host;
  return host;
}
bool constructed = false;
} // namespace

void Collectives::setLauncher(const std::string &launcher) {
  chosenLauncher() = launcher;
}

void Collectives::setHost(Host host) {
  if (constructed)
    throw Error("the collectives are chosen before the first data-parallel "
                "session; this process already has them");
  hostCollectives() = std::move(host);
}

Collectives &Collectives::get() {
  static Collectives instance;
  return instance;
}

Collectives::Collectives() {
  constructed = true;
  if (std::optional<Host> &host = hostCollectives()) {
    rankId = host->rank;
    worldSize = host->size;
    return;
  }
  if (std::optional<Launch> launch = detectLaunch()) {
    static Gloo gloo = loadGloo();
    char error[1024] = {};
    // A rank that never arrives ends the rendezvous after this; a collective
    // waits longer (rank 0 may be writing a checkpoint); a rank that dies
    // ends the others at once (its connections close).
    int rendezvous = nonEmptyEnv("ACCRUE_RENDEZVOUS_TIMEOUT")
                         ? intVariable("ACCRUE_RENDEZVOUS_TIMEOUT",
                                       launch->launcher, 1, 1 << 20)
                         : 60;
    int collective = nonEmptyEnv("ACCRUE_COLLECTIVE_TIMEOUT")
                         ? intVariable("ACCRUE_COLLECTIVE_TIMEOUT",
                                       launch->launcher, 1, 1 << 20)
                         : 1800;
    if (gloo.connect(launch->rank, launch->size, launch->host.c_str(),
                     launch->port, selfHost().c_str(), rendezvous, collective,
                     &gloo.group, error, sizeof error))
      throw Error(error);
    loadedGloo = &gloo;
    rankId = launch->rank;
    worldSize = launch->size;
    return;
  }
  static Mpi mpi = loadMpi();
  int initialized = 0;
  mpi.initialized(&initialized);
  if (!initialized)
    check(mpi.init(nullptr, nullptr), "MPI_Init");
  loadedMpi = &mpi;
  mpi.commRank(mpi.world, &rankId);
  mpi.commSize(mpi.world, &worldSize);
}

Collectives::~Collectives() {
  if (loadedGloo) {
    loadedGloo->close(loadedGloo->group);
    loadedGloo = nullptr;
  }
  if (Mpi *mpi = activeMpi())
    mpi->finalize();
}

int Collectives::rankIfParallel() {
  if (constructed && hostCollectives())
    return get().size() > 1 ? get().rank() : -1;
  if (loadedGloo)
    return get().size() > 1 ? get().rank() : -1;
  Mpi *mpi = activeMpi();
  if (!mpi)
    return -1;
  int size = 1, rank = 0;
  mpi->commSize(mpi->world, &size);
  mpi->commRank(mpi->world, &rank);
  return size > 1 ? rank : -1;
}

void Collectives::abortIfParallel(int code) {
  if (rankIfParallel() < 0)
    return;
  // Gloo has no abort: this rank's exit closes its connections, and the
  // other ranks' next collective fails naming the closed peer.
  if (loadedGloo) {
    std::fflush(nullptr);
    std::_Exit(code);
  }
  loadedMpi->abort(loadedMpi->world, code);
}

namespace {
void glooAllReduce(void *data, int64_t count, int reduction) {
  char error[1024] = {};
  checkGloo(loadedGloo->allReduce(loadedGloo->group, data, count, reduction,
                                  error, sizeof error),
            error);
}
} // namespace

void Collectives::allReduceSum(float *data, int64_t count) {
  ++numCalls;
  movedFloats += count;
  if (worldSize == 1)
    return;
  if (hostCollectives())
    return hostCollectives()->allReduceSum(data, count);
  if (loadedGloo)
    return glooAllReduce(data, count, ACCRUE_GLOO_SUM_F32);
  forEachChunk(data, count, [](float *chunk, int size) {
    check(loadedMpi->allreduce(MPI_IN_PLACE, chunk, size, loadedMpi->f32,
                               loadedMpi->sum, loadedMpi->world),
          "MPI_Allreduce");
  });
}

std::vector<int64_t> Collectives::shardSizes(int64_t n, int64_t used,
                                             int64_t from) const {
  std::vector<int64_t> sizes;
  for (int r = 0; r < worldSize; ++r) {
    int64_t begin, size;
    accrueShard(n, r, worldSize, &begin, &size);
    sizes.push_back(std::max<int64_t>(
        std::min(begin + size, used) - std::max(begin, from), 0));
  }
  return sizes;
}

bool Collectives::shards() const {
  const std::optional<Host> &host = hostCollectives();
  return !host || (host->reduceScatterSum && host->allGather);
}

void Collectives::reduceScatterSum(float *data, int64_t n, int64_t used) {
  countScatter(used);
  if (worldSize == 1)
    return;
  // The shards up to `used` (the rest of the arena holds no data).
  reduceSegments(data, shardSizes(n, used));
}

void Collectives::reduceScatterAdd(float *data, int64_t count, int64_t offset,
                                   int64_t n, float *shard) {
  countScatter(count);
  // The slice's overlap with each rank's shard: consecutive in `data`, as
  // the shards are in the arena.
  std::vector<int64_t> sizes = shardSizes(n, offset + count, offset);
  int64_t mine =
      std::accumulate(sizes.begin(), sizes.begin() + rankId, int64_t(0));
  if (worldSize > 1)
    reduceSegments(data, sizes);
  int64_t begin = 0, size = 0;
  accrueShard(n, rankId, worldSize, &begin, &size);
  float *to = shard + (std::max(begin, offset) - begin);
  const float *from = data + mine;
  for (int64_t i = 0; i < sizes[rankId]; ++i)
    to[i] += from[i];
}

void Collectives::reduceSegments(float *data,
                                 const std::vector<int64_t> &sizes) {
  if (hostCollectives())
    return hostCollectives()->reduceScatterSum(data, sizes);
  if (loadedGloo) {
    char error[1024] = {};
    checkGloo(loadedGloo->reduceScatter(loadedGloo->group, data, sizes.data(),
                                        error, sizeof error),
              error);
    return;
  }
  // As on Gloo: one reduce per shard, to its owner (Open MPI's in-place
  // MPI_Reduce_scatter takes a scratch copy of the whole buffer, half the
  // state a 2-rank shard saves).
  int64_t begin = 0;
  for (int r = 0; r < worldSize; begin += sizes[r++])
    forEachChunk(data + begin, sizes[r], [&](float *chunk, int size) {
      check(loadedMpi->reduce(r == rankId ? MPI_IN_PLACE : chunk, chunk, size,
                              loadedMpi->f32, loadedMpi->sum, r,
                              loadedMpi->world),
            "MPI_Reduce");
    });
}

void Collectives::allGather(float *data, int64_t n) {
  countGather(n);
  if (worldSize == 1)
    return;
  std::vector<int64_t> sizes = shardSizes(n, n);
  if (hostCollectives())
    return hostCollectives()->allGather(data, sizes);
  if (loadedGloo) {
    char error[1024] = {};
    checkGloo(loadedGloo->allGather(loadedGloo->group, data, sizes.data(),
                                    error, sizeof error),
              error);
    return;
  }
  if (n > INT32_MAX)
    throw Error("MPI_Allgatherv: an arena of more than 2^31 floats");
  std::vector<int> counts(sizes.begin(), sizes.end()), displacements;
  for (int r = 0, at = 0; r < worldSize; at += counts[r++])
    displacements.push_back(at);
  check(loadedMpi->allgatherv(MPI_IN_PLACE, 0, loadedMpi->f32, data,
                              counts.data(), displacements.data(),
                              loadedMpi->f32, loadedMpi->world),
        "MPI_Allgatherv");
}

void Collectives::broadcast(float *data, int64_t count) {
  if (worldSize == 1)
    return;
  if (loadedGloo || hostCollectives())
    return broadcastBytes(data, count * int64_t(sizeof(float)));
  forEachChunk(data, count, [](float *chunk, int size) {
    check(loadedMpi->bcast(chunk, size, loadedMpi->f32, 0, loadedMpi->world),
          "MPI_Bcast");
  });
}

void Collectives::broadcastBytes(void *data, int64_t bytes) {
  if (worldSize == 1)
    return;
  if (hostCollectives())
    return hostCollectives()->broadcastBytes(data, bytes);
  if (loadedGloo) {
    char error[1024] = {};
    checkGloo(loadedGloo->broadcast(loadedGloo->group, data, bytes, error,
                                    sizeof error),
              error);
    return;
  }
  check(loadedMpi->bcast(data, static_cast<int>(bytes), loadedMpi->byte, 0,
                         loadedMpi->world),
        "MPI_Bcast");
}

void Collectives::setDeviceReducer(
    std::function<void(float *, int64_t)> reducer) {
  deviceReducer() = std::move(reducer);
}

void Collectives::setDeviceShardCollectives(
    std::function<void(float *, const std::vector<int64_t> &)> scatter,
    std::function<void(float *, const std::vector<int64_t> &)> gather) {
  deviceScatter() = std::move(scatter);
  deviceGather() = std::move(gather);
}

/// The maximum over the ranks of each of the `count` int64s at `data`, in
/// place, by whichever engine serves the ranks.
void Collectives::maxOverRanks(int64_t *data, int64_t count) {
  if (hostCollectives())
    return hostCollectives()->allReduceExtremum(data, count, true);
  if (loadedGloo)
    return glooAllReduce(data, count, ACCRUE_GLOO_MAX_I64);
  std::vector<long long> mine(data, data + count), max(count);
  check(loadedMpi->allreduce(mine.data(), max.data(), static_cast<int>(count),
                             loadedMpi->i64, loadedMpi->max, loadedMpi->world),
        "MPI_Allreduce");
  std::copy(max.begin(), max.end(), data);
}

bool Collectives::agree(int64_t value) {
  if (worldSize == 1)
    return true;
  // One collective: the maximum of the values and of their complements
  // (~v reverses the order without overflowing), whose complement is the
  // minimum.
  int64_t bounds[2] = {value, ~value};
  maxOverRanks(bounds, 2);
  return bounds[0] == ~bounds[1];
}

bool Collectives::anyRank(bool mine) {
  if (worldSize == 1)
    return mine;
  int64_t any = mine;
  maxOverRanks(&any, 1);
  return any != 0;
}

/// Called by compiled data-parallel steps: sums one buffer (the gradient
/// accumulator with the loss sum and count in its tail) over all ranks, in
/// place.
extern "C" void _mlir_ciface_accrue_all_reduce(AccrueBuffer *buffer) {
  // Called from compiled code: no exception may cross it.
  try {
    if (buffer->stride != 1)
      throw Error("the buffer is not contiguous");
    float *data = buffer->aligned + buffer->offset;
    if (deviceReducer()) {
      Collectives::get().countCall(buffer->size);
      if (Collectives::get().size() > 1)
        deviceReducer()(data, buffer->size);
      return;
    }
    Collectives::get().allReduceSum(data, buffer->size);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "accrue_all_reduce: %s\n", e.what());
    Collectives::abortIfParallel(1);
    std::abort();
  }
}
static_assert(std::is_same_v<decltype(&_mlir_ciface_accrue_all_reduce),
                             AccrueAllReduceFn> &&
                  std::string_view(ACCRUE_ALL_REDUCE_SYMBOL) ==
                      "_mlir_ciface_accrue_all_reduce",
              "the collective hook of StepABI.h");

namespace {
/// Runs a hook's body; no exception may cross into compiled code.
template <typename Fn> void hook(const char *name, Fn fn) {
  try {
    fn();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    Collectives::abortIfParallel(1);
    std::abort();
  }
}
} // namespace

/// Called by compiled sharded steps (ZeRO, StepABI.h): this rank's shard of
/// an n-element arena.
extern "C" int64_t accrue_shard_begin(int64_t n) {
  int64_t begin = 0, size = n;
  Collectives &c = Collectives::get();
  accrueShard(n, c.rank(), c.size(), &begin, &size);
  return begin;
}

extern "C" int64_t accrue_shard_size(int64_t n) {
  int64_t begin = 0, size = n;
  Collectives &c = Collectives::get();
  accrueShard(n, c.rank(), c.size(), &begin, &size);
  return size;
}

/// Called by compiled sharded steps instead of the all-reduce: this rank's
/// shard of the accumulator summed over the ranks; the loss sum and count
/// (the last two of the `used` elements) summed apart, on every rank.
extern "C" void _mlir_ciface_accrue_reduce_scatter(AccrueBuffer *arena,
                                                   int64_t used) {
  hook("accrue_reduce_scatter", [&] {
    if (arena->stride != 1 || used < 2 || used > arena->size)
      throw Error("the accumulator is not a contiguous arena with its "
                  "scalars inside");
    float *data = arena->aligned + arena->offset;
    Collectives &c = Collectives::get();
    if (deviceScatter()) {
      // Device memory: the gradients up to the scalars reduce-scattered,
      // the two scalars all-reduced, by the device's collectives.
      c.countScatter(used);
      if (c.size() > 1) {
        deviceScatter()(data, c.shardSizes(arena->size, used - 2));
        deviceReducer()(data + used - 2, 2);
      }
      return;
    }
    float scalars[2] = {data[used - 2], data[used - 1]};
    data[used - 2] = data[used - 1] = 0.0f;
    c.reduceScatterSum(data, arena->size, used);
    c.allReduceSum(scalars, 2);
    data[used - 2] = scalars[0];
    data[used - 1] = scalars[1];
  });
}

/// Called by compiled stage-2 steps per micro-batch and gradient: the
/// gradient's sum over the ranks added to the accumulator shard it
/// overlaps.
extern "C" void _mlir_ciface_accrue_reduce_scatter_add(AccrueBuffer *gradient,
                                                       AccrueBuffer *shard,
                                                       int64_t offset,
                                                       int64_t n) {
  hook("accrue_reduce_scatter_add", [&] {
    if (gradient->stride != 1 || shard->stride != 1 || offset < 0 ||
        offset + gradient->size > n)
      throw Error("the gradient is not a contiguous slice of the arena");
    Collectives::get().reduceScatterAdd(gradient->aligned + gradient->offset,
                                        gradient->size, offset, n,
                                        shard->aligned + shard->offset);
  });
}

/// Called by compiled sharded steps after the update: every rank's shard
/// of the parameters from the rank that updated it.
extern "C" void _mlir_ciface_accrue_all_gather(AccrueBuffer *arena) {
  hook("accrue_all_gather", [&] {
    if (arena->stride != 1)
      throw Error("the parameters are not a contiguous arena");
    Collectives &c = Collectives::get();
    if (deviceGather()) {
      c.countGather(arena->size);
      if (c.size() > 1)
        deviceGather()(arena->aligned + arena->offset,
                       c.shardSizes(arena->size, arena->size));
      return;
    }
    c.allGather(arena->aligned + arena->offset, arena->size);
  });
}
static_assert(
    std::is_same_v<decltype(&accrue_shard_begin), AccrueShardFn> &&
        std::is_same_v<decltype(&accrue_shard_size), AccrueShardFn> &&
        std::is_same_v<decltype(&_mlir_ciface_accrue_reduce_scatter),
                       AccrueReduceScatterFn> &&
        std::is_same_v<decltype(&_mlir_ciface_accrue_all_gather),
                       AccrueAllGatherFn> &&
        std::is_same_v<decltype(&_mlir_ciface_accrue_reduce_scatter_add),
                       AccrueReduceScatterAddFn> &&
        std::string_view(ACCRUE_REDUCE_SCATTER_ADD_SYMBOL) ==
            "_mlir_ciface_accrue_reduce_scatter_add" &&
        std::string_view(ACCRUE_REDUCE_SCATTER_SYMBOL) ==
            "_mlir_ciface_accrue_reduce_scatter" &&
        std::string_view(ACCRUE_ALL_GATHER_SYMBOL) ==
            "_mlir_ciface_accrue_all_gather",
    "the ZeRO hooks of StepABI.h");
