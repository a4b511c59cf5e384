/*===- accrue-c/Compiler.h - Accrue's compiler, from C -----------*- C -*-===*
 *
 * The compiler's C API, in MLIR's C API style: register Accrue's dialects
 * (nn, train) and passes with an MLIR context or pass manager of the host's
 * own compiler, add Accrue's pipelines to its pass managers, and compile an
 * ONNX model into an artifact directory with accrue-compile's settings.
 * Errors use AccrueError (accrue-c/Runtime.h); compilation reports each
 * diagnostic, with the ONNX node it concerns, to an optional callback.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ACCRUE_C_COMPILER_H
#define ACCRUE_C_COMPILER_H

#include "accrue-c/Runtime.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Dialects, passes and pipelines, for MLIR hosts
 *===----------------------------------------------------------------------===*/

/* Adds the nn and train dialects, the upstream dialects Accrue's pipelines
 * produce, and the interface models they need. */
void accrueRegisterDialects(MlirDialectRegistry registry);

/* Registers every Accrue pass and pipeline (accrue-train-pipeline,
 * accrue-train-transforms, accrue-lower-cpu, accrue-lower-cuda, and each
 * pass by its accrue-opt name) with MLIR's global registry, so that
 * mlirParsePassPipeline and mlirOpPassManagerAddPipeline accept them. Safe
 * to call more than once. */
void accrueRegisterPasses(void);

/* Adds accrue-compile's pipeline (the train passes, then lowering for the
 * target) to `passManager`, which must run on builtin.module. `options` is
 * the pipeline's option text ("precision=bf16 data-parallel", as for
 * accrue-opt --accrue-train-pipeline=...); errors go to `errorCallback`. */
MlirLogicalResult accrueAddTrainPipeline(MlirOpPassManager passManager,
                                         MlirStringRef options,
                                         MlirStringCallback errorCallback,
                                         void *userData);

/*===----------------------------------------------------------------------===*
 * Compiling ONNX models
 *===----------------------------------------------------------------------===*/

typedef struct AccrueCompileOptions AccrueCompileOptions;

AccrueCompileOptions *accrueCompileOptionsCreate(void);
void accrueCompileOptionsDestroy(AccrueCompileOptions *options);
/* Sets one of accrue-compile's settings by name, '_' for '-' in its flag
 * (micro_batch, accumulation_steps, optimizer, lr, weight_decay,
 * clip_norm, precision, loss_scale, target, cuda_arch, emit, ...);
 * booleans take "true" or "false". micro_batch is required unless
 * memory_budget chooses it. */
int accrueCompileOptionsSet(AccrueCompileOptions *options, const char *name,
                            const char *value, AccrueError **error);
/* The names accrueCompileOptionsSet takes, and whether each is a boolean
 * (a flag of accrue-compile). */
int accrueCompileOptionsNumSettings(void);
const char *accrueCompileOptionsSettingName(int index);
int accrueCompileOptionsSettingIsFlag(int index);

/* Called once per diagnostic: "error", "warning", "note" or "remark", and
 * the message, with the ONNX node (or file position) it concerns. */
typedef void (*AccrueDiagnosticCallback)(const char *severity,
                                         const char *message, void *userData);

/* Compiles the ONNX model at `modelPath` into the artifact directory
 * `output` (or, with the emit setting, the textual file). On failure the
 * error holds the first error's message and nothing is left at `output`.
 */
int accrueCompile(const char *modelPath, const char *output,
                  const AccrueCompileOptions *options,
                  AccrueDiagnosticCallback callback, void *userData,
                  AccrueError **error);

/* The same for a model held in memory (the bytes of a .onnx file). Its
 * initializers must be stored inside it: there is no folder for external
 * data. */
int accrueCompileBytes(const void *bytes, size_t size, const char *output,
                       const AccrueCompileOptions *options,
                       AccrueDiagnosticCallback callback, void *userData,
                       AccrueError **error);

#ifdef __cplusplus
}
#endif

#endif /* ACCRUE_C_COMPILER_H */
