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
#include <string>
#include <vector>

namespace accrue::rt {

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
  /// Calls the packed entry point.
  void call(void **packedArgs) const;

private:
  void *handle = nullptr;
  void (*entryPoint)(void **) = nullptr;
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
  /// from rank 0's).
  explicit Trainer(std::shared_ptr<const Artifact> artifact);

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

  const Arena &params() const { return *paramArena; }
  const Arena &grads() const { return *gradArena; }

  /// The current value of every parameter, by name.
  std::map<std::string, Array> parameterArrays() const;
  /// The gradient accumulator's view of every parameter, by name.
  std::map<std::string, Array> gradientArrays() const;

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
  std::shared_ptr<const Artifact> art;
  std::unique_ptr<Arena> paramArena, gradArena;
  std::vector<std::unique_ptr<Arena>> stateArenas;
  /// Scratch memory of steps that take a workspace.
  std::vector<uint8_t> workspace;
  int64_t completed = 0;
  double scale = 1.0;
  int64_t streak = 0;
};

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_TRAINER_H
