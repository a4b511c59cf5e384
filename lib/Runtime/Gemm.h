//===- Gemm.h - the GEMM entry CUDA steps call ------------------*- C++ -*-===//
//
// A CUDA step hands each contraction to ACCRUE_GEMM_FUNCTION with row,
// column and batch strides of row-or-column-major operands (StepABI.h).
// planGemm turns that into what BLAS libraries take: column-major matrices
// with leading dimensions and transpose flags, the output never transposed
// (a row-major output computes D^T = B^T A^T). cuBLASLt runs the plan on
// the GPU; runGemmOnHost runs the same plan on the CPU, for the emulated
// target, so the CPU tests exercise the layouts cuBLASLt is given.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_RUNTIME_GEMM_H
#define ACCRUE_LIB_RUNTIME_GEMM_H

#include "accrue-runtime/StepABI.h"

#include <cstdint>
#include <exception>

/// The GEMM entry compiled CUDA steps call (an AccrueGemmFn, StepABI.h).
extern "C" void accrue_gemm(int64_t batch, int64_t m, int64_t n, int64_t k,
                            intptr_t a, int64_t aRow, int64_t aCol,
                            int64_t aBatch, intptr_t b, int64_t bRow,
                            int64_t bCol, int64_t bBatch, intptr_t c,
                            int64_t cRow, int64_t cCol, int64_t cBatch,
                            int64_t types, float beta, intptr_t bias);

namespace accrue::rt {

/// A column-major matrix: `rows` x `cols` stored with leading dimension
/// `ld`, then `transposed` if the product reads its transpose.
struct BlasMatrix {
  intptr_t address = 0;
  int64_t rows = 0, cols = 0, ld = 1, batchStride = 0;
  bool transposed = false;
  AccrueDType type = ACCRUE_DTYPE_FLOAT32;
};

/// What a GEMM also computes from its inputs, in the column-major plan's
/// terms (cuBLASLt's BGRADA and BGRADB epilogues): the f32 sums over k of
/// op(A)'s rows (m values) or of op(B)'s columns (n values).
enum class GemmEpilogue { None, BiasGradientA, BiasGradientB };

/// D (m x n) = op(A) (m x k) op(B) (k x n) + beta C, `batch` times.
struct GemmPlan {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  BlasMatrix a, b, c;
  float beta = 0;
  /// The precision f32 inputs hold exactly (f32 if none narrower).
  AccrueDType exact = ACCRUE_DTYPE_FLOAT32;
  GemmEpilogue epilogue = GemmEpilogue::None;
  /// Where the epilogue's f32 vector goes (contiguous).
  intptr_t bias = 0;
};

/// The plan for one call of the entry; throws rt::Error if an operand has
/// unit stride along neither rows nor columns.
GemmPlan planGemm(int64_t batch, int64_t m, int64_t n, int64_t k, intptr_t a,
                  int64_t aRow, int64_t aCol, int64_t aBatch, intptr_t b,
                  int64_t bRow, int64_t bCol, int64_t bBatch, intptr_t c,
                  int64_t cRow, int64_t cCol, int64_t cBatch, int64_t types,
                  float beta, intptr_t bias = 0);

/// Runs `plan` on host memory, accumulating in f32 like cuBLASLt's
/// CUBLAS_COMPUTE_32F (C is not read when beta is 0); an epilogue's sums
/// are in k order.
void runGemmOnHost(const GemmPlan &plan);

/// Where the entry sends its plans (a CUDA backend installs cuBLASLt);
/// nullptr: the host.
using GemmRunner = void (*)(const GemmPlan &plan);
void setGemmRunner(GemmRunner runner);

/// Reports an error in a runtime entry compiled code called (no exception
/// may cross compiled frames) and ends the process (every rank of a
/// data-parallel run).
[[noreturn]] void failInStep(const char *where, const std::exception &e);

} // namespace accrue::rt

#endif // ACCRUE_LIB_RUNTIME_GEMM_H
