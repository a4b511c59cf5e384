//===- FreeAtLastUse.cpp - deallocate when a buffer dies --------*- C++ -*-===//
//
// Ownership-based buffer deallocation frees a buffer at the end of the
// block that owns it. In the micro-batch loop's body that is the end of the
// micro-step: every temporary of the forward and backward stays allocated
// until then, and the step's peak memory is the sum of all of them. Moved to
// just after the buffer's last use, a dealloc returns the memory to the
// allocator for the ops that follow, so the peak is what is live at once,
// and recomputed activations (train-autodiff's recomputation) actually free
// what they do not keep. The alloc moves the other way, to just before the
// buffer's first use: bufferization allocates where the tensor was made,
// which can be much earlier than where it is written (a ZeRO stage-2
// gradient whose zero init CSE shared with the forward's would otherwise
// live through the whole backward).
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_FREEATLASTUSE
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// The op of `block` after which nothing uses `buffer` or a view of it,
/// or null when that is not known: a view escapes through a terminator
/// (a loop's or branch's result) or as a pointer, or a use lies outside
/// the block.
Operation *lastUseInBlock(Value buffer, Block *block, Operation *dealloc) {
  SmallVector<Value> aliases{buffer};
  DenseSet<Value> seen{buffer};
  Operation *last = nullptr;
  while (!aliases.empty()) {
    Value alias = aliases.pop_back_val();
    for (Operation *user : alias.getUsers()) {
      if (user == dealloc)
        continue;
      // Through a terminator the buffer may outlive the block; as a raw
      // pointer or a cast its uses can no longer be followed.
      if (user->hasTrait<OpTrait::IsTerminator>() ||
          isa<memref::ExtractAlignedPointerAsIndexOp,
              UnrealizedConversionCastOp>(user))
        return nullptr;
      Operation *ancestor = block->findAncestorOpInBlock(*user);
      if (!ancestor)
        return nullptr;
      if (!last || last->isBeforeInBlock(ancestor))
        last = ancestor;
      // Anything computed from the buffer that is a buffer may view it.
      for (Value result : user->getResults())
        if (isa<BaseMemRefType>(result.getType()) && seen.insert(result).second)
          aliases.push_back(result);
    }
  }
  return last;
}

struct FreeAtLastUsePass
    : accrue::cpu::impl::FreeAtLastUseBase<FreeAtLastUsePass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk([&](memref::DeallocOp op) { deallocs.push_back(op); });
    for (memref::DeallocOp dealloc : deallocs) {
      Value buffer = dealloc.getMemref();
      auto alloc = buffer.getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != dealloc->getBlock())
        continue;
      Operation *last = lastUseInBlock(buffer, dealloc->getBlock(), dealloc);
      if (!last || !last->isBeforeInBlock(dealloc))
        continue;
      dealloc->moveAfter(last);
      ++numMoved;
    }
    // Then each such buffer's alloc to its first use. (Its operands, the
    // dynamic sizes, are defined before the alloc, so before any point
    // after it too.)
    for (memref::DeallocOp dealloc : deallocs) {
      auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != dealloc->getBlock())
        continue;
      Block *block = alloc->getBlock();
      Operation *first = nullptr;
      for (Operation *user : alloc->getUsers()) {
        Operation *ancestor = block->findAncestorOpInBlock(*user);
        if (ancestor && (!first || ancestor->isBeforeInBlock(first)))
          first = ancestor;
      }
      if (!first || first == dealloc || first == alloc->getNextNode())
        continue;
      alloc->moveBefore(first);
      ++numSunk;
    }
  }
};

} // namespace
