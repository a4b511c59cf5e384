//===- SplitReductions.cpp - two-stage full reductions ----------*- C++ -*-===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDASPLITREDUCTIONS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;

namespace {

/// The op that folds each element into the accumulator (`out`) and its
/// kind, if the body ends in one this pass knows: `yield combine(out, x)`
/// or `yield combine(x, out)`, where `out` is used there alone.
std::optional<std::pair<Operation *, arith::AtomicRMWKind>>
findCombiner(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  BlockArgument out = body.getArguments().back();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *combine = yield.getOperand(0).getDefiningOp();
  if (!combine || combine->getNumOperands() != 2 || !out.hasOneUse() ||
      !llvm::is_contained(combine->getOperands(), out) ||
      combine->getOperand(0) == combine->getOperand(1))
    return std::nullopt;
  using Kind = arith::AtomicRMWKind;
  std::optional<Kind> kind =
      llvm::TypeSwitch<Operation *, std::optional<Kind>>(combine)
          .Case([](arith::AddFOp) { return Kind::addf; })
          .Case([](arith::AddIOp) { return Kind::addi; })
          .Case([](arith::MulFOp) { return Kind::mulf; })
          .Case([](arith::MulIOp) { return Kind::muli; })
          .Case([](arith::MaximumFOp) { return Kind::maximumf; })
          .Case([](arith::MinimumFOp) { return Kind::minimumf; })
          .Case([](arith::MaxNumFOp) { return Kind::maxnumf; })
          .Case([](arith::MinNumFOp) { return Kind::minnumf; })
          .Case([](arith::MaxSIOp) { return Kind::maxs; })
          .Case([](arith::MinSIOp) { return Kind::mins; })
          .Case([](arith::MaxUIOp) { return Kind::maxu; })
          .Case([](arith::MinUIOp) { return Kind::minu; })
          .Default([](Operation *) { return std::nullopt; });
  if (!kind)
    return std::nullopt;
  return std::make_pair(combine, *kind);
}

/// Splits a linalg.generic that reduces its whole iteration space into
/// one value: `partials` threads reduce strided shares, one thread folds
/// the partials in order.
LogicalResult splitFullReduction(RewriterBase &rewriter, linalg::GenericOp op,
                                 int64_t partials, int64_t minElements) {
  {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
        op.getNumLoops() == 0 || op.getNumParallelLoops() != 0)
      return failure();
    auto outType = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
    if (!outType || outType.getRank() != 0)
      return failure();
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    int64_t count = 1;
    for (int64_t r : ranges) {
      if (ShapedType::isDynamic(r))
        return failure();
      count *= r;
    }
    if (count < minElements)
      return failure();
    auto combiner = findCombiner(op);
    if (!combiner)
      return failure();
    Operation *combine = combiner->first;
    arith::AtomicRMWKind kind = combiner->second;

    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    Type elementType = outType.getElementType();
    // P threads, thread p folding elements p, p + P, p + 2P, ...
    int64_t threads =
        std::max<int64_t>(1, std::min<int64_t>(partials, (count + 15) / 16));
    auto partialType = RankedTensorType::get({threads}, elementType);
    Value identity = arith::getIdentityValue(kind, elementType, rewriter, loc);
    Value partialInit =
        linalg::FillOp::create(
            rewriter, loc, identity,
            Value(tensor::EmptyOp::create(rewriter, loc, partialType,
                                          ValueRange{})))
            .getResult(0);

    Block &oldBody = op.getRegion().front();
    SmallVector<AffineMap> oldMaps = op.getIndexingMapsArray();
    SmallVector<Value> oldInputs(op.getDpsInputs());
    // Stage 1: thread p folds elements p, p + P, ... in a loop of its own
    // (a loop in the body: linalg needs every loop to index an operand).
    int64_t perThread = (count + threads - 1) / threads;
    auto stage1Maps =
        SmallVector<AffineMap>{AffineMap::getMultiDimIdentityMap(1, ctx)};
    auto stage1 = linalg::GenericOp::create(
        rewriter, loc, TypeRange{partialType}, ValueRange{},
        ValueRange{partialInit}, stage1Maps, {utils::IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto index = [&](OpBuilder &ib, int64_t v) {
            return arith::ConstantIndexOp::create(ib, l, v).getResult();
          };
          Value p = linalg::IndexOp::create(b, l, 0);
          auto chunk = scf::ForOp::create(
              b, l, index(b, 0), index(b, perThread), index(b, 1),
              ValueRange{args[0]},
              [&](OpBuilder &lb, Location, Value j, ValueRange iterArgs) {
                Value out = iterArgs[0];
                Value i = arith::AddIOp::create(
                    lb, l, arith::MulIOp::create(lb, l, j, index(lb, threads)),
                    p);
                Value valid = arith::CmpIOp::create(
                    lb, l, arith::CmpIPredicate::ult, i, index(lb, count));
                Value clamped =
                    arith::SelectOp::create(lb, l, valid, i, index(lb, 0));
                // The element's position in the original iteration space.
                SmallVector<Value> dims(ranges.size());
                Value rest = clamped;
                for (int64_t d = static_cast<int64_t>(ranges.size()) - 1;
                     d >= 0; --d) {
                  dims[d] =
                      arith::RemUIOp::create(lb, l, rest, index(lb, ranges[d]));
                  rest =
                      arith::DivUIOp::create(lb, l, rest, index(lb, ranges[d]));
                }
                IRMapping mapping;
                for (auto [k, input] : llvm::enumerate(oldInputs)) {
                  Value value = input;
                  if (isa<RankedTensorType>(input.getType())) {
                    SmallVector<Value> indices;
                    for (AffineExpr expr : oldMaps[k].getResults())
                      indices.push_back(affine::AffineApplyOp::create(
                          lb, l, AffineMap::get(ranges.size(), 0, expr),
                          dims));
                    value = tensor::ExtractOp::create(lb, l, input, indices);
                  }
                  mapping.map(oldBody.getArgument(k), value);
                }
                mapping.map(oldBody.getArguments().back(), out);
                for (Operation &bodyOp : oldBody.without_terminator()) {
                  if (auto idx = dyn_cast<linalg::IndexOp>(bodyOp)) {
                    mapping.map(idx.getResult(), dims[idx.getDim()]);
                    continue;
                  }
                  lb.clone(bodyOp, mapping);
                }
                Value folded =
                    mapping.lookup(oldBody.getTerminator()->getOperand(0));
                scf::YieldOp::create(
                    lb, l,
                    ValueRange{
                        arith::SelectOp::create(lb, l, valid, folded, out)});
              });
          linalg::YieldOp::create(b, l, chunk.getResults());
        });

    // One thread folds the partials in order into the original init.
    auto stage2Maps = SmallVector<AffineMap>{
        AffineMap::getMultiDimIdentityMap(1, ctx), AffineMap::get(1, 0, ctx)};
    bool outFirst = combine->getOperand(0) == oldBody.getArguments().back();
    auto stage2 = linalg::GenericOp::create(
        rewriter, loc, TypeRange{outType}, stage1.getResults(),
        op.getDpsInits(), stage2Maps, {utils::IteratorType::reduction},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value partial = args[0], out = args[1];
          linalg::YieldOp::create(
              b, l,
              outFirst ? arith::getReductionOp(kind, b, l, out, partial)
                       : arith::getReductionOp(kind, b, l, partial, out));
        });
    rewriter.replaceOp(op, stage2.getResults());
    return success();
  }
}

struct CudaSplitReductionsPass
    : public accrue::cuda::impl::CudaSplitReductionsBase<
          CudaSplitReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    // One walk, not a fixpoint: the new ops reduce over partials, which a
    // second split would only slow down.
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!op->getParentOfType<linalg::LinalgOp>())
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : candidates) {
      rewriter.setInsertionPoint(op);
      (void)splitFullReduction(rewriter, op, partials, minElements);
    }
  }
};

} // namespace
