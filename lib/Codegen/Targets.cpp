//===- Targets.cpp - the targets by the contract's enum ---------*- C++ -*-===//

#include "accrue/Codegen/Target.h"

using namespace accrue;

const Target &Target::get(AccrueTarget kind) {
  switch (kind) {
  case ACCRUE_TARGET_CPU:
    return cpu::getTarget();
  case ACCRUE_TARGET_CUDA:
  case ACCRUE_TARGET_CUDA_EMULATED:
    return cuda::getTarget();
  }
  llvm_unreachable("a target without a backend");
}

llvm::ArrayRef<const Target *> Target::all() {
  static const Target *const targets[] = {&cpu::getTarget(),
                                          &cuda::getTarget()};
  return targets;
}
