/*===- accrue-c/Runtime.h - training with compiled steps, from C --*- C -*-===*
 *
 * The runtime's C API: open an artifact (what accrue-compile writes), give
 * it data as host arrays, and train: one optimizer step at a time or N of
 * them, with checkpoints, parameters and the trained ONNX model. It is the
 * Session of accrue-train (include/accrue-runtime/Session.h) behind opaque
 * handles, and links no MLIR or LLVM.
 *
 * Conventions: objects are created by accrue<Type>Create/Open and released
 * by accrue<Type>Destroy (which accepts NULL). Functions that can fail
 * return 0 on success and -1 on failure (or NULL for constructors) and,
 * when `error` is not NULL, store a new AccrueError there that the caller
 * releases with accrueErrorDestroy. Nothing aborts the host process or
 * throws through these functions. Strings returned by the API stay valid
 * until the object they came from is destroyed or changed.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ACCRUE_C_RUNTIME_H
#define ACCRUE_C_RUNTIME_H

#include "accrue-runtime/StepABI.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Errors
 *===----------------------------------------------------------------------===*/

typedef struct AccrueError AccrueError;

/* The message, one line, settings named as they are spelled in this API
 * ("accumulation_steps"). */
const char *accrueErrorMessage(const AccrueError *error);
void accrueErrorDestroy(AccrueError *error);
/* A new error with `message` (for hosts that report their own errors the
 * same way); NULL if out of memory. */
AccrueError *accrueErrorCreate(const char *message);

/*===----------------------------------------------------------------------===*
 * Artifacts
 *===----------------------------------------------------------------------===*/

typedef struct AccrueArtifact AccrueArtifact;

/* Opens the artifact in `directory`: reads and checks its manifest, loads
 * step.so and checks the contract fingerprint. */
AccrueArtifact *accrueArtifactOpen(const char *directory, AccrueError **error);
void accrueArtifactDestroy(AccrueArtifact *artifact);

/* Checks that the artifact's files are still there with the sizes
 * accrue-compile recorded (a session checks their checksums as it reads
 * them: init.safetensors when it is created, model.onnx to export). */
int accrueArtifactCheckFiles(const AccrueArtifact *artifact,
                             AccrueError **error);

/* Samples per micro-batch the step was compiled for. */
int64_t accrueArtifactMicroBatch(const AccrueArtifact *artifact);
/* The memory plan (accrue-compile --plan) as a JSON object: param_bytes,
 * gradient_bytes, optimizer_state_bytes, buffer_bytes, static_bytes,
 * activation_fixed_bytes, activation_bytes_per_sample,
 * input_bytes_per_sample, micro_batch, accumulation_steps,
 * samples_per_rank, peak_bytes. NULL when the artifact has none. Owned by
 * the artifact. */
const char *accrueArtifactMemoryPlan(const AccrueArtifact *artifact);
/* The kernel report of a CUDA artifact compiled with kernel_report (JSON:
 * accumulation_steps, totals, kernels with their accesses, gemms; see
 * docs/cuda.md), or NULL. Owned by the artifact. */
const char *accrueArtifactKernelReport(const AccrueArtifact *artifact);
/* The batch inputs the data must provide, by name, in call order. */
int accrueArtifactNumInputs(const AccrueArtifact *artifact);
const char *accrueArtifactInputName(const AccrueArtifact *artifact, int index);
/* Input `index`'s element type ("f32", "i64", ...) and shape, -1 for the
 * samples dimension. */
const char *accrueArtifactInputDType(const AccrueArtifact *artifact, int index);
int accrueArtifactInputRank(const AccrueArtifact *artifact, int index);
const int64_t *accrueArtifactInputShape(const AccrueArtifact *artifact,
                                        int index);
/* The trained parameters, by their ONNX names, and their shapes. */
int accrueArtifactNumParameters(const AccrueArtifact *artifact);
const char *accrueArtifactParameterName(const AccrueArtifact *artifact,
                                        int index);
int accrueArtifactParameterRank(const AccrueArtifact *artifact, int index);
const int64_t *accrueArtifactParameterShape(const AccrueArtifact *artifact,
                                            int index);
/* The model's buffers: tensors the step updates but does not train
 * (BatchNormalization's running mean and variance), by their ONNX names. */
int accrueArtifactNumBuffers(const AccrueArtifact *artifact);
const char *accrueArtifactBufferName(const AccrueArtifact *artifact, int index);
int accrueArtifactBufferRank(const AccrueArtifact *artifact, int index);
const int64_t *accrueArtifactBufferShape(const AccrueArtifact *artifact,
                                         int index);

/*===----------------------------------------------------------------------===*
 * Data
 *===----------------------------------------------------------------------===*/

/* Arrays are typed by the step contract's AccrueDType (ACCRUE_DTYPE_FLOAT32,
 * ..., in accrue-runtime/StepABI.h, which also gives accrueDTypeName and
 * accrueParseDType for the manifest's spellings "f32", "i64", ...). */

typedef struct AccrueDataset AccrueDataset;

AccrueDataset *accrueDatasetCreate(void);
/* Reads a .npz file: one array per batch input, samples along axis 0. */
AccrueDataset *accrueDatasetOpenNpz(const char *path, AccrueError **error);
void accrueDatasetDestroy(AccrueDataset *dataset);
/* Adds (a copy of) a dense, row-major array named as a batch input, samples
 * along dimension 0. Arrays are checked against the artifact when a session
 * is created (every input present, shapes, dtypes convertible, equal sample
 * counts, no NaN or infinity). */
int accrueDatasetAddArray(AccrueDataset *dataset, const char *name,
                          AccrueDType dtype, const int64_t *shape, int rank,
                          const void *data, AccrueError **error);

/*===----------------------------------------------------------------------===*
 * Sessions
 *===----------------------------------------------------------------------===*/

typedef struct AccrueSessionOptions AccrueSessionOptions;

AccrueSessionOptions *accrueSessionOptionsCreate(void);
void accrueSessionOptionsDestroy(AccrueSessionOptions *options);
/* Sets one setting from its text, as accrue-train's flag of the same name
 * (with '_' for '-'): steps, accumulation_steps, accumulation_schedule,
 * drop_last, lr, lr_schedule, warmup_steps, total_steps, checkpoint_dir,
 * checkpoint_every, keep_checkpoints, resume, log, device. Booleans take
 * "true" or "false". Refuses unknown settings and malformed values. */
int accrueSessionOptionsSet(AccrueSessionOptions *options, const char *name,
                            const char *value, AccrueError **error);
/* Checks the settings together (those that exclude or need each other),
 * as creating a session does. */
int accrueSessionOptionsValidate(const AccrueSessionOptions *options,
                                 AccrueError **error);
/* The names accrueSessionOptionsSet takes. */
int accrueSessionOptionsNumSettings(void);
const char *accrueSessionOptionsSettingName(int index);

typedef struct AccrueSession AccrueSession;

/* Checks the options and the data against the artifact and loads the
 * initial parameters (or, with resume, the newest checkpoint). The session
 * keeps what it needs of the artifact and the data: they may be destroyed
 * after this call. */
AccrueSession *accrueSessionCreate(const AccrueArtifact *artifact,
                                   const AccrueDataset *data,
                                   const AccrueSessionOptions *options,
                                   AccrueError **error);
void accrueSessionDestroy(AccrueSession *session);

/* What one optimizer step reports (the fields of metrics.jsonl). */
typedef struct AccrueStepMetrics {
  /* Windows of data consumed so far (the log's step number). */
  int64_t iteration;
  /* Completed optimizer steps (loss scaling: skipped ones do not count). */
  int64_t optimizerSteps;
  double loss;
  /* The global gradient norm before clipping (NaN when skipped). */
  double gradNorm;
  double lr;
  int64_t samples;
  /* The loss scale this step used (0 without loss scaling). */
  double lossScale;
  int skipped;
  double milliseconds;
} AccrueStepMetrics;

/* Optimizer steps the session runs in all, and those done so far. */
int64_t accrueSessionPlannedSteps(const AccrueSession *session);
int64_t accrueSessionIterations(const AccrueSession *session);
/* Runs the next optimizer step (the next window of the data); logs and
 * checkpoints as the options say. `metrics` may be NULL. */
int accrueSessionStep(AccrueSession *session, AccrueStepMetrics *metrics,
                      AccrueError **error);
/* The last step's metrics.jsonl line (without the newline). */
const char *accrueSessionLastRecord(const AccrueSession *session);
/* Trains on `data` from now on, from its first window; the model, the
 * optimizer state and the step count carry on. */
int accrueSessionSetData(AccrueSession *session, const AccrueDataset *data,
                         AccrueError **error);
/* Sets the number of optimizer steps the session runs in all (at least
 * those already run). */
int accrueSessionPlanSteps(AccrueSession *session, int64_t total,
                           AccrueError **error);
/* The optimizer steps until the current pass over the data ends. */
int64_t accrueSessionStepsLeftInPass(const AccrueSession *session);

/* Writes a checkpoint of the current state to the options' checkpoint_dir
 * (and drops old ones beyond keep_checkpoints). */
int accrueSessionSaveCheckpoint(AccrueSession *session, AccrueError **error);
/* Writes a checkpoint to the file `path` (atomically). */
int accrueSessionSaveCheckpointTo(const AccrueSession *session,
                                  const char *path, AccrueError **error);
/* Writes the artifact's model with the trained parameters. */
int accrueSessionExportOnnx(const AccrueSession *session, const char *path,
                            AccrueError **error);
/* Writes the gradient accumulator, by parameter, as .npz. */
int accrueSessionSaveGradients(const AccrueSession *session, const char *path,
                               AccrueError **error);
/* Writes the kernel profile of the steps run so far as JSON (artifacts
 * compiled with count_accesses for target cuda-emulated), atomically. */
int accrueSessionSaveKernelProfile(const AccrueSession *session,
                                   const char *path, AccrueError **error);
/* Collectives a host provides (a torch.distributed process group): each
 * returns 0, or nonzero after writing a message of at most `error_size`
 * bytes to `error`. Data-parallel sessions created after
 * accrueSetCollectives use them instead of MPI or Gloo. */
typedef struct AccrueHostCollectives {
  void *context;
  int rank, size;
  /* Sums `count` floats in place over the ranks. */
  int (*all_reduce_sum)(void *context, float *data, int64_t count, char *error,
                        size_t error_size);
  /* The minimum (max = 0) or maximum (max = 1) of `count` int64s, in place. */
  int (*all_reduce_extremum)(void *context, int64_t *data, int64_t count,
                             int max, char *error, size_t error_size);
  /* Every rank's `bytes` at `data` become the group's first rank's. */
  int (*broadcast)(void *context, void *data, int64_t bytes, char *error,
                   size_t error_size);
  /* For artifacts that shard their optimizer state (--shard-optimizer);
   * NULL where the host has none. `data` is cut into `size` consecutive
   * shards, rank r's of counts[r] floats. reduce_scatter_sum: this rank's
   * shard becomes the sum over the ranks of theirs (the rest of `data` is
   * scratch); all_gather: every shard becomes its owner's. In place. */
  int (*reduce_scatter_sum)(void *context, float *data, const int64_t *counts,
                            char *error, size_t error_size);
  int (*all_gather)(void *context, float *data, const int64_t *counts,
                    char *error, size_t error_size);
} AccrueHostCollectives;
/* Before the process's first data-parallel session (an error after). */
int accrueSetCollectives(const AccrueHostCollectives *collectives,
                         AccrueError **error);

/* Copies the current value of parameter or buffer `name` (float32, its
 * shape's element count) to `values`, which has room for `count` floats. */
int accrueSessionReadParameter(const AccrueSession *session, const char *name,
                               float *values, int64_t count,
                               AccrueError **error);

#ifdef __cplusplus
}
#endif

#endif /* ACCRUE_C_RUNTIME_H */
