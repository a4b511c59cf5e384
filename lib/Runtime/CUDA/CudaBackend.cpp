//===- CudaBackend.cpp - run a CUDA step on one stream ----------*- C++ -*-===//
//
// The device side of a CUDA artifact: device memory for the step's buffers,
// one stream per process, the kernel modules of step.so (its PTX bundle,
// loaded lazily for the device's architecture), the mgpu* entry points the
// lowered host code calls, CUDA graphs captured per batch shape, and NCCL
// for the data-parallel all-reduce (the GEMMs, by cuBLASLt, are in
// CudaGemm.cpp). Everything is loaded with dlopen: the runtime links no CUDA
// library.
//
//===----------------------------------------------------------------------===//

#include "CUDA/CudaContext.h"

#include "accrue-runtime/Collectives.h"
#include "accrue-runtime/StepABI.h"
#include "accrue-runtime/Trainer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>

using namespace accrue::rt;
using namespace accrue::rt::cuda;

//===----------------------------------------------------------------------===//
// The process's device, context and stream
//===----------------------------------------------------------------------===//

namespace {

/// A kernel module of step.so: its PTX bundle, loaded on first use.
struct LazyModule {
  const uint8_t *bundle = nullptr;
  CUmodule module = nullptr;
  std::map<std::string, CUfunction> functions;
};

/// The device ordinal: ACCRUE_CUDA_DEVICE, else the launcher's local rank
/// (mpirun's, torchrun's LOCAL_RANK, srun's; one GPU per rank), else 0.
int chooseDevice(int count) {
  if (const char *chosen = std::getenv("ACCRUE_CUDA_DEVICE"))
    return std::atoi(chosen);
  for (const char *variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                               "LOCAL_RANK", "SLURM_LOCALID"})
    if (const char *rank = std::getenv(variable))
      return std::atoi(rank) % count;
  return 0;
}

/// Kernel modules step.so registered (its constructors run at dlopen).
std::vector<std::unique_ptr<LazyModule>> &modules() {
  static std::vector<std::unique_ptr<LazyModule>> list;
  return list;
}

uint32_t le32(const uint8_t *p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24);
}
uint64_t le64(const uint8_t *p) {
  return le32(p) | (uint64_t(le32(p + 4)) << 32);
}

/// Loads the newest PTX of `module`'s bundle that the device runs.
void load(LazyModule &module) {
  if (module.module)
    return;
  Context &c = Context::get();
  const uint8_t *bundle = module.bundle;
  if (std::memcmp(bundle, ACCRUE_PTX_BUNDLE_MAGIC,
                  ACCRUE_PTX_BUNDLE_MAGIC_SIZE) != 0)
    throw Error("step.so's kernels are not an Accrue PTX bundle (compiled by "
                "another compiler?)");
  uint32_t count = le32(bundle + ACCRUE_PTX_BUNDLE_MAGIC_SIZE);
  const uint8_t *entries = bundle + ACCRUE_PTX_BUNDLE_MAGIC_SIZE + 8;
  const uint8_t *best = nullptr;
  uint32_t bestSm = 0, oldest = ~0u;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *entry = entries + 24 * i;
    uint32_t sm = le32(entry);
    oldest = std::min(oldest, sm);
    if (sm <= static_cast<uint32_t>(c.sm) && sm >= bestSm) {
      bestSm = sm;
      best = bundle + le64(entry + 8);
    }
  }
  if (!best)
    throw Error("the artifact's kernels need sm_" + std::to_string(oldest) +
                " or newer, and this GPU is sm_" + std::to_string(c.sm) +
                "; recompile with " + settingRef("cuda_arch") + " sm_" +
                std::to_string(c.sm));
  check(driver().moduleLoadData(&module.module, best),
        "loading the step's kernels (cuModuleLoadData)");
}

} // namespace

Context *Context::started = nullptr;

Context &Context::get() {
  static Context context = [] {
    const Driver &d = driver();
    check(d.init(0), "cuInit");
    int count = 0;
    check(d.deviceGetCount(&count), "cuDeviceGetCount");
    if (count == 0)
      throw Error("the CUDA driver sees no GPU on this machine");
    Context c;
    int ordinal = chooseDevice(count);
    if (ordinal < 0 || ordinal >= count)
      throw Error("CUDA device " + std::to_string(ordinal) +
                  " does not exist (this machine has " + std::to_string(count) +
                  ")");
    check(d.deviceGet(&c.device, ordinal), "cuDeviceGet");
    int major = 0, minor = 0;
    check(d.deviceGetAttribute(
              &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c.device),
          "cuDeviceGetAttribute");
    check(d.deviceGetAttribute(
              &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c.device),
          "cuDeviceGetAttribute");
    c.sm = major * 10 + minor;
    check(d.primaryCtxRetain(&c.context, c.device), "cuDevicePrimaryCtxRetain");
    check(d.ctxSetCurrent(c.context), "cuCtxSetCurrent");
    check(d.streamCreate(&c.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return c;
  }();
  started = &context;
  return context;
}

//===----------------------------------------------------------------------===//
// The entry points of lowered host code (MLIR's gpu-to-llvm conventions)
//===----------------------------------------------------------------------===//

extern "C" {

/// Called from step.so's constructors with its PTX bundle: recorded, loaded
/// when a kernel is first needed (after the backend chose the device).
void *mgpuModuleLoadJIT(void *bundle, int /*optLevel*/) {
  auto module = std::make_unique<LazyModule>();
  module->bundle = static_cast<const uint8_t *>(bundle);
  modules().push_back(std::move(module));
  return modules().back().get();
}

void mgpuModuleUnload(void *handle) {
  auto *module = static_cast<LazyModule *>(handle);
  if (module->module && Context::started)
    driver().moduleUnload(module->module);
  module->module = nullptr;
  module->functions.clear();
}

void *mgpuModuleGetFunction(void *handle, const char *name) {
  try {
    auto *module = static_cast<LazyModule *>(handle);
    load(*module);
    CUfunction &function = module->functions[name];
    if (!function)
      check(driver().moduleGetFunction(&function, module->module, name),
            "cuModuleGetFunction");
    return function;
  } catch (const std::exception &e) {
    failInStep("loading a kernel", e);
  }
}

/// One stream per process: every launch goes on it, in order.
void *mgpuStreamCreate() {
  try {
    return Context::get().stream;
  } catch (const std::exception &e) {
    failInStep("creating a stream", e);
  }
}

/// The compiler checked that host code never reads device memory, so the
/// per-launch synchronization of the lowered code is not needed.
void mgpuStreamSynchronize(void *) {}
void mgpuStreamDestroy(void *) {}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void * /*stream*/,
                      void **params, void **extra, size_t /*paramsCount*/) {
  try {
    check(driver().launchKernel(static_cast<CUfunction>(function), gridX, gridY,
                                gridZ, blockX, blockY, blockZ, sharedBytes,
                                Context::get().stream, params, extra),
          "cuLaunchKernel");
  } catch (const std::exception &e) {
    failInStep("launching a kernel", e);
  }
}

} // extern "C"

//===----------------------------------------------------------------------===//
// NCCL: the data-parallel all-reduce of device buffers
//===----------------------------------------------------------------------===//

namespace {

struct NcclUniqueId {
  char internal[128];
};
using NcclComm = struct NcclComm_st *;
constexpr int kNcclFloat32 = 7, kNcclSum = 0;

struct Nccl {
  int (*getUniqueId)(NcclUniqueId *id);
  int (*commInitRank)(NcclComm *comm, int ranks, NcclUniqueId id, int rank);
  int (*allReduce)(const void *send, void *receive, size_t count, int type,
                   int op, NcclComm comm, CUstream stream);
  int (*reduce)(const void *send, void *receive, size_t count, int type, int op,
                int root, NcclComm comm, CUstream stream);
  int (*broadcast)(const void *send, void *receive, size_t count, int type,
                   int root, NcclComm comm, CUstream stream);
  int (*groupStart)();
  int (*groupEnd)();
  const char *(*getErrorString)(int result);
  NcclComm comm = nullptr;

  void check(int result, const char *what) const {
    if (result != 0)
      throw Error(std::string(what) + ": " + getErrorString(result));
  }
};

/// NCCL for this process's ranks, bootstrapped over MPI: rank 0's unique id
/// goes to every rank.
Nccl &nccl() {
  static Nccl loaded = [] {
    void *library =
        openLibrary("ACCRUE_NCCL_LIBRARY", {"libnccl.so.2", "libnccl.so"},
                    "NCCL (libnccl.so.2; pip install nvidia-nccl-cu12), which "
                    "data-parallel CUDA runs need,");
    Nccl n;
    auto bind = [&](auto &function, const char *name) {
      bindSymbol(library, function, name, "NCCL");
    };
    bind(n.getUniqueId, "ncclGetUniqueId");
    bind(n.commInitRank, "ncclCommInitRank");
    bind(n.allReduce, "ncclAllReduce");
    bind(n.reduce, "ncclReduce");
    bind(n.broadcast, "ncclBroadcast");
    bind(n.groupStart, "ncclGroupStart");
    bind(n.groupEnd, "ncclGroupEnd");
    bind(n.getErrorString, "ncclGetErrorString");
    Collectives &group = Collectives::get();
    NcclUniqueId id{};
    if (group.rank() == 0)
      n.check(n.getUniqueId(&id), "ncclGetUniqueId");
    group.broadcastBytes(&id, sizeof id);
    Context::get();
    n.check(n.commInitRank(&n.comm, group.size(), id, group.rank()),
            "ncclCommInitRank");
    return n;
  }();
  return loaded;
}

//===----------------------------------------------------------------------===//
// The backend
//===----------------------------------------------------------------------===//

/// An event, created on first use.
struct Event {
  CUevent event = nullptr;
  bool recorded = false;

  void record(CUstream stream) {
    if (!event)
      check(driver().eventCreate(&event, CU_EVENT_DISABLE_TIMING),
            "cuEventCreate");
    check(driver().eventRecord(event, stream), "cuEventRecord");
    recorded = true;
  }
  void wait() {
    if (recorded)
      check(driver().eventSynchronize(event), "cuEventSynchronize");
    recorded = false;
  }
  /// `stream` waits (on the device) for what preceded the record.
  void order(CUstream stream) const {
    if (recorded)
      check(driver().streamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
  }
  ~Event() {
    if (event)
      driver().eventDestroy(event);
  }
};

/// Pinned host memory handed out in order and reused once `free` says
/// the copies that read it are done.
struct Staging {
  void *memory = nullptr;
  size_t size = 0, used = 0;
  /// Recorded after the last copy from this memory.
  Event free;

  ~Staging() {
    if (memory)
      driver().memFreeHost(memory);
  }
};

/// Device memory, a compute stream and a copy stream, captured graphs.
///
/// Calls alternate between two slots. A batch for slot s is staged in
/// pinned memory of its own and copied on the copy stream once the last
/// call with slot s is done, while the previous call runs; the call waits
/// for that copy on the device. The metrics come back through pinned
/// memory and an event, so the host waits for one step's metrics while the
/// device runs the next: no synchronization of the device inside a step.
class CudaBackend final : public Backend {
public:
  CudaBackend() : context(Context::get()) {
    setGemmRunner(runGemmOnDevice);
    check(driver().streamCreate(&copyStream, CU_STREAM_NON_BLOCKING),
          "cuStreamCreate");
  }

  ~CudaBackend() override {
    setGemmRunner(nullptr);
    const Driver &d = driver();
    d.streamSynchronize(context.stream);
    d.streamSynchronize(copyStream);
    for (auto &[key, graph] : graphs)
      d.graphExecDestroy(graph);
  }

  void *allocate(size_t bytes) override {
    CUdeviceptr pointer = 0;
    check(driver().memAlloc(&pointer, std::max<size_t>(bytes, 1)),
          ("allocating " + std::to_string(bytes) + " bytes of device memory")
              .c_str());
    sizes[pointer] = bytes;
    held += bytes;
    peak = std::max(peak, held);
    check(driver().memsetD8Async(pointer, 0, bytes, context.stream),
          "cuMemsetD8Async");
    return reinterpret_cast<void *>(pointer);
  }

  void release(void *buffer) override {
    auto pointer = reinterpret_cast<CUdeviceptr>(buffer);
    held -= sizes[pointer];
    sizes.erase(pointer);
    driver().memFree(pointer);
  }

  void upload(void *dst, const void *src, size_t bytes) override {
    void *staged = stage(general, bytes);
    std::memcpy(staged, src, bytes);
    check(driver().memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), staged,
                                   bytes, context.stream),
          "cuMemcpyHtoDAsync");
  }

  void uploadForCall(void *dst, const void *src, size_t bytes, int slot,
                     bool ahead) override {
    void *staged = stage(slots[slot].staging, bytes);
    std::memcpy(staged, src, bytes);
    CUstream stream = context.stream;
    if (ahead) {
      // After the last call that read this slot's buffers, before this one.
      stream = copyStream;
      slots[slot].done.order(copyStream);
      copied = true;
    }
    check(driver().memcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), staged,
                                   bytes, stream),
          "cuMemcpyHtoDAsync");
  }

  void download(void *dst, const void *src, size_t bytes) override {
    void *staged = stage(general, bytes);
    check(driver().memcpyDtoHAsync(staged, reinterpret_cast<CUdeviceptr>(src),
                                   bytes, context.stream),
          "cuMemcpyDtoHAsync");
    pendingDownloads.push_back({dst, staged, bytes});
  }

  std::unique_ptr<PendingCopy> downloadLater(const void *src,
                                             size_t bytes) override {
    auto copy = std::make_unique<Readback>();
    copy->bytes = std::max<size_t>(bytes, 1);
    check(driver().memAllocHost(&copy->memory, copy->bytes),
          "allocating pinned host memory");
    check(driver().memcpyDtoHAsync(copy->memory,
                                   reinterpret_cast<CUdeviceptr>(src), bytes,
                                   context.stream),
          "cuMemcpyDtoHAsync");
    copy->copied.record(context.stream);
    return copy;
  }

  void fillZero(void *dst, size_t bytes) override {
    check(driver().memsetD8Async(reinterpret_cast<CUdeviceptr>(dst), 0, bytes,
                                 context.stream),
          "cuMemsetD8Async");
  }

  void call(const Artifact &artifact, PackedArgs &args, int64_t shapeKey,
            int slot) override {
    // Load every kernel module before anything is captured, with errors a
    // caller can report.
    for (auto &module : modules())
      load(*module);
    const Driver &d = driver();
    if (copied) {
      // The call reads the batch the copy stream brought.
      Event &arrived = slots[slot].arrived;
      arrived.record(copyStream);
      arrived.order(context.stream);
      copied = false;
    }
    int64_t &calls = callsPerShape[shapeKey];
    ++calls;
    if (!graphsEnabled() || calls == 1) {
      // The first call of a shape runs directly (warm-up: lazy loading,
      // cuBLASLt's algorithm choice, first touch).
      artifact.call(args.data());
    } else {
      int64_t key = shapeKey * 2 + slot;
      auto found = graphs.find(key);
      if (found == graphs.end()) {
        CUgraph graph = nullptr;
        CUgraphExec exec = nullptr;
        int64_t collectivesBefore =
            collectives ? Collectives::get().calls() : 0;
        int64_t floatsBefore = collectives ? Collectives::get().floats() : 0;
        check(d.streamBeginCapture(context.stream,
                                   CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture");
        context.capturing = true;
        artifact.call(args.data());
        context.capturing = false;
        check(d.streamEndCapture(context.stream, &graph), "cuStreamEndCapture");
        check(d.graphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
        d.graphDestroy(graph);
        found = graphs.emplace(key, exec).first;
        // The all-reduces the graph holds were counted as they were
        // captured.
        capturedCollectives[key] = {
            collectives ? Collectives::get().calls() - collectivesBefore : 0,
            collectives ? Collectives::get().floats() - floatsBefore : 0};
      } else {
        auto [calls, floats] = capturedCollectives[key];
        for (int64_t i = 0; i < calls; ++i)
          Collectives::get().countCall(i == 0 ? floats : 0);
      }
      check(d.graphLaunch(found->second, context.stream), "cuGraphLaunch");
      ++context.graphLaunches;
    }
    // Done with this slot's batch buffers and staged copies.
    slots[slot].done.record(context.stream);
    slots[slot].staging.free.record(context.stream);
  }

  void synchronize() override {
    check(driver().streamSynchronize(copyStream), "cuStreamSynchronize");
    check(driver().streamSynchronize(context.stream), "cuStreamSynchronize");
    ++context.synchronizations;
    for (const Download &download : pendingDownloads)
      std::memcpy(download.dst, download.staged, download.bytes);
    pendingDownloads.clear();
    general.used = 0;
    general.free.recorded = false;
  }

  bool hostMemory() const override { return false; }
  int64_t synchronizations() const override { return context.synchronizations; }
  int64_t graphLaunches() const override { return context.graphLaunches; }
  int64_t peakDeviceBytes() const override {
    // cuBLASLt's workspace, once created, is held for the process.
    return peak + cublasLtWorkspaceBytes();
  }
  void forgetCalls() override {
    for (auto &[key, graph] : graphs)
      driver().graphExecDestroy(graph);
    graphs.clear();
    callsPerShape.clear();
    capturedCollectives.clear();
  }
  void joinCollectives() override {
    collectives = true;
    Nccl &n = nccl();
    Collectives::setDeviceReducer([](float *data, int64_t count) {
      Nccl &n = nccl();
      n.check(n.allReduce(data, data, count, kNcclFloat32, kNcclSum, n.comm,
                          Context::get().stream),
              "ncclAllReduce");
    });
    // ZeRO: one reduce to each segment's owner, one broadcast from it,
    // grouped into one NCCL launch each, in place.
    auto perSegment = [](float *data, const std::vector<int64_t> &sizes,
                         bool reduce) {
      Nccl &n = nccl();
      CUstream stream = Context::get().stream;
      n.check(n.groupStart(), "ncclGroupStart");
      int64_t begin = 0;
      for (int r = 0; r < static_cast<int>(sizes.size()); begin += sizes[r++]) {
        if (!sizes[r])
          continue;
        float *segment = data + begin;
        auto count = static_cast<size_t>(sizes[r]);
        n.check(reduce ? n.reduce(segment, segment, count, kNcclFloat32,
                                  kNcclSum, r, n.comm, stream)
                       : n.broadcast(segment, segment, count, kNcclFloat32, r,
                                     n.comm, stream),
                reduce ? "ncclReduce" : "ncclBroadcast");
      }
      n.check(n.groupEnd(), "ncclGroupEnd");
    };
    Collectives::setDeviceShardCollectives(
        [perSegment](float *data, const std::vector<int64_t> &sizes) {
          perSegment(data, sizes, true);
        },
        [perSegment](float *data, const std::vector<int64_t> &sizes) {
          perSegment(data, sizes, false);
        });
    (void)n;
  }

private:
  struct Download {
    void *dst;
    void *staged;
    size_t bytes;
  };

  /// Metrics on their way to pinned host memory.
  struct Readback final : PendingCopy {
    void *memory = nullptr;
    size_t bytes = 0;
    Event copied;
    const void *wait() override {
      copied.wait();
      return memory;
    }
    ~Readback() override {
      copied.wait();
      if (memory)
        driver().memFreeHost(memory);
    }
  };

  struct Slot {
    Staging staging;
    /// Recorded after the last call with this slot, and after the copy of
    /// its batch.
    Event done, arrived;
  };

  static bool graphsEnabled() {
    const char *setting = std::getenv("ACCRUE_CUDA_GRAPHS");
    return !setting || std::strcmp(setting, "0") != 0;
  }

  /// `bytes` of `staging`, valid until the copies issued from it are done.
  void *stage(Staging &staging, size_t bytes) {
    if (staging.free.recorded) {
      // The copies from this memory were issued before an earlier call;
      // that call is normally long done.
      staging.free.wait();
      staging.used = 0;
    }
    size_t aligned = (bytes + 255) / 256 * 256;
    if (staging.used + aligned > staging.size) {
      // Rare (the first steps, a larger batch): wait for every copy, then
      // grow.
      if (staging.used)
        synchronize();
      staging.used = 0;
      if (aligned > staging.size) {
        if (staging.memory)
          driver().memFreeHost(staging.memory);
        staging.memory = nullptr;
        staging.size = std::max<size_t>(2 * aligned, 1 << 20);
        check(driver().memAllocHost(&staging.memory, staging.size),
              "allocating pinned host memory");
      }
    }
    void *slot = static_cast<uint8_t *>(staging.memory) + staging.used;
    staging.used += aligned;
    return slot;
  }

  Context &context;
  CUstream copyStream = nullptr;
  Slot slots[2];
  /// Staging for copies outside calls (initial state, checkpoints).
  Staging general;
  /// Whether the copy stream has a batch the next call must wait for.
  bool copied = false;
  std::map<int64_t, CUgraphExec> graphs;
  std::map<int64_t, int64_t> callsPerShape;
  /// Per captured graph: the all-reduces it holds and the floats they sum.
  std::map<int64_t, std::pair<int64_t, int64_t>> capturedCollectives;
  /// Whether steps sum over data-parallel ranks (joinCollectives).
  bool collectives = false;
  std::vector<Download> pendingDownloads;
  /// Device memory held, by allocation, and its peak.
  std::map<CUdeviceptr, size_t> sizes;
  int64_t held = 0, peak = 0;
};

} // namespace

namespace accrue::rt {
std::unique_ptr<Backend> createCudaBackend() {
  return std::make_unique<CudaBackend>();
}
} // namespace accrue::rt
