//===- cuda_stub.cpp - a CUDA driver and NCCL that record calls -*- C++ -*-===//
//
// For the runtime's tests on machines without a GPU: the entry points of
// libcuda.so.1, libcublasLt.so and libnccl.so.2 that Accrue's runtime
// loads, with "device" memory in host memory, copies done at once and
// kernels and GEMMs not run. Every call is counted; at exit the counts go
// to $ACCRUE_CUDA_STUB_LOG (one line of JSON, suffixed with the MPI rank
// under mpirun). What the tests check are the calls: a graph launch per
// step, the synchronizations, the copies, the module's architecture, the
// GEMMs and their betas, the all-reduces.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

namespace {

struct Counts {
  std::map<std::string, long> calls;
  std::string moduleTarget;
  bool capturing = false;
  long capturedLaunches = 0;
  /// The beta of each GEMM run directly, in order.
  std::string gemmBetas;
  /// Matrix layouts whose leading dimension is below their row count.
  long badLayouts = 0;

  ~Counts() {
    const char *path = std::getenv("ACCRUE_CUDA_STUB_LOG");
    if (!path)
      return;
    std::string file = path;
    if (const char *rank = std::getenv("OMPI_COMM_WORLD_RANK"))
      file += std::string(".") + rank;
    FILE *out = std::fopen(file.c_str(), "w");
    if (!out)
      return;
    std::fprintf(out,
                 "{\"module_target\": \"%s\", \"captured_launches\": %ld, "
                 "\"gemm_betas\": \"%s\", \"bad_layouts\": %ld",
                 moduleTarget.c_str(), capturedLaunches, gemmBetas.c_str(),
                 badLayouts);
    for (const auto &[name, count] : calls)
      std::fprintf(out, ", \"%s\": %ld", name.c_str(), count);
    std::fprintf(out, "}\n");
    std::fclose(out);
  }
} counts;

void count(const char *name) { ++counts.calls[name]; }

int fakeHandle;

} // namespace

extern "C" {

int cuInit(unsigned) {
  count("cuInit");
  return 0;
}
int cuDeviceGetCount(int *n) {
  const char *devices = std::getenv("ACCRUE_CUDA_STUB_DEVICES");
  *n = devices ? std::atoi(devices) : 1;
  return 0;
}
int cuDeviceGet(int *device, int ordinal) {
  *device = ordinal;
  return 0;
}
int cuDeviceGetAttribute(int *value, int attribute, int) {
  const char *sm = std::getenv("ACCRUE_CUDA_STUB_SM");
  int version = sm ? std::atoi(sm) : 90;
  *value = attribute == 75 ? version / 10 : version % 10;
  return 0;
}
int cuDevicePrimaryCtxRetain(void **context, int) {
  *context = &fakeHandle;
  return 0;
}
int cuCtxSetCurrent(void *) { return 0; }
int cuStreamCreate(void **stream, unsigned) {
  *stream = &fakeHandle;
  return 0;
}
int cuStreamSynchronize(void *) {
  count("cuStreamSynchronize");
  return 0;
}
int cuMemAlloc_v2(uint64_t *pointer, size_t bytes) {
  count("cuMemAlloc");
  // 256-byte aligned, as the driver's allocations are.
  size_t rounded = (bytes + 255) / 256 * 256;
  void *memory = std::aligned_alloc(256, rounded ? rounded : 256);
  if (memory)
    std::memset(memory, 0, rounded);
  *pointer = reinterpret_cast<uint64_t>(memory);
  return *pointer ? 0 : 2;
}
int cuMemFree_v2(uint64_t pointer) {
  std::free(reinterpret_cast<void *>(pointer));
  return 0;
}
int cuMemAllocHost_v2(void **pointer, size_t bytes) {
  *pointer = std::malloc(bytes);
  return *pointer ? 0 : 2;
}
int cuMemFreeHost(void *pointer) {
  std::free(pointer);
  return 0;
}
int cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t bytes, void *) {
  count(counts.capturing ? "captured_uploads" : "cuMemcpyHtoDAsync");
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return 0;
}
int cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t bytes, void *) {
  count("cuMemcpyDtoHAsync");
  std::memcpy(dst, reinterpret_cast<void *>(src), bytes);
  return 0;
}
int cuMemsetD8Async(uint64_t dst, unsigned char value, size_t bytes, void *) {
  std::memset(reinterpret_cast<void *>(dst), value, bytes);
  return 0;
}
int cuModuleLoadData(void **module, const void *image) {
  count("cuModuleLoadData");
  const char *text = static_cast<const char *>(image);
  if (const char *target = std::strstr(text, ".target ")) {
    const char *end = std::strchr(target, '\n');
    counts.moduleTarget = std::string(target + 8, end ? end : target + 16);
  }
  *module = &fakeHandle;
  return 0;
}
int cuModuleUnload(void *) { return 0; }
int cuModuleGetFunction(void **function, void *, const char *name) {
  count("cuModuleGetFunction");
  // A function handle is the module's (as the driver's are): its name,
  // kept for the life of the process.
  static std::set<std::string> names;
  *function = const_cast<char *>(names.insert(name).first->c_str());
  return 0;
}
int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                   unsigned, unsigned, void *, void **, void **) {
  if (counts.capturing)
    ++counts.capturedLaunches;
  else
    count("cuLaunchKernel");
  return 0;
}
int cuStreamBeginCapture_v2(void *, int) {
  count("cuStreamBeginCapture");
  counts.capturing = true;
  return 0;
}
int cuStreamEndCapture(void *, void **graph) {
  counts.capturing = false;
  *graph = &fakeHandle;
  return 0;
}
int cuGraphInstantiateWithFlags(void **exec, void *, unsigned long long) {
  count("cuGraphInstantiate");
  *exec = &fakeHandle;
  return 0;
}
int cuGraphLaunch(void *, void *) {
  count("cuGraphLaunch");
  return 0;
}
int cuGraphExecDestroy(void *) { return 0; }
int cuGraphDestroy(void *) { return 0; }
int cuEventCreate(void **event, unsigned) {
  *event = new int(0);
  return 0;
}
int cuEventRecord(void *, void *) {
  count(counts.capturing ? "captured_event_records" : "cuEventRecord");
  return 0;
}
int cuEventSynchronize(void *) {
  count("cuEventSynchronize");
  return 0;
}
int cuEventDestroy_v2(void *event) {
  delete static_cast<int *>(event);
  return 0;
}
int cuStreamWaitEvent(void *, void *, unsigned) {
  count(counts.capturing ? "captured_event_waits" : "cuStreamWaitEvent");
  return 0;
}
int cuGetErrorString(int, const char **text) {
  *text = "stub error";
  return 0;
}

// cuBLASLt.
struct Opaque {
  uint64_t data[64];
};
int cublasLtCreate(void **handle) {
  count("cublasLtCreate");
  *handle = &fakeHandle;
  return 0;
}
int cublasLtMatmulDescCreate(void **desc, int, int) {
  *desc = new Opaque{};
  return 0;
}
// A descriptor's data[0] keeps its epilogue (CUBLASLT_MATMUL_DESC_EPILOGUE,
// 7), data[1] its bias data type (26) and data[2] its bias pointer (8).
int cublasLtMatmulDescSetAttribute(void *desc, int attribute, const void *value,
                                   size_t bytes) {
  auto *data = static_cast<Opaque *>(desc)->data;
  if (attribute == 7)
    data[0] = *static_cast<const uint32_t *>(value);
  if (attribute == 26)
    data[1] = uint64_t(*static_cast<const int32_t *>(value)) + 1;
  if (attribute == 8 && bytes == sizeof(void *))
    std::memcpy(&data[2], value, bytes);
  return 0;
}
int cublasLtMatrixLayoutCreate(void **layout, int, uint64_t rows, uint64_t,
                               int64_t ld) {
  if (ld < static_cast<int64_t>(rows))
    ++counts.badLayouts;
  *layout = new Opaque{};
  return 0;
}
int cublasLtMatrixLayoutSetAttribute(void *, int, const void *, size_t) {
  return 0;
}
int cublasLtMatmulPreferenceCreate(void **preference) {
  *preference = new Opaque{};
  return 0;
}
int cublasLtMatmulPreferenceDestroy(void *preference) {
  delete static_cast<Opaque *>(preference);
  return 0;
}
int cublasLtMatmulPreferenceSetAttribute(void *, int, const void *, size_t) {
  return 0;
}
// ACCRUE_CUDA_STUB_NO_EPILOGUE: no algorithm has a bias-gradient epilogue.
int cublasLtMatmulAlgoGetHeuristic(void *, void *desc, void *, void *, void *,
                                   void *, void *, int, Opaque *results,
                                   int *returned) {
  count("cublasLtMatmulAlgoGetHeuristic");
  std::memset(results, 0, sizeof(uint64_t) * 8);
  uint64_t epilogue = static_cast<Opaque *>(desc)->data[0];
  *returned = (epilogue == 256 || epilogue == 512) &&
                      std::getenv("ACCRUE_CUDA_STUB_NO_EPILOGUE")
                  ? 0
                  : 1;
  return 0;
}
int cublasLtMatmul(void *, void *desc, const float *, const void *, void *,
                   const void *, void *, const float *beta, const void *,
                   void *, void *, void *, const void *, void *, size_t,
                   void *) {
  // A bias-gradient epilogue (BGRADA 256, BGRADB 512) into f32 (CUDA_R_32F,
  // 0) at a pointer set.
  const uint64_t *data = static_cast<Opaque *>(desc)->data;
  if (data[0] == 256 || data[0] == 512)
    count(data[1] == 1 && data[2] ? "bias_gradient_epilogues"
                                  : "bad_bias_gradient_epilogues");
  if (counts.capturing) {
    count("captured_gemms");
    return 0;
  }
  count("cublasLtMatmul");
  if (!counts.gemmBetas.empty())
    counts.gemmBetas += ' ';
  counts.gemmBetas += *beta == 0 ? "0" : *beta == 1 ? "1" : "?";
  return 0;
}
const char *cublasLtGetStatusName(int) { return "CUBLAS_STATUS_STUB"; }

// NCCL.
struct NcclId {
  char internal[128];
};
int ncclGetUniqueId(NcclId *id) {
  std::memset(id, 7, sizeof *id);
  return 0;
}
int ncclCommInitRank(void **comm, int, NcclId, int) {
  count("ncclCommInitRank");
  *comm = &fakeHandle;
  return 0;
}
int ncclAllReduce(const void *, void *, size_t, int, int, void *, void *) {
  count(counts.capturing ? "captured_all_reduces" : "ncclAllReduce");
  return 0;
}
int ncclReduce(const void *, void *, size_t, int, int, int, void *, void *) {
  count(counts.capturing ? "captured_reduces" : "ncclReduce");
  return 0;
}
int ncclBroadcast(const void *, void *, size_t, int, int, void *, void *) {
  count(counts.capturing ? "captured_broadcasts" : "ncclBroadcast");
  return 0;
}
int ncclGroupStart() {
  count(counts.capturing ? "captured_group_starts" : "ncclGroupStart");
  return 0;
}
int ncclGroupEnd() { return 0; }
const char *ncclGetErrorString(int) { return "stub error"; }

} // extern "C"
