//===- CUDATarget.cpp - PTX for the artifact --------------------*- C++ -*-===//

#include "accrue/Codegen/CUDA/CUDATarget.h"

#include "accrue-runtime/StepABI.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#ifndef ACCRUE_SOURCE_DIR
#define ACCRUE_SOURCE_DIR ""
#endif

using namespace mlir;

/// Whether `dir` holds libdevice where MLIR's NVVM target looks for it.
static bool hasLibdevice(llvm::StringRef dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "nvvm", "libdevice", "libdevice.10.bc");
  return llvm::sys::fs::exists(path);
}

std::optional<std::string> accrue::cuda::findToolkit(llvm::StringRef given) {
  if (!given.empty())
    return hasLibdevice(given) ? std::optional(given.str()) : std::nullopt;
  std::vector<std::string> candidates;
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
    if (std::optional<std::string> value = llvm::sys::Process::GetEnv(variable))
      candidates.push_back(*value);
  candidates.push_back("/usr/local/cuda");
  // scripts/setup installs the nvidia-cuda-nvcc wheel into the source
  // tree's .venv when there is no toolkit.
  llvm::SmallString<256> lib(ACCRUE_SOURCE_DIR);
  llvm::sys::path::append(lib, ".venv", "lib");
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(lib, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::SmallString<256> package(it->path());
    llvm::sys::path::append(package, "site-packages", "nvidia", "cuda_nvcc");
    candidates.push_back(std::string(package));
  }
  for (const std::string &dir : candidates)
    if (hasLibdevice(dir))
      return dir;
  return std::nullopt;
}

llvm::FailureOr<std::map<std::string, std::string>>
accrue::cuda::bundleKernels(ModuleOp module) {
  std::map<std::string, std::string> ptx;
  WalkResult walk = module.walk([&](gpu::BinaryOp binary) {
    std::vector<std::pair<unsigned, std::string>> entries;
    Attribute firstTarget;
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget());
      llvm::StringRef chip = target ? target.getChip() : "";
      unsigned version = 0;
      if (!target || object.getFormat() != gpu::CompilationTarget::Assembly ||
          !chip.starts_with("sm_") ||
          chip.drop_front(3).getAsInteger(10, version)) {
        binary.emitError("expected PTX for an sm_XX target");
        return WalkResult::interrupt();
      }
      if (!firstTarget)
        firstTarget = object.getTarget();
      std::string text = object.getObject().str();
      ptx[chip.str()] += text;
      entries.push_back({version, text});
    }
    // The bundle: header, entries, NUL-terminated PTX texts.
    std::string bundle(ACCRUE_PTX_BUNDLE_MAGIC, ACCRUE_PTX_BUNDLE_MAGIC_SIZE);
    auto put32 = [&](uint32_t v) {
      for (int i = 0; i < 4; ++i)
        bundle.push_back(static_cast<char>(v >> (8 * i)));
    };
    auto put64 = [&](uint64_t v) {
      for (int i = 0; i < 8; ++i)
        bundle.push_back(static_cast<char>(v >> (8 * i)));
    };
    put32(entries.size());
    put32(0);
    uint64_t offset = bundle.size() + entries.size() * 24;
    for (auto &[version, text] : entries) {
      put32(version);
      put32(0);
      put64(offset);
      put64(text.size() + 1);
      offset += text.size() + 1;
    }
    for (auto &[version, text] : entries) {
      bundle += text;
      bundle.push_back('\0');
    }
    MLIRContext *ctx = module.getContext();
    binary.setObjectsAttr(ArrayAttr::get(
        ctx, {gpu::ObjectAttr::get(
                 ctx, firstTarget, gpu::CompilationTarget::Assembly,
                 StringAttr::get(ctx, bundle), nullptr, nullptr)}));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return ptx;
}
