//===- Trainer.h - load a compiled step and run it --------------*- C++ -*-===//
//
// An Artifact is a loaded step.so with its manifest; a Trainer owns the
// step's arenas and runs one optimizer step at a time on batches it is given.
// The Session (Session.h) drives a Trainer over a dataset.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_TRAINER_H
#define ACCRUE_RUNTIME_TRAINER_H

#include "accrue-runtime/Manifest.h"

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accrue::rt {

class AccessCounter;

/// Arguments in the packed calling convention of compiled steps (that of
/// mlir::ExecutionEngine::invokePacked): one pointer per lowered argument,
/// each memref expanded into (allocated, aligned, offset, sizes...,
/// strides...) for a contiguous row-major buffer.
class PackedArgs {
public:
  /// A row-major buffer of `shape` at `data`.
  void addMemref(void *data, const std::vector<int64_t> &shape);
  /// A scalar argument; `value` must outlive the call.
  void addScalar(void *value) { slots.push_back(value); }
  void **data() { return slots.data(); }
  size_t size() const { return slots.size(); }

private:
  // Deques keep the addresses handed out stable as they grow.
  std::deque<void *> pointers;
  std::deque<int64_t> integers;
  std::vector<void *> slots;
};

/// A loaded artifact: its manifest and its entry point.
class Artifact : public Manifest {
public:
  /// Loads `dir`/step.json and dlopens the library it names; refuses a
  /// library compiled for another manifest (the contract fingerprints
  /// differ).
  explicit Artifact(const std::string &dir);
  ~Artifact();
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  std::string dir;
  std::string path(const std::string &file) const { return dir + "/" + file; }
  /// Checks that the files a session reads (the library, the initial
  /// parameters, the model for export) are still there with the sizes the
  /// compiler wrote (their checksums are checked when they are read).
  void checkFiles() const;
  /// Calls the packed entry point. A step that counts its accesses
  /// (countedAccesses) throws after the call if it saw a race or an
  /// out-of-bounds access, naming the kernel's ONNX node.
  void call(void **packedArgs) const;
  /// The counted accesses of every call so far as a JSON profile (steps
  /// compiled with --count-accesses; throws for others).
  std::string kernelProfile() const;
  /// Runs the step's parallel loops on `threads` threads (0: as
  /// OMP_NUM_THREADS says when it is set, else the cores this process may
  /// use, shared among the ranks of this node). Results do not depend on
  /// it. Returns the count set, or 1 for a step without parallel
  /// loops.
  int64_t setThreads(int64_t threads) const;

private:
  void *handle = nullptr;
  void (*entryPoint)(void **) = nullptr;
  std::unique_ptr<AccessCounter> counter;
};

/// Sets the calling thread's floating-point mode to flush denormal inputs
/// and results to zero (x86's FTZ and DAZ); threads it creates later, such
/// as OpenMP's workers, inherit it.
void flushDenormalsToZero();

/// The devices a step runs on: the host (targets cpu and cuda-emulated)
/// or an NVIDIA GPU (target cuda).
enum class Device { CPU, CUDA };

/// "cpu" or "cuda" (the setting's spelling); throws naming the setting.
Device parseDevice(const std::string &name);
const char *deviceName(Device device);
/// The device an artifact's target runs on.
Device deviceFor(const Manifest &manifest);

/// Where a step's buffers live and how it is called: host memory and a
/// plain call, or device memory, one stream and captured CUDA graphs.
/// Bytes on their way from a backend's memory to the host.
class PendingCopy {
public:
  virtual ~PendingCopy() = default;
  /// Waits for this copy (not for anything issued after it) and returns
  /// the bytes, valid while this object lives.
  virtual const void *wait() = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// `bytes` of zeroed memory for the step's buffers (64-byte aligned).
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *buffer) = 0;
  virtual void upload(void *dst, const void *src, size_t bytes) = 0;
  virtual void download(void *dst, const void *src, size_t bytes) = 0;
  virtual void fillZero(void *dst, size_t bytes) = 0;
  /// Copies what the call with `slot` (0 or 1: calls alternate) reads.
  /// `ahead`: a batch in a buffer only calls with this slot use, which a
  /// device may copy while the previous call still runs (once the last
  /// call with this slot is done); else ordered after everything issued.
  virtual void uploadForCall(void *dst, const void *src, size_t bytes,
                             int /*slot*/, bool /*ahead*/) {
    upload(dst, src, bytes);
  }
  /// Starts copying `bytes` at `src` to the host after everything issued
  /// so far, without waiting for it.
  virtual std::unique_ptr<PendingCopy> downloadLater(const void *src,
                                                     size_t bytes);
  /// Calls the step with `args`. `shapeKey` names the shapes of the
  /// arguments (a CUDA backend captures a graph per key and slot and
  /// replays it).
  virtual void call(const Artifact &artifact, PackedArgs &args,
                    int64_t shapeKey, int slot) = 0;
  /// Waits for every call and copy issued so far.
  virtual void synchronize() = 0;
  /// Whether buffers are host memory the host may use directly.
  virtual bool hostMemory() const = 0;
  /// Host synchronizations performed so far (for the metrics).
  virtual int64_t synchronizations() const { return 0; }
  /// Graph launches performed so far (CUDA).
  virtual int64_t graphLaunches() const { return 0; }
  /// The most device memory the backend held at once, in bytes (0 for
  /// host memory).
  virtual int64_t peakDeviceBytes() const { return 0; }
  /// Forgets what was learned from earlier calls (captured graphs): the
  /// buffers the arguments point to changed.
  virtual void forgetCalls() {}
  /// Data parallelism: sums device buffers over the ranks with the device's
  /// own collectives (NCCL) instead of MPI on host memory.
  virtual void joinCollectives() {}

  /// The backend of `device`; throws (naming what is missing) when the
  /// device cannot be used.
  static std::unique_ptr<Backend> create(Device device);
};

/// Memory of a backend, released with it.
class Buffer {
public:
  Buffer() = default;
  Buffer(Backend &backend, size_t bytes)
      : backend(&backend), pointer(backend.allocate(bytes)), size(bytes) {}
  ~Buffer() {
    if (pointer)
      backend->release(pointer);
  }
  Buffer(Buffer &&other) noexcept { *this = std::move(other); }
  Buffer &operator=(Buffer &&other) noexcept {
    std::swap(backend, other.backend);
    std::swap(pointer, other.pointer);
    std::swap(size, other.size);
    return *this;
  }
  void *data() const { return pointer; }
  float *floats() const { return static_cast<float *>(pointer); }
  size_t bytes() const { return size; }

private:
  Backend *backend = nullptr;
  void *pointer = nullptr;
  size_t size = 0;
};

/// What one optimizer step reports.
struct StepMetrics {
  /// Completed optimizer steps after this one.
  int64_t step = 0;
  double loss = 0;
  double gradNorm = 0;
  double lr = 0;
  int64_t samples = 0;
  /// The loss scale this step used (0 without loss scaling).
  double lossScale = 0;
  /// The gradient overflowed: parameters, optimizer state and the step
  /// count are unchanged, the scale backed off.
  bool skipped = false;
};

/// Owns the arenas of a step and runs it.
class Trainer {
public:
  /// Loads the artifact's initial parameters (data-parallel ranks start
  /// from rank 0's) onto `device` (unset: the artifact's target's). Refuses
  /// a device the artifact was not compiled for.
  explicit Trainer(std::shared_ptr<const Artifact> artifact,
                   std::optional<Device> device = std::nullopt);
  ~Trainer();

  const Artifact &artifact() const { return *art; }

  /// Runs one optimizer step over `samples` rows of each batch input
  /// (samples = micro-batch x number of micro-batches). `inputs[i]` points to
  /// the first row of batch input i, in its manifest dtype; `sampleBase` is
  /// the index of the first row in the whole dataset (it keys Dropout
  /// masks). Only the first `valid` rows are real samples (default: all);
  /// the rest pad a partial last window to whole micro-batches and do not
  /// count, which needs an artifact with `partial_windows`.
  StepMetrics step(const std::vector<const void *> &inputs, int64_t samples,
                   double lr, int64_t sampleBase = 0, int64_t valid = -1);

  /// step() in two halves, so that a device runs step t while the host
  /// prepares step t + 1: launch() issues a step (its inputs are copied
  /// before it returns) and finish() waits for the oldest launched step's
  /// metrics. A step may be launched before the previous one finished only
  /// if canLaunchAhead().
  void launch(const std::vector<const void *> &inputs, int64_t samples,
              double lr, int64_t sampleBase = 0, int64_t valid = -1);
  StepMetrics finish();
  /// Steps launched and not finished.
  int64_t inFlight() const { return static_cast<int64_t>(pending.size()); }
  /// Whether launching before finishing helps and is exact: a device, and
  /// no loss scaling (whose next scale and step count depend on whether
  /// this step overflowed) unless the step keeps that state on the device.
  bool canLaunchAhead() const;

  /// Completed optimizer steps (skipped ones do not count).
  int64_t completedSteps() const { return completed; }
  /// The optimizer steps completed once every launched step finished
  /// (launched steps complete when they may be launched ahead).
  int64_t stepsAfterInFlight() const { return completed + inFlight(); }
  /// The loss scale the next step uses, and the finite steps since it last
  /// changed (dynamic scaling grows it after `interval` of them).
  double lossScale() const { return scale; }
  int64_t finiteStreak() const { return streak; }

  Device device() const { return deviceKind; }
  Backend &backend() const { return *exec; }

  /// The current value of every parameter, by name.
  std::map<std::string, Array> parameterArrays() const;
  /// The current value of every buffer (running statistics), by name.
  std::map<std::string, Array> bufferArrays() const;
  /// The gradient accumulator's view of every parameter, by name.
  std::map<std::string, Array> gradientArrays() const;

  /// Writes the artifact's model with the current parameters and buffers to
  /// `path`.
  void exportOnnx(const std::string &path) const;

  /// Writes parameters, optimizer state, the step count and `run` (the
  /// caller's position and configuration: data cursor, schedules, ...) to
  /// `path` atomically, as safetensors with a checksum.
  void saveCheckpoint(const std::string &path,
                      const std::map<std::string, std::string> &run) const;
  /// Whether checkpoints are sets of shards (a sharded optimizer state on
  /// several ranks): then every rank calls saveCheckpoint.
  bool shardsCheckpoints() const;
  /// Restores what saveCheckpoint wrote and returns its `run` entries.
  /// Refuses (Error) a corrupt file or one written for other parameters or
  /// another optimizer.
  std::map<std::string, std::string> loadCheckpoint(const std::string &path);

private:
  /// The named slices of `arena` as host arrays.
  std::map<std::string, Array>
  arenaArrays(const Buffer &arena, const std::vector<ParamSpec> &slots) const;
  /// A host copy of `arena`'s floats.
  std::vector<float> hostCopy(const Buffer &arena) const;
  /// Host copies of several arenas, with one wait.
  std::vector<std::vector<float>>
  hostCopies(const std::vector<const Buffer *> &arenas) const;
  /// Batch buffers on the device, for `samples` rows each.
  void reserveBatch(int64_t samples);

  std::shared_ptr<const Artifact> art;
  Device deviceKind;
  std::unique_ptr<Backend> exec;
  Buffer paramArena, gradArena;
  /// The model's buffers (empty when it has none).
  Buffer bufferArena;
  std::vector<Buffer> stateArenas;
  /// Where the state arenas' elements lie in the arenas: all of them, or
  /// this rank's shard of a sharded step.
  int64_t stateBegin = 0, stateSize = 0;
  /// Scratch memory of steps that take a workspace.
  Buffer workspace;
  /// The metrics buffer and the per-step scalars the step reads from
  /// memory (device targets), one 16-byte slot each.
  Buffer metricsBuffer, scalars;
  /// Device targets: the batch inputs' device copies, one set per call
  /// slot (calls alternate between them), and their capacity.
  std::vector<Buffer> batchBuffers[2];
  int64_t batchCapacity = 0;
  /// Steps launched so far (their parity is the call slot).
  int64_t launched = 0;
  /// Launched steps whose metrics are on their way.
  struct Pending {
    std::unique_ptr<PendingCopy> metrics;
    double lr;
    int64_t valid;
  };
  std::deque<Pending> pending;
  /// The metrics argument of the step (null without one).
  const ArgSpec *metricsArg = nullptr;
  int64_t completed = 0;
  double scale = 1.0;
  int64_t streak = 0;
  /// The step keeps the loss scale, step number and streak in its scalar
  /// buffers and updates them itself (CUDA targets with loss scaling); the
  /// host takes the same values from its metrics. Stale: the host's values
  /// must be uploaded (at the start, after loading a checkpoint).
  bool deviceLossScale = false, deviceStateStale = true;
};

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_TRAINER_H
