//===- JoinSliceSums.cpp - a split's gradient as one tensor -----*- C++ -*-===//
//
// The gradient of a tensor that was split (a Linear's output into q, k and
// v) is, from the autodiff, the sum of each part's gradient inserted into
// zeros: a zero fill, a copy and a whole-tensor add per part. Where the
// parts do not overlap, each element of the sum is one part's value plus
// zeros, or zeros: the parts inserted into one tensor (zeros only where no
// part covers it) are the same values.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAJOINSLICESUMS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;

namespace {

/// Whether `value` is a tensor of zeros: a fill with +0.0 of an empty
/// tensor.
bool isZeros(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
    return false;
  FloatAttr zero;
  return matchPattern(fill.getInputs()[0], m_Constant(&zero)) &&
         zero.getValue().isPosZero();
}

/// Whether the block arguments `args` each appear once in the tree of
/// float additions that computes `value`, and nothing else does.
bool sumsArguments(Value value, SmallVectorImpl<BlockArgument> &args) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (llvm::is_contained(args, arg))
      return false;
    args.push_back(arg);
    return true;
  }
  auto add = value.getDefiningOp<arith::AddFOp>();
  return add && sumsArguments(add.getLhs(), args) &&
         sumsArguments(add.getRhs(), args);
}

/// The box a static slice covers, per dimension [offset, offset + size).
std::optional<SmallVector<std::pair<int64_t, int64_t>>>
boxOf(tensor::InsertSliceOp slice) {
  if (!slice.hasUnitStride() ||
      llvm::any_of(slice.getStaticOffsets(), ShapedType::isDynamic) ||
      llvm::any_of(slice.getStaticSizes(), ShapedType::isDynamic))
    return std::nullopt;
  SmallVector<std::pair<int64_t, int64_t>> box;
  for (auto [offset, size] :
       llvm::zip(slice.getStaticOffsets(), slice.getStaticSizes()))
    box.push_back({offset, offset + size});
  return box;
}

/// sum(insert_slice(part_i, zeros)) -> insert_slice(part_n, ...
/// insert_slice(part_1, zeros)) for parts of disjoint boxes (an input may
/// hold several, joined before); the zeros become an empty tensor where
/// the parts cover it.
struct JoinSliceSum : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
        op.getNumDpsInputs() < 2 ||
        op.getNumParallelLoops() != op.getNumLoops() ||
        !llvm::all_of(op.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); }))
      return failure();
    Block *body = op.getBlock();
    SmallVector<BlockArgument> summed;
    if (!sumsArguments(body->getTerminator()->getOperand(0), summed) ||
        static_cast<int64_t>(summed.size()) != op.getNumDpsInputs() ||
        llvm::any_of(summed, [&](BlockArgument arg) {
          return arg.getArgNumber() >= op.getNumDpsInputs();
        }))
      return failure();
    auto type = cast<RankedTensorType>(op.getResult(0).getType());
    if (!type.hasStaticShape() || !isa<FloatType>(type.getElementType()))
      return failure();
    SmallVector<tensor::InsertSliceOp> parts;
    SmallVector<SmallVector<std::pair<int64_t, int64_t>>> boxes;
    int64_t covered = 0;
    // Each input: parts inserted one after the other into zeros (a sum
    // joined before).
    SmallVector<tensor::InsertSliceOp> slices;
    for (Value input : op.getDpsInputs()) {
      Value at = input;
      do {
        auto slice = at.getDefiningOp<tensor::InsertSliceOp>();
        if (!slice || !slice->hasOneUse() || slice.getType() != type)
          return failure();
        slices.push_back(slice);
        at = slice.getDest();
      } while (!isZeros(at));
    }
    for (tensor::InsertSliceOp slice : slices) {
      std::optional<SmallVector<std::pair<int64_t, int64_t>>> box =
          boxOf(slice);
      if (!box)
        return failure();
      for (const auto &other : boxes) {
        bool meets = true;
        for (auto [x, y] : llvm::zip(*box, other))
          meets &= x.first < y.second && y.first < x.second;
        if (meets)
          return failure();
      }
      int64_t volume = 1;
      for (auto [first, end] : *box)
        volume *= end - first;
      covered += volume;
      parts.push_back(slice);
      boxes.push_back(*box);
    }
    // In the order of their boxes: the same IR however the sum was nested.
    SmallVector<unsigned> order =
        llvm::to_vector(llvm::seq<unsigned>(0, parts.size()));
    llvm::sort(order,
               [&](unsigned x, unsigned y) { return boxes[x] < boxes[y]; });
    Location loc = op.getLoc();
    Value joined = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                           type.getElementType());
    if (covered != type.getNumElements())
      joined = linalg::FillOp::create(
                   rewriter, loc,
                   arith::ConstantOp::create(
                       rewriter, loc,
                       rewriter.getFloatAttr(type.getElementType(), 0.0))
                       .getResult(),
                   joined)
                   .getResult(0);
    for (unsigned k : order) {
      tensor::InsertSliceOp part = parts[k];
      joined = tensor::InsertSliceOp::create(
          rewriter, part.getLoc(), part.getSource(), joined,
          part.getMixedOffsets(), part.getMixedSizes(), part.getMixedStrides());
    }
    rewriter.replaceOp(op, joined);
    return success();
  }
};

struct CudaJoinSliceSumsPass
    : accrue::cuda::impl::CudaJoinSliceSumsBase<CudaJoinSliceSumsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<JoinSliceSum>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
