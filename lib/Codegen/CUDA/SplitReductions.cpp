//===- SplitReductions.cpp - two-stage full reductions ----------*- C++ -*-===//

#include "accrue/Codegen/Common/Contractions.h"

#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

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

/// Whether `op` reduces along rows of its inputs that are not contiguous:
/// the innermost dimension of its widest input is an output dimension.
bool isColumnReduction(linalg::GenericOp op) {
  AffineMap widest;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (isa<RankedTensorType>(input->get().getType()) &&
        (!widest || map.getNumResults() > widest.getNumResults()))
      widest = map;
  }
  if (!widest || widest.getNumResults() == 0)
    return false;
  auto inner = dyn_cast<AffineDimExpr>(widest.getResults().back());
  return inner && op.getIteratorTypesArray()[inner.getPosition()] ==
                      utils::IteratorType::parallel;
}

/// The loops of a reduction with one output that every parallel loop
/// indexes (unit output dimensions may be constant zeros), of static
/// reduced extents.
struct ReductionLoops {
  SmallVector<int64_t> ranges;
  /// The output dimension each loop is (-1 for the reduced loops).
  SmallVector<int64_t> outDimOfLoop;
  /// The reduced loops, in order.
  SmallVector<unsigned> reduced;
  /// Reduced elements per output point.
  int64_t count = 1;
};

std::optional<ReductionLoops> reductionLoops(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumResults() != 1 || op.getNumReductionLoops() == 0 ||
      !isa<RankedTensorType>(op.getDpsInits()[0].getType()))
    return std::nullopt;
  ReductionLoops loops;
  loops.ranges = op.getStaticLoopRanges();
  loops.outDimOfLoop.assign(op.getNumLoops(), -1);
  auto iterators = op.getIteratorTypesArray();
  for (auto [j, expr] :
       llvm::enumerate(op.getIndexingMapsArray().back().getResults())) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
      if (iterators[dim.getPosition()] != utils::IteratorType::parallel)
        return std::nullopt;
      loops.outDimOfLoop[dim.getPosition()] = j;
      continue;
    }
    auto constant = dyn_cast<AffineConstantExpr>(expr);
    if (!constant || constant.getValue() != 0)
      return std::nullopt;
  }
  for (auto [d, kind] : llvm::enumerate(iterators)) {
    if (kind == utils::IteratorType::parallel) {
      if (loops.outDimOfLoop[d] < 0)
        return std::nullopt;
      continue;
    }
    if (ShapedType::isDynamic(loops.ranges[d]))
      return std::nullopt;
    loops.reduced.push_back(d);
    loops.count *= loops.ranges[d];
  }
  return loops;
}

/// A parallel linalg.generic writing `init` (of the output's points, with
/// a dimension of `threads` threads at `threadDim` when that is not -1) in
/// which thread p of each point folds the reduced elements p, p + T, ...
/// of `op`, in order, with `op`'s body, in a loop of its own (a loop in the
/// body: linalg needs every loop to index an operand), from `start`.
Value foldInLoops(RewriterBase &rewriter, linalg::GenericOp op,
                  const ReductionLoops &loops, Value init, int64_t threads,
                  int64_t threadDim,
                  function_ref<Value(OpBuilder &, Location)> start) {
  Location loc = op.getLoc();
  auto type = cast<RankedTensorType>(init.getType());
  int64_t rank = type.getRank();
  auto pointDim = [&](int64_t j) { return threadDim == 0 ? j + 1 : j; };
  SmallVector<AffineMap> maps = {
      AffineMap::getMultiDimIdentityMap(rank, op.getContext())};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  SmallVector<AffineMap> oldMaps = op.getIndexingMapsArray();
  Block &oldBody = op.getRegion().front();
  SmallVector<Value> oldInputs(op.getDpsInputs());
  int64_t perThread = (loops.count + threads - 1) / threads;
  auto fold = linalg::GenericOp::create(
      rewriter, loc, TypeRange{type}, ValueRange{}, ValueRange{init}, maps,
      iterators, [&](OpBuilder &b, Location l, ValueRange) {
        auto index = [&](OpBuilder &ib, int64_t v) {
          return arith::ConstantIndexOp::create(ib, l, v).getResult();
        };
        Value p = threadDim >= 0
                      ? linalg::IndexOp::create(b, l, threadDim).getResult()
                      : index(b, 0);
        // The output point's loops.
        SmallVector<Value> dims(loops.ranges.size());
        for (auto [d, j] : llvm::enumerate(loops.outDimOfLoop))
          if (j >= 0)
            dims[d] = linalg::IndexOp::create(b, l, pointDim(j));
        auto chunk = scf::ForOp::create(
            b, l, index(b, 0), index(b, perThread), index(b, 1),
            ValueRange{start(b, l)},
            [&](OpBuilder &lb, Location, Value k, ValueRange iterArgs) {
              Value out = iterArgs[0];
              Value i = arith::AddIOp::create(
                  lb, l, arith::MulIOp::create(lb, l, k, index(lb, threads)),
                  p);
              Value valid = arith::CmpIOp::create(
                  lb, l, arith::CmpIPredicate::ult, i, index(lb, loops.count));
              Value clamped =
                  arith::SelectOp::create(lb, l, valid, i, index(lb, 0));
              // The element's position in the reduced loops.
              Value rest = clamped;
              for (unsigned d : llvm::reverse(loops.reduced)) {
                dims[d] = arith::RemUIOp::create(lb, l, rest,
                                                 index(lb, loops.ranges[d]));
                rest = arith::DivUIOp::create(lb, l, rest,
                                              index(lb, loops.ranges[d]));
              }
              IRMapping mapping;
              for (auto [k, input] : llvm::enumerate(oldInputs)) {
                Value value = input;
                if (isa<RankedTensorType>(input.getType())) {
                  SmallVector<Value> indices;
                  for (AffineExpr expr : oldMaps[k].getResults())
                    indices.push_back(affine::AffineApplyOp::create(
                        lb, l, AffineMap::get(loops.ranges.size(), 0, expr),
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
              Value next = threads == 1 ? folded
                                        : arith::SelectOp::create(lb, l, valid,
                                                                  folded, out)
                                              .getResult();
              scf::YieldOp::create(lb, l, ValueRange{next});
            });
        linalg::YieldOp::create(b, l, chunk.getResults());
      });
  return fold.getResult(0);
}

/// Splits a reduction into two deterministic stages. For each point of
/// the output (none for a full reduction into a rank-0 result, one per row
/// otherwise), `threads` threads each fold a strided share of the reduced
/// elements (thread p takes p, p + T, p + 2T, ...: neighbouring threads
/// read neighbouring elements) into partials; then one thread per point
/// folds that point's partials, in order, into the original init.
LogicalResult splitReduction(RewriterBase &rewriter, linalg::GenericOp op,
                             int64_t fullThreads, int64_t elementsPerThread,
                             int64_t minElements, int64_t rowThreads,
                             int64_t minRowElements) {
  std::optional<ReductionLoops> loops = reductionLoops(op);
  if (!loops)
    return failure();
  auto outType = cast<RankedTensorType>(op.getDpsInits()[0].getType());
  int64_t count = loops->count;
  bool full = outType.getRank() == 0;
  if (count < (full ? minElements : minRowElements))
    return failure();
  // Products (a * b summed) are GEMMs for cuda-contractions-to-gemm.
  if (!full && codegen::matchContraction(op))
    return failure();
  auto combiner = findCombiner(op);
  if (!combiner)
    return failure();
  Operation *combine = combiner->first;
  arith::AtomicRMWKind kind = combiner->second;

  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Type elementType = outType.getElementType();
  int64_t rank = outType.getRank();
  // A full reduction: `elementsPerThread` elements a thread, up to
  // `fullThreads` (so that its threads fill the GPU: 10M elements are
  // 163,840 threads, more than two waves of 132 SMs). A row: a warp at
  // least, 32 elements each, up to `rowThreads`.
  int64_t threads =
      full
          ? std::max<int64_t>(
                1, std::min<int64_t>(
                       fullThreads, llvm::divideCeil(count, elementsPerThread)))
          : std::min<int64_t>(
                count,
                std::min<int64_t>(rowThreads,
                                  std::max<int64_t>(32, (count + 31) / 32)));
  // A column reduction (the inputs' contiguous dimension is an output
  // dimension: a bias gradient, LayerNorm's gamma) keeps its partials
  // threads-first, so that neighbouring threads take neighbouring output
  // points and read neighbouring elements; a row reduction keeps them
  // threads-last (neighbouring threads read neighbouring elements of one
  // row). Either way each partial folds the same elements in the same
  // order.
  bool threadsFirst = !full && isColumnReduction(op);
  // Partials: the output's shape with the threads' dimension, first or
  // last.
  SmallVector<int64_t> partialShape(outType.getShape());
  partialShape.insert(threadsFirst ? partialShape.begin() : partialShape.end(),
                      threads);
  int64_t threadDim = threadsFirst ? 0 : rank;
  auto partialType = RankedTensorType::get(partialShape, elementType);
  SmallVector<Value> dynamicSizes;
  for (int64_t j = 0; j < rank; ++j)
    if (outType.isDynamicDim(j))
      dynamicSizes.push_back(
          tensor::DimOp::create(rewriter, loc, op.getDpsInits()[0], j));
  // Stage 1. Each partial starts from the combiner's identity in its
  // thread's registers: nothing reads the partials' buffer before stage 1
  // writes it (no fill kernel).
  Value partialInit =
      tensor::EmptyOp::create(rewriter, loc, partialType, dynamicSizes);
  Value partials =
      foldInLoops(rewriter, op, *loops, partialInit, threads, threadDim,
                  [&](OpBuilder &b, Location l) {
                    return arith::getIdentityValue(kind, elementType, b, l);
                  });

  // Stage 2: one thread per output point folds its partials in order into
  // the original init.
  Block &oldBody = op.getRegion().front();
  SmallVector<AffineExpr> pointDims;
  for (int64_t j = 0; j < rank; ++j)
    pointDims.push_back(getAffineDimExpr(j, ctx));
  // Stage 2 iterates (point, thread): the partials' map puts the thread
  // where the partials have it.
  SmallVector<AffineExpr> partialDims(pointDims);
  partialDims.insert(threadsFirst ? partialDims.begin() : partialDims.end(),
                     getAffineDimExpr(rank, ctx));
  SmallVector<AffineMap> stage2Maps = {
      AffineMap::get(rank + 1, 0, partialDims, ctx),
      AffineMap::get(rank + 1, 0, pointDims, ctx)};
  SmallVector<utils::IteratorType> stage2Iterators(
      rank, utils::IteratorType::parallel);
  stage2Iterators.push_back(utils::IteratorType::reduction);
  bool outFirst = combine->getOperand(0) == oldBody.getArguments().back();
  auto stage2 = linalg::GenericOp::create(
      rewriter, loc, TypeRange{outType}, ValueRange{partials}, op.getDpsInits(),
      stage2Maps, stage2Iterators,
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value partial = args[0], out = args[1];
        linalg::YieldOp::create(
            b, l,
            outFirst ? arith::getReductionOp(kind, b, l, out, partial)
                     : arith::getReductionOp(kind, b, l, partial, out));
      });
  rewriter.replaceOp(op, stage2.getResults());
  // Many partials are a full reduction of their own: split again (a third
  // stage, and so on), so that no thread folds more than a few.
  if (full) {
    rewriter.setInsertionPoint(stage2);
    (void)splitReduction(rewriter, stage2, fullThreads, elementsPerThread,
                         minElements, rowThreads, minRowElements);
  }
  return success();
}

/// A reduction (not a product: those are GEMMs) into a constant fill (a
/// sum's zeros, a maximum's -inf) folds each point's elements from that
/// constant in its thread's registers, in the same order, instead of
/// reading the filled buffer: a kernel fewer, and nothing to read.
LogicalResult foldFillInit(RewriterBase &rewriter, linalg::GenericOp op) {
  std::optional<ReductionLoops> loops = reductionLoops(op);
  if (!loops || codegen::matchContraction(op))
    return failure();
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getInputs()[0].getType().isIntOrFloat())
    return failure();
  Value value = fill.getInputs()[0];
  Value init = fill.getOutputs()[0];
  if (!init.getDefiningOp<tensor::EmptyOp>())
    return failure();
  rewriter.setInsertionPoint(op);
  Value empty = rewriter.clone(*init.getDefiningOp())->getResult(0);
  Value folded =
      foldInLoops(rewriter, op, *loops, empty, /*threads=*/1, /*threadDim=*/-1,
                  [&](OpBuilder &, Location) { return value; });
  rewriter.replaceOp(op, folded);
  return success();
}

struct CudaSplitReductionsPass
    : public accrue::cuda::impl::CudaSplitReductionsBase<
          CudaSplitReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    // One walk, not a fixpoint: splitReduction splits the partials of a
    // full reduction itself while there are many.
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!op->getParentOfType<linalg::LinalgOp>())
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : candidates) {
      rewriter.setInsertionPoint(op);
      (void)splitReduction(rewriter, op, partials, elementsPerThread,
                           minElements, rowThreads, minRowElements);
    }
    // Then every reduction into a constant fill (unsplit ones, the last
    // stages of split ones) starts from the constant.
    SmallVector<linalg::GenericOp> reductions;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!op->getParentOfType<linalg::LinalgOp>())
        reductions.push_back(op);
    });
    for (linalg::GenericOp op : reductions)
      (void)foldFillInit(rewriter, op);
  }
};

} // namespace
