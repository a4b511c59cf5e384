//===- MemoryEstimate.cpp - activation memory of a micro-step ---*- C++ -*-===//

#include "accrue/Dialect/Train/Utils/MemoryEstimate.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace accrue;

static int64_t bufferBytes(MemRefType type) {
  if (!type.hasStaticShape())
    return 0;
  // index: the deallocation's own bookkeeping, 64-bit here.
  int64_t bits =
      type.getElementType().isIndex() ? 64 : type.getElementTypeBitWidth();
  return type.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

std::optional<int64_t> train::estimateMicroStepPeakBytes(func::FuncOp step) {
  int64_t live = 0, peak = 0;
  auto sweep = [&](Operation *op) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      live += bufferBytes(alloc.getType());
      peak = std::max(peak, live);
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      live -= bufferBytes(cast<MemRefType>(dealloc.getMemref().getType()));
    }
  };
  // The micro-batch loop is the step's top-level scf.for. What the step
  // computed before it and still holds through it (a weight's transpose or
  // cast that hoist-loop-invariants moved out of the loop) is live in every
  // micro-step.
  for (Operation &op : step.getBody().front()) {
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop) {
      op.walk<WalkOrder::PreOrder>(sweep);
      continue;
    }
    peak = live;
    loop.getBody()->walk<WalkOrder::PreOrder>(sweep);
    return peak;
  }
  return std::nullopt;
}
