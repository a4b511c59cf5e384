//===- AccumulateInPlace.cpp - reductions straight into the arena -*- C++
//-*-===//
//
// After bufferization a micro-batch computes each weight gradient into a
// zero-filled temporary (a contraction or a reduction accumulates into its
// init) and train.accumulate adds the temporary to its slice of the
// gradient accumulator. The reduction can accumulate into that slice
// instead (beta = 1): the temporary, its zero fill and the extra pass over
// it go away, as with the CUDA backend's GEMM epilogue. The accumulator is
// zeroed once per optimizer step, so the first micro-batch's reduction adds
// to zeros.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/ContractionKernels.h"
#include "accrue/Codegen/CPU/Passes.h"
#include "accrue/Codegen/Common/Contractions.h"

#include "BufferViews.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_ACCUMULATEINPLACE
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;
using accrue::cpu::rootOf;

namespace {

/// Whether the generic's body yields `a + b` of its block arguments `x`
/// and `out` in either order (`out` the init's element).
bool yieldsSumWith(linalg::GenericOp op, Value out) {
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getNumOperands() == 1
                 ? yield.getOperand(0).getDefiningOp<arith::AddFOp>()
                 : nullptr;
  return add && (add.getLhs() == out || add.getRhs() == out) && out.hasOneUse();
}

/// train.accumulate's add of a gradient into the arena: one input, one
/// init, identity maps, parallel loops, `out + in`.
bool isAccumulation(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      !accrue::codegen::isPointwise(op))
    return false;
  Block &body = op.getRegion().front();
  return yieldsSumWith(op, body.getArgument(1)) &&
         llvm::is_contained(
             body.getTerminator()->getOperand(0).getDefiningOp()->getOperands(),
             body.getArgument(0));
}

/// A reduction that adds into its init: at least one reduction loop and a
/// body yielding `out + ...`.
bool accumulatesIntoInit(Operation *op, Value buffer) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInits() != 1 ||
      generic.getNumReductionLoops() == 0 ||
      generic.getDpsInits()[0] != buffer ||
      llvm::is_contained(generic.getDpsInputs(), buffer))
    return false;
  Block &body = generic.getRegion().front();
  return yieldsSumWith(generic, body.getArguments().back());
}

/// An elementwise op that writes every element of `buffer`, its only init,
/// without reading it: the bf16 rounding of a weight gradient (identity
/// maps, parallel loops, one result computed from the inputs alone).
bool writesElementwise(Operation *op, Value buffer) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.getNumDpsInits() == 1 &&
         generic.getDpsInits()[0] == buffer &&
         !llvm::is_contained(generic.getDpsInputs(), buffer) &&
         accrue::codegen::isPointwise(generic) &&
         !generic.hasIndexSemantics() &&
         !generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)) &&
         generic.getRegion().front().getTerminator()->getNumOperands() == 1;
}

/// Whether `op` (or an op nested in it) may read or write a buffer rooted
/// at `root`.
bool mayAccess(Operation *op, Value root) {
  bool touches = false;
  op->walk([&](Operation *nested) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
    if (!effects) {
      // Unknown effects: assume it writes what it touches.
      for (Value operand : nested->getOperands())
        if (isa<MemRefType>(operand.getType()) && rootOf(operand) == root)
          touches = true;
      return;
    }
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    for (auto &effect : list)
      if (isa<MemoryEffects::Write, MemoryEffects::Read>(effect.getEffect()) &&
          (!effect.getValue() || rootOf(effect.getValue()) == root))
        touches = true;
  });
  return touches;
}

/// Whether `v` is defined by a reshape (a view of the same elements).
bool isReshape(Value v) {
  return isa_and_nonnull<memref::CollapseShapeOp, memref::ExpandShapeOp>(
      v.getDefiningOp());
}

/// The contiguous 1-D subview of a 1-D buffer that `v` is (through
/// reshapes), or null.
memref::SubViewOp slicedFrom(Value v) {
  while (isReshape(v))
    v = v.getDefiningOp()->getOperand(0);
  auto slice = v.getDefiningOp<memref::SubViewOp>();
  if (!slice || slice.getSourceType().getRank() != 1 ||
      !slice.hasUnitStride() || slice.getType().getRank() != 1)
    return {};
  return slice;
}

/// The static range [begin, end) of `root` (a 1-D buffer) that `v` views
/// (through reshapes and one subview of it), if known.
std::optional<std::pair<int64_t, int64_t>> viewedRange(Value v, Value root) {
  memref::SubViewOp slice = slicedFrom(v);
  if (!slice || slice.getSource() != root ||
      ShapedType::isDynamic(slice.getStaticOffsets()[0]) ||
      ShapedType::isDynamic(slice.getStaticSizes()[0]))
    return std::nullopt;
  int64_t begin = slice.getStaticOffsets()[0];
  return std::make_pair(begin, begin + slice.getStaticSizes()[0]);
}

/// Whether `op` may read or write `arena` within [begin, end): a linalg op
/// whose operands view known ranges of it is checked range by range (the
/// other gradients, accumulated in place already, write other ranges).
bool mayAccessRange(Operation *op, Value arena, int64_t begin, int64_t end) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
      linalgOp && linalgOp.hasPureBufferSemantics()) {
    for (Value init : linalgOp->getOperands()) {
      if (!isa<MemRefType>(init.getType()))
        continue;
      if (rootOf(init) != rootOf(arena))
        continue;
      std::optional<std::pair<int64_t, int64_t>> range =
          viewedRange(init, arena);
      if (!range || (range->first < end && begin < range->second))
        return true;
    }
    return false;
  }
  return mayAccess(op, rootOf(arena));
}

struct AccumulateInPlacePass
    : accrue::cpu::impl::AccumulateInPlaceBase<AccumulateInPlacePass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> adds;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isAccumulation(op))
        adds.push_back(op);
    });
    for (linalg::GenericOp add : adds)
      if (succeeded(rewrite(add)))
        ++numInPlace;
    if (!foldZeroFills)
      return;
    SmallVector<linalg::FillOp> fills;
    getOperation().walk([&](linalg::FillOp fill) {
      if (fill.hasPureBufferSemantics() &&
          matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat()))
        fills.push_back(fill);
    });
    for (linalg::FillOp fill : fills)
      if (succeeded(foldFill(fill)))
        ++numFolded;
  }

  /// A zero fill followed by a contraction accumulating into the same
  /// buffer, nothing touching the buffer in between: the contraction is
  /// marked to start from zeros and the fill goes.
  LogicalResult foldFill(linalg::FillOp fill) {
    Value buffer = fill.getDpsInits()[0];
    Value root = rootOf(buffer);
    for (Operation *op = fill->getNextNode(); op; op = op->getNextNode()) {
      if (accumulatesIntoInit(op, buffer) &&
          linalg::isaContractionOpInterface(cast<linalg::LinalgOp>(op))) {
        op->setAttr(accrue::cpu::kZeroInitAttr,
                    UnitAttr::get(op->getContext()));
        fill.erase();
        return success();
      }
      if (mayAccess(op, root))
        return failure();
    }
    return failure();
  }

  LogicalResult rewrite(linalg::GenericOp add) {
    Block *block = add->getBlock();
    // The gradient: views of a temporary.
    SmallVector<Operation *> views;
    Value gradient = add.getDpsInputs()[0];
    while (isReshape(gradient)) {
      if (!gradient.hasOneUse())
        return failure();
      views.push_back(gradient.getDefiningOp());
      gradient = gradient.getDefiningOp()->getOperand(0);
    }
    auto alloc = gradient.getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != block ||
        !alloc.getType().getLayout().isIdentity())
      return failure();
    // The arena slice: a contiguous 1-D subview, possibly reshaped.
    memref::SubViewOp slice = slicedFrom(add.getDpsInits()[0]);
    if (!slice)
      return failure();
    // The temporary's users: a zero fill and the reduction, or an
    // elementwise op that writes all of it; the views.
    linalg::FillOp fill;
    Operation *producer = nullptr;
    bool elementwise = false;
    for (Operation *user : alloc->getUsers()) {
      if (auto f = dyn_cast<linalg::FillOp>(user);
          f && f.getDpsInits()[0] == alloc.getResult() &&
          matchPattern(f.getDpsInputs()[0], m_AnyZeroFloat())) {
        fill = f;
      } else if (accumulatesIntoInit(user, alloc) && !producer) {
        producer = user;
      } else if (writesElementwise(user, alloc) && !producer) {
        producer = user;
        elementwise = true;
      } else if (isa<memref::DeallocOp>(user)) {
        continue;
      } else if (!(views.empty() ? user == add.getOperation()
                                 : user == views.back())) {
        return failure();
      }
    }
    if (!producer || producer->getBlock() != block ||
        !producer->isBeforeInBlock(add) || (elementwise && fill) ||
        (!elementwise && (!fill || fill->getBlock() != block ||
                          !fill->isBeforeInBlock(producer))))
      return failure();
    // The slice must be available at the producer, and nothing between the
    // producer and the add may touch that slice (the add's write moves up).
    Value arena = slice.getSource();
    if (auto def = arena.getDefiningOp();
        def && (def->getBlock() == block && !def->isBeforeInBlock(producer)))
      return failure();
    std::optional<std::pair<int64_t, int64_t>> range =
        viewedRange(slice.getResult(), arena);
    if (!range)
      return failure();
    for (Operation *op = producer->getNextNode(); op != add;
         op = op->getNextNode())
      if (mayAccessRange(op, arena, range->first, range->second))
        return failure();

    OpBuilder b(producer);
    auto newSlice = cast<memref::SubViewOp>(b.clone(*slice));
    Value view = newSlice.getResult();
    MemRefType shape = alloc.getType();
    if (shape.getRank() == 0) {
      view = memref::CollapseShapeOp::create(b, add.getLoc(), view,
                                             ArrayRef<ReassociationIndices>{});
    } else if (shape.getRank() > 1) {
      SmallVector<ReassociationIndices> all{
          llvm::to_vector(llvm::seq<int64_t>(0, shape.getRank()))};
      FailureOr<MemRefType> type = memref::ExpandShapeOp::computeExpandedType(
          cast<MemRefType>(view.getType()), shape.getShape(), all);
      if (failed(type))
        return failure();
      view = memref::ExpandShapeOp::create(b, add.getLoc(), *type, view, all);
    }
    producer->getOpOperand(producer->getNumOperands() - 1).set(view);
    if (elementwise) {
      // It yields out + f(in) instead of f(in): the add's sum (IEEE
      // addition commutes, so the order of its operands does not matter).
      Block &body = cast<linalg::GenericOp>(producer).getRegion().front();
      Operation *yield = body.getTerminator();
      OpBuilder inBody(yield);
      yield->setOperand(0, arith::AddFOp::create(inBody, add.getLoc(),
                                                 body.getArguments().back(),
                                                 yield->getOperand(0)));
    }
    add.erase();
    for (Operation *v : views)
      v->erase();
    if (fill)
      fill.erase();
    SmallVector<Operation *> rest(alloc->getUsers());
    for (Operation *user : rest)
      if (isa<memref::DeallocOp>(user))
        user->erase();
    if (!alloc->use_empty())
      return success(); // (cannot happen: every other user was matched)
    alloc.erase();
    return success();
  }
};

} // namespace
