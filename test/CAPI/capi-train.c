/*===- capi-train.c - train through the runtime's C API ------------------===*
 *
 * A plain C host of include/accrue-c/Runtime.h, for the tests:
 *
 *   capi-train ARTIFACT (--npz DATA.npz | --raw NAME=FILE:DTYPE:D0xD1...)...
 *              [--set NAME=VALUE]... [--export OUT.onnx]
 *              [--print-param NAME]
 *
 * --raw adds an array from a raw little-endian file (DTYPE as the manifest
 * spells it: f32, f64, f16, bf16, i64, i32, bool or u8). Runs every planned
 *step, printing each step's metrics line; errors print "capi-train: error:
 *MESSAGE" and exit 1.
 *
 *===----------------------------------------------------------------------===*/

#include "accrue-c/Runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed(AccrueError *error) {
  fprintf(stderr, "capi-train: error: %s\n", accrueErrorMessage(error));
  accrueErrorDestroy(error);
  return 1;
}

/* NAME=FILE:DTYPE:D0xD1... into the dataset. */
static int addRaw(AccrueDataset *data, char *spec, AccrueError **error) {
  char *eq = strchr(spec, '=');
  char *colon1 = eq ? strchr(eq + 1, ':') : NULL;
  char *colon2 = colon1 ? strchr(colon1 + 1, ':') : NULL;
  if (!colon2) {
    fprintf(stderr, "capi-train: error: bad --raw '%s'\n", spec);
    return 1;
  }
  *eq = *colon1 = *colon2 = '\0';
  const char *name = spec, *file = eq + 1, *dtypeName = colon1 + 1;
  int64_t shape[8];
  int rank = 0;
  for (char *dim = strtok(colon2 + 1, "x"); dim && rank < 8;
       dim = strtok(NULL, "x"))
    shape[rank++] = atoll(dim);
  /* The manifest's spellings, as accrueArtifactInputDType gives them. */
  AccrueDType dtype;
  size_t width;
  if (accrueParseDType(dtypeName, &dtype) != 0) {
    fprintf(stderr, "capi-train: error: bad dtype '%s'\n", dtypeName);
    return 1;
  }
  switch (dtype) {
  case ACCRUE_DTYPE_FLOAT64:
  case ACCRUE_DTYPE_INT64:
    width = 8;
    break;
  case ACCRUE_DTYPE_FLOAT32:
  case ACCRUE_DTYPE_INT32:
    width = 4;
    break;
  case ACCRUE_DTYPE_FLOAT16:
  case ACCRUE_DTYPE_BFLOAT16:
    width = 2;
    break;
  default:
    width = 1;
  }
  size_t count = 1;
  for (int i = 0; i < rank; ++i)
    count *= (size_t)shape[i];
  void *buffer = malloc(count * width + 1);
  FILE *in = fopen(file, "rb");
  if (!buffer || !in || fread(buffer, width, count, in) != count) {
    fprintf(stderr, "capi-train: error: cannot read %zu values from '%s'\n",
            count, file);
    return 1;
  }
  fclose(in);
  int status =
      accrueDatasetAddArray(data, name, dtype, shape, rank, buffer, error);
  free(buffer); /* the dataset keeps a copy */
  return status ? -1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: capi-train ARTIFACT --npz DATA | --raw ... "
                    "[--set NAME=VALUE] [--export OUT] [--print-param NAME]\n");
    return 2;
  }
  AccrueError *error = NULL;
  AccrueArtifact *artifact = accrueArtifactOpen(argv[1], &error);
  if (!artifact)
    return failed(error);
  AccrueDataset *data = NULL;
  AccrueSessionOptions *options = accrueSessionOptionsCreate();
  const char *exportPath = NULL, *printParam = NULL;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--npz")) {
      accrueDatasetDestroy(data);
      if (!(data = accrueDatasetOpenNpz(argv[i + 1], &error)))
        return failed(error);
    } else if (!strcmp(argv[i], "--raw")) {
      if (!data)
        data = accrueDatasetCreate();
      int status = addRaw(data, argv[i + 1], &error);
      if (status < 0)
        return failed(error);
      if (status > 0)
        return 1;
    } else if (!strcmp(argv[i], "--set")) {
      char *eq = strchr(argv[i + 1], '=');
      if (!eq)
        return fprintf(stderr, "capi-train: error: bad --set\n"), 1;
      *eq = '\0';
      if (accrueSessionOptionsSet(options, argv[i + 1], eq + 1, &error))
        return failed(error);
    } else if (!strcmp(argv[i], "--export")) {
      exportPath = argv[i + 1];
    } else if (!strcmp(argv[i], "--print-param")) {
      printParam = argv[i + 1];
    } else {
      fprintf(stderr, "capi-train: error: unknown option '%s'\n", argv[i]);
      return 1;
    }
  }
  if (!data)
    data = accrueDatasetCreate();
  AccrueSession *session = accrueSessionCreate(artifact, data, options, &error);
  /* The session keeps what it needs: the rest can go. */
  accrueDatasetDestroy(data);
  accrueSessionOptionsDestroy(options);
  if (!session)
    return failed(error);
  while (accrueSessionIterations(session) <
         accrueSessionPlannedSteps(session)) {
    AccrueStepMetrics metrics;
    if (accrueSessionStep(session, &metrics, &error))
      return failed(error);
    printf("step %lld loss %.9g grad_norm %.9g: %s\n",
           (long long)metrics.iteration, metrics.loss, metrics.gradNorm,
           accrueSessionLastRecord(session));
  }
  if (exportPath && accrueSessionExportOnnx(session, exportPath, &error))
    return failed(error);
  if (printParam) {
    for (int p = 0; p < accrueArtifactNumParameters(artifact); ++p) {
      if (strcmp(accrueArtifactParameterName(artifact, p), printParam))
        continue;
      int64_t count = 1;
      for (int d = 0; d < accrueArtifactParameterRank(artifact, p); ++d)
        count *= accrueArtifactParameterShape(artifact, p)[d];
      float *values = malloc(sizeof(float) * (size_t)count);
      if (accrueSessionReadParameter(session, printParam, values, count,
                                     &error))
        return failed(error);
      printf("%s:", printParam);
      for (int64_t i = 0; i < count; ++i)
        printf(" %.9g", values[i]);
      printf("\n");
      free(values);
    }
  }
  accrueSessionDestroy(session);
  accrueArtifactDestroy(artifact);
  return 0;
}
