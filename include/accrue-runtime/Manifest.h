//===- Manifest.h - what step.json says about a compiled step ---*- C++ -*-===//
//
// The manifest of an artifact, as one struct that the compiler fills from the
// step's IR and writes, and the runtime reads: every argument of the step in
// order (role, name, dtype, shape), where each parameter lives in the flat
// arenas, and the settings compiled into the step. Its fingerprint is also
// compiled into step.so, so the runtime can tell that a manifest describes
// the code beside it (StepABI.h has the names and the enumerations).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_RUNTIME_MANIFEST_H
#define ACCRUE_RUNTIME_MANIFEST_H

#include "accrue-runtime/Arrays.h"
#include "accrue-runtime/StepABI.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace accrue::rt {

/// Where the values of an integer batch input must lie because they index
/// a table (an embedding's rows) or name a class (a classification loss's
/// labels): in [low, high), or equal to `ignore`. The step itself cannot
/// tell a bad value from a good one (a gather clamps it to row 0).
struct IndexCheck {
  int64_t low = 0, high = 0;
  std::optional<int64_t> ignore;
  /// What the values index, for messages: "the rows of Gather node 'wte'".
  std::string what;

  bool accepts(int64_t v) const {
    return (v >= low && v < high) || (ignore && v == *ignore);
  }
};

/// One argument of the step, in the packed calling convention's order.
struct ArgSpec {
  AccrueArgRole role = ACCRUE_ROLE_PARAMS;
  /// By value, or as a memref descriptor (rank 0 for a scalar in memory).
  AccrueArgKind kind = ACCRUE_ARG_BUFFER;
  std::string name;
  DType dtype = ACCRUE_DTYPE_FLOAT32;
  /// Batch inputs: -1 for the effective-batch dimension.
  std::vector<int64_t> shape;
  /// Metrics: the name of each element.
  std::vector<std::string> fields;
  /// Integer batch inputs: the ranges their values must lie in.
  std::vector<IndexCheck> indexChecks;

  /// Batch inputs: the bytes of one sample (the dimensions after the
  /// first).
  int64_t bytesPerSample() const {
    int64_t bytes = dtypeSize(dtype);
    for (size_t d = 1; d < shape.size(); ++d)
      bytes *= shape[d];
    return bytes;
  }
};

/// Where a parameter lives in the arenas.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
};

/// The optimizer compiled into the step.
struct OptimizerSpec {
  AccrueOptimizer kind = ACCRUE_OPTIMIZER_ADAMW;
  /// The default learning rate (the step takes the rate as an argument).
  double lr = 1e-3;
  /// Hyperparameters by their manifest key (beta1, eps, momentum, ...);
  /// "nesterov" is 0 or 1.
  std::map<std::string, double> hyperparameters;
};

/// Loss scaling: the runtime keeps the scale, the step uses it.
struct LossScaling {
  AccrueLossScaleMode mode = ACCRUE_LOSS_SCALE_NONE;
  /// The static scale, or the dynamic scale's initial value.
  double init = 1.0;
  double growth = 2.0, backoff = 0.5;
  int64_t interval = 2000;
};

/// What a step needs in memory on its device (accrue-compile --plan): the
/// fixed arenas, and a micro-batch's temporaries as fixed + b x per sample,
/// measured on the bufferized step at two micro-batch sizes. Bytes.
struct MemoryPlan {
  int64_t params = 0, gradients = 0, optimizerState = 0, buffers = 0;
  /// Activation (temporary) bytes of one micro-batch: fixed + b * perSample.
  int64_t activationFixed = 0, activationPerSample = 0;
  /// The batch inputs of one sample (a step holds b * K samples of them).
  int64_t inputPerSample = 0;
  int64_t microBatch = 1, accumulationSteps = 1;

  int64_t staticBytes() const {
    return params + gradients + optimizerState + buffers;
  }
  /// Peak at micro-batch b with K micro-batches per step.
  int64_t peakBytes(int64_t b, int64_t k) const {
    return staticBytes() + activationFixed + b * activationPerSample +
           b * k * inputPerSample;
  }
};

/// A file of the artifact as accrue-compile wrote it.
struct FileRecord {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// The size and CRC-32 of the file at `path`; false with `error` set when
/// it cannot be read (for callers built without exceptions: the compiler).
bool recordFile(const std::string &path, FileRecord &record,
                std::string &error) noexcept;

/// The contents of step.json.
struct Manifest {
  AccrueTarget target = ACCRUE_TARGET_CPU;
  std::string library = ACCRUE_FILE_LIBRARY;
  std::string entry = ACCRUE_STEP_ENTRY;
  std::string init = ACCRUE_FILE_INIT;
  std::string model = ACCRUE_FILE_MODEL;
  /// The ONNX name of the loss output.
  std::string loss;
  AccrueLossNormalization lossNormalization = ACCRUE_LOSS_NORMALIZATION_EXACT;
  AccruePrecision precision = ACCRUE_PRECISION_FP32;
  AccrueCollectives collectives = ACCRUE_COLLECTIVES_NONE;
  /// ZeRO stage 1: each rank keeps its shard of the optimizer state only
  /// (the state arguments are f32[-1]; StepABI.h's accrueShard says which).
  bool shardOptimizer = false;
  /// ZeRO stage 2 (with shardOptimizer): the accumulator argument is the
  /// rank's shard too, summed per micro-batch and gradient; every rank must
  /// run the same number of micro-batches.
  bool shardGradients = false;
  int64_t microBatch = 1;
  /// The default number of micro-batches per optimizer step.
  int64_t accumulationSteps = 1;
  /// The default effective batch E (samples per optimizer step over all
  /// ranks), when the compile was given one: K is then ceil(E / (b G)) for
  /// G ranks, and the last micro-batches of a step are padding.
  std::optional<int64_t> effectiveBatch;
  OptimizerSpec optimizer;
  std::optional<double> clipNorm;
  /// Elements of every arena (parameters, accumulator, each state).
  int64_t arenaSize = 0;
  std::vector<ParamSpec> params;
  /// The model's buffers (BatchNormalization's running statistics), slices
  /// of the buffer arena.
  std::vector<ParamSpec> buffers;
  std::vector<ArgSpec> args;
  /// Estimated peak bytes of the temporaries of one micro-batch.
  std::optional<int64_t> activationBytes;
  /// The memory plan, when accrue-compile made one (--plan).
  std::optional<MemoryPlan> memoryPlan;
  /// The kernel report of a CUDA step (accrue-compile --kernel-report), as
  /// a JSON object's text; informational, not part of the fingerprint.
  std::optional<std::string> kernelReport;
  /// The emulated kernels count their accesses (accrue-compile
  /// --count-accesses): runs check them and can write their profile.
  bool countedAccesses = false;
  /// The step masks padded samples out of its loss, so a partial last
  /// window may be padded to whole micro-batches.
  bool partialWindows = false;
  LossScaling lossScaling;
  /// CUDA steps: the GPU architectures whose PTX step.so embeds ("sm_90").
  std::vector<std::string> cudaArchs;
  /// The artifact's files by name (step.so, init.safetensors, ...), written
  /// last by the compiler: not part of the fingerprint.
  std::map<std::string, FileRecord> files;

  bool dataParallel() const { return collectives != ACCRUE_COLLECTIVES_NONE; }
  /// Elements of each optimizer-state arena on rank `rank` of `ranks`, and
  /// where they start in the arenas (the whole arena unless sharded).
  void stateShard(int64_t rank, int64_t ranks, int64_t &begin,
                  int64_t &size) const;
  bool hasOptimizer() const { return optimizer.kind != ACCRUE_OPTIMIZER_NONE; }
  /// Elements of the buffer arena (0: the step takes none).
  int64_t buffersSize() const;
  /// The batch inputs, in argument order.
  std::vector<const ArgSpec *> batchInputs() const;
  /// The optimizer's state arenas (exp_avg, ...), in argument order.
  std::vector<std::string> stateNames() const;
  /// Why the step cannot take `e` samples per optimizer step in `k`
  /// micro-batches on each of `ranks` ranks: the rows past `e` would be
  /// padding, which its loss cannot mask. Empty when it can.
  std::optional<std::string> effectiveBatchProblem(int64_t e, int64_t k,
                                                   int64_t ranks) const;

  /// Checks the artifact file `name` in `dir` against its record before it
  /// is mapped or read: throws Error naming the file when it is missing, of
  /// another size (checked first, without reading it) or, unless
  /// `sizeOnly`, corrupt (its CRC-32 differs).
  void checkFile(const std::string &dir, const std::string &name,
                 bool sizeOnly = false) const;

  /// A hash of everything the compiled code depends on: the arguments, the
  /// arena layout and the compiled settings (not the defaults the runtime
  /// may override, such as the learning rate).
  uint64_t fingerprint() const noexcept;
  /// step.json's text.
  std::string toJson() const noexcept;
  /// Reads step.json's text; `path` names the file in errors.
  static Manifest parse(const std::string &text, const std::string &path);
};

/// An effective batch of `e` samples over `ranks` ranks: each rank's share
/// of a step, ceil(e / ranks), and the micro-batches of `microBatch`
/// samples that cover it (K).
inline int64_t effectiveBatchShare(int64_t e, int64_t ranks) {
  return (e + ranks - 1) / ranks;
}
inline int64_t accumulationStepsFor(int64_t e, int64_t microBatch,
                                    int64_t ranks) {
  return (effectiveBatchShare(e, ranks) + microBatch - 1) / microBatch;
}

/// `plan` as the JSON object step.json holds under "memory_plan".
std::string memoryPlanJsonText(const MemoryPlan &plan);

/// The fingerprint as step.json and messages spell it (16 hex digits).
std::string fingerprintText(uint64_t fingerprint);

} // namespace accrue::rt

#endif // ACCRUE_RUNTIME_MANIFEST_H
