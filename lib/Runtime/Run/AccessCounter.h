//===- AccessCounter.h - the counting emulator's runtime side ---*- C++ -*-===//
//
// Steps compiled with --count-accesses (target cuda-emulated) report every
// global access of their kernels through the ACCRUE_EMU_* entries
// (StepABI.h). The counter groups them as a GPU would: warps of 32
// consecutive threads of a block, one request per access per execution,
// and counts the 32-byte sectors each request touches (as Nsight Compute
// counts them), the bytes it uses of them, the unique sectors of a launch
// (what DRAM would move at best) and the longest chain of accesses of one
// thread. It also checks what the emulation assumes: no two threads of one
// launch write one byte, or one reads a byte another writes (the GPU runs
// them in no order), unless both are threads of one block and a barrier
// of that block lies between the two accesses, and every access lies
// inside the view it indexes.
// Sectors are counted from the start of each buffer, so the profile does
// not depend on where the host allocated it, nor on the thread count (the
// emulated kernels run on one thread).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_RUN_ACCESSCOUNTER_H
#define ACCRUE_RUNTIME_RUN_ACCESSCOUNTER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace accrue::rt {

class AccessCounter {
public:
  /// `kernelReport`: the artifact's kernel report (JSON), whose accesses
  /// name the buffers of the sites.
  explicit AccessCounter(const std::optional<std::string> &kernelReport);
  ~AccessCounter();

  void launch(int64_t kernel, const char *names, const int64_t grid[3],
              const int64_t block[3]);
  void thread(const int64_t ids[6]);
  void access(int64_t site, int64_t root, int64_t offset, int64_t address,
              int64_t bytes, int64_t flags);
  /// Every thread of the current block has reached a barrier.
  void barrier();
  void launchEnd();

  /// The first race or out-of-bounds access since the last call, if any.
  std::optional<std::string> takeError();
  /// One more step call counted (the profile's "steps").
  void countStep() { ++steps; }
  /// The profile of every launch so far (JSON).
  std::string profileJson() const;

  /// The counter the emulated kernels of this thread report to (set while
  /// an Artifact calls its step; null outside).
  static AccessCounter *&current();

private:
  struct Site {
    std::string buffer, parameter;
    bool store = false;
    int64_t executions = 0, requests = 0, sectors = 0, bytesUsed = 0,
            bytesMoved = 0, broadcasts = 0;
  };
  struct Kernel {
    std::string name, node;
    int64_t launches = 0, threads = 0, accesses = 0, longestChain = 0,
            uniqueSectors = 0;
    std::vector<Site> sites;
  };
  struct Lane {
    int64_t root, offset, bytes;
  };
  /// Who touched a byte in this launch, and in which epoch (the barriers
  /// the launch had passed): the last writer, the readers of the last
  /// epoch anything read it in (a thread id, -1 none, -2 several) and the
  /// block of every reader so far (-1 none, -2 several blocks). Blocks run
  /// one after another, so only a thread of the same block can have
  /// touched a byte in an earlier epoch than the current one and still be
  /// ordered with it.
  struct Shadow {
    int32_t writer, reader, readerBlock;
    int32_t writeEpoch, readEpoch;
  };

  Site &site(int64_t index);
  void flushWarp();
  /// `shared`: an access to the block's workgroup memory, which no other
  /// block's threads see.
  void checkRace(int64_t site, int64_t root, int64_t offset, int64_t address,
                 int64_t bytes, int64_t elementBytes, bool store,
                 bool shared = false);
  Shadow &shadow(uint64_t address);
  std::string where(int64_t site, int64_t root, int64_t offset) const;
  std::string threadName(int64_t id) const;
  void fail(std::string message);

  std::vector<Kernel> kernels;
  /// The report's buffer and parameter names by kernel and site.
  std::vector<std::vector<std::pair<std::string, std::string>>> names;
  int64_t steps = 0;

  // The current launch.
  Kernel *kernel = nullptr;
  int64_t blockThreads = 1, blockDims[3] = {1, 1, 1}, gridDims[3] = {1, 1, 1};
  int64_t threadId = -1, warp = -1, chain = 0, launchChain = 0;
  /// The barriers passed in this launch, by any block.
  int32_t epoch = 0;
  /// Each thread's chain so far in the launch: a kernel run in phases (at
  /// its shuffles) enters each thread once per phase, and its chain goes
  /// on where the last phase left it.
  std::vector<int64_t> threadChains;
  std::vector<int32_t> occurrences;
  std::unordered_map<uint64_t, std::vector<Lane>> requests;
  std::unordered_set<uint64_t> uniqueSectors;
  std::unordered_map<uint64_t, std::unique_ptr<Shadow[]>> pages;
  uint64_t lastPage = ~uint64_t(0);
  Shadow *lastShadow = nullptr;

  std::optional<std::string> error;
};

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_RUN_ACCESSCOUNTER_H
