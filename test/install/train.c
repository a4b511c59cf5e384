/*===- train.c - compile and train through Accrue::CAPI alone ------------===*
 *
 *   train-c MODEL.onnx DATA.npz WORKDIR STEPS
 *
 * Compiles MODEL with micro-batch 16 x 2 and clipping at 1 into
 * WORKDIR/art, trains STEPS steps on DATA and exports WORKDIR/trained.onnx,
 * with nothing but the C API.
 *
 *===----------------------------------------------------------------------===*/

#include "accrue-c/Compiler.h"
#include "accrue-c/Runtime.h"

#include <stdio.h>
#include <string.h>

static int check(int status, AccrueError *error) {
  if (status) {
    fprintf(stderr, "train-c: error: %s\n", accrueErrorMessage(error));
    accrueErrorDestroy(error);
  }
  return status;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: train-c MODEL.onnx DATA.npz WORKDIR STEPS\n");
    return 2;
  }
  char art[4096], trained[4096];
  snprintf(art, sizeof art, "%s/art", argv[3]);
  snprintf(trained, sizeof trained, "%s/trained.onnx", argv[3]);
  AccrueError *error = NULL;

  AccrueCompileOptions *compile = accrueCompileOptionsCreate();
  if (check(accrueCompileOptionsSet(compile, "micro_batch", "16", &error),
            error) ||
      check(accrueCompileOptionsSet(compile, "accumulation_steps", "2", &error),
            error) ||
      check(accrueCompileOptionsSet(compile, "clip_norm", "1", &error),
            error) ||
      check(accrueCompile(argv[1], art, compile, NULL, NULL, &error), error))
    return 1;
  accrueCompileOptionsDestroy(compile);

  AccrueArtifact *artifact = accrueArtifactOpen(art, &error);
  AccrueDataset *data = artifact ? accrueDatasetOpenNpz(argv[2], &error) : NULL;
  AccrueSessionOptions *options = accrueSessionOptionsCreate();
  if (!data ||
      check(accrueSessionOptionsSet(options, "steps", argv[4], &error), error))
    return check(-1, error), 1;
  AccrueSession *session = accrueSessionCreate(artifact, data, options, &error);
  if (!session)
    return check(-1, error), 1;
  while (accrueSessionIterations(session) <
         accrueSessionPlannedSteps(session)) {
    AccrueStepMetrics metrics;
    if (check(accrueSessionStep(session, &metrics, &error), error))
      return 1;
    printf("step %lld loss %.6f\n", (long long)metrics.iteration, metrics.loss);
  }
  if (check(accrueSessionExportOnnx(session, trained, &error), error))
    return 1;
  accrueSessionDestroy(session);
  accrueSessionOptionsDestroy(options);
  accrueDatasetDestroy(data);
  accrueArtifactDestroy(artifact);
  return 0;
}
