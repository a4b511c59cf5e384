//===- AccessCounter.cpp - the counting emulator's runtime side -*- C++ -*-===//

#include "Run/AccessCounter.h"

#include "accrue-runtime/StepABI.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace accrue::rt;
using json = nlohmann::ordered_json;

namespace {
constexpr int64_t kWarp = 32, kSector = 32;
constexpr int kPageBits = 12;
constexpr uint64_t kPageBytes = uint64_t(1) << kPageBits;
/// Sector keys: the buffer in the high bits.
constexpr int kSectorBits = 40;
} // namespace

AccessCounter::AccessCounter(const std::optional<std::string> &kernelReport) {
  if (!kernelReport)
    return;
  json report = json::parse(*kernelReport, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("kernels"))
    return;
  for (const json &k : report.at("kernels")) {
    auto &sites = names.emplace_back();
    if (k.contains("accesses"))
      for (const json &a : k.at("accesses"))
        sites.emplace_back(a.value("buffer", ""), a.value("parameter", ""));
  }
}

AccessCounter::~AccessCounter() = default;

AccessCounter *&AccessCounter::current() {
  static thread_local AccessCounter *counter = nullptr;
  return counter;
}

void AccessCounter::launch(int64_t index, const char *text,
                           const int64_t grid[3], const int64_t block[3]) {
  if (index < 0)
    index = 0;
  if (size_t(index) >= kernels.size())
    kernels.resize(index + 1);
  kernel = &kernels[index];
  if (kernel->name.empty() && text) {
    kernel->name = text;
    kernel->node = text + std::strlen(text) + 1;
  }
  ++kernel->launches;
  blockThreads = 1;
  for (int d = 0; d < 3; ++d) {
    gridDims[d] = grid[d];
    blockDims[d] = block[d];
    blockThreads *= block[d];
  }
  int64_t threads = blockThreads * grid[0] * grid[1] * grid[2];
  kernel->threads += threads;
  threadId = -1, warp = -1, chain = 0, launchChain = 0, epoch = 0;
  threadChains.assign(threads, 0);
}

AccessCounter::Site &AccessCounter::site(int64_t index) {
  std::vector<Site> &sites = kernel->sites;
  if (size_t(index) >= sites.size()) {
    size_t first = sites.size();
    sites.resize(index + 1);
    size_t k = kernel - kernels.data();
    for (size_t s = first; s < sites.size(); ++s)
      if (k < names.size() && s < names[k].size())
        std::tie(sites[s].buffer, sites[s].parameter) = names[k][s];
  }
  return sites[index];
}

void AccessCounter::thread(const int64_t ids[6]) {
  if (!kernel)
    return;
  int64_t blockId = ids[0] + gridDims[0] * (ids[1] + gridDims[1] * ids[2]);
  int64_t local = ids[3] + blockDims[0] * (ids[4] + blockDims[1] * ids[5]);
  int64_t w = blockId * ((blockThreads + kWarp - 1) / kWarp) + local / kWarp;
  if (w != warp) {
    flushWarp();
    warp = w;
  }
  launchChain = std::max(launchChain, chain);
  if (threadId >= 0)
    threadChains[threadId] = chain;
  threadId = blockId * blockThreads + local;
  chain = threadChains[threadId];
  std::fill(occurrences.begin(), occurrences.end(), 0);
}

void AccessCounter::access(int64_t index, int64_t root, int64_t offset,
                           int64_t address, int64_t bytes, int64_t flags) {
  if (!kernel)
    return;
  if (flags & ACCRUE_EMU_SHARED) {
    // The block's own memory: no traffic, only its threads' order.
    bool store = flags & ACCRUE_EMU_STORE;
    if (!(flags & ACCRUE_EMU_IN_BOUNDS)) {
      fail(std::string("an out-of-bounds ") + (store ? "store" : "load") +
           " in " + where(-1, root, offset) + ": " + threadName(threadId) +
           (store ? " writes" : " reads") +
           " outside the view it indexes (the access is skipped)");
      return;
    }
    int64_t elementBytes = (flags >> ACCRUE_EMU_ELEMENT_SHIFT) & 0xff;
    checkRace(-1, root, offset, address, bytes,
              std::max<int64_t>(elementBytes, 1), store, /*shared=*/true);
    return;
  }
  Site &s = site(index);
  bool store = flags & ACCRUE_EMU_STORE;
  s.store = store;
  ++s.executions;
  ++kernel->accesses;
  ++chain;
  if (!(flags & ACCRUE_EMU_IN_BOUNDS)) {
    fail(std::string("an out-of-bounds ") + (store ? "store" : "load") +
         " in " + where(index, root, offset) + ": " + threadName(threadId) +
         (store ? " writes" : " reads") +
         " outside the view it indexes (the access is skipped)");
    return;
  }
  if (size_t(index) >= occurrences.size())
    occurrences.resize(index + 1, 0);
  uint64_t key = (uint64_t(index) << 32) | uint32_t(occurrences[index]++);
  requests[key].push_back({root, offset, bytes});
  int64_t elementBytes = (flags >> ACCRUE_EMU_ELEMENT_SHIFT) & 0xff;
  checkRace(index, root, offset, address, bytes,
            std::max<int64_t>(elementBytes, 1), store);
}

void AccessCounter::flushWarp() {
  std::vector<int64_t> sectors;
  for (auto &[key, lanes] : requests) {
    if (lanes.empty())
      continue;
    Site &s = site(int64_t(key >> 32));
    ++s.requests;
    bool broadcast = lanes.size() > 1;
    for (const Lane &lane : lanes)
      broadcast &= lane.root == lanes[0].root && lane.offset == lanes[0].offset;
    // Sectors of one request (a request reaches one buffer), and of the
    // launch.
    sectors.clear();
    for (const Lane &lane : lanes)
      for (int64_t sector = lane.offset / kSector;
           sector <= (lane.offset + lane.bytes - 1) / kSector; ++sector) {
        sectors.push_back(sector);
        uniqueSectors.insert((uint64_t(lane.root) << kSectorBits) ^
                             uint64_t(sector));
      }
    std::sort(sectors.begin(), sectors.end());
    int64_t touched =
        std::unique(sectors.begin(), sectors.end()) - sectors.begin();
    s.sectors += touched;
    if (broadcast) {
      ++s.broadcasts;
    } else {
      // The bytes the lanes use: the union of their ranges.
      std::sort(lanes.begin(), lanes.end(), [](const Lane &a, const Lane &b) {
        return a.offset < b.offset;
      });
      int64_t used = 0, end = INT64_MIN;
      for (const Lane &lane : lanes) {
        int64_t start = std::max(lane.offset, end);
        end = std::max(end, lane.offset + lane.bytes);
        used += std::max<int64_t>(end - start, 0);
      }
      s.bytesUsed += used;
      s.bytesMoved += touched * kSector;
    }
    lanes.clear();
  }
}

AccessCounter::Shadow &AccessCounter::shadow(uint64_t address) {
  uint64_t page = address >> kPageBits;
  if (page != lastPage) {
    std::unique_ptr<Shadow[]> &entries = pages[page];
    if (!entries) {
      entries.reset(new Shadow[kPageBytes]);
      std::memset(static_cast<void *>(entries.get()), 0xff,
                  kPageBytes * sizeof(Shadow));
    }
    lastPage = page;
    lastShadow = entries.get();
  }
  return lastShadow[address & (kPageBytes - 1)];
}

void AccessCounter::barrier() {
  if (kernel)
    ++epoch;
}

void AccessCounter::checkRace(int64_t index, int64_t root, int64_t offset,
                              int64_t address, int64_t bytes,
                              int64_t elementBytes, bool store, bool shared) {
  int32_t self = int32_t(threadId);
  int32_t block = int32_t(threadId / blockThreads);
  // Whether thread `other`'s access in epoch `when` is ordered before
  // this one: a thread of this block, a barrier ago.
  auto ordered = [&](int32_t other, int32_t when) {
    return other / blockThreads == block && when < epoch;
  };
  for (int64_t at = 0; at < bytes; at += elementBytes) {
    Shadow &entry = shadow(uint64_t(address + at));
    // Each block has workgroup memory of its own (the emulator reuses one
    // buffer for the blocks it runs in turn): what an earlier block did
    // there is no other thread's access.
    if (shared &&
        ((entry.writer >= 0 && entry.writer / blockThreads != block) ||
         (entry.readerBlock != -1 && entry.readerBlock != block)))
      entry = Shadow{-1, -1, -1, -1, -1};
    std::string other;
    if (entry.writer >= 0 && entry.writer != self &&
        !ordered(entry.writer, entry.writeEpoch))
      other = threadName(entry.writer) + " writes";
    else if (store && entry.readerBlock == -2)
      other = "threads of other blocks read";
    else if (store && entry.readerBlock >= 0 && entry.readerBlock != block)
      other = entry.reader >= 0
                  ? threadName(entry.reader) + " reads"
                  : "threads of block " + std::to_string(entry.readerBlock) +
                        " read";
    else if (store && entry.readEpoch == epoch && entry.reader == -2)
      other = "other threads read";
    else if (store && entry.readEpoch == epoch && entry.reader >= 0 &&
             entry.reader != self)
      other = threadName(entry.reader) + " reads";
    if (!other.empty()) {
      fail("a data race in " + where(index, root, offset + at) + ": " +
           threadName(self) + (store ? " writes" : " reads") +
           " the element that " + other +
           ", in one launch (its threads run in no order" +
           (epoch > 0 ? " between barriers)" : ")"));
      return;
    }
    if (store) {
      entry.writer = self;
      entry.writeEpoch = epoch;
      continue;
    }
    entry.readerBlock =
        entry.readerBlock == -1 || entry.readerBlock == block ? block : -2;
    if (entry.readEpoch != epoch || entry.reader == -1)
      entry.reader = self;
    else if (entry.reader != self)
      entry.reader = -2;
    entry.readEpoch = epoch;
  }
}

void AccessCounter::launchEnd() {
  if (!kernel)
    return;
  flushWarp();
  launchChain = std::max(launchChain, chain);
  kernel->longestChain = std::max(kernel->longestChain, launchChain);
  kernel->uniqueSectors += int64_t(uniqueSectors.size());
  uniqueSectors.clear();
  requests.clear();
  pages.clear();
  lastPage = ~uint64_t(0), lastShadow = nullptr;
  kernel = nullptr;
}

std::string AccessCounter::where(int64_t index, int64_t root,
                                 int64_t offset) const {
  std::string text = "kernel " + kernel->name + " (ONNX node '" + kernel->node +
                     "'), " +
                     (index < 0 ? std::string("an access")
                                : "access " + std::to_string(index));
  const std::vector<Site> &sites = kernel->sites;
  std::string buffer =
      index >= 0 && size_t(index) < sites.size() ? sites[index].buffer : "";
  if (buffer.empty())
    buffer =
        root >= ACCRUE_EMU_ROOT_SHARED
            ? "shared memory " + std::to_string(root - ACCRUE_EMU_ROOT_SHARED)
        : root < ACCRUE_EMU_ROOT_OTHER
            ? "step argument " + std::to_string(root)
            : "buffer " + std::to_string(root - ACCRUE_EMU_ROOT_OTHER);
  text += " to '" + buffer + "'";
  if (index >= 0 && size_t(index) < sites.size() &&
      !sites[index].parameter.empty())
    text += " (" + sites[index].parameter + ")";
  return text + " at byte " + std::to_string(offset);
}

std::string AccessCounter::threadName(int64_t id) const {
  return "thread " + std::to_string(id % blockThreads) + " of block " +
         std::to_string(id / blockThreads);
}

void AccessCounter::fail(std::string message) {
  if (!error)
    error = std::move(message);
}

std::optional<std::string> AccessCounter::takeError() {
  std::optional<std::string> taken = std::move(error);
  error.reset();
  return taken;
}

std::string AccessCounter::profileJson() const {
  auto efficiency = [](int64_t used, int64_t moved) -> json {
    return moved ? json(double(used) / double(moved)) : json(nullptr);
  };
  json kernelList = json::array();
  int64_t launches = 0, accesses = 0, requestCount = 0, sectorCount = 0,
          used = 0, moved = 0, unique = 0, longest = 0;
  for (const Kernel &k : kernels) {
    if (!k.launches)
      continue;
    json siteList = json::array();
    int64_t kRequests = 0, kSectors = 0, kUsed = 0, kMoved = 0;
    for (const Site &s : k.sites) {
      json entry = {
          {"buffer", s.buffer},
          {"op", s.store ? "store" : "load"},
          {"executions", s.executions},
          {"requests", s.requests},
          {"sectors", s.sectors},
          {"sectors_per_request",
           s.requests ? json(double(s.sectors) / double(s.requests))
                      : json(nullptr)},
          {"broadcast_requests", s.broadcasts},
          {"bytes_used", s.bytesUsed},
          {"bytes_moved", s.bytesMoved},
          {"sector_efficiency", efficiency(s.bytesUsed, s.bytesMoved)}};
      if (!s.parameter.empty())
        entry["parameter"] = s.parameter;
      siteList.push_back(std::move(entry));
      kRequests += s.requests, kSectors += s.sectors;
      kUsed += s.bytesUsed, kMoved += s.bytesMoved;
    }
    kernelList.push_back(
        {{"name", k.name},
         {"node", k.node},
         {"launches", k.launches},
         {"threads", k.threads},
         {"accesses", k.accesses},
         {"longest_chain", k.longestChain},
         {"requests", kRequests},
         {"sectors", kSectors},
         {"sectors_per_request",
          kRequests ? json(double(kSectors) / double(kRequests))
                    : json(nullptr)},
         {"bytes_used", kUsed},
         {"bytes_moved", kMoved},
         {"sector_efficiency", efficiency(kUsed, kMoved)},
         {"unique_bytes", k.uniqueSectors * kSector},
         {"accesses_by_site", std::move(siteList)}});
    launches += k.launches, accesses += k.accesses;
    requestCount += kRequests, sectorCount += kSectors;
    used += kUsed, moved += kMoved, unique += k.uniqueSectors * kSector;
    longest = std::max(longest, k.longestChain);
  }
  json profile = {{"format", "accrue-kernel-profile"},
                  {"version", 1},
                  {"steps", steps},
                  {"totals",
                   {{"launches", launches},
                    {"accesses", accesses},
                    {"requests", requestCount},
                    {"sectors", sectorCount},
                    {"bytes_used", used},
                    {"bytes_moved", moved},
                    {"sector_efficiency", efficiency(used, moved)},
                    {"unique_bytes", unique},
                    {"longest_chain", longest}}},
                  {"kernels", std::move(kernelList)}};
  return profile.dump(1) + "\n";
}

//===----------------------------------------------------------------------===//
// The entries the emulated kernels call
//===----------------------------------------------------------------------===//

namespace {

/// Kernels run outside an Artifact (a host that calls step.so itself, a
/// test through mlir-runner) report to a counter of their own, which stops
/// the process at the end of the first launch with a race or an
/// out-of-bounds access, as a sanitizer does.
AccessCounter &counter() {
  if (AccessCounter *current = AccessCounter::current())
    return *current;
  static AccessCounter standalone{std::nullopt};
  return standalone;
}

} // namespace

extern "C" {

void accrue_emu_launch(int64_t kernel, int64_t names, int64_t gx, int64_t gy,
                       int64_t gz, int64_t bx, int64_t by, int64_t bz) {
  const int64_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  counter().launch(kernel, reinterpret_cast<const char *>(names), grid, block);
}

void accrue_emu_launch_end() {
  AccessCounter &c = counter();
  c.launchEnd();
  if (AccessCounter::current())
    return;
  if (std::optional<std::string> error = c.takeError()) {
    std::fprintf(stderr, "accrue: %s\n", error->c_str());
    std::exit(1);
  }
}

void accrue_emu_thread(int64_t bx, int64_t by, int64_t bz, int64_t tx,
                       int64_t ty, int64_t tz) {
  const int64_t ids[6] = {bx, by, bz, tx, ty, tz};
  counter().thread(ids);
}

void accrue_emu_barrier() { counter().barrier(); }

void accrue_emu_access(int64_t site, int64_t root, int64_t offset,
                       int64_t address, int64_t bytes, int64_t flags) {
  counter().access(site, root, offset, address, bytes, flags);
}

} // extern "C"
