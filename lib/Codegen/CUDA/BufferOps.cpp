//===- BufferOps.cpp - linalg ops on buffers, before kernels ----*- C++ -*-===//
//
// See BufferOps.h.
//
//===----------------------------------------------------------------------===//

#include "BufferOps.h"

#include "WarpReductions.h"

#include "accrue/Codegen/CUDA/KernelReport.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace accrue;
using accrue::cuda::viewRoot;

namespace {

/// The elements of its root the view `value` spans, first and last, from
/// its static layout; all of them where that is not static.
std::pair<int64_t, int64_t> spanOf(Value value) {
  auto type = cast<MemRefType>(value.getType());
  auto layout = cuda::staticLayout(value);
  if (!type.hasStaticShape() || !layout ||
      llvm::any_of(layout->first, [](int64_t stride) { return stride < 0; }))
    return {0, std::numeric_limits<int64_t>::max()};
  auto &[strides, offset] = *layout;
  int64_t last = offset;
  for (auto [size, stride] : llvm::zip(type.getShape(), strides))
    last += (size - 1) * stride;
  return {offset, last};
}

/// The box of its root's indices the view `value` covers, where it is a
/// static unit-stride subview of the root, reshaped perhaps (a reshape
/// keeps the elements): per dimension the first index and the extent.
std::optional<SmallVector<std::pair<int64_t, int64_t>>> boxOf(Value value) {
  while (isa_and_present<memref::ExpandShapeOp, memref::CollapseShapeOp>(
      value.getDefiningOp()))
    value = cast<ViewLikeOpInterface>(value.getDefiningOp()).getViewSource();
  auto subview = value.getDefiningOp<memref::SubViewOp>();
  if (!subview || subview.getSource() != viewRoot(value) ||
      !subview.hasUnitStride() ||
      llvm::any_of(subview.getStaticOffsets(), ShapedType::isDynamic) ||
      llvm::any_of(subview.getStaticSizes(), ShapedType::isDynamic) ||
      subview.getSourceType().getRank() !=
          static_cast<int64_t>(subview.getStaticSizes().size()))
    return std::nullopt;
  SmallVector<std::pair<int64_t, int64_t>> box;
  for (auto [offset, size] :
       llvm::zip(subview.getStaticOffsets(), subview.getStaticSizes()))
    box.push_back({offset, size});
  return box;
}

} // namespace

bool cuda::isFusible(linalg::LinalgOp op) {
  if (!op || !op.hasPureBufferSemantics() || op.getNumReductionLoops() != 0 ||
      op.getNumDpsInits() == 0 || op->hasAttr(accrue::cuda::kWarpLanes) ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic) ||
      !llvm::all_of(op.getIndexingMapsArray(), [](AffineMap map) {
        return map.isProjectedPermutation(/*allowZeroInResults=*/true);
      }))
    return false;
  WalkResult writes = op->getRegion(0).walk([](Operation *nested) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
    if (effects ? effects.hasEffect<MemoryEffects::Write>()
                : !nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !writes.wasInterrupted();
}

bool cuda::isWarpReduction(linalg::LinalgOp op) {
  return op && op->hasAttr(accrue::cuda::kWarpLanes) &&
         isa<linalg::GenericOp>(op) && op.hasPureBufferSemantics() &&
         llvm::none_of(op.getStaticLoopRanges(), ShapedType::isDynamic);
}

bool cuda::isTranspose(linalg::LinalgOp op) {
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (out.getNumResults() == 0)
    return false;
  auto innerExpr = dyn_cast<AffineDimExpr>(out.getResults().back());
  if (!innerExpr)
    return true;
  unsigned inner = innerExpr.getPosition();
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (map.getNumResults() == 0 || !map.isFunctionOfDim(inner))
      continue;
    auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
    if (!last || last.getPosition() != inner)
      return true;
  }
  return false;
}

std::optional<std::pair<SmallVector<int64_t>, int64_t>>
cuda::staticLayout(Value memref) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(cast<MemRefType>(memref.getType())
                 .getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return std::nullopt;
  return std::make_pair(strides, offset);
}

AffineExpr cuda::elementOf(Value buffer, AffineMap map,
                           ArrayRef<int64_t> ranges) {
  auto layout = staticLayout(buffer);
  if (!layout)
    return {};
  auto &[strides, offset] = *layout;
  MLIRContext *context = map.getContext();
  AffineExpr element = getAffineConstantExpr(offset, context);
  for (auto [k, expr] : llvm::enumerate(map.getResults()))
    element = element + expr * strides[k];
  SmallVector<AffineExpr> dims;
  for (auto [d, range] : llvm::enumerate(ranges))
    dims.push_back(range == 1 ? getAffineConstantExpr(0, context)
                              : getAffineDimExpr(d, context));
  return simplifyAffineExpr(element.replaceDims(dims), ranges.size(), 0);
}

bool cuda::isWhole(Value view, Value base) {
  while (view != base) {
    Operation *op = view.getDefiningOp();
    if (!isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp,
                         memref::CastOp>(op))
      return false;
    view = op->getOperand(0);
  }
  return true;
}

bool cuda::staysBetween(Operation &op) {
  if (isa<memref::AllocOp>(op))
    return true;
  return isMemoryEffectFree(&op) && op.getNumRegions() == 0;
}

bool cuda::mayOverlap(Value x, Value y) {
  if (viewRoot(x) != viewRoot(y))
    return false;
  // Boxes of one buffer (a split's parts, columns side by side) meet
  // where they meet along every dimension.
  auto boxX = boxOf(x), boxY = boxOf(y);
  if (boxX && boxY && boxX->size() == boxY->size()) {
    for (auto [a, b] : llvm::zip(*boxX, *boxY))
      if (a.first + a.second <= b.first || b.first + b.second <= a.first)
        return false;
    return true;
  }
  auto [firstX, lastX] = spanOf(x);
  auto [firstY, lastY] = spanOf(y);
  return firstX <= lastY && firstY <= lastX;
}
