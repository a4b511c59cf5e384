//===- FoldIntoContractions.cpp - data movement into contractions -*- C++
//-*-===//
//
// Autodiff writes a Linear's weight gradient as transpose(x), a batched
// product per sample, a sum over the samples and a transpose back: four
// passes over memory where one contraction would do. A contraction reads
// its operands and writes its result through indexing maps, and it sums
// over as many dimensions as it is given, so these rewrites move the data
// movement into its maps (see Contractions.h). The targets' passes decide
// which folds their kernels take: cuBLASLt takes any strides, the CPU's
// vector kernels prefer some layouts.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/Common/Contractions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace accrue::codegen;

namespace {

/// A copy of `op` with new operands, maps and iterators (same body, same
/// discardable attributes: what later passes marked the op with).
linalg::GenericOp rebuild(PatternRewriter &rewriter, linalg::GenericOp op,
                          ValueRange inputs, Value init,
                          ArrayRef<AffineMap> maps,
                          ArrayRef<utils::IteratorType> iterators) {
  auto rebuilt = linalg::GenericOp::create(rewriter, op.getLoc(),
                                           TypeRange{init.getType()}, inputs,
                                           ValueRange{init}, maps, iterators);
  rewriter.cloneRegionBefore(op.getRegion(), rebuilt.getRegion(),
                             rebuilt.getRegion().end());
  rebuilt->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  return rebuilt;
}

/// A rewrite pattern whose folds the target's `control` may refuse.
template <typename Pattern> struct Controlled : Pattern {
  Controlled(MLIRContext *context, FoldControl control)
      : Pattern(context), control(std::move(control)) {}
  bool allowed(linalg::GenericOp op, ArrayRef<AffineMap> maps) const {
    return !control || control(op, maps);
  }
  FoldControl control;
};

/// contraction(transpose(x), y) -> contraction(x, y) reading x through the
/// composed map.
struct FoldMovedInput : Controlled<OpRewritePattern<linalg::GenericOp>> {
  using Controlled::Controlled;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || !matchContraction(op))
      return failure();
    SmallVector<Value> inputs(op.getDpsInputs());
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    bool changed = false;
    for (unsigned i = 0; i < 2; ++i) {
      Operation *producer = inputs[i].getDefiningOp();
      std::optional<AffineMap> toInput = outputToInputMap(producer);
      if (!toInput)
        continue;
      SmallVector<AffineMap> folded = maps;
      folded[i] = toInput->compose(maps[i]);
      if (!allowed(op, folded))
        continue;
      inputs[i] = cast<linalg::LinalgOp>(producer).getDpsInputs()[0];
      maps = std::move(folded);
      changed = true;
    }
    if (!changed)
      return failure();
    rewriter.replaceOp(op, rebuild(rewriter, op, inputs, op.getDpsInits()[0],
                                   maps, op.getIteratorTypesArray()));
    return success();
  }
};

/// The contraction producing `value` if it is its only use and starts from
/// zeros.
std::optional<linalg::GenericOp> zeroBasedContraction(Value value) {
  auto op = value.getDefiningOp<linalg::GenericOp>();
  if (!op || !op.hasPureTensorSemantics() || !value.hasOneUse() ||
      !matchContraction(op) || !isZeroFill(op.getDpsInits()[0]))
    return std::nullopt;
  return op;
}

/// sum_over_some_dims(contraction(x, y)) -> contraction(x, y) that also
/// reduces over those dimensions.
struct FoldSumOfContraction : Controlled<OpRewritePattern<linalg::GenericOp>> {
  using Controlled::Controlled;
  LogicalResult matchAndRewrite(linalg::GenericOp sum,
                                PatternRewriter &rewriter) const override {
    if (!sum.hasPureTensorSemantics() || sum.getNumDpsInputs() != 1 ||
        sum.getNumDpsInits() != 1 || !isZeroFill(sum.getDpsInits()[0]))
      return failure();
    // yield out + in.
    Block &body = sum.getRegion().front();
    auto add =
        body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
    if (!add || !llvm::is_contained(add->getOperands(), body.getArgument(0)) ||
        !llvm::is_contained(add->getOperands(), body.getArgument(1)) ||
        std::next(body.begin()) != Block::iterator(body.getTerminator()))
      return failure();
    AffineMap in = sum.getIndexingMapsArray()[0];
    AffineMap out = sum.getIndexingMapsArray()[1];
    std::optional<SmallVector<int64_t>> outLoops = loopsOf(out);
    if (!in.isIdentity() || !outLoops)
      return failure();
    std::optional<linalg::GenericOp> contraction =
        zeroBasedContraction(sum.getDpsInputs()[0]);
    if (!contraction)
      return failure();
    AffineMap produced = contraction->getIndexingMapsArray()[2];
    std::optional<SmallVector<int64_t>> producedLoops = loopsOf(produced);
    if (!producedLoops)
      return failure();
    // Loop j of the sum is dimension j of the contraction's result: the
    // contraction's loop that writes it becomes a reduction if j is one.
    SmallVector<utils::IteratorType> iterators =
        contraction->getIteratorTypesArray();
    for (auto [j, type] : llvm::enumerate(sum.getIteratorTypesArray())) {
      if (type != utils::IteratorType::reduction)
        continue;
      if ((*producedLoops)[j] < 0)
        continue; // a unit dimension: nothing to sum
      iterators[(*producedLoops)[j]] = utils::IteratorType::reduction;
    }
    SmallVector<AffineExpr> results;
    for (int64_t loop : *outLoops)
      results.push_back(loop < 0 ? getAffineConstantExpr(0, getContext())
                                 : produced.getResult(loop));
    SmallVector<AffineMap> maps = contraction->getIndexingMapsArray();
    maps[2] = AffineMap::get(produced.getNumDims(), 0, results, getContext());
    if (!allowed(*contraction, maps))
      return failure();
    rewriter.replaceOp(sum, rebuild(rewriter, *contraction,
                                    contraction->getDpsInputs(),
                                    sum.getDpsInits()[0], maps, iterators));
    return success();
  }
};

/// transpose(contraction(x, y)) -> contraction(x, y) writing through the
/// transposed map into a zero-filled init of the transpose's shape.
struct FoldMovedResult
    : Controlled<OpInterfaceRewritePattern<linalg::LinalgOp>> {
  using Controlled::Controlled;
  LogicalResult matchAndRewrite(linalg::LinalgOp move,
                                PatternRewriter &rewriter) const override {
    std::optional<AffineMap> toInput = outputToInputMap(move);
    if (!toInput || !toInput->isPermutation() || !move.hasPureTensorSemantics())
      return failure();
    std::optional<linalg::GenericOp> contraction =
        zeroBasedContraction(move.getDpsInputs()[0]);
    if (!contraction)
      return failure();
    // Result index e of the move reads the contraction's result at
    // toInput(e); the contraction writes its result at `produced`.
    AffineMap produced = contraction->getIndexingMapsArray()[2];
    SmallVector<AffineMap> maps = contraction->getIndexingMapsArray();
    maps[2] = inversePermutation(*toInput).compose(produced);
    if (!allowed(*contraction, maps))
      return failure();
    Value zero = contraction->getDpsInits()[0]
                     .getDefiningOp<linalg::FillOp>()
                     .getInputs()[0];
    Value init = linalg::FillOp::create(rewriter, move.getLoc(), zero,
                                        move.getDpsInits()[0])
                     .getResult(0);
    rewriter.replaceOp(move, rebuild(rewriter, *contraction,
                                     contraction->getDpsInputs(), init, maps,
                                     contraction->getIteratorTypesArray()));
    return success();
  }
};

} // namespace

void accrue::codegen::populateFoldIntoContractionsPatterns(
    RewritePatternSet &patterns, FoldControl control) {
  patterns.add<FoldMovedInput, FoldSumOfContraction, FoldMovedResult>(
      patterns.getContext(), control);
}
