//===- Collectives.cpp - data-parallel all-reduce over MPI ------*- C++ -*-===//
//
// The runtime side of train.all_reduce. A data-parallel step calls
// _mlir_ciface_accrue_all_reduce once per optimizer step, after its
// micro-batch loop, with one buffer: the gradient accumulator, whose tail
// holds the loss sum and count; the runtime sums it in place with one
// MPI_Allreduce. The CUDA backend will implement the same entry with NCCL.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

using namespace accrue::rt;

namespace {

/// A rank-1 memref descriptor (what MLIR's C interface passes).
struct MemRef1D {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
};

void check(int status, const char *what) {
  if (status != MPI_SUCCESS)
    throw Error(std::string("MPI: ") + what + " failed");
}

} // namespace

Collectives &Collectives::get() {
  static Collectives instance;
  return instance;
}

Collectives::Collectives() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    check(MPI_Init(nullptr, nullptr), "MPI_Init");
  MPI_Comm_rank(MPI_COMM_WORLD, &rankId);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
}

Collectives::~Collectives() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

int Collectives::rankIfParallel() {
  int initialized = 0, finalized = 0, size = 1, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return -1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return size > 1 ? rank : -1;
}

void Collectives::abortIfParallel(int code) {
  if (rankIfParallel() >= 0)
    MPI_Abort(MPI_COMM_WORLD, code);
}

void Collectives::allReduceSum(float *data, int64_t count) {
  ++numCalls;
  if (worldSize == 1)
    return;
  for (int64_t done = 0; done < count;) {
    int chunk = static_cast<int>(std::min<int64_t>(count - done, 1 << 30));
    check(MPI_Allreduce(MPI_IN_PLACE, data + done, chunk, MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD),
          "MPI_Allreduce");
    done += chunk;
  }
}

void Collectives::broadcast(float *data, int64_t count) {
  if (worldSize == 1)
    return;
  for (int64_t done = 0; done < count;) {
    int chunk = static_cast<int>(std::min<int64_t>(count - done, 1 << 30));
    check(MPI_Bcast(data + done, chunk, MPI_FLOAT, 0, MPI_COMM_WORLD),
          "MPI_Bcast");
    done += chunk;
  }
}

bool Collectives::agree(int64_t value) {
  if (worldSize == 1)
    return true;
  long long mine = value, low = 0, high = 0;
  check(MPI_Allreduce(&mine, &low, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD),
        "MPI_Allreduce");
  check(MPI_Allreduce(&mine, &high, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD),
        "MPI_Allreduce");
  return low == high;
}

/// Called by compiled data-parallel steps: sums one buffer (the gradient
/// accumulator with the loss sum and count in its tail) over all ranks, in
/// place.
extern "C" void _mlir_ciface_accrue_all_reduce(MemRef1D *buffer) {
  // Called from compiled code: no exception may cross it.
  if (buffer->stride != 1) {
    std::fprintf(stderr, "accrue_all_reduce: the buffer is not contiguous\n");
    Collectives::abortIfParallel(1);
    std::abort();
  }
  Collectives::get().allReduceSum(buffer->aligned + buffer->offset,
                                  buffer->size);
}
