//===- PlanWorkspace.cpp - temporaries in one device workspace --*- C++ -*-===//
//
// Every memref.alloc of a step becomes a view into one `workspace` argument.
// Offsets come from lifetimes: a buffer lives from its allocation to the
// end of the last op that uses it (or a view of it), where an op is taken
// at the level of the allocation's block, so a buffer allocated before a
// loop and used inside it lives through the whole loop. Buffers with
// disjoint lifetimes may share bytes (first fit, largest first); the ops of
// a row group (cuda-group-rows) run as one kernel, so a buffer any of them
// uses lives through all of them. A buffer
// allocated in a loop body gets the same offset in every iteration, which
// is why the workspace does not grow with the number of micro-batches.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/Train/IR/Train.h"

#include "WarpReductions.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAPLANWORKSPACE
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;

namespace {

struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes = 0;
  int64_t begin = 0, end = 0; // program positions, inclusive
  int64_t offset = 0;
};

/// Bytes of a statically shaped buffer (bools take a byte).
std::optional<int64_t> sizeInBytes(MemRefType type) {
  if (!type.hasStaticShape() || !type.getLayout().isIdentity())
    return std::nullopt;
  Type element = type.getElementType();
  if (!element.isIntOrFloat())
    return std::nullopt;
  int64_t width = (element.getIntOrFloatBitWidth() + 7) / 8;
  return type.getNumElements() * width;
}

struct CudaPlanWorkspacePass
    : public accrue::cuda::impl::CudaPlanWorkspaceBase<CudaPlanWorkspacePass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp step = getOperation();
    auto abi = step->getAttrOfType<ArrayAttr>(train::StepAttrs::kABI);
    if (!abi || step.isExternal())
      return;
    // Positions: every op in pre-order, and the last position inside it;
    // the ops of a row group (its members and what lies between them)
    // all span the group: they run as one kernel.
    DenseMap<Operation *, std::pair<int64_t, int64_t>> positions;
    int64_t next = 0;
    std::function<void(Block &)> numberBlock;
    auto number = [&](Operation *op) {
      int64_t first = next++;
      for (Region &region : op->getRegions())
        for (Block &block : region)
          numberBlock(block);
      positions[op] = {first, next - 1};
    };
    numberBlock = [&](Block &block) {
      DenseMap<Attribute, Operation *> lastMember;
      for (Operation &op : block)
        if (Attribute group = op.getAttr(cuda::kRowGroup))
          lastMember[group] = &op;
      for (Operation *op = &block.front(); op; op = op->getNextNode()) {
        Attribute group = op->getAttr(cuda::kRowGroup);
        if (!group) {
          number(op);
          continue;
        }
        Operation *first = op, *last = lastMember[group];
        for (;; op = op->getNextNode()) {
          number(op);
          if (op == last)
            break;
        }
        int64_t begin = positions[first].first, end = positions[last].second;
        for (Operation *member = first;; member = member->getNextNode()) {
          positions[member] = {begin, end};
          if (member == last)
            break;
        }
      }
    };
    numberBlock(step.getBody().front());

    SmallVector<Buffer> buffers;
    SmallVector<Operation *> deallocs;
    WalkResult walk = step.walk([&](Operation *op) {
      if (isa<memref::DeallocOp>(op)) {
        deallocs.push_back(op);
        return WalkResult::advance();
      }
      auto alloc = dyn_cast<memref::AllocOp>(op);
      // A row group's own rows live in its kernel's workgroup memory.
      if (!alloc || alloc->hasAttr(cuda::kRowLocal))
        return WalkResult::advance();
      std::optional<int64_t> bytes = sizeInBytes(alloc.getType());
      if (!bytes) {
        alloc.emitError("a temporary of type ")
            << alloc.getType()
            << " cannot be placed in the device workspace (it needs a "
               "static shape)";
        return WalkResult::interrupt();
      }
      Buffer buffer{alloc, *bytes, positions[alloc].first,
                    positions[alloc].first, 0};
      if (failed(lifetime(buffer, positions)))
        return WalkResult::interrupt();
      buffers.push_back(buffer);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (Operation *dealloc : deallocs)
      dealloc->erase();
    if (buffers.empty())
      return;

    // First fit, largest first.
    SmallVector<Buffer *> order;
    for (Buffer &b : buffers)
      order.push_back(&b);
    llvm::stable_sort(order,
                      [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
    SmallVector<Buffer *> placed;
    int64_t total = 0;
    for (Buffer *buffer : order) {
      SmallVector<std::pair<int64_t, int64_t>> taken;
      for (Buffer *other : placed)
        if (other->begin <= buffer->end && buffer->begin <= other->end)
          taken.push_back({other->offset, other->offset + other->bytes});
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [begin, end] : taken) {
        if (offset + buffer->bytes <= begin)
          break;
        offset = std::max<int64_t>(offset, llvm::alignTo(end, alignment));
      }
      buffer->offset = offset;
      total = std::max(total, offset + buffer->bytes);
      placed.push_back(buffer);
    }
    total = std::max<int64_t>(llvm::alignTo(total, alignment), alignment);

    // The workspace argument, last, and the views into it.
    MLIRContext *ctx = &getContext();
    auto workspaceType = MemRefType::get({total}, IntegerType::get(ctx, 8));
    FailureOr<BlockArgument> workspaceArg = train::appendStepArgument(
        step, workspaceType, ACCRUE_ROLE_WORKSPACE, "workspace");
    if (failed(workspaceArg))
      return signalPassFailure();
    Value workspace = *workspaceArg;
    for (Buffer &buffer : buffers) {
      OpBuilder b(buffer.alloc);
      Location loc = buffer.alloc.getLoc();
      Value offset = arith::ConstantIndexOp::create(b, loc, buffer.offset);
      Value view = memref::ViewOp::create(b, loc, buffer.alloc.getType(),
                                          workspace, offset, ValueRange{});
      buffer.alloc.replaceAllUsesWith(view);
      buffer.alloc.erase();
    }
  }

  /// Extends `buffer` over every op that uses it or a view of it, taken at
  /// the level of the allocation's block. A buffer that leaves its block
  /// through a loop's yield would be overwritten by the next iteration.
  LogicalResult
  lifetime(Buffer &buffer,
           DenseMap<Operation *, std::pair<int64_t, int64_t>> &positions) {
    Block *home = buffer.alloc->getBlock();
    SmallVector<Value> worklist{buffer.alloc.getResult()};
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      if (!seen.insert(value).second)
        continue;
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        if (isa<memref::DeallocOp>(user))
          continue;
        if (isa<scf::YieldOp>(user) && user->getBlock() == home)
          return buffer.alloc.emitError(
              "a temporary outlives its loop iteration; it cannot be placed "
              "in the device workspace");
        Operation *ancestor = home->findAncestorOpInBlock(*user);
        if (!ancestor)
          return buffer.alloc.emitError(
              "a temporary is used outside the block that allocates it");
        buffer.end = std::max(buffer.end, positions[ancestor].second);
        // Views and loop-carried values alias the buffer.
        if (isa<ViewLikeOpInterface, memref::CastOp, memref::ExpandShapeOp,
                memref::CollapseShapeOp, memref::ReinterpretCastOp>(user))
          for (Value result : user->getResults())
            worklist.push_back(result);
        if (auto loop = dyn_cast<scf::ForOp>(user)) {
          unsigned first = loop.getNumControlOperands();
          if (use.getOperandNumber() >= first) {
            unsigned i = use.getOperandNumber() - first;
            worklist.push_back(loop.getRegionIterArg(i));
            worklist.push_back(loop.getResult(i));
          }
        }
      }
    }
    return success();
  }
};

} // namespace
