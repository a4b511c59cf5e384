//===- CudaGemm.cpp - the GEMMs of CUDA steps, by cuBLASLt ------*- C++ -*-===//
//
// cuBLASLt, loaded with dlopen: a matmul descriptor, layouts and the
// heuristic's algorithm per GEMM shape (cached), run on the step's stream.
//
//===----------------------------------------------------------------------===//

#include "CUDA/CudaContext.h"

#include "accrue-runtime/Trainer.h"

#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <vector>

using namespace accrue::rt;
using namespace accrue::rt::cuda;

namespace {

// cuBLASLt's types and constants (cublasLt.h, cublas_api.h, library_types.h).
using LtHandle = struct LtContext *;
using LtMatmulDesc = struct LtMatmulDescOpaque *;
using LtLayout = struct LtLayoutOpaque *;
using LtPreference = struct LtPreferenceOpaque *;
struct LtAlgo {
  uint64_t data[8];
};
struct LtHeuristic {
  LtAlgo algo;
  size_t workspaceSize;
  int state;
  float wavesCount;
  int reserved[4];
};
constexpr int kCudaR32F = 0, kCudaR16F = 2, kCudaR16BF = 14;
constexpr int kCompute32F = 68, kCompute32FFast16F = 74,
              kCompute32FFast16BF = 75;
constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7,
              kDescBiasPointer = 8, kDescBiasDataType = 26;
constexpr uint32_t kEpilogueDefault = 1, kEpilogueBgradA = 256,
                   kEpilogueBgradB = 512;
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;
constexpr int kPrefMaxWorkspace = 1, kPrefAlignA = 5, kPrefAlignB = 6,
              kPrefAlignC = 7, kPrefAlignD = 8;
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr int kStatusNotSupported = 15; // CUBLAS_STATUS_NOT_SUPPORTED

struct CublasLt {
  int (*create)(LtHandle *handle);
  int (*descCreate)(LtMatmulDesc *desc, int computeType, int scaleType);
  int (*descSetAttribute)(LtMatmulDesc desc, int attribute, const void *value,
                          size_t bytes);
  int (*layoutCreate)(LtLayout *layout, int type, uint64_t rows, uint64_t cols,
                      int64_t ld);
  int (*layoutSetAttribute)(LtLayout layout, int attribute, const void *value,
                            size_t bytes);
  int (*preferenceCreate)(LtPreference *preference);
  int (*preferenceDestroy)(LtPreference preference);
  int (*preferenceSetAttribute)(LtPreference preference, int attribute,
                                const void *value, size_t bytes);
  int (*heuristic)(LtHandle handle, LtMatmulDesc desc, LtLayout a, LtLayout b,
                   LtLayout c, LtLayout d, LtPreference preference,
                   int requested, LtHeuristic *results, int *returned);
  int (*matmul)(LtHandle handle, LtMatmulDesc desc, const void *alpha,
                const void *a, LtLayout aLayout, const void *b,
                LtLayout bLayout, const void *beta, const void *c,
                LtLayout cLayout, void *d, LtLayout dLayout, const LtAlgo *algo,
                void *workspace, size_t workspaceBytes, CUstream stream);
  const char *(*statusName)(int status);
  LtHandle handle = nullptr;
  CUdeviceptr workspace = 0;

  void check(int status, const char *what) const {
    if (status != 0)
      throw Error(std::string(what) + ": " +
                  (statusName ? statusName(status) : std::to_string(status)));
  }
};

/// Whether cuBLASLt (and its workspace) was loaded.
bool &cublasLtLoaded() {
  static bool loaded = false;
  return loaded;
}

CublasLt &cublasLt() {
  static CublasLt loaded = [] {
    void *library = openLibrary(
        "ACCRUE_CUBLASLT_LIBRARY",
        {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11",
         "libcublasLt.so"},
        "cuBLASLt (libcublasLt.so; pip install nvidia-cublas-cu12), which "
        "CUDA steps call for their matrix products,");
    CublasLt lt;
    auto bind = [&](auto &function, const char *name) {
      bindSymbol(library, function, name, "cuBLASLt");
    };
    bind(lt.create, "cublasLtCreate");
    bind(lt.descCreate, "cublasLtMatmulDescCreate");
    bind(lt.descSetAttribute, "cublasLtMatmulDescSetAttribute");
    bind(lt.layoutCreate, "cublasLtMatrixLayoutCreate");
    bind(lt.layoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
    bind(lt.preferenceCreate, "cublasLtMatmulPreferenceCreate");
    bind(lt.preferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    bind(lt.preferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    bind(lt.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    bind(lt.matmul, "cublasLtMatmul");
    bind(lt.statusName, "cublasLtGetStatusName");
    lt.check(lt.create(&lt.handle), "cublasLtCreate");
    check(driver().memAlloc(&lt.workspace, kWorkspaceBytes),
          "allocating cuBLASLt's workspace");
    cublasLtLoaded() = true;
    return lt;
  }();
  return loaded;
}

/// A planned GEMM's cuBLASLt descriptors and algorithm, made once per
/// shape, layout and alignment (descriptors are kept for the process).
struct LtGemm {
  LtMatmulDesc desc = nullptr;
  LtLayout a = nullptr, b = nullptr, c = nullptr;
  LtAlgo algo{};
  /// Whether cuBLASLt has no algorithm with the plan's bias-gradient
  /// epilogue: the GEMM runs without it and a second GEMM sums the rows
  /// (columns) against a vector of ones.
  bool separateBias = false;
};

/// The largest power of two up to 256 dividing `address`.
uint32_t alignmentOf(intptr_t address) {
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}

int cudaType(AccrueDType type) {
  switch (type) {
  case ACCRUE_DTYPE_FLOAT32:
    return kCudaR32F;
  case ACCRUE_DTYPE_BFLOAT16:
    return kCudaR16BF;
  case ACCRUE_DTYPE_FLOAT16:
    return kCudaR16F;
  default:
    return kCudaR32F; // planGemm admits no other type
  }
}

const LtGemm &ltGemm(const GemmPlan &plan) {
  CublasLt &lt = cublasLt();
  auto matrixKey = [](const BlasMatrix &x) {
    return std::to_string(x.rows) + "x" + std::to_string(x.cols) + "/" +
           std::to_string(x.ld) + "/" + std::to_string(x.batchStride) +
           (x.transposed ? "T" : "N") + std::to_string(x.type) + "@" +
           std::to_string(alignmentOf(x.address));
  };
  std::string key = std::to_string(plan.batch) + ":" + std::to_string(plan.m) +
                    "," + std::to_string(plan.n) + "," +
                    std::to_string(plan.k) + ":" + matrixKey(plan.a) + ":" +
                    matrixKey(plan.b) + ":" + matrixKey(plan.c) + ":" +
                    std::to_string(plan.exact) + ":" +
                    std::to_string(int(plan.epilogue)) + "@" +
                    std::to_string(alignmentOf(plan.bias));
  // One entry per GEMM shape, for the life of the process (its descriptors
  // stay reachable, never released: steps may run until exit).
  static auto &cache = *new std::map<std::string, LtGemm>;
  if (auto found = cache.find(key); found != cache.end())
    return found->second;
  LtGemm g;
  // f32 inputs that hold bf16 (f16) values: multiplied in that precision,
  // which loses nothing; fp32 accumulation always.
  int compute = kCompute32F;
  if (plan.a.type == ACCRUE_DTYPE_FLOAT32 &&
      plan.exact == ACCRUE_DTYPE_BFLOAT16)
    compute = kCompute32FFast16BF;
  else if (plan.a.type == ACCRUE_DTYPE_FLOAT32 &&
           plan.exact == ACCRUE_DTYPE_FLOAT16)
    compute = kCompute32FFast16F;
  lt.check(lt.descCreate(&g.desc, compute, kCudaR32F),
           "cublasLtMatmulDescCreate");
  int32_t transA = plan.a.transposed, transB = plan.b.transposed;
  lt.check(lt.descSetAttribute(g.desc, kDescTransA, &transA, sizeof transA),
           "cublasLtMatmulDescSetAttribute");
  lt.check(lt.descSetAttribute(g.desc, kDescTransB, &transB, sizeof transB),
           "cublasLtMatmulDescSetAttribute");
  // A bias gradient: cuBLASLt's BGRADA/BGRADB epilogue, into an f32 vector
  // (the heuristic reads its pointer for the alignment).
  if (plan.epilogue != GemmEpilogue::None) {
    uint32_t epilogue = plan.epilogue == GemmEpilogue::BiasGradientA
                            ? kEpilogueBgradA
                            : kEpilogueBgradB;
    int32_t biasType = kCudaR32F;
    void *bias = reinterpret_cast<void *>(plan.bias);
    lt.check(
        lt.descSetAttribute(g.desc, kDescEpilogue, &epilogue, sizeof epilogue),
        "cublasLtMatmulDescSetAttribute");
    lt.check(lt.descSetAttribute(g.desc, kDescBiasDataType, &biasType,
                                 sizeof biasType),
             "cublasLtMatmulDescSetAttribute");
    lt.check(lt.descSetAttribute(g.desc, kDescBiasPointer, &bias, sizeof bias),
             "cublasLtMatmulDescSetAttribute");
  }
  auto layout = [&](LtLayout &out, const BlasMatrix &x) {
    lt.check(lt.layoutCreate(&out, cudaType(x.type), x.rows, x.cols, x.ld),
             "cublasLtMatrixLayoutCreate");
    if (plan.batch > 1) {
      int32_t count = static_cast<int32_t>(plan.batch);
      int64_t stride = x.batchStride;
      lt.check(
          lt.layoutSetAttribute(out, kLayoutBatchCount, &count, sizeof count),
          "cublasLtMatrixLayoutSetAttribute");
      lt.check(lt.layoutSetAttribute(out, kLayoutBatchStride, &stride,
                                     sizeof stride),
               "cublasLtMatrixLayoutSetAttribute");
    }
  };
  layout(g.a, plan.a);
  layout(g.b, plan.b);
  layout(g.c, plan.c);
  LtPreference preference = nullptr;
  lt.check(lt.preferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  uint64_t workspace = kWorkspaceBytes;
  lt.check(lt.preferenceSetAttribute(preference, kPrefMaxWorkspace, &workspace,
                                     sizeof workspace),
           "cublasLtMatmulPreferenceSetAttribute");
  // The operands are views at any offset of the step's buffers: algorithms
  // must not assume more alignment than they have.
  const std::pair<int, const BlasMatrix *> alignments[] = {
      {kPrefAlignA, &plan.a},
      {kPrefAlignB, &plan.b},
      {kPrefAlignC, &plan.c},
      {kPrefAlignD, &plan.c}};
  for (auto [attribute, matrix] : alignments) {
    uint32_t alignment = alignmentOf(matrix->address);
    lt.check(lt.preferenceSetAttribute(preference, attribute, &alignment,
                                       sizeof alignment),
             "cublasLtMatmulPreferenceSetAttribute");
  }
  LtHeuristic result{};
  int returned = 0;
  int status = lt.heuristic(lt.handle, g.desc, g.a, g.b, g.c, g.c, preference,
                            1, &result, &returned);
  if (plan.epilogue != GemmEpilogue::None &&
      ((status == 0 && returned == 0) || status == kStatusNotSupported)) {
    // No algorithm with the epilogue for this shape and layout: without.
    g.separateBias = true;
    uint32_t none = kEpilogueDefault;
    lt.check(lt.descSetAttribute(g.desc, kDescEpilogue, &none, sizeof none),
             "cublasLtMatmulDescSetAttribute");
    status = lt.heuristic(lt.handle, g.desc, g.a, g.b, g.c, g.c, preference, 1,
                          &result, &returned);
  }
  lt.preferenceDestroy(preference);
  lt.check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (returned == 0)
    throw Error("cuBLASLt has no algorithm for a " + std::to_string(plan.m) +
                "x" + std::to_string(plan.n) + "x" + std::to_string(plan.k) +
                " product (batch " + std::to_string(plan.batch) + ")");
  g.algo = result.algo;
  return cache.emplace(key, g).first->second;
}

} // namespace

int64_t cuda::cublasLtWorkspaceBytes() {
  return cublasLtLoaded() ? static_cast<int64_t>(kWorkspaceBytes) : 0;
}

namespace {

/// `count` ones of `type` in device memory, made on the first step (which
/// runs directly, before a graph captures the calls) and kept for the
/// process: a shorter vector made before stays allocated too (GEMMs queued
/// on the stream may still read it), and the copy from pageable memory has
/// read the host's values when it returns.
intptr_t onesOnDevice(AccrueDType type, int64_t count) {
  static auto &vectors =
      *new std::map<AccrueDType, std::pair<CUdeviceptr, int64_t>>;
  auto &[vector, size] = vectors[type];
  if (size >= count)
    return static_cast<intptr_t>(vector);
  if (Context::get().capturing)
    throw Error("a GEMM's bias gradient needs a vector of " +
                std::to_string(count) +
                " ones, first asked for while a CUDA graph captures the "
                "step (set ACCRUE_CUDA_GRAPHS=0)");
  size_t elementBytes = type == ACCRUE_DTYPE_FLOAT32 ? 4 : 2;
  uint32_t one = type == ACCRUE_DTYPE_FLOAT32    ? 0x3f800000u
                 : type == ACCRUE_DTYPE_BFLOAT16 ? 0x3f80u
                                                 : 0x3c00u;
  std::vector<unsigned char> host(count * elementBytes);
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(host.data() + i * elementBytes, &one, elementBytes);
  check(driver().memAlloc(&vector, host.size()), "allocating a GEMM's ones");
  check(driver().memcpyHtoDAsync(vector, host.data(), host.size(),
                                 Context::get().stream),
        "copying a GEMM's ones");
  size = count;
  return static_cast<intptr_t>(vector);
}

/// The bias gradient of `plan` as a GEMM of its own: op(A) times a column
/// of ones (the sums of A's rows), or a row of ones times op(B).
GemmPlan biasGradientPlan(const GemmPlan &plan) {
  GemmPlan sums;
  sums.k = plan.k;
  sums.exact = plan.exact;
  BlasMatrix ones;
  ones.address = onesOnDevice(plan.a.type, plan.k);
  ones.type = plan.a.type;
  BlasMatrix bias;
  bias.address = plan.bias;
  if (plan.epilogue == GemmEpilogue::BiasGradientA) {
    sums.m = plan.m;
    sums.n = 1;
    sums.a = plan.a;
    ones.rows = plan.k, ones.cols = 1, ones.ld = plan.k;
    sums.b = ones;
    bias.rows = plan.m, bias.cols = 1, bias.ld = plan.m;
  } else {
    sums.m = 1;
    sums.n = plan.n;
    ones.rows = 1, ones.cols = plan.k, ones.ld = 1;
    sums.a = ones;
    sums.b = plan.b;
    bias.rows = 1, bias.cols = plan.n, bias.ld = 1;
  }
  sums.c = bias;
  return sums;
}

} // namespace

void cuda::runGemmOnDevice(const GemmPlan &plan) {
  CublasLt &lt = cublasLt();
  const LtGemm &g = ltGemm(plan);
  if (plan.epilogue != GemmEpilogue::None && !g.separateBias) {
    void *bias = reinterpret_cast<void *>(plan.bias);
    lt.check(lt.descSetAttribute(g.desc, kDescBiasPointer, &bias, sizeof bias),
             "cublasLtMatmulDescSetAttribute");
  }
  float alpha = 1.0f, beta = plan.beta;
  void *c = reinterpret_cast<void *>(plan.c.address);
  lt.check(lt.matmul(lt.handle, g.desc, &alpha,
                     reinterpret_cast<void *>(plan.a.address), g.a,
                     reinterpret_cast<void *>(plan.b.address), g.b, &beta, c,
                     g.c, c, g.c, &g.algo,
                     reinterpret_cast<void *>(lt.workspace), kWorkspaceBytes,
                     Context::get().stream),
           "cublasLtMatmul");
  if (plan.epilogue != GemmEpilogue::None && g.separateBias)
    runGemmOnDevice(biasGradientPlan(plan));
}
