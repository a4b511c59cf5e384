//===- PlacedSlices.cpp - sums of placed slices as one concat ---*- C++ -*-===//
//
// The adjoint of a tensor that several nn.slice ops read along one axis (an
// exporter's split of a fused weight into its gates, q/k/v of a fused
// projection, an LSTM step's gates) is a sum of nn.slice_grad ops, each a
// zero tensor with one slice placed in it. When the slices are disjoint the
// sum is their concatenation, zeros in the gaps: one pass writing the result
// instead of a zero fill and a copy per slice and an add per pair.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace accrue::nn;

namespace {

struct SumOfPlacedSlices : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    if (!type.hasStaticShape())
      return failure();
    // The root of a tree of adds: an add whose only user is another add of
    // the tree is rewritten with it.
    if (op->hasOneUse())
      if (auto user = dyn_cast<AddOp>(*op->getUsers().begin());
          user && user.getType() == type)
        return failure();
    SmallVector<SliceGradOp> leaves;
    SmallVector<Value> work = {op.getLhs(), op.getRhs()};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (v.getType() != type)
        return failure();
      if (auto add = v.getDefiningOp<AddOp>(); add && add->hasOneUse()) {
        work.push_back(add.getLhs());
        work.push_back(add.getRhs());
        continue;
      }
      auto placed = v.getDefiningOp<SliceGradOp>();
      if (!placed)
        return failure();
      leaves.push_back(placed);
    }

    // Slices along one axis, each whole along the others, unit steps.
    struct Piece {
      int64_t start;
      Value input;
    };
    SmallVector<Piece> pieces;
    int64_t axis = -1;
    for (SliceGradOp placed : leaves) {
      auto input = cast<RankedTensorType>(placed.getInput().getType());
      for (int64_t d = 0; d < type.getRank(); ++d) {
        if (placed.getSteps()[d] != 1)
          return failure();
        if (input.getDimSize(d) == type.getDimSize(d))
          continue;
        if (axis >= 0 && axis != d)
          return failure();
        axis = d;
      }
      pieces.push_back({0, placed.getInput()});
    }
    if (axis < 0)
      return failure();
    for (auto [piece, placed] : llvm::zip(pieces, leaves)) {
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (d != axis && placed.getStarts()[d] != 0)
          return failure();
      piece.start = placed.getStarts()[axis];
    }
    llvm::sort(pieces, [](const Piece &a, const Piece &b) {
      return a.start < b.start;
    });

    auto size = [&](const Piece &piece) {
      return cast<RankedTensorType>(piece.input.getType()).getDimSize(axis);
    };
    int64_t end = 0;
    for (const Piece &piece : pieces) {
      if (piece.start < end)
        return failure(); // overlapping slices add up
      end = piece.start + size(piece);
    }
    if (end > type.getDimSize(axis))
      return failure();

    // The pieces in order, zeros in the gaps.
    NNBuilder nn(rewriter, op.getLoc());
    auto zeros = [&](int64_t length) {
      SmallVector<int64_t> shape(type.getShape());
      shape[axis] = length;
      return nn.splat(RankedTensorType::get(shape, type.getElementType()), 0.0);
    };
    SmallVector<Value> parts;
    end = 0;
    for (const Piece &piece : pieces) {
      if (piece.start > end)
        parts.push_back(zeros(piece.start - end));
      parts.push_back(piece.input);
      end = piece.start + size(piece);
    }
    if (end < type.getDimSize(axis))
      parts.push_back(zeros(type.getDimSize(axis) - end));
    rewriter.replaceOpWithNewOp<ConcatOp>(op, parts,
                                          rewriter.getI64IntegerAttr(axis));
    return success();
  }
};

} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<SumOfPlacedSlices>(context);
}
