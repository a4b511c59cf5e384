/*===- GlooShim.h - the C face of libaccrue-gloo.so ---------------*- C -*-===*
 *
 * Gloo is a C++ library; the runtime loads it with dlopen through this
 * small shared library of Accrue's (lib/Runtime/Gloo), so that neither the
 * runtime nor a single-process run links it. Every function returns 0 on
 * success, or nonzero with a message in `error` (NUL-terminated, at most
 * `error_size` bytes).
 *
 *===----------------------------------------------------------------------===*/

#ifndef ACCRUE_RUNTIME_GLOOSHIM_H
#define ACCRUE_RUNTIME_GLOOSHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AccrueGloo AccrueGloo;

/* What accrue_gloo_all_reduce combines. */
enum AccrueGlooReduction {
  ACCRUE_GLOO_SUM_F32 = 0,
  ACCRUE_GLOO_MIN_I64 = 1,
  ACCRUE_GLOO_MAX_I64 = 2,
};

/* Connects rank `rank` of `size`: the ranks meet through a key-value store
 * that rank 0 serves on TCP port `store_port` of `store_host` (torchrun's
 * MASTER_ADDR and MASTER_PORT), then connect every pair over TCP, this
 * rank listening on `self_host` (empty: the address its connection to the
 * store leaves from). The meeting fails after `rendezvous_seconds`, a
 * collective that waits longer than `collective_seconds`. */
typedef int (*AccrueGlooConnectFn)(int rank, int size, const char *store_host,
                                   int store_port, const char *self_host,
                                   int rendezvous_seconds,
                                   int collective_seconds, AccrueGloo **group,
                                   char *error, size_t error_size);
/* In place over every rank. */
typedef int (*AccrueGlooAllReduceFn)(AccrueGloo *group, void *data,
                                     int64_t count, int reduction, char *error,
                                     size_t error_size);
/* Every rank's `bytes` at `data` become rank 0's. */
typedef int (*AccrueGlooBroadcastFn)(AccrueGloo *group, void *data,
                                     int64_t bytes, char *error,
                                     size_t error_size);
/* ZeRO's collectives over f32 arenas cut in `size` consecutive shards of
 * counts[r] elements (rank r's starting after those of the ranks before
 * it), in place. Reduce-scatter: this rank's shard becomes the sum over the
 * ranks of theirs (the rest of `data` is scratch). All-gather: every
 * shard becomes its owner's. */
typedef int (*AccrueGlooReduceScatterFn)(AccrueGloo *group, float *data,
                                         const int64_t *counts, char *error,
                                         size_t error_size);
typedef int (*AccrueGlooAllGatherFn)(AccrueGloo *group, float *data,
                                     const int64_t *counts, char *error,
                                     size_t error_size);
typedef void (*AccrueGlooCloseFn)(AccrueGloo *group);

#define ACCRUE_GLOO_CONNECT "accrue_gloo_connect"
#define ACCRUE_GLOO_ALL_REDUCE "accrue_gloo_all_reduce"
#define ACCRUE_GLOO_BROADCAST "accrue_gloo_broadcast"
#define ACCRUE_GLOO_REDUCE_SCATTER "accrue_gloo_reduce_scatter"
#define ACCRUE_GLOO_ALL_GATHER "accrue_gloo_all_gather"
#define ACCRUE_GLOO_CLOSE "accrue_gloo_close"

#ifdef __cplusplus
}
#endif

#endif /* ACCRUE_RUNTIME_GLOOSHIM_H */
