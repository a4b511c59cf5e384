//===- Collectives.cpp - data-parallel all-reduce over MPI ------*- C++ -*-===//
//
// The runtime side of train.all_reduce. A data-parallel step calls
// ACCRUE_ALL_REDUCE_SYMBOL (StepABI.h) once per optimizer step, after its
// micro-batch loop, with one buffer: the gradient accumulator, whose tail
// holds the loss sum and count; the runtime sums it in place with one
// MPI_Allreduce. The CUDA backend will implement the same entry with NCCL.
//
// Open MPI is loaded with dlopen when a data-parallel run starts, so the
// runtime (and every single-process run) does not depend on it. mpi.h gives
// the types and signatures only; its predefined handles (MPI_COMM_WORLD,
// MPI_FLOAT, MPI_SUM, ...) are the addresses of library globals, looked up
// by name.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Collectives.h"

#include "accrue-runtime/Error.h"
#include "accrue-runtime/StepABI.h"

#include <mpi.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
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
  decltype(&MPI_Bcast) bcast;
  decltype(&MPI_Abort) abort;
  MPI_Comm world;
  MPI_Datatype f32, i64, byte;
  MPI_Op sum, min, max;
};

/// Set once MPI is loaded and initialized; until then no run is parallel.
Mpi *loadedMpi = nullptr;

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
  void *library = nullptr;
  std::string errors;
  for (const std::string &name : names) {
    library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (library)
      break;
    errors += (errors.empty() ? " " : "; ") + std::string(::dlerror());
  }
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
  bind(mpi.bcast, "MPI_Bcast");
  bind(mpi.abort, "MPI_Abort");
  mpi.world = static_cast<MPI_Comm>(symbol("ompi_mpi_comm_world"));
  mpi.f32 = static_cast<MPI_Datatype>(symbol("ompi_mpi_float"));
  mpi.i64 = static_cast<MPI_Datatype>(symbol("ompi_mpi_long_long_int"));
  mpi.byte = static_cast<MPI_Datatype>(symbol("ompi_mpi_byte"));
  mpi.sum = static_cast<MPI_Op>(symbol("ompi_mpi_op_sum"));
  mpi.min = static_cast<MPI_Op>(symbol("ompi_mpi_op_min"));
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

} // namespace

Collectives &Collectives::get() {
  static Collectives instance;
  return instance;
}

Collectives::Collectives() {
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
  if (Mpi *mpi = activeMpi())
    mpi->finalize();
}

int Collectives::rankIfParallel() {
  Mpi *mpi = activeMpi();
  if (!mpi)
    return -1;
  int size = 1, rank = 0;
  mpi->commSize(mpi->world, &size);
  mpi->commRank(mpi->world, &rank);
  return size > 1 ? rank : -1;
}

void Collectives::abortIfParallel(int code) {
  if (rankIfParallel() >= 0)
    loadedMpi->abort(loadedMpi->world, code);
}

void Collectives::allReduceSum(float *data, int64_t count) {
  ++numCalls;
  if (worldSize == 1)
    return;
  forEachChunk(data, count, [](float *chunk, int size) {
    check(loadedMpi->allreduce(MPI_IN_PLACE, chunk, size, loadedMpi->f32,
                               loadedMpi->sum, loadedMpi->world),
          "MPI_Allreduce");
  });
}

void Collectives::broadcast(float *data, int64_t count) {
  if (worldSize == 1)
    return;
  forEachChunk(data, count, [](float *chunk, int size) {
    check(loadedMpi->bcast(chunk, size, loadedMpi->f32, 0, loadedMpi->world),
          "MPI_Bcast");
  });
}

void Collectives::broadcastBytes(void *data, int64_t bytes) {
  if (worldSize == 1)
    return;
  check(loadedMpi->bcast(data, static_cast<int>(bytes), loadedMpi->byte, 0,
                         loadedMpi->world),
        "MPI_Bcast");
}

void Collectives::setDeviceReducer(
    std::function<void(float *, int64_t)> reducer) {
  deviceReducer() = std::move(reducer);
}

bool Collectives::agree(int64_t value) {
  if (worldSize == 1)
    return true;
  long long mine = value, low = 0, high = 0;
  check(loadedMpi->allreduce(&mine, &low, 1, loadedMpi->i64, loadedMpi->min,
                             loadedMpi->world),
        "MPI_Allreduce");
  check(loadedMpi->allreduce(&mine, &high, 1, loadedMpi->i64, loadedMpi->max,
                             loadedMpi->world),
        "MPI_Allreduce");
  return low == high;
}

bool Collectives::anyRank(bool mine) {
  if (worldSize == 1)
    return mine;
  long long value = mine, any = 0;
  check(loadedMpi->allreduce(&value, &any, 1, loadedMpi->i64, loadedMpi->max,
                             loadedMpi->world),
        "MPI_Allreduce");
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
      Collectives::get().countCall();
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
