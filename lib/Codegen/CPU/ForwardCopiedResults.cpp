//===- ForwardCopiedResults.cpp - compute results where they go -*- C++ -*-===//
//
// One-shot bufferization computes a tensor inserted into a slice of a
// larger one in that slice only where the tensor.empty it was computed
// into could become the slice (eliminate-empty-tensors). Where one op
// computes several results inserted into slices one after another (an
// LSTM cell's backward, fused, yields the four gate gradients that the
// step concatenates into its slice of their stack), each later slice comes
// after the op in SSA order, and those results are computed into
// temporaries and copied: four copies per time step. After bufferization
// order no longer binds: a linalg op whose result lands in a temporary that
// nothing but a copy reads computes it into the copy's destination
// instead, when nothing between the two touches memory and no other
// operand of the op may alias the destination.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/Passes.h"

#include "BufferViews.h"

#include "mlir/Analysis/AliasAnalysis/LocalAliasAnalysis.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_FORWARDCOPIEDRESULTS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;
using accrue::cpu::rootOf;

namespace {

/// The one linalg op that writes `copy`'s source, a view of a temporary
/// (memref.alloc) that only it and the copy use (through views): the
/// source is one of its inits, whose values its body does not read, and
/// none of its other operands is a view of the temporary.
linalg::LinalgOp soleWriter(memref::CopyOp copy) {
  auto alloc = rootOf(copy.getSource()).getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != copy->getBlock())
    return nullptr;
  linalg::LinalgOp writer;
  SmallVector<Value> views{alloc.getResult()};
  while (!views.empty()) {
    Value view = views.pop_back_val();
    for (OpOperand &use : view.getUses()) {
      Operation *user = use.getOwner();
      if (user == copy)
        continue;
      if (auto viewLike = dyn_cast<ViewLikeOpInterface>(user);
          viewLike && viewLike.getViewSource() == view) {
        views.push_back(viewLike->getResult(0));
        continue;
      }
      auto op = dyn_cast<linalg::LinalgOp>(user);
      if (!op || (writer && writer != op) || view != copy.getSource() ||
          !op.isDpsInit(&use) || op.payloadUsesValueFromOperand(&use))
        return nullptr;
      writer = op;
    }
  }
  // Used once: as one init (the loop above saw every use).
  if (writer && llvm::count(writer->getOperands(), copy.getSource()) != 1)
    return nullptr;
  return writer;
}

/// Moves the view ops that compute `value` (in `point`'s block) before
/// `point`, where their other operands already are; false when `value`
/// cannot be computed there.
bool computeBefore(Value value, Operation *point, DominanceInfo &dominance) {
  if (dominance.properlyDominates(value, point))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != point->getBlock() ||
      !isa<ViewLikeOpInterface>(def) || !isMemoryEffectFree(def))
    return false;
  for (Value operand : def->getOperands())
    if (!computeBefore(operand, point, dominance))
      return false;
  def->moveBefore(point);
  return true;
}

/// Whether `a` and `b` are subviews of one buffer at static offsets whose
/// ranges are apart along some dimension (the slices of a concatenation).
bool disjointSlices(Value a, Value b) {
  auto x = a.getDefiningOp<memref::SubViewOp>();
  auto y = b.getDefiningOp<memref::SubViewOp>();
  if (!x || !y || x.getSource() != y.getSource() ||
      x.getSourceType().getRank() != x.getType().getRank() ||
      y.getSourceType().getRank() != y.getType().getRank())
    return false;
  for (auto [xOffset, xSize, xStride, yOffset, ySize, yStride] : llvm::zip(
           x.getStaticOffsets(), x.getStaticSizes(), x.getStaticStrides(),
           y.getStaticOffsets(), y.getStaticSizes(), y.getStaticStrides())) {
    if (llvm::is_contained({xOffset, xSize, yOffset, ySize},
                           ShapedType::kDynamic) ||
        xStride != 1 || yStride != 1)
      continue;
    if (xOffset + xSize <= yOffset || yOffset + ySize <= xOffset)
      return true;
  }
  return false;
}

struct ForwardCopiedResultsPass
    : accrue::cpu::impl::ForwardCopiedResultsBase<ForwardCopiedResultsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    LocalAliasAnalysis aliases;
    // (Ops only move within their blocks: the dominance of blocks holds.)
    DominanceInfo dominance(getOperation());
    for (memref::CopyOp copy : copies) {
      linalg::LinalgOp writer = soleWriter(copy);
      if (!writer || writer->getBlock() != copy->getBlock() ||
          !writer->isBeforeInBlock(copy))
        continue;
      // Nothing in between reads or writes memory (the destination, or a
      // buffer the writer's operands view), so the write may move.
      bool quiet = true;
      for (Operation *op = writer->getNextNode(); op != copy.getOperation();
           op = op->getNextNode())
        quiet &= isMemoryEffectFree(op);
      Value source = copy.getSource(), target = copy.getTarget();
      if (!quiet)
        continue;
      // The writer reads or writes no other buffer the destination may be.
      if (llvm::any_of(writer->getOperands(), [&](Value operand) {
            return operand != source && isa<MemRefType>(operand.getType()) &&
                   !aliases.alias(operand, target).isNo() &&
                   !disjointSlices(operand, target);
          }))
        continue;
      if (!computeBefore(target, writer, dominance))
        continue;
      writer->replaceUsesOfWith(source, target);
      copy->erase();
      // The temporary and its views, now unused.
      SmallVector<Operation *> dead{source.getDefiningOp()};
      while (!dead.empty()) {
        Operation *op = dead.pop_back_val();
        if (!op || !op->use_empty())
          continue;
        auto viewLike = dyn_cast<ViewLikeOpInterface>(op);
        Value from = viewLike ? viewLike.getViewSource() : Value();
        op->erase();
        if (from)
          dead.push_back(from.getDefiningOp());
      }
      ++numForwarded;
    }
  }
};

} // namespace
