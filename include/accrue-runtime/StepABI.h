/*===- StepABI.h - the step contract between compiler and runtime -*- C -*-===*
 *
 * Everything the compiler (accrue-compile, the passes) and the runtime
 * (accrue-train, the C and Python hosts) agree on about a compiled training
 * step: the files of an artifact, the entry point and its argument roles, the
 * collective the step calls, the manifest's keys and format version, and the
 * enumerations of the settings a manifest records. Both sides include this
 * header; nothing else spells these names.
 *
 * Plain C, no dependencies: a C host can include it to drive step.so.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ACCRUE_RUNTIME_STEPABI_H
#define ACCRUE_RUNTIME_STEPABI_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * The artifact
 *===----------------------------------------------------------------------===*/

/* Files of an artifact directory. */
#define ACCRUE_FILE_MANIFEST "step.json"
#define ACCRUE_FILE_LIBRARY "step.so"
#define ACCRUE_FILE_HEADER "step.h"
#define ACCRUE_FILE_INIT "init.safetensors"
#define ACCRUE_FILE_MODEL "model.onnx"

/* The manifest's "format" and "version". A runtime refuses other versions:
 * version 2 added the contract fingerprint, version 3 the records of the
 * artifact's files (size and CRC-32, checked before anything is loaded) and
 * the ranges of integer batch inputs that index a table or name a class,
 * version 4 loss scaling inside the step on every target (a step with a
 * loss_scale argument also takes loss_scale_streak and reports
 * next_loss_scale and loss_scale_streak in its metrics), version 5 one
 * vocabulary of element types (accrue_gemm's operand types are AccrueDType
 * codes; bf16 was 1 and is 7), version 6 accrue_gemm's bias-gradient
 * epilogue (an argument more). */
#define ACCRUE_MANIFEST_FORMAT "accrue-step"
#define ACCRUE_MANIFEST_VERSION 6

/* The step function's symbol in MLIR, and the packed entry point step.so
 * exports for it: `void _mlir_train_step(void **args)`, where args[i] points
 * to the i-th lowered argument (each buffer expanded into allocated, aligned,
 * offset, sizes[rank], strides[rank]), in the order of the manifest's args. */
#define ACCRUE_STEP_FUNCTION "train_step"
#define ACCRUE_STEP_ENTRY "_mlir_train_step"

/* A `const uint64_t` in step.so: the fingerprint of the contract the code
 * was compiled for (accrue::rt::Manifest::fingerprint()). The runtime checks
 * it against the manifest before the first call. */
#define ACCRUE_STEP_FINGERPRINT_SYMBOL "accrue_step_fingerprint"

/* The collective a data-parallel step calls, once per optimizer step, on one
 * contiguous f32 buffer (the gradient accumulator, whose last
 * ACCRUE_RESERVED_TAIL elements carry the loss sum and count): the host sums
 * it over all ranks in place. ACCRUE_ALL_REDUCE_FUNCTION is its name in
 * MLIR; hosts define ACCRUE_ALL_REDUCE_SYMBOL (MLIR's C interface) with the
 * signature of AccrueAllReduceFn. */
#define ACCRUE_ALL_REDUCE_FUNCTION "accrue_all_reduce"
#define ACCRUE_ALL_REDUCE_SYMBOL "_mlir_ciface_accrue_all_reduce"

/* A rank-1 f32 memref descriptor, as MLIR's C interface passes it. A
 * data-parallel artifact's step.h spells it again, under the same guard, so
 * that a host may include both headers in either order. */
#ifndef ACCRUE_BUFFER_DEFINED
#define ACCRUE_BUFFER_DEFINED
typedef struct AccrueBuffer {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
} AccrueBuffer;
#endif

typedef void (*AccrueAllReduceFn)(AccrueBuffer *buffer);

/* ZeRO stage 1 (accrue-compile --shard-optimizer): each rank keeps the
 * optimizer state of its shard of the arenas only. Rank r of G owns
 * elements [begin, begin + size) of an n-element arena, as accrueShard
 * computes them: G slices of ceil(n / G) elements rounded up to whole
 * ACCRUE_ARENA_ALIGNMENT blocks, the last ones shorter or empty. A sharded
 * step calls, per optimizer step:
 *   int64_t accrue_shard_begin(int64_t n), accrue_shard_size(int64_t n):
 *     this rank's shard of an n-element arena (its state arenas hold
 *     `size` elements);
 *   accrue_reduce_scatter(arena, used): instead of accrue_all_reduce, on
 *     the whole accumulator; the first `used` elements carry data, the last
 *     two of them the loss sum and count. Afterwards the rank's shard holds
 *     the sum over the ranks and the two scalars hold theirs; the rest is
 *     unspecified;
 *   accrue_all_reduce on a one-element buffer (the norm's partial sum);
 *   accrue_all_gather(arena): every rank's shard of the parameters, from
 *     the rank that owns it, in place. */
#define ACCRUE_SHARD_BEGIN_FUNCTION "accrue_shard_begin"
#define ACCRUE_SHARD_SIZE_FUNCTION "accrue_shard_size"
#define ACCRUE_REDUCE_SCATTER_FUNCTION "accrue_reduce_scatter"
#define ACCRUE_REDUCE_SCATTER_SYMBOL "_mlir_ciface_accrue_reduce_scatter"
#define ACCRUE_ALL_GATHER_FUNCTION "accrue_all_gather"
#define ACCRUE_ALL_GATHER_SYMBOL "_mlir_ciface_accrue_all_gather"
typedef int64_t (*AccrueShardFn)(int64_t n);
typedef void (*AccrueReduceScatterFn)(AccrueBuffer *arena, int64_t used);
typedef void (*AccrueAllGatherFn)(AccrueBuffer *arena);

/* ZeRO stage 2 (accrue-compile --shard-gradients): the accumulator argument
 * is this rank's shard too (accrue_shard_size(arena_size) elements), and
 * there is no accrue_reduce_scatter. Instead, per micro-batch and gradient,
 * in the same order on every rank:
 *   accrue_reduce_scatter_add(gradient, shard, offset, n): `gradient` is
 *     the slice [offset, offset + gradient.size) of an n-element arena; its
 *     sum over the ranks is added to the part of the rank's accumulator
 *     shard it overlaps. The host may overwrite `gradient`;
 * and after the micro-batch loop accrue_all_reduce on a two-element buffer
 * (the loss sum and count). */
#define ACCRUE_REDUCE_SCATTER_ADD_FUNCTION "accrue_reduce_scatter_add"
#define ACCRUE_REDUCE_SCATTER_ADD_SYMBOL                                       \
  "_mlir_ciface_accrue_reduce_scatter_add"
typedef void (*AccrueReduceScatterAddFn)(AccrueBuffer *gradient,
                                         AccrueBuffer *shard, int64_t offset,
                                         int64_t n);

/* CUDA steps call the runtime for their contractions:
 *   D[b] = sum_k A[b](m, k) B[b](k, n) + beta * C[b](m, n), written over C,
 * for b < batch, with every matrix given by its address and its strides in
 * elements (rows, columns, batch). `types` packs the element types of A and
 * B (bits 0-7, an AccrueDType: f32, bf16 or f16), of C (bits 8-15: f32, or
 * bf16 or f16 with beta 0, the f32 sum rounded once to nearest even) and the
 * precision the inputs are exact in (bits 16-23: f32 inputs that hold bf16
 * or f16 values may be multiplied in that precision, accumulating in f32)
 * and an epilogue (bits 24-31, an AccrueGemmEpilogue; batch 1 only): the
 * bias gradient of A, sum over k of A(i, k) for each i < m, or of B, sum
 * over k of B(k, j) for each j < n, summed in f32 and written as m (n)
 * contiguous f32 values at `bias` (0 without an epilogue).
 * On the GPU this is cuBLASLt on the step's stream (the bias gradient its
 * BGRADA/BGRADB epilogue); for the emulated target, a loop on the host that
 * reads the operands the same way. */
#define ACCRUE_GEMM_FUNCTION "accrue_gemm"
typedef void (*AccrueGemmFn)(int64_t batch, int64_t m, int64_t n, int64_t k,
                             intptr_t a, int64_t aRow, int64_t aCol,
                             int64_t aBatch, intptr_t b, int64_t bRow,
                             int64_t bCol, int64_t bBatch, intptr_t c,
                             int64_t cRow, int64_t cCol, int64_t cBatch,
                             int64_t types, float beta, intptr_t bias);

typedef enum AccrueGemmEpilogue {
  ACCRUE_GEMM_EPILOGUE_NONE = 0,
  ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A = 1,
  ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_B = 2,
} AccrueGemmEpilogue;

/* The counting emulator (accrue-compile --count-accesses, target
 * cuda-emulated): the emulated kernels call these runtime entries. A launch
 * begins with ACCRUE_EMU_LAUNCH_FUNCTION(kernel, name, grid x/y/z, block
 * x/y/z), where `name` points to "<kernel name>\0<ONNX node>\0", and ends
 * with ACCRUE_EMU_LAUNCH_END_FUNCTION(); each thread starts with
 * ACCRUE_EMU_THREAD_FUNCTION(block x/y/z, thread x/y/z) (again at each
 * phase of a kernel run in phases at its shuffles and barriers: the
 * thread goes on where it left off), ACCRUE_EMU_BARRIER_FUNCTION() is
 * called when every thread of a block has reached a barrier (before the
 * block's threads enter the phase after it), and each global
 * access calls ACCRUE_EMU_ACCESS_FUNCTION(site, root, offset, address,
 * bytes, flags): `site` its index among the kernel's accesses (the kernel
 * report's order), `root` the buffer it falls in (a step argument's number,
 * or ACCRUE_EMU_ROOT_OTHER plus an index), `offset` its byte offset in that
 * buffer, `address` its host address, `bytes` its size, and `flags` the
 * ACCRUE_EMU_* bits with the element size in bits 8-15. An access to the
 * block's workgroup (shared) memory has ACCRUE_EMU_SHARED, site -1 and
 * root ACCRUE_EMU_ROOT_SHARED plus the buffer's index: it is checked for
 * races among the block's threads, not counted as memory traffic. */
#define ACCRUE_EMU_LAUNCH_FUNCTION "accrue_emu_launch"
#define ACCRUE_EMU_LAUNCH_END_FUNCTION "accrue_emu_launch_end"
#define ACCRUE_EMU_THREAD_FUNCTION "accrue_emu_thread"
#define ACCRUE_EMU_ACCESS_FUNCTION "accrue_emu_access"
#define ACCRUE_EMU_BARRIER_FUNCTION "accrue_emu_barrier"
#define ACCRUE_EMU_STORE 1
#define ACCRUE_EMU_IN_BOUNDS 2
#define ACCRUE_EMU_SHARED 4
#define ACCRUE_EMU_ELEMENT_SHIFT 8
#define ACCRUE_EMU_ROOT_OTHER 1000000
#define ACCRUE_EMU_ROOT_SHARED 2000000

/* CUDA steps: step.so embeds its kernels as one PTX bundle, the argument of
 * the mgpuModuleLoadJIT call its constructors make: a header (the magic,
 * then a uint32 count and a uint32 zero), `count` entries (uint32 sm version
 * such as 90, uint32 zero, uint64 offset from the bundle's start, uint64
 * size including the terminating NUL), then the PTX texts. The runtime loads
 * the newest one the device runs. All integers little-endian. */
#define ACCRUE_PTX_BUNDLE_MAGIC "ACCRUE-PTX-1\0\0\0"
#define ACCRUE_PTX_BUNDLE_MAGIC_SIZE 16

/* Parameters start at multiples of this many elements (64 bytes) in the flat
 * arenas; a data-parallel step reserves this many elements at the end of
 * every arena for the loss sum and count. */
#define ACCRUE_ARENA_ALIGNMENT 16
#define ACCRUE_RESERVED_TAIL 16

/* Rank `rank` of `ranks`'s shard of an n-element arena (see
 * ACCRUE_SHARD_BEGIN_FUNCTION). */
static inline void accrueShard(int64_t n, int64_t rank, int64_t ranks,
                               int64_t *begin, int64_t *size) {
  int64_t per = (n + ranks - 1) / ranks;
  per = (per + ACCRUE_ARENA_ALIGNMENT - 1) / ACCRUE_ARENA_ALIGNMENT *
        ACCRUE_ARENA_ALIGNMENT;
  int64_t first = rank * per < n ? rank * per : n;
  int64_t last = first + per < n ? first + per : n;
  *begin = first;
  *size = last - first;
}

/*===----------------------------------------------------------------------===*
 * Manifest keys (step.json)
 *===----------------------------------------------------------------------===*/

#define ACCRUE_KEY_FORMAT "format"
#define ACCRUE_KEY_VERSION "version"
#define ACCRUE_KEY_TARGET "target"
#define ACCRUE_KEY_LIBRARY "library"
#define ACCRUE_KEY_ENTRY "entry"
#define ACCRUE_KEY_INIT "init"
#define ACCRUE_KEY_MODEL "model"
#define ACCRUE_KEY_FINGERPRINT "fingerprint"
#define ACCRUE_KEY_LOSS "loss"
#define ACCRUE_KEY_LOSS_NORMALIZATION "loss_normalization"
#define ACCRUE_KEY_PRECISION "precision"
#define ACCRUE_KEY_COLLECTIVES "collectives"
#define ACCRUE_KEY_MICRO_BATCH "micro_batch"
#define ACCRUE_KEY_ACCUMULATION_STEPS "accumulation_steps"
#define ACCRUE_KEY_EFFECTIVE_BATCH "effective_batch"
#define ACCRUE_KEY_OPTIMIZER "optimizer"
#define ACCRUE_KEY_CLIP_NORM "clip_norm"
#define ACCRUE_KEY_ARENA_SIZE "arena_size"
#define ACCRUE_KEY_PARAMS "params"
#define ACCRUE_KEY_BUFFERS "buffers"
#define ACCRUE_KEY_ARGS "args"
#define ACCRUE_KEY_ACTIVATION_BYTES "activation_bytes"
#define ACCRUE_KEY_MEMORY_PLAN "memory_plan"
#define ACCRUE_KEY_KERNEL_REPORT "kernel_report"
#define ACCRUE_KEY_COUNTED_ACCESSES "counted_accesses"
#define ACCRUE_KEY_PARTIAL_WINDOWS "partial_windows"
#define ACCRUE_KEY_LOSS_SCALE "loss_scale"
#define ACCRUE_KEY_CUDA_ARCHS "cuda_archs"
#define ACCRUE_KEY_FILES "files"
#define ACCRUE_KEY_SHARD_OPTIMIZER "shard_optimizer"
#define ACCRUE_KEY_SHARD_GRADIENTS "shard_gradients"
/* Keys inside an argument, a parameter, the optimizer and the loss scale. */
#define ACCRUE_KEY_ROLE "role"
#define ACCRUE_KEY_NAME "name"
#define ACCRUE_KEY_DTYPE "dtype"
#define ACCRUE_KEY_SHAPE "shape"
#define ACCRUE_KEY_FIELDS "fields"
#define ACCRUE_KEY_INDEX_CHECKS "index_checks"
#define ACCRUE_KEY_KIND "kind"
#define ACCRUE_KEY_OFFSET "offset"
#define ACCRUE_KEY_NUMEL "numel"
#define ACCRUE_KEY_LR "lr"
#define ACCRUE_KEY_MODE "mode"

/*===----------------------------------------------------------------------===*
 * Enumerations, each with its manifest spelling
 *
 * ACCRUE_X(V) lists (ENUMERATOR, "spelling") pairs; accrueXName() gives the
 * spelling and accrueParseX() reads it back (0 on success, -1 if unknown).
 *===----------------------------------------------------------------------===*/

/* The role of each argument of the step, and of the forward function the
 * importer builds (which uses params, batch, step and sample_base). */
#define ACCRUE_ARG_ROLES(V)                                                    \
  /* The parameter arena (forward: one parameter, a view of it). */            \
  V(ACCRUE_ROLE_PARAMS, "params")                                              \
  /* The fp32 gradient accumulator arena; zero between steps. */               \
  V(ACCRUE_ROLE_ACCUMULATOR, "accumulator")                                    \
  /* One optimizer state arena (exp_avg, exp_avg_sq, momentum_buffer, ...). */ \
  V(ACCRUE_ROLE_STATE, "state")                                                \
  /* A batch input: b*K samples along dimension 0 (forward: b). */             \
  V(ACCRUE_ROLE_BATCH, "batch")                                                \
  /* f32: this step's learning rate. */                                        \
  V(ACCRUE_ROLE_LR, "lr")                                                      \
  /* i64: this optimizer step's number, from 1. */                             \
  V(ACCRUE_ROLE_STEP, "step")                                                  \
  /* i64: how many of the batch's samples are real (the rest pad a partial     \
   * window). */                                                               \
  V(ACCRUE_ROLE_VALID_SAMPLES, "valid_samples")                                \
  /* f32: the loss scale the backward starts from. */                          \
  V(ACCRUE_ROLE_LOSS_SCALE, "loss_scale")                                      \
  /* i64: the dataset index of the batch's first sample (Dropout masks). */    \
  V(ACCRUE_ROLE_SAMPLE_BASE, "sample_base")                                    \
  /* f32[n]: the step's scalar results, named by the argument's fields. */     \
  V(ACCRUE_ROLE_METRICS, "metrics")                                            \
  /* A buffer the caller provides for a tensor result (inference forwards). */ \
  V(ACCRUE_ROLE_OUTPUT, "output")                                              \
  /* u8[n]: scratch memory for the step's temporaries (device targets). */     \
  V(ACCRUE_ROLE_WORKSPACE, "workspace")                                        \
  /* i64: finite steps in a row before this one (GradScaler's streak; with     \
   * loss_scale). The step reports the next scale and streak in its metrics;   \
   * passed as buffers (CUDA targets), the step also writes the next loss      \
   * scale, step number and streak into loss_scale's, step's and this          \
   * argument's buffers, so it can run before its predecessor's metrics. */    \
  V(ACCRUE_ROLE_LOSS_SCALE_STREAK, "loss_scale_streak")                        \
  /* The model's state arena: tensors the forward updates but nothing trains   \
   * (BatchNormalization's running mean and variance), one slice each (see     \
   * "buffers" in the manifest; forward: one buffer, a view of it, and a       \
   * result with train.tied naming it). */                                     \
  V(ACCRUE_ROLE_BUFFERS, "buffers")

/* How an argument is passed: a scalar by value, or a buffer as a memref
 * descriptor (device targets pass the per-step scalars as rank-0 buffers). */
#define ACCRUE_ARG_KINDS(V)                                                    \
  V(ACCRUE_ARG_SCALAR, "scalar")                                               \
  V(ACCRUE_ARG_BUFFER, "buffer")

/* The fields of the metrics buffer, in order. */
#define ACCRUE_METRICS(V)                                                      \
  V(ACCRUE_METRIC_LOSS, "loss")                                                \
  V(ACCRUE_METRIC_GRAD_NORM, "grad_norm")                                      \
  V(ACCRUE_METRIC_NEXT_LOSS_SCALE, "next_loss_scale")                          \
  V(ACCRUE_METRIC_LOSS_SCALE_STREAK, "loss_scale_streak")

/* Where the step runs. */
#define ACCRUE_TARGETS(V)                                                      \
  V(ACCRUE_TARGET_CPU, "cpu")                                                  \
  V(ACCRUE_TARGET_CUDA, "cuda")                                                \
  /* The CUDA pipeline with every kernel run serially on the host: checks      \
   * the CUDA transformations against the CPU on machines without a GPU. */    \
  V(ACCRUE_TARGET_CUDA_EMULATED, "cuda-emulated")

/* The optimizer (PyTorch's definitions; onnx-adam is ai.onnx.preview.training
 * Adam; none leaves the normalized gradient in the accumulator). */
#define ACCRUE_OPTIMIZERS(V)                                                   \
  V(ACCRUE_OPTIMIZER_SGD, "sgd")                                               \
  V(ACCRUE_OPTIMIZER_ADAM, "adam")                                             \
  V(ACCRUE_OPTIMIZER_ADAMW, "adamw")                                           \
  V(ACCRUE_OPTIMIZER_ADAGRAD, "adagrad")                                       \
  V(ACCRUE_OPTIMIZER_ONNX_ADAM, "onnx-adam")                                   \
  V(ACCRUE_OPTIMIZER_NONE, "none")

/* Loss scaling: a fixed scale, or torch.amp.GradScaler's dynamic rule. */
#define ACCRUE_LOSS_SCALE_MODES(V)                                             \
  V(ACCRUE_LOSS_SCALE_NONE, "none")                                            \
  V(ACCRUE_LOSS_SCALE_STATIC, "static")                                        \
  V(ACCRUE_LOSS_SCALE_DYNAMIC, "dynamic")

/* Compute precision of the forward and backward (parameters, gradients and
 * optimizer state are always fp32). */
#define ACCRUE_PRECISIONS(V)                                                   \
  V(ACCRUE_PRECISION_FP32, "fp32")                                             \
  V(ACCRUE_PRECISION_BF16, "bf16")                                             \
  V(ACCRUE_PRECISION_FP16, "fp16")

/* How a mean-reduced loss is normalized over the micro-batches: exactly
 * (sum and count, divided once) or as the mean of micro-batch means. */
#define ACCRUE_LOSS_NORMALIZATIONS(V)                                          \
  V(ACCRUE_LOSS_NORMALIZATION_EXACT, "exact")                                  \
  V(ACCRUE_LOSS_NORMALIZATION_PER_MICRO_BATCH, "per-micro-batch")

/* Data-parallel gradient sums: none (one process), one all-reduce per
 * optimizer step after the micro-batch loop, or one per micro-batch. */
#define ACCRUE_COLLECTIVES(V)                                                  \
  V(ACCRUE_COLLECTIVES_NONE, "none")                                           \
  V(ACCRUE_COLLECTIVES_DEFERRED, "deferred")                                   \
  V(ACCRUE_COLLECTIVES_PER_MICRO_BATCH, "per-micro-batch")

/* Element types: of the manifest's arguments and batch inputs, of the arrays
 * a host hands the runtime (accrueDatasetAddArray) and of accrue_gemm's
 * operands. The first seven keep the C API's codes of manifest version 4. */
#define ACCRUE_DTYPES(V)                                                       \
  V(ACCRUE_DTYPE_FLOAT32, "f32")                                               \
  V(ACCRUE_DTYPE_FLOAT64, "f64")                                               \
  V(ACCRUE_DTYPE_FLOAT16, "f16")                                               \
  V(ACCRUE_DTYPE_INT64, "i64")                                                 \
  V(ACCRUE_DTYPE_INT32, "i32")                                                 \
  V(ACCRUE_DTYPE_BOOL, "bool")                                                 \
  V(ACCRUE_DTYPE_UINT8, "u8")                                                  \
  V(ACCRUE_DTYPE_BFLOAT16, "bf16")

#define ACCRUE_ENUMERATOR_(E, S) E,
#define ACCRUE_SPELLING_(E, S) S,
/* Declares enum `Type` and, for `name`, `int accrue<name>Count(void)`,
 * `const char *accrue<name>Name(Type)` and
 * `int accrueParse<name>(const char *, Type *)`. */
#define ACCRUE_DEFINE_ENUM_(Type, name, LIST)                                  \
  typedef enum Type { LIST(ACCRUE_ENUMERATOR_) } Type;                         \
  static inline int accrue##name##Count(void) {                                \
    static const char *const spellings[] = {LIST(ACCRUE_SPELLING_)};           \
    return (int)(sizeof spellings / sizeof *spellings);                        \
  }                                                                            \
  static inline const char *accrue##name##Name(Type value) {                   \
    static const char *const spellings[] = {LIST(ACCRUE_SPELLING_)};           \
    return (int)value >= 0 &&                                                  \
                   (int)value < (int)(sizeof spellings / sizeof *spellings)    \
               ? spellings[value]                                              \
               : "?";                                                          \
  }                                                                            \
  static inline int accrueParse##name(const char *text, Type *value) {         \
    static const char *const spellings[] = {LIST(ACCRUE_SPELLING_)};           \
    for (int i = 0; i < (int)(sizeof spellings / sizeof *spellings); ++i)      \
      if (strcmp(text, spellings[i]) == 0) {                                   \
        *value = (Type)i;                                                      \
        return 0;                                                              \
      }                                                                        \
    return -1;                                                                 \
  }

ACCRUE_DEFINE_ENUM_(AccrueArgRole, ArgRole, ACCRUE_ARG_ROLES)
ACCRUE_DEFINE_ENUM_(AccrueArgKind, ArgKind, ACCRUE_ARG_KINDS)
ACCRUE_DEFINE_ENUM_(AccrueMetric, Metric, ACCRUE_METRICS)
ACCRUE_DEFINE_ENUM_(AccrueTarget, Target, ACCRUE_TARGETS)
ACCRUE_DEFINE_ENUM_(AccrueOptimizer, Optimizer, ACCRUE_OPTIMIZERS)
ACCRUE_DEFINE_ENUM_(AccrueLossScaleMode, LossScaleMode, ACCRUE_LOSS_SCALE_MODES)
ACCRUE_DEFINE_ENUM_(AccruePrecision, Precision, ACCRUE_PRECISIONS)
ACCRUE_DEFINE_ENUM_(AccrueLossNormalization, LossNormalization,
                    ACCRUE_LOSS_NORMALIZATIONS)
ACCRUE_DEFINE_ENUM_(AccrueCollectives, Collectives, ACCRUE_COLLECTIVES)
ACCRUE_DEFINE_ENUM_(AccrueDType, DType, ACCRUE_DTYPES)

#ifdef __cplusplus
}
#endif

#endif /* ACCRUE_RUNTIME_STEPABI_H */
