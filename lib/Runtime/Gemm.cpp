//===- Gemm.cpp - the GEMM entry CUDA steps call ----------------*- C++ -*-===//

#include "Gemm.h"

#include "accrue-runtime/Collectives.h"
#include "accrue-runtime/Error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

using namespace accrue::rt;

namespace {

/// An operand as the step passes it: rows x cols with element strides.
struct Strided {
  intptr_t address;
  int64_t rows, cols, rowStride, colStride, batchStride;
  AccrueDType type;

  Strided transposed() const {
    return {address, cols, rows, colStride, rowStride, batchStride, type};
  }
};

/// `x` as a column-major matrix, read directly or transposed; nullopt if
/// neither its rows nor its columns are contiguous.
std::optional<BlasMatrix> columnMajor(const Strided &x) {
  auto matrix = [&](int64_t rows, int64_t cols, int64_t ld,
                    bool transposed) -> std::optional<BlasMatrix> {
    if (ld < std::max<int64_t>(rows, 1))
      return std::nullopt;
    return BlasMatrix{x.address,     rows,       cols,  ld,
                      x.batchStride, transposed, x.type};
  };
  if (x.rows <= 1 || x.rowStride == 1)
    if (auto m = matrix(
            x.rows, x.cols,
            x.cols <= 1 ? std::max<int64_t>(x.rows, 1) : x.colStride, false))
      return m;
  if (x.cols <= 1 || x.colStride == 1)
    return matrix(x.cols, x.rows,
                  x.rows <= 1 ? std::max<int64_t>(x.cols, 1) : x.rowStride,
                  true);
  return std::nullopt;
}

BlasMatrix require(const std::optional<BlasMatrix> &matrix, const char *name,
                   const Strided &x) {
  if (!matrix)
    throw Error(std::string("GEMM operand ") + name + " (" +
                std::to_string(x.rows) + "x" + std::to_string(x.cols) +
                ", strides " + std::to_string(x.rowStride) + ", " +
                std::to_string(x.colStride) +
                ") has neither contiguous rows nor contiguous columns");
  return *matrix;
}

float load(const BlasMatrix &x, int64_t offset) {
  switch (x.type) {
  case ACCRUE_DTYPE_FLOAT32:
    return reinterpret_cast<const float *>(x.address)[offset];
  case ACCRUE_DTYPE_BFLOAT16: {
    uint32_t bits =
        uint32_t(reinterpret_cast<const uint16_t *>(x.address)[offset]) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  case ACCRUE_DTYPE_FLOAT16: {
    uint16_t h = reinterpret_cast<const uint16_t *>(x.address)[offset];
    uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f,
             mantissa = h & 0x3ff, bits;
    if (exponent == 0x1f) {
      bits = sign | 0x7f800000 | (mantissa << 13);
    } else if (exponent != 0) {
      bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      bits = sign;
    } else {
      // Subnormal: normalize.
      int shift = 0;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        ++shift;
      }
      bits = sign | uint32_t(113 - shift) << 23 | ((mantissa & 0x3ff) << 13);
    }
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  default:
    return 0; // planGemm admits no other type
  }
}

/// Stores f32 `value` into `x` at `offset`, rounded to nearest even in
/// its type (as cuBLASLt converts an f32 accumulation for a narrower D).
void store(const BlasMatrix &x, int64_t offset, float value) {
  switch (x.type) {
  case ACCRUE_DTYPE_FLOAT32:
    reinterpret_cast<float *>(x.address)[offset] = value;
    return;
  case ACCRUE_DTYPE_BFLOAT16: {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    uint16_t rounded =
        std::isnan(value)
            ? uint16_t((bits >> 16) | 0x40) // quiet, sign kept
            : uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    reinterpret_cast<uint16_t *>(x.address)[offset] = rounded;
    return;
  }
  case ACCRUE_DTYPE_FLOAT16: {
    _Float16 half = static_cast<_Float16>(value);
    std::memcpy(reinterpret_cast<uint16_t *>(x.address) + offset, &half,
                sizeof half);
    return;
  }
  default:
    return; // planGemm admits no other type
  }
}

GemmRunner &runner() {
  static GemmRunner installed = nullptr;
  return installed;
}

/// Whether f32 `value` is exactly representable in bf16 or f16 (NaNs and
/// infinities are).
bool exactIn(float value, AccrueDType type) {
  if (!std::isfinite(value) || value == 0)
    return true;
  if (type == ACCRUE_DTYPE_BFLOAT16) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return (bits & 0xffff) == 0;
  }
  // f16: 11 significant bits, |x| <= 65504, no spacing below 2^-24.
  float magnitude = std::fabs(value);
  if (magnitude > 65504.0f)
    return false;
  int exponent;
  std::frexp(magnitude, &exponent);
  float units = std::ldexp(magnitude, -std::max(exponent - 11, -24));
  return units == std::floor(units);
}

} // namespace

namespace accrue::rt {

GemmPlan planGemm(int64_t batch, int64_t m, int64_t n, int64_t k, intptr_t a,
                  int64_t aRow, int64_t aCol, int64_t aBatch, intptr_t b,
                  int64_t bRow, int64_t bCol, int64_t bBatch, intptr_t c,
                  int64_t cRow, int64_t cCol, int64_t cBatch, int64_t types,
                  float beta, intptr_t bias) {
  auto type = [](int64_t code) {
    auto type = static_cast<AccrueDType>(code);
    if (type != ACCRUE_DTYPE_FLOAT32 && type != ACCRUE_DTYPE_BFLOAT16 &&
        type != ACCRUE_DTYPE_FLOAT16)
      throw Error("unknown GEMM element type " + std::to_string(code) +
                  " (f32, bf16 or f16)");
    return type;
  };
  AccrueDType input = type(types & 0xff), output = type((types >> 8) & 0xff);
  // A bf16 or f16 output is the f32 sum rounded once: nothing to add to.
  if (output != ACCRUE_DTYPE_FLOAT32 && beta != 0)
    throw Error("a GEMM writing bf16 or f16 starts from zero (beta " +
                std::to_string(beta) + ")");
  Strided sa{a, m, k, aRow, aCol, aBatch, input};
  Strided sb{b, k, n, bRow, bCol, bBatch, input};
  Strided sc{c, m, n, cRow, cCol, cBatch, output};
  GemmPlan plan;
  plan.batch = batch;
  plan.beta = beta;
  plan.exact = type((types >> 16) & 0xff);
  switch (static_cast<AccrueGemmEpilogue>((types >> 24) & 0xff)) {
  case ACCRUE_GEMM_EPILOGUE_NONE:
    break;
  case ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_A:
    plan.epilogue = GemmEpilogue::BiasGradientA;
    break;
  case ACCRUE_GEMM_EPILOGUE_BIAS_GRADIENT_B:
    plan.epilogue = GemmEpilogue::BiasGradientB;
    break;
  default:
    throw Error("unknown GEMM epilogue " +
                std::to_string((types >> 24) & 0xff));
  }
  if (plan.epilogue != GemmEpilogue::None && (batch != 1 || !bias))
    throw Error("a GEMM's bias gradient needs batch 1 and an address (batch " +
                std::to_string(batch) + ")");
  plan.bias = bias;
  // The output is column-major: D = A B, or D^T = B^T A^T for a row-major
  // output (A's rows are then B^T's columns).
  std::optional<BlasMatrix> out = columnMajor(sc);
  if (out && out->transposed) {
    if (plan.epilogue != GemmEpilogue::None)
      plan.epilogue = plan.epilogue == GemmEpilogue::BiasGradientA
                          ? GemmEpilogue::BiasGradientB
                          : GemmEpilogue::BiasGradientA;
    std::swap(m, n);
    Strided ta = sb.transposed(), tb = sa.transposed();
    sa = ta;
    sb = tb;
    sc = sc.transposed();
    out = columnMajor(sc);
  }
  plan.c = require(out, "C", sc);
  plan.a = require(columnMajor(sa), "A", sa);
  plan.b = require(columnMajor(sb), "B", sb);
  plan.m = m;
  plan.n = n;
  plan.k = k;
  return plan;
}

void runGemmOnHost(const GemmPlan &plan) {
  const BlasMatrix &a = plan.a, &b = plan.b, &c = plan.c;
  auto at = [](const BlasMatrix &x, int64_t batch, int64_t i, int64_t j) {
    return batch * x.batchStride + (x.transposed ? j + i * x.ld : i + j * x.ld);
  };
  // f32 inputs the compiler found exact in bf16 or f16 are multiplied in
  // that precision on a GPU: a value that is not would be rounded there.
  // The host, which multiplies in f32, checks the claim.
  if (plan.exact != ACCRUE_DTYPE_FLOAT32)
    for (auto [x, name] : {std::pair{&a, "A"}, std::pair{&b, "B"}})
      for (int64_t p = 0; p < plan.batch; ++p)
        for (int64_t j = 0; j < x->cols; ++j)
          for (int64_t i = 0; i < x->rows; ++i) {
            float value = load(*x, p * x->batchStride + i + j * x->ld);
            if (!exactIn(value, plan.exact))
              throw Error(
                  std::string("GEMM input ") + name + " holds " +
                  std::to_string(value) + ", not exact in " +
                  (plan.exact == ACCRUE_DTYPE_BFLOAT16 ? "bf16" : "f16") +
                  " as the compiler found its values to be");
          }
  for (int64_t p = 0; p < plan.batch; ++p)
    for (int64_t j = 0; j < plan.n; ++j)
      for (int64_t i = 0; i < plan.m; ++i) {
        float sum = 0;
        for (int64_t l = 0; l < plan.k; ++l)
          sum += load(a, at(a, p, i, l)) * load(b, at(b, p, l, j));
        int64_t d = at(c, p, i, j);
        store(c, d, plan.beta == 0 ? sum : sum + plan.beta * load(c, d));
      }
  // The bias gradient: each row of op(A) or column of op(B) summed in f32.
  float *bias = reinterpret_cast<float *>(plan.bias);
  if (plan.epilogue == GemmEpilogue::BiasGradientA)
    for (int64_t i = 0; i < plan.m; ++i) {
      float sum = 0;
      for (int64_t l = 0; l < plan.k; ++l)
        sum += load(a, at(a, 0, i, l));
      bias[i] = sum;
    }
  if (plan.epilogue == GemmEpilogue::BiasGradientB)
    for (int64_t j = 0; j < plan.n; ++j) {
      float sum = 0;
      for (int64_t l = 0; l < plan.k; ++l)
        sum += load(b, at(b, 0, l, j));
      bias[j] = sum;
    }
}

void setGemmRunner(GemmRunner installed) { runner() = installed; }

[[noreturn]] void failInStep(const char *where, const std::exception &e) {
  // The host program's name (accrue-train, python3, a C host), as tools
  // prefix their errors: the library is not a tool.
  std::fprintf(stderr, "%s: error: %s: %s\n", program_invocation_short_name,
               where, e.what());
  std::fflush(stderr);
  Collectives::abortIfParallel(1);
  std::_Exit(1);
}

} // namespace accrue::rt

/// Called by compiled CUDA steps (StepABI.h).
extern "C" void accrue_gemm(int64_t batch, int64_t m, int64_t n, int64_t k,
                            intptr_t a, int64_t aRow, int64_t aCol,
                            int64_t aBatch, intptr_t b, int64_t bRow,
                            int64_t bCol, int64_t bBatch, intptr_t c,
                            int64_t cRow, int64_t cCol, int64_t cBatch,
                            int64_t types, float beta, intptr_t bias) {
  // Called from compiled code: no exception may cross it.
  try {
    GemmPlan plan =
        planGemm(batch, m, n, k, a, aRow, aCol, aBatch, b, bRow, bCol, bBatch,
                 c, cRow, cCol, cBatch, types, beta, bias);
    if (runner())
      runner()(plan);
    else
      runGemmOnHost(plan);
  } catch (const std::exception &e) {
    failInStep("a GEMM", e);
  }
}
static_assert(std::is_same_v<decltype(&accrue_gemm), AccrueGemmFn> &&
                  std::string_view(ACCRUE_GEMM_FUNCTION) == "accrue_gemm",
              "the GEMM entry of StepABI.h");
