/* A C host that uses nothing of Accrue but an artifact's step.h: it loads
 * step.so, checks the fingerprint against the header's, and runs optimizer
 * steps of the MLP of test/e2e/models/mlp.py compiled with AdamW, passing
 * the arguments as step.h lays them out (test/e2e/step_header.py).
 *
 *   train-step ARTIFACT_DIR PARAMS.bin X.bin Y.bin STEPS K LR OUT.bin
 *
 * PARAMS.bin is the float32 parameter arena; X.bin and Y.bin hold STEPS
 * windows of ACCRUE_STEP_MICRO_BATCH x K samples (K: the artifact's
 * accumulation steps), LR the learning rate; OUT.bin receives the
 * arena after the steps, and each step's metrics go to stdout. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "step.h"

/* The arguments this host knows how to pass (see the list in step.h). */
_Static_assert(ACCRUE_STEP_NUM_STATES == 2, "an optimizer with two states");

enum { FEATURES = 8 };

static void *readFile(const char *path, size_t size) {
  FILE *f = fopen(path, "rb");
  void *data = malloc(size);
  if (!f || fread(data, 1, size, f) != size) {
    fprintf(stderr, "train-step: cannot read %zu bytes of %s\n", size, path);
    exit(1);
  }
  fclose(f);
  return data;
}

/* A rank-1 or rank-2 memref descriptor, expanded into the packed
 * arguments: allocated, aligned, offset, sizes..., strides.... */
struct Memref {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};

static void **pack(void **args, struct Memref *m, int rank) {
  *args++ = &m->allocated;
  *args++ = &m->aligned;
  *args++ = &m->offset;
  for (int i = 0; i < rank; ++i)
    *args++ = &m->sizes[i];
  for (int i = 0; i < rank; ++i)
    *args++ = &m->strides[i];
  return args;
}

static struct Memref vector(void *data, int64_t size) {
  struct Memref m = {data, data, 0, {size, 0}, {1, 0}};
  return m;
}

int main(int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: train-step ARTIFACT_DIR PARAMS.bin X.bin Y.bin "
                    "STEPS K LR OUT.bin\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/step.so", argv[1]);
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    fprintf(stderr, "train-step: %s\n", dlerror());
    return 1;
  }
  const uint64_t *fingerprint = dlsym(library, "accrue_step_fingerprint");
  void (*step)(void **) = (void (*)(void **))dlsym(library, "_mlir_train_step");
  if (!fingerprint || !step || *fingerprint != ACCRUE_STEP_FINGERPRINT) {
    fprintf(stderr, "train-step: step.so does not match step.h\n");
    return 1;
  }
  int steps = atoi(argv[5]);
  int64_t window = ACCRUE_STEP_MICRO_BATCH * (int64_t)atoi(argv[6]);
  size_t arena = ACCRUE_STEP_ARENA_SIZE * sizeof(float);
  float *params = readFile(argv[2], arena);
  float *x = readFile(argv[3], steps * window * FEATURES * sizeof(float));
  int64_t *y = readFile(argv[4], steps * window * sizeof(int64_t));
  float *grads = calloc(ACCRUE_STEP_ARENA_SIZE, sizeof(float));
  float *m = calloc(ACCRUE_STEP_ARENA_SIZE, sizeof(float));
  float *v = calloc(ACCRUE_STEP_ARENA_SIZE, sizeof(float));
  float metrics[2];
  float lr = (float)atof(argv[7]);

  for (int64_t t = 1; t <= steps; ++t) {
    struct Memref p = vector(params, ACCRUE_STEP_ARENA_SIZE),
                  g = vector(grads, ACCRUE_STEP_ARENA_SIZE),
                  s0 = vector(m, ACCRUE_STEP_ARENA_SIZE),
                  s1 = vector(v, ACCRUE_STEP_ARENA_SIZE),
                  mx = {x,
                        x + (t - 1) * window * FEATURES,
                        0,
                        {window, FEATURES},
                        {FEATURES, 1}},
                  my = vector(y + (t - 1) * window, window),
                  mm = vector(metrics, 2);
    my.allocated = y;
    int64_t valid = window;
    void *args[64], **next = args;
    next = pack(next, &p, 1);
    next = pack(next, &g, 1);
    next = pack(next, &s0, 1);
    next = pack(next, &s1, 1);
    next = pack(next, &mx, 2);
    next = pack(next, &my, 1);
    *next++ = &lr;
    *next++ = &t;
    *next++ = &valid;
    next = pack(next, &mm, 1);
    step(args);
    printf("step %lld loss %.9g grad_norm %.9g\n", (long long)t, metrics[0],
           metrics[1]);
  }
  FILE *out = fopen(argv[8], "wb");
  if (!out || fwrite(params, 1, arena, out) != arena || fclose(out) != 0) {
    fprintf(stderr, "train-step: cannot write %s\n", argv[8]);
    return 1;
  }
  return 0;
}
