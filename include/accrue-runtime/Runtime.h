//===- Runtime.h - Accrue's runtime (no MLIR/LLVM) --------------*- C++ -*-===//
//
// Loads a compiled training step (step.so + step.json), owns its flat arenas
// and drives it over a dataset. Depends on libc, libdl and zlib only, so a
// compiled step deploys to machines without a compiler. Errors are thrown as
// accrue::rt::Error with a one-line message.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_RUNTIME_H
#define ACCRUE_RUNTIME_RUNTIME_H

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace accrue::rt {

/// A user-facing error: bad files, bad data, bad flags.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Element types the runtime moves around.
enum class DType { F32, F64, F16, I64, I32, Bool };

/// Parses "f32", "i64", ... (manifest spelling).
DType parseDType(const std::string &name);
const char *dtypeName(DType type);
size_t dtypeSize(DType type);

/// A dense, row-major host array.
struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numElements() const;
  /// Converts to `type` (numeric conversion; throws if impossible).
  Array convertTo(DType type, const std::string &what) const;
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
};

/// Reads every array of a .npz file (stored or deflated members).
std::map<std::string, Array> readNpz(const std::string &path);
/// Writes arrays as an uncompressed .npz, atomically.
void writeNpz(const std::string &path,
              const std::map<std::string, Array> &arrays);

/// Reads a safetensors file (and its string metadata, if asked).
std::map<std::string, Array>
readSafetensors(const std::string &path,
                std::map<std::string, std::string> *metadata = nullptr);
/// Writes a safetensors file atomically (temp file, fsync, rename).
void writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Array *>> &tensors,
    const std::map<std::string, std::string> &metadata = {});

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsync, rename.
void writeFileAtomically(const std::string &path, const std::string &bytes);
std::string readFile(const std::string &path);

/// Overwrites the raw_data of the named float initializers of a serialized
/// ONNX model (as accrue-compile stores it) with new values.
std::string patchOnnxInitializers(
    const std::string &model,
    const std::map<std::string, std::pair<const float *, int64_t>> &values);

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

/// One buffer the step takes, from step.json.
struct ArgSpec {
  std::string role; // params, accumulator, state, batch, lr, step, metrics
  std::string name;
  DType dtype;
  std::vector<int64_t> shape; // batch: -1 for the effective-batch dimension
};

/// Where a parameter lives in the arenas.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset;
  int64_t numel;
};

/// Loss scaling settings from step.json; the Trainer keeps the scale.
struct LossScaling {
  /// "none", "static" or "dynamic" (torch.amp.GradScaler's rule).
  std::string mode = "none";
  double init = 1.0, growth = 2.0, backoff = 0.5;
  int64_t interval = 2000;
};

/// A loaded artifact: manifest and entry point.
class Artifact {
public:
  /// Loads `dir`/step.json and dlopens the library it names.
  explicit Artifact(const std::string &dir);
  ~Artifact();
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;

  std::string dir;
  std::vector<ArgSpec> args;
  std::vector<ParamSpec> params;
  int64_t arenaSize = 0;
  int64_t microBatch = 0;
  int64_t accumulationSteps = 1;
  double lr = 0.0;
  std::string optimizer;
  std::string loss;
  int64_t activationBytes = -1;
  /// The step masks padding out of its loss: a partial last window may be
  /// padded to whole micro-batches.
  bool partialWindows = false;
  LossScaling lossScaling;
  /// "none", or how the step sums gradients over data-parallel ranks:
  /// "deferred" (once per step) or "per-micro-batch".
  std::string collectives = "none";
  bool dataParallel() const { return collectives != "none"; }
  std::string path(const std::string &file) const { return dir + "/" + file; }
  /// Calls the packed entry point.
  void call(void **packedArgs) const;

  /// The batch inputs, in argument order.
  std::vector<const ArgSpec *> batchInputs() const;
  /// The optimizer's state arenas (exp_avg, ...), in argument order.
  std::vector<std::string> stateNames() const;

private:
  void *library = nullptr;
  void (*entry)(void **) = nullptr;
};

/// A 64-byte aligned, zero-initialized float buffer.
class Arena {
public:
  explicit Arena(int64_t size);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
  float *data() { return values; }
  const float *data() const { return values; }
  int64_t size() const { return count; }
  void zero();

private:
  float *values = nullptr;
  int64_t count = 0;
};

/// What one optimizer step reports.
struct StepMetrics {
  /// Completed optimizer steps after this one.
  int64_t step;
  double loss;
  double gradNorm;
  double lr;
  int64_t samples;
  /// The loss scale this step used (0 without loss scaling).
  double lossScale = 0;
  /// The gradient overflowed: parameters, optimizer state and the step
  /// count are unchanged, the scale backed off.
  bool skipped = false;
};


/// Owns the arenas of a step and runs it.
class Trainer {
public:
  /// Loads the artifact and its initial parameters.
  explicit Trainer(const std::string &artifactDir);

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

  /// Completed optimizer steps (skipped ones do not count).
  int64_t completedSteps() const { return completed; }
  /// The loss scale the next step uses, and the finite steps since it last
  /// changed (dynamic scaling grows it after `interval` of them).
  double lossScale() const { return scale; }
  int64_t finiteStreak() const { return streak; }

  Arena &params() { return *paramArena; }
  Arena &grads() { return *gradArena; }

  /// The current value of every parameter, by name.
  std::map<std::string, Array> parameterArrays() const;

  /// Writes the artifact's model with the current parameters to `path`.
  void exportOnnx(const std::string &path) const;

  /// Writes parameters, optimizer state, the step count and `run` (the
  /// caller's position and configuration: data cursor, schedules, ...) to
  /// `path` atomically, as safetensors with a checksum.
  void saveCheckpoint(const std::string &path,
                      const std::map<std::string, std::string> &run) const;
  /// Restores what saveCheckpoint wrote and returns its `run` entries.
  /// Refuses (Error) a corrupt file or one written for other parameters or
  /// another optimizer.
  std::map<std::string, std::string> loadCheckpoint(const std::string &path);

private:
  std::unique_ptr<Artifact> art;
  std::unique_ptr<Arena> paramArena, gradArena;
  std::vector<std::unique_ptr<Arena>> stateArenas;
  int64_t completed = 0;
  double scale = 1.0;
  int64_t streak = 0;
};

/// One optimizer step's share of a dataset.
struct Window {
  /// Dataset index of the first sample.
  int64_t first = 0;
  /// Real samples, from `first` on.
  int64_t valid = 0;
  /// Rows the step gets: `valid` rounded up to whole micro-batches (the
  /// rows past `valid` are padding).
  int64_t samples = 0;
  /// The pass over the data this window belongs to (from 0).
  int64_t epoch = 0;
};

/// Walks a dataset in order, one window of micro-batch x K samples per
/// optimizer step, pass after pass. A pass whose size is not a multiple of
/// the window ends with a partial window, padded to whole micro-batches,
/// unless `dropLast` (then the remainder is skipped).
class WindowCursor {
public:
  WindowCursor(int64_t numSamples, int64_t microBatch, bool dropLast);

  /// The next window of up to microBatch x `k` samples.
  Window next(int64_t k);
  /// Windows in one pass when every step takes `k` micro-batches.
  int64_t windowsPerEpoch(int64_t k) const;

  /// The position, for checkpoints: the pass and the next sample in it.
  int64_t epoch = 0, offset = 0;

private:
  int64_t numSamples, microBatch;
  bool dropLast;
};

/// Micro-batches per optimizer step as a function of the step: "S:K,..."
/// means K from S completed steps on ("0:2,100:4,200:8" ramps the batch up).
class AccumulationSchedule {
public:
  /// A constant K.
  explicit AccumulationSchedule(int64_t k = 1);
  /// Parses "S:K,S:K,..." (S strictly increasing, the first 0, K >= 1).
  static AccumulationSchedule parse(const std::string &text);

  /// K for the step after `completedSteps` steps.
  int64_t at(int64_t completedSteps) const;
  int64_t max() const;

private:
  std::vector<std::pair<int64_t, int64_t>> points;
};

/// The learning rate as a function of completed optimizer steps s: the
/// step after s completed steps uses at(s), so it advances once per
/// optimizer step, never per micro-batch.
class LRSchedule {
public:
  enum class Kind { Constant, Linear, Cosine };

  /// `Linear` and `Cosine` warm up linearly from 0 over `warmup` steps, then
  /// decay to 0 at `total` steps (linearly or along a half cosine).
  LRSchedule(Kind kind, double lr, int64_t warmup = 0, int64_t total = 0);
  /// "constant", "linear" or "cosine".
  static Kind parseKind(const std::string &name);

  double at(int64_t completedSteps) const;

private:
  Kind kind;
  double lr;
  int64_t warmup, total;
};

/// The process group of data-parallel training (MPI_COMM_WORLD; one rank
/// when not launched by mpirun). Compiled steps of data-parallel artifacts
/// sum their gradients, loss sum and count over it once per optimizer step.
class Collectives {
public:
  /// Initializes MPI once per process (idempotent).
  static Collectives &get();
  int rank() const { return rankId; }
  int size() const { return worldSize; }
  /// Sums `count` floats in place over all ranks.
  void allReduceSum(float *data, int64_t count);
  /// All-reduces performed so far (for the metrics).
  int64_t calls() const { return numCalls; }
  /// Every rank's copy of `data` becomes rank 0's.
  void broadcast(float *data, int64_t count);
  /// Whether all ranks pass the same value (a cheap consistency check).
  bool agree(int64_t value);
  /// Ends every rank after an error on one (the others may be waiting in
  /// a collective); a no-op unless MPI runs with several ranks.
  static void abortIfParallel(int code);
  /// This process's rank when MPI runs with several ranks, else -1 (does
  /// not start MPI).
  static int rankIfParallel();

private:
  Collectives();
  ~Collectives();
  int rankId = 0, worldSize = 1;
  int64_t numCalls = 0;
};

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_RUNTIME_H
