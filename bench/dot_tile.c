// dot_tile.c - the CPU dot-product kernel's loop nest, alone.
//
// vectorize-contractions gives a contraction whose A and B are both
// contiguous along k (a convolution's weight gradient dW = dY col^T, a
// Linear's forward x W^T) a 4 x 4 block of C whose 16 partial sums are
// 16-lane vectors: per step of k, 4 vectors of A, 4 of B, 16 FMAs. This
// program runs the same nest with AVX-512 intrinsics over the shapes of the
// CNN's first weight gradient, to tell the kernel's own rate from what the
// step around it costs (bench/README.md, vs_pytorch.py section).
//
//   C[M][N] += sum over s < S, k < K of A[s][M][K] * B[s][N][K]
//
// The samples s run in blocks of SB around the blocks of C (n outside m),
// the partial sums waiting in P between blocks, as Plan::outerKBlock does.
//
// usage: clang -O3 -march=native [-DM=64 -DN=288 -DK=256 -DS=16 -DSB=2]
//            [-DCOLD] bench/dot_tile.c -o /tmp/dot_tile && /tmp/dot_tile
// -DCOLD writes 64 MiB between runs, so A and B come from memory.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef M
#define M 64
#endif
#ifndef N
#define N 288
#endif
#ifndef K
#define K 256
#endif
#ifndef S
#define S 16
#endif
#ifndef SB
#define SB 2
#endif

static float *A, *B, *C, *P;

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// The partial sums of C's element (m + i, n + j) in P.
static float *partial(int m, int n, int i, int j) {
  return P + ((size_t)(m + i) * N + n + j) * 16;
}

static void kernel(void) {
  for (int sb = 0; sb < S; sb += SB)
    for (int n = 0; n < N; n += 4)
      for (int m = 0; m < M; m += 4) {
        __m512 sum[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j)
            sum[i][j] = sb == 0 ? _mm512_setzero_ps()
                                : _mm512_load_ps(partial(m, n, i, j));
        for (int s = sb; s < sb + SB; ++s) {
          const float *a = A + ((size_t)s * M + m) * K;
          const float *b = B + ((size_t)s * N + n) * K;
          for (int k = 0; k < K; k += 16) {
            __m512 av[4], bv[4];
            for (int i = 0; i < 4; ++i)
              av[i] = _mm512_load_ps(a + i * K + k);
            for (int j = 0; j < 4; ++j)
              bv[j] = _mm512_load_ps(b + j * K + k);
            for (int i = 0; i < 4; ++i)
              for (int j = 0; j < 4; ++j)
                sum[i][j] = _mm512_fmadd_ps(av[i], bv[j], sum[i][j]);
          }
        }
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            if (sb + SB < S)
              _mm512_store_ps(partial(m, n, i, j), sum[i][j]);
            else
              C[(m + i) * N + n + j] += _mm512_reduce_add_ps(sum[i][j]);
          }
      }
}

int main(void) {
  A = aligned_alloc(64, sizeof(float) * S * M * K);
  B = aligned_alloc(64, sizeof(float) * S * N * K);
  C = aligned_alloc(64, sizeof(float) * M * N);
  P = aligned_alloc(64, sizeof(float) * M * N * 16);
  for (size_t i = 0; i < (size_t)S * M * K; ++i)
    A[i] = (float)(i % 7) * 0.1f;
  for (size_t i = 0; i < (size_t)S * N * K; ++i)
    B[i] = (float)(i % 5) * 0.1f;
  memset(C, 0, sizeof(float) * M * N);
  static char flush[64 << 20];
  double best = 1e9;
  for (int run = 0; run < 30; ++run) {
#ifdef COLD
    memset(flush, run, sizeof flush);
#endif
    double start = seconds();
    kernel();
    double time = seconds() - start;
    best = time < best ? time : best;
  }
  printf("M=%d N=%d K=%d S=%d SB=%d: %.1f GFLOP/s (best of 30, %.3f ms)\n", M,
         N, K, S, SB, 2.0 * M * N * K * S / best / 1e9, best * 1e3);
  return 0;
}
