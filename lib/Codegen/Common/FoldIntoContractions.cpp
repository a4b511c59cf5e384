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
#include "mlir/Dialect/Tensor/IR/Tensor.h"

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

/// Whether `op`'s body is one addf of its first two arguments, yielded.
bool yieldsSumOfFirstArguments(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  return add &&
         std::next(body.begin()) == Block::iterator(body.getTerminator()) &&
         llvm::is_contained(add->getOperands(), body.getArgument(0)) &&
         llvm::is_contained(add->getOperands(), body.getArgument(1));
}

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
    if (!yieldsSumOfFirstArguments(sum))
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

/// The indexing maps of `contraction` writing its result through a move
/// whose output index e reads its input at toInput(e).
SmallVector<AffineMap> movedResultMaps(linalg::GenericOp contraction,
                                       AffineMap toInput) {
  SmallVector<AffineMap> maps = contraction.getIndexingMapsArray();
  maps[2] = inversePermutation(toInput).compose(maps[2]);
  return maps;
}

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
    SmallVector<AffineMap> maps = movedResultMaps(*contraction, *toInput);
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

/// transpose(f(contraction(x, y))) -> f(transpose(contraction(x, y))) for
/// an elementwise f of the contraction's result alone (what bf16 autocast
/// does to a weight gradient: round it to bf16), so that FoldMovedResult
/// folds the transpose into the contraction. f then maps the transposed
/// values, one by one as before.
struct MoveBeforeElementwise
    : Controlled<OpRewritePattern<linalg::TransposeOp>> {
  using Controlled::Controlled;
  LogicalResult matchAndRewrite(linalg::TransposeOp move,
                                PatternRewriter &rewriter) const override {
    auto f = move.getInput().getDefiningOp<linalg::GenericOp>();
    if (!move.hasPureTensorSemantics() || !f || !f->hasOneUse() ||
        !f.hasPureTensorSemantics() || f.getNumDpsInputs() != 1 ||
        f.getNumDpsInits() != 1 || f.hasIndexSemantics() || !isPointwise(f) ||
        f.payloadUsesValueFromOperand(f.getDpsInitOperand(0)))
      return failure();
    Value produced = f.getDpsInputs()[0];
    std::optional<linalg::GenericOp> contraction =
        zeroBasedContraction(produced);
    std::optional<AffineMap> toInput = outputToInputMap(move);
    auto movedType = cast<RankedTensorType>(move.getInit().getType());
    if (!contraction || !toInput || !movedType.hasStaticShape() ||
        !allowed(*contraction, movedResultMaps(*contraction, *toInput)))
      return failure();
    Location loc = move.getLoc();
    Value empty = tensor::EmptyOp::create(rewriter, loc, movedType.getShape(),
                                          getElementTypeOrSelf(produced));
    Value moved = linalg::TransposeOp::create(rewriter, loc, produced, empty,
                                              move.getPermutation())
                      .getResult()[0];
    auto after = linalg::GenericOp::create(
        rewriter, loc, TypeRange{movedType}, ValueRange{moved},
        ValueRange{move.getInit()}, f.getIndexingMapsArray(),
        f.getIteratorTypesArray());
    rewriter.cloneRegionBefore(f.getRegion(), after.getRegion(),
                               after.getRegion().end());
    after->setDiscardableAttrs(f->getDiscardableAttrDictionary());
    rewriter.replaceOp(move, after.getResults());
    rewriter.eraseOp(f);
    return success();
  }
};

/// x + contraction(a, b) -> contraction(a, b) starting from x instead of
/// zeros, when the sum is x's only use: the product accumulates into x's
/// buffer (an RNN step's slice of its stacked input projection) instead of
/// a temporary that another pass adds and writes back.
struct FoldAddedInit : Controlled<OpRewritePattern<linalg::GenericOp>> {
  using Controlled::Controlled;
  LogicalResult matchAndRewrite(linalg::GenericOp sum,
                                PatternRewriter &rewriter) const override {
    if (!sum.hasPureTensorSemantics() || sum.getNumDpsInputs() != 2 ||
        sum.getNumDpsInits() != 1 || sum.hasIndexSemantics() ||
        !isPointwise(sum) ||
        sum.payloadUsesValueFromOperand(sum.getDpsInitOperand(0)))
      return failure();
    if (!yieldsSumOfFirstArguments(sum))
      return failure();
    Type type = sum.getResult(0).getType();
    for (unsigned i = 0; i < 2; ++i) {
      Value x = sum.getDpsInputs()[1 - i];
      std::optional<linalg::GenericOp> contraction =
          zeroBasedContraction(sum.getDpsInputs()[i]);
      if (!contraction || x.getType() != type || !x.hasOneUse() ||
          contraction->getResult(0).getType() != type ||
          !allowed(*contraction, contraction->getIndexingMapsArray()))
        continue;
      rewriter.replaceOp(sum, rebuild(rewriter, *contraction,
                                      contraction->getDpsInputs(), x,
                                      contraction->getIndexingMapsArray(),
                                      contraction->getIteratorTypesArray()));
      return success();
    }
    return failure();
  }
};

} // namespace

void accrue::codegen::populateFoldIntoContractionsPatterns(
    RewritePatternSet &patterns, FoldControl control) {
  patterns.add<FoldMovedInput, FoldSumOfContraction, FoldMovedResult>(
      patterns.getContext(), control);
}

void accrue::codegen::populateMoveBeforeElementwisePatterns(
    RewritePatternSet &patterns, FoldControl control) {
  patterns.add<MoveBeforeElementwise>(patterns.getContext(), control);
}

void accrue::codegen::populateFoldAddedInitPatterns(RewritePatternSet &patterns,
                                                    FoldControl control) {
  patterns.add<FoldAddedInit>(patterns.getContext(), control);
}
