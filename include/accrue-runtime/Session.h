//===- Session.h - a training run over a dataset ----------------*- C++ -*-===//
//
// A Session is what accrue-train, the C API and Python run: it walks a
// dataset in windows of micro-batch x K samples (K from an accumulation
// schedule), gives each data-parallel rank its slice, pads a partial last
// window, steps the learning-rate schedule, validates and resumes
// checkpoints, rotates them, and logs one metrics record per optimizer step.
// Its errors name settings (SessionOptions' fields, spelled as Python
// keywords); tools render them as their flags.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_SESSION_H
#define ACCRUE_RUNTIME_SESSION_H

#include "accrue-runtime/SettingTable.h"
#include "accrue-runtime/Trainer.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accrue::rt {

class FolderLock;

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

/// Walks a dataset in order, one window of samples per optimizer step (the
/// effective batch: micro-batch x K x ranks, or a fixed effective batch),
/// pass after pass. A pass whose size is not a multiple of the window ends
/// with a partial window, padded to whole micro-batches, unless `dropLast`
/// (then the remainder is skipped).
class WindowCursor {
public:
  WindowCursor(int64_t numSamples, int64_t microBatch, bool dropLast);

  /// The next window of up to `size` samples.
  Window next(int64_t size);

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
  static const char *kindName(Kind kind);

  double at(int64_t completedSteps) const;

private:
  Kind kind;
  double lr;
  int64_t warmup, total;
};

/// A dataset: one array per batch input of an artifact, in the input's
/// dtype, samples along dimension 0.
struct Dataset {
  std::vector<Array> arrays;
  int64_t numSamples = 0;
  /// How errors name the data ("'data.npz'").
  std::string what = "the data";

  /// Checks and converts `arrays` (by input name) for `artifact`: every
  /// input present, shapes, dtypes, equal sample counts, no NaN or Inf.
  /// `what` names the data in errors ("'data.npz'").
  static Dataset fromArrays(std::map<std::string, Array> arrays,
                            const Manifest &artifact, const std::string &what);
  /// Reads a .npz file.
  static Dataset fromNpz(const std::string &path, const Manifest &artifact);
};

/// How a Session runs; each field is the setting of the same name.
struct SessionOptions {
  /// Where the step runs; unset: the device of the artifact's target.
  std::optional<Device> device;
  /// Optimizer steps in all (a resumed run continues up to it); unset: one
  /// pass over the data.
  std::optional<int64_t> steps;
  /// Micro-batches per optimizer step; unset: the artifact's default.
  std::optional<int64_t> accumulationSteps;
  /// Samples per optimizer step over all ranks (excludes
  /// accumulationSteps and the schedule): K is then ceil(E / (b G)), each
  /// rank takes ceil(E / G) samples and pads its last micro-batch; unset:
  /// the artifact's default when it has one (accrue-compile
  /// --effective-batch), else micro-batch x K x ranks.
  std::optional<int64_t> effectiveBatch;
  /// "S:K,..." (excludes accumulationSteps).
  std::string accumulationSchedule;
  /// Skip a pass's last samples that do not fill an effective batch.
  bool dropLast = false;
  /// Unset: the artifact's learning rate.
  std::optional<double> lr;
  LRSchedule::Kind lrSchedule = LRSchedule::Kind::Constant;
  int64_t warmupSteps = 0;
  /// Unset: `steps`.
  std::optional<int64_t> totalSteps;
  /// Where checkpoints go (empty: none).
  std::string checkpointDir;
  /// Every N optimizer steps; unset: only after the last step.
  std::optional<int64_t> checkpointEvery;
  int64_t keepCheckpoints = 2;
  /// Flush denormal floats to zero (inputs and results) on the CPU, as
  /// torch.set_flush_denormal(True) does: faster when values underflow,
  /// different in the denormal range. Off by default.
  bool flushDenormals = false;
  /// Threads for the step's parallel loops; unset or 0: OMP_NUM_THREADS
  /// when set, else the cores this process may use, divided among the
  /// node's ranks.
  std::optional<int64_t> threads;
  /// Continue from the newest checkpoint in checkpointDir.
  bool resume = false;
  /// Resume with another effective batch (another number of samples per
  /// step); the step count and the data position carry over.
  bool resumeNewBatch = false;
  /// metrics.jsonl (empty: no log); a resumed run appends.
  std::string log;

  /// Checks the values and their combinations; errors name the settings.
  void validate() const;

  /// The settings (steps, accumulation_steps, accumulation_schedule,
  /// effective_batch, drop_last, lr, lr_schedule, warmup_steps,
  /// total_steps, checkpoint_dir, checkpoint_every, keep_checkpoints,
  /// resume, log, device, threads, flush_denormals), bound to this struct's
  /// fields: the one list set(), accrue-train's flags and the C API read.
  SettingTable settingTable();
  /// Sets the setting `name` from its text (booleans take "true" or
  /// "false"). Throws on an unknown name or a malformed value, naming the
  /// setting.
  void set(const std::string &name, const std::string &value);
  /// The names set() takes, in the table's order.
  static const std::vector<std::string> &settingNames();
};

/// One optimizer step as the session reports it.
struct StepRecord {
  /// Windows of data consumed so far (the step number of the log).
  int64_t iteration = 0;
  StepMetrics metrics;
  /// Collectives the step ran (data-parallel artifacts), else -1.
  int64_t allReduces = -1;
  /// Device targets: host synchronizations and graph launches the step
  /// made, else -1.
  int64_t synchronizations = -1, graphLaunches = -1;
  /// Wall time since the previous step's record, in milliseconds.
  double milliseconds = 0;
  /// The metrics.jsonl line, without the newline.
  std::string json;
};

/// Something a session says that is not an error.
struct Notice {
  enum class Kind { Info, Warning } kind = Kind::Info;
  /// May reference settings (see Error.h).
  std::string text;
};

/// A training run: an artifact, a dataset and the options.
class Session {
public:
  using NoticeSink = std::function<void(const Notice &)>;

  /// Checks the settings and loads the initial parameters (or, with
  /// `resume`, the newest checkpoint). `notices` receives what a tool prints
  /// (rank 0's only, under data parallelism).
  Session(std::shared_ptr<const Artifact> artifact, Dataset data,
          SessionOptions options, NoticeSink notices = {});
  ~Session();

  const Artifact &artifact() const { return trainer.artifact(); }
  const Trainer &state() const { return trainer; }
  const SessionOptions &options() const { return opts; }

  /// The step count the run ends at (total, counting resumed steps).
  int64_t plannedSteps() const { return steps; }
  /// Windows consumed so far (including before a resume).
  int64_t iterations() const { return iteration; }
  bool done() const { return iteration >= steps; }
  /// Samples per optimizer step: the fixed effective batch, else
  /// micro-batch x K x ranks at the current step.
  int64_t effectiveBatch() const;
  int ranks() const { return numRanks; }
  /// Whether this process writes files (rank 0).
  bool writes() const { return rank == 0; }

  /// Runs the next optimizer step: the next window of data, logged and
  /// checkpointed as the options say. Throws on a non-finite loss.
  StepRecord step();
  /// Steps until plannedSteps(), calling `onStep` after each.
  void run(const std::function<void(const StepRecord &)> &onStep = {});
  /// Finishes the steps launched ahead (a device runs one step ahead of the
  /// host), logging them; returns their records. After it, the state is
  /// that of the last step logged (for a checkpoint before stopping).
  std::vector<StepRecord> finishInFlight();

  /// Writes a checkpoint of the current state to checkpointDir (and drops
  /// old ones beyond keepCheckpoints); returns its path.
  std::string saveCheckpoint();
  /// Writes a checkpoint of the current state to `path`.
  void saveCheckpointTo(const std::string &path) const;
  /// Writes the trained model (the original ONNX with these parameters).
  void exportOnnx(const std::string &path) const;
  /// Trains on `data` from now on, from its first window (the state of
  /// the model and optimizer carries on).
  void setData(Dataset data);
  /// Sets the optimizer steps the run ends at (at least those run).
  void planSteps(int64_t total);
  /// The steps until the data's current pass ends.
  int64_t stepsLeftInPass() const;
  /// Writes the gradient accumulator, by parameter, as .npz.
  void saveGradients(const std::string &path) const;
  /// Writes the kernel profile of the steps run so far (JSON; artifacts
  /// compiled with --count-accesses), atomically.
  void saveKernelProfile(const std::string &path) const;

private:
  /// A launched step, until its metrics are back.
  struct Launched {
    int64_t samples = 0, allReduces = -1, graphLaunches = 0;
    /// Data-parallel: reduce-scatters and all-gathers (a sharded optimizer
    /// state), and the floats all the collectives were given.
    int64_t reduceScatters = 0, allGathers = 0, collectiveFloats = 0;
  };
  /// Checks `data` against the batch sizes and starts its first pass.
  void startData();
  /// The samples of a window of `k` micro-batches per rank, and one rank's
  /// share of it.
  int64_t windowSize(int64_t k) const;
  int64_t rankShare(int64_t k) const;
  /// Launches the step of the next window (Trainer::launch).
  void launchNext();
  /// Waits for the oldest launched step; logs and checkpoints it.
  StepRecord finishOldest();
  /// Whether a checkpoint follows step `iteration`.
  bool checkpointsAfter(int64_t iteration) const;
  void resumeFromCheckpoint();
  std::map<std::string, std::string> runRecord() const;
  void notify(Notice::Kind kind, const std::string &text) const;

  // Declared first: the options are checked before anything is loaded.
  SessionOptions opts;
  NoticeSink notices;
  Trainer trainer;
  Dataset data;
  AccumulationSchedule schedule;
  /// The fixed effective batch, if any (see SessionOptions).
  std::optional<int64_t> fixedBatch;
  std::optional<LRSchedule> lrSchedule;
  std::optional<WindowCursor> cursor;
  /// What a checkpoint must agree on to resume bit for bit.
  std::map<std::string, std::string> config;
  int numRanks = 1, rank = 0;
  /// Threads of the step's parallel loops.
  int64_t threadCount = 1;
  int64_t steps = 0, iteration = 0;
  /// The checkpoint folder's lock, held for the session's life (rank 0).
  std::unique_ptr<FolderLock> folderLock;
  std::ofstream log;
  std::vector<std::vector<uint8_t>> staging;
  std::deque<Launched> inFlight;
  /// Device synchronizations when the last step was reported, and when.
  int64_t syncsReported = 0;
  std::chrono::steady_clock::time_point lastRecord;
};

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_SESSION_H
