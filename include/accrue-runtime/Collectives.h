//===- Collectives.h - data-parallel training over MPI or Gloo --*- C++ -*-===//

#ifndef ACCRUE_RUNTIME_COLLECTIVES_H
#define ACCRUE_RUNTIME_COLLECTIVES_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace accrue::rt {

/// The process group of data-parallel training: MPI_COMM_WORLD under
/// mpirun (one rank when launched alone), Gloo's ranks under torchrun or
/// srun (Collectives.cpp says how the launcher is found). Compiled steps of
/// data-parallel artifacts sum their gradients, loss sum and count over it once
/// per optimizer step (through ACCRUE_ALL_REDUCE_SYMBOL, which the runtime
/// defines).
class Collectives {
public:
  /// Joins the ranks once per process (idempotent).
  static Collectives &get();
  /// The launcher to assume (auto, mpi, torchrun, slurm), before get();
  /// ACCRUE_LAUNCHER otherwise, detected from the environment by default.
  static void setLauncher(const std::string &launcher);
  /// Collectives a host provides (accrueSetCollectives: a torch.distributed
  /// process group), used instead of MPI or Gloo; before get().
  struct Host {
    int rank = 0, size = 1;
    std::function<void(float *, int64_t)> allReduceSum;
    std::function<void(int64_t *, int64_t, bool max)> allReduceExtremum;
    std::function<void(void *, int64_t)> broadcastBytes;
    /// ZeRO, over consecutive shards of the given sizes (may be empty).
    std::function<void(float *, const std::vector<int64_t> &)> reduceScatterSum,
        allGather;
  };
  static void setHost(Host host);
  int rank() const { return rankId; }
  /// Whether the collectives can serve a sharded optimizer state (a
  /// host's may not).
  bool shards() const;
  int size() const { return worldSize; }
  /// Sums `count` floats in place over all ranks.
  void allReduceSum(float *data, int64_t count);
  /// ZeRO (StepABI.h's accrueShard of an n-element arena): sums this
  /// rank's shard over the ranks, the data ending at element `used`
  /// (`data` outside the shard is scratch afterwards).
  void reduceScatterSum(float *data, int64_t n, int64_t used);
  /// ZeRO stage 2: `data` is elements [offset, offset + count) of an
  /// n-element arena; their sum over the ranks is added to the part of
  /// this rank's shard (`shard`, its first element the shard's first) that
  /// they overlap. `data` is scratch afterwards.
  void reduceScatterAdd(float *data, int64_t count, int64_t offset, int64_t n,
                        float *shard);
  /// Every rank's shard of the n-element arena `data` from its owner.
  void allGather(float *data, int64_t n);
  /// Collectives performed so far (for the metrics): all-reduces,
  /// reduce-scatters, all-gathers, and the floats they were given.
  int64_t calls() const { return numCalls; }
  int64_t scatters() const { return numScatters; }
  int64_t gathers() const { return numGathers; }
  int64_t floats() const { return movedFloats; }
  /// Counts an all-reduce of `count` floats made elsewhere (a device
  /// backend's).
  void countCall(int64_t count) {
    ++numCalls;
    movedFloats += count;
  }
  /// Every rank's copy of `data` becomes rank 0's.
  void broadcast(float *data, int64_t count);
  /// Every rank's `bytes` at `data` become rank 0's.
  void broadcastBytes(void *data, int64_t bytes);
  /// Sums device buffers instead of host ones: the step's collective hook
  /// hands its buffer to `reducer` (a CUDA backend installs NCCL).
  static void setDeviceReducer(std::function<void(float *, int64_t)> reducer);
  /// ZeRO on device buffers: `scatter` sums consecutive segments of the
  /// given sizes (one per rank, in rank order) over the ranks, each to its
  /// rank, in place; `gather` gives every rank each segment from its rank.
  static void setDeviceShardCollectives(
      std::function<void(float *, const std::vector<int64_t> &)> scatter,
      std::function<void(float *, const std::vector<int64_t> &)> gather);
  /// The shards' sizes of an n-element arena (StepABI.h's accrueShard),
  /// each cut to elements [from, used).
  std::vector<int64_t> shardSizes(int64_t n, int64_t used,
                                  int64_t from = 0) const;
  /// Counts a reduce-scatter or all-gather of `count` floats made by a
  /// device backend.
  void countScatter(int64_t count) {
    ++numScatters;
    movedFloats += count;
  }
  void countGather(int64_t count) {
    ++numGathers;
    movedFloats += count;
  }
  /// Whether all ranks pass the same value (a cheap consistency check).
  bool agree(int64_t value);
  /// Whether `mine` holds on any rank (every rank gets the same answer).
  bool anyRank(bool mine);
  /// Ends every rank after an error on one (the others may be waiting in
  /// a collective); a no-op unless several ranks run.
  static void abortIfParallel(int code);
  /// This process's rank when several ranks run, else -1 (joins no
  /// ranks).
  static int rankIfParallel();

private:
  Collectives();
  ~Collectives();
  int rankId = 0, worldSize = 1;
  /// The maximum over the ranks of each of `count` int64s, in place.
  void maxOverRanks(int64_t *data, int64_t count);
  /// Sums consecutive segments of `data` of the given sizes (one per
  /// rank, in rank order) over the ranks, each to its rank, in place.
  void reduceSegments(float *data, const std::vector<int64_t> &sizes);
  int64_t numCalls = 0, numScatters = 0, numGathers = 0, movedFloats = 0;
};

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_COLLECTIVES_H
