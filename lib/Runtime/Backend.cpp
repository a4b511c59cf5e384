//===- Backend.cpp - where a step runs: the host ----------------*- C++ -*-===//

#include "accrue-runtime/Trainer.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

using namespace accrue::rt;

Device accrue::rt::parseDevice(const std::string &name) {
  if (name == "cpu")
    return Device::CPU;
  if (name == "cuda")
    return Device::CUDA;
  throw Error(settingRef("device") + " must be cpu or cuda, not '" + name +
              "'");
}

const char *accrue::rt::deviceName(Device device) {
  return device == Device::CUDA ? "cuda" : "cpu";
}

Device accrue::rt::deviceFor(const Manifest &manifest) {
  return manifest.target == ACCRUE_TARGET_CUDA ? Device::CUDA : Device::CPU;
}

namespace accrue::rt {
/// The CUDA backend (CudaBackend.cpp).
std::unique_ptr<Backend> createCudaBackend();
} // namespace accrue::rt

namespace {

/// A transparent huge page on x86-64 and most Linux targets.
constexpr size_t kHugePageBytes = size_t(2) << 20;

/// Host memory and a plain call (targets cpu and cuda-emulated).
class HostBackend final : public Backend {
public:
  /// Buffers of a huge page or more (the arenas of parameters, gradients
  /// and optimizer state, the batches) start on a huge-page boundary and
  /// ask the kernel for transparent huge pages, which it grants where THP
  /// is `always` or `madvise`: a contraction that streams a weight's rows
  /// 4 KiB apart then walks one TLB entry per 2 MiB instead of one per row.
  /// A hint: where it is refused the buffer is the same, on small pages.
  void *allocate(size_t bytes) override {
    size_t alignment = bytes >= kHugePageBytes ? kHugePageBytes : 64;
    size_t rounded =
        (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
    void *buffer = std::aligned_alloc(alignment, rounded);
    if (!buffer)
      throw Error("out of memory allocating " + std::to_string(bytes) +
                  " bytes");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (alignment == kHugePageBytes)
      (void)madvise(buffer, rounded, MADV_HUGEPAGE);
#endif
    // After the hint: zeroing faults the pages in, huge where granted.
    std::memset(buffer, 0, rounded);
    return buffer;
  }
  void release(void *buffer) override { std::free(buffer); }
  void upload(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void download(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void fillZero(void *dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
  }
  void call(const Artifact &artifact, PackedArgs &args, int64_t, int) override {
    artifact.call(args.data());
  }
  void synchronize() override {}
  bool hostMemory() const override { return true; }
};

} // namespace

std::unique_ptr<PendingCopy> Backend::downloadLater(const void *src,
                                                    size_t bytes) {
  // Backends without asynchronous copies: copied now.
  struct Copied final : PendingCopy {
    std::vector<uint8_t> bytes;
    const void *wait() override { return bytes.data(); }
  };
  auto copy = std::make_unique<Copied>();
  copy->bytes.resize(bytes);
  download(copy->bytes.data(), src, bytes);
  synchronize();
  return copy;
}

std::unique_ptr<Backend> Backend::create(Device device) {
  if (device == Device::CUDA)
    return createCudaBackend();
  return std::make_unique<HostBackend>();
}
