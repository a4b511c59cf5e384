//===- SplitReductions.cpp - split and warp reductions ----------*- C++ -*-===//

#include "BiasGradients.h"
#include "WarpReductions.h"

#include "accrue/Codegen/Common/Contractions.h"

#include "accrue/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDASPLITREDUCTIONS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;

namespace accrue::cuda {

std::optional<arith::AtomicRMWKind> combinerKind(Operation *op) {
  using Kind = arith::AtomicRMWKind;
  return llvm::TypeSwitch<Operation *, std::optional<Kind>>(op)
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
}

} // namespace accrue::cuda

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
  std::optional<arith::AtomicRMWKind> kind = cuda::combinerKind(combine);
  if (!kind)
    return std::nullopt;
  return std::make_pair(combine, *kind);
}

/// The innermost dimension of `op`'s widest input (the one of most
/// dimensions) when that is a loop of `op`.
std::optional<unsigned> innermostLoop(linalg::GenericOp op) {
  AffineMap widest;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (isa<RankedTensorType>(input->get().getType()) &&
        (!widest || map.getNumResults() > widest.getNumResults()))
      widest = map;
  }
  if (!widest || widest.getNumResults() == 0)
    return std::nullopt;
  auto inner = dyn_cast<AffineDimExpr>(widest.getResults().back());
  if (!inner)
    return std::nullopt;
  return inner.getPosition();
}

/// Whether `op` reduces along rows of its inputs that are not contiguous:
/// the innermost dimension of its widest input is an output dimension.
bool isColumnReduction(linalg::GenericOp op) {
  std::optional<unsigned> inner = innermostLoop(op);
  return inner &&
         op.getIteratorTypesArray()[*inner] == utils::IteratorType::parallel;
}

/// Whether `op` reduces along contiguous rows of its inputs: the innermost
/// dimension of its widest input is a reduced loop.
bool isRowReduction(linalg::GenericOp op) {
  std::optional<unsigned> inner = innermostLoop(op);
  return inner &&
         op.getIteratorTypesArray()[*inner] == utils::IteratorType::reduction;
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

/// Folds, from `start`, the reduced elements p, p + T, ... (T = `threads`)
/// of `op` at the output point `dims` (the positions of its parallel
/// loops; the reduced ones are filled in), in order, with `op`'s body, in
/// a loop at `b`'s insertion point (inside a linalg.generic's body: linalg
/// needs every loop to index an operand, so the share is a loop of its own).
Value foldShare(OpBuilder &b, Location l, linalg::GenericOp op,
                const ReductionLoops &loops, Value p, int64_t threads,
                SmallVector<Value> dims, Value start) {
  SmallVector<AffineMap> oldMaps = op.getIndexingMapsArray();
  Block &oldBody = op.getRegion().front();
  SmallVector<Value> oldInputs(op.getDpsInputs());
  int64_t perThread = (loops.count + threads - 1) / threads;
  auto index = [&](OpBuilder &ib, int64_t v) {
    return arith::ConstantIndexOp::create(ib, l, v).getResult();
  };
  auto chunk = scf::ForOp::create(
      b, l, index(b, 0), index(b, perThread), index(b, 1), ValueRange{start},
      [&](OpBuilder &lb, Location, Value k, ValueRange iterArgs) {
        Value out = iterArgs[0];
        Value i = arith::AddIOp::create(
            lb, l, arith::MulIOp::create(lb, l, k, index(lb, threads)), p);
        Value valid = arith::CmpIOp::create(lb, l, arith::CmpIPredicate::ult, i,
                                            index(lb, loops.count));
        Value clamped = arith::SelectOp::create(lb, l, valid, i, index(lb, 0));
        // The element's position in the reduced loops.
        Value rest = clamped;
        for (unsigned d : llvm::reverse(loops.reduced)) {
          dims[d] =
              arith::RemUIOp::create(lb, l, rest, index(lb, loops.ranges[d]));
          rest =
              arith::DivUIOp::create(lb, l, rest, index(lb, loops.ranges[d]));
        }
        IRMapping mapping;
        for (auto [k, input] : llvm::enumerate(oldInputs)) {
          Value value = input;
          if (isa<RankedTensorType>(input.getType())) {
            SmallVector<Value> indices;
            for (AffineExpr expr : oldMaps[k].getResults())
              indices.push_back(affine::AffineApplyOp::create(
                  lb, l, AffineMap::get(loops.ranges.size(), 0, expr), dims));
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
        Value folded = mapping.lookup(oldBody.getTerminator()->getOperand(0));
        Value next = threads == 1
                         ? folded
                         : arith::SelectOp::create(lb, l, valid, folded, out)
                               .getResult();
        scf::YieldOp::create(lb, l, ValueRange{next});
      });
  return chunk.getResult(0);
}

/// The positions of `op`'s loops at an output point of a new op whose
/// loop `pointDim(j)` is output dimension j (the reduced ones unset).
SmallVector<Value> pointPositions(OpBuilder &b, Location l,
                                  const ReductionLoops &loops,
                                  function_ref<int64_t(int64_t)> pointDim) {
  SmallVector<Value> dims(loops.ranges.size());
  for (auto [d, j] : llvm::enumerate(loops.outDimOfLoop))
    if (j >= 0)
      dims[d] = linalg::IndexOp::create(b, l, pointDim(j));
  return dims;
}

/// Where the threads of a point are among the loops of a split's first
/// stage: none (a thread per point), a loop after the points' (so that
/// neighbouring threads take neighbouring elements of one point: a row
/// reduction), or before them (neighbouring threads take neighbouring
/// points: a column reduction), with the partials' dimension of threads
/// first or last.
enum class ThreadLoop { None, Last, First, FirstStoredLast };

/// A parallel linalg.generic writing `init` (of the output's points, with
/// a dimension of `threads` threads, first for First and last otherwise,
/// unless `where` is None) in which thread p of each point folds the
/// reduced elements p, p + T, ... of `op`, in order, with `op`'s body,
/// from `start`.
Value foldInLoops(RewriterBase &rewriter, linalg::GenericOp op,
                  const ReductionLoops &loops, Value init, int64_t threads,
                  ThreadLoop where,
                  function_ref<Value(OpBuilder &, Location)> start) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  auto type = cast<RankedTensorType>(init.getType());
  int64_t rank = type.getRank();
  AffineMap map = AffineMap::getMultiDimIdentityMap(rank, ctx);
  if (where == ThreadLoop::FirstStoredLast) {
    SmallVector<AffineExpr> results;
    for (int64_t j = 1; j < rank; ++j)
      results.push_back(getAffineDimExpr(j, ctx));
    results.push_back(getAffineDimExpr(0, ctx));
    map = AffineMap::get(rank, 0, results, ctx);
  }
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto fold = linalg::GenericOp::create(
      rewriter, loc, TypeRange{type}, ValueRange{}, ValueRange{init}, {map},
      iterators, [&](OpBuilder &b, Location l, ValueRange) {
        Value p;
        if (where == ThreadLoop::None)
          p = arith::ConstantIndexOp::create(b, l, 0);
        else
          p = linalg::IndexOp::create(b, l,
                                      where == ThreadLoop::Last ? rank - 1 : 0);
        SmallVector<Value> dims = pointPositions(b, l, loops, [&](int64_t j) {
          bool first = where == ThreadLoop::First ||
                       where == ThreadLoop::FirstStoredLast;
          return first ? j + 1 : j;
        });
        linalg::YieldOp::create(
            b, l, foldShare(b, l, op, loops, p, threads, dims, start(b, l)));
      });
  return fold.getResult(0);
}

/// The fill `init` is, when it fills a `tensor.empty` with a scalar (a
/// sum's zeros, a maximum's -inf).
linalg::FillOp constantFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getInputs()[0].getType().isIntOrFloat() ||
      !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
    return nullptr;
  return fill;
}

/// Replaces the reduction `op` by a warp reduction (kWarpLanes): a
/// generic over the output's points and the 32 lanes (indexed by a
/// placeholder input only), whose lane l folds the elements l, l + 32, ...
/// of the point from the identity and then combines that into the output
/// point. Into a constant fill it starts from the constant instead:
/// lane 0 combines with the constant where the others combine with the
/// accumulator, so that the op reads its initial value nowhere (the fill
/// goes).
void warpReduction(RewriterBase &rewriter, linalg::GenericOp op,
                   const ReductionLoops &loops, Operation *combine,
                   arith::AtomicRMWKind kind) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Value init = op.getDpsInits()[0];
  auto outType = cast<RankedTensorType>(init.getType());
  Type elementType = outType.getElementType();
  int64_t rank = outType.getRank();
  Value constant;
  if (linalg::FillOp fill = constantFill(init)) {
    constant = fill.getInputs()[0];
    init = rewriter.clone(*fill.getOutputs()[0].getDefiningOp())->getResult(0);
  }
  Value lanes = tensor::EmptyOp::create(
      rewriter, loc, ArrayRef<int64_t>{cuda::kWarpSize}, rewriter.getI8Type());
  SmallVector<AffineExpr> pointDims;
  for (int64_t j = 0; j < rank; ++j)
    pointDims.push_back(getAffineDimExpr(j, ctx));
  SmallVector<AffineMap> maps = {
      AffineMap::get(rank + 1, 0, getAffineDimExpr(rank, ctx)),
      AffineMap::get(rank + 1, 0, pointDims, ctx)};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  Block &oldBody = op.getRegion().front();
  bool outFirst = combine->getOperand(0) == oldBody.getArguments().back();
  auto warp = linalg::GenericOp::create(
      rewriter, loc, TypeRange{outType}, ValueRange{lanes}, ValueRange{init},
      maps, iterators, [&](OpBuilder &b, Location l, ValueRange args) {
        Value lane = linalg::IndexOp::create(b, l, rank);
        SmallVector<Value> dims =
            pointPositions(b, l, loops, [](int64_t j) { return j; });
        Value share =
            foldShare(b, l, op, loops, lane, cuda::kWarpSize, dims,
                      arith::getIdentityValue(kind, elementType, b, l));
        Value acc = args[1];
        if (constant) {
          Value first =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, lane,
                                    arith::ConstantIndexOp::create(b, l, 0));
          acc = arith::SelectOp::create(b, l, first, constant, acc);
        }
        linalg::YieldOp::create(
            b, l,
            outFirst ? arith::getReductionOp(kind, b, l, acc, share)
                     : arith::getReductionOp(kind, b, l, share, acc));
      });
  warp->setAttr(cuda::kWarpLanes, rewriter.getUnitAttr());
  rewriter.replaceOp(op, warp.getResults());
}

/// The pass's options.
struct Limits {
  int64_t fullThreads, elementsPerThread, minElements, rowThreads,
      minRowElements, warpElements, laneElements;
};

/// Whether `op` is a product that is no GEMM: every output point sums the
/// products of elements both inputs hold at that point (every parallel
/// loop indexes both inputs: M = N = 1) along contiguous rows, a dot
/// product per row, as RMSNorm's forward and LayerNorm's, RMSNorm's and
/// softmax's backward sum a row's products. Such a product is a row
/// reduction (a warp's, in their row groups). A column's (a LayerNorm
/// scale's gradient) stays a GEMM, which adds into the accumulator itself.
bool isDotProducts(linalg::GenericOp op) {
  std::optional<codegen::Contraction> c = codegen::matchContraction(op);
  if (!c || !isRowReduction(op))
    return false;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (auto [loop, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
    if (iterator == utils::IteratorType::parallel &&
        (!maps[c->lhs].isFunctionOfDim(loop) ||
         !maps[c->rhs].isFunctionOfDim(loop)))
      return false;
  return true;
}

/// Splits a reduction into deterministic stages. A row reduction (or a
/// full one) of 32-bit elements of at least `warpElements` and at most 32
/// x `laneElements` elements becomes a warp reduction (warpReduction).
/// Otherwise, for each point of the output (none for a full reduction
/// into a rank-0 result, one per row otherwise), `threads` threads each
/// fold a strided share of the reduced elements (thread p takes p, p + T,
/// p + 2T, ...: neighbouring threads read neighbouring elements) into
/// partials; then the partials are reduced the same way (split again, or
/// by a warp), or one thread per point folds its partials (a column
/// reduction), in order, into the original init.
LogicalResult splitReduction(RewriterBase &rewriter, linalg::GenericOp op,
                             const Limits &limits) {
  std::optional<ReductionLoops> loops = reductionLoops(op);
  if (!loops)
    return failure();
  auto outType = cast<RankedTensorType>(op.getDpsInits()[0].getType());
  int64_t count = loops->count;
  bool full = outType.getRank() == 0;
  // Products (a * b summed) are GEMMs for cuda-contractions-to-gemm, but
  // for dot products.
  if (!full && codegen::matchContraction(op) && !isDotProducts(op))
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
  // A column reduction (the inputs' contiguous dimension is an output
  // dimension: a bias gradient, LayerNorm's gamma) orders its first
  // stage's threads first, so that neighbouring threads take neighbouring
  // output points and read neighbouring elements; a row reduction orders
  // them last (neighbouring threads read neighbouring elements of one
  // row). Either way each partial folds the same elements in the same
  // order, and the partials keep the threads last: the second stage is a
  // row reduction.
  bool threadsFirst = !full && isColumnReduction(op);
  // Shuffles move 32-bit values. (A window's reduction, a convolution's,
  // keeps a thread per point: neighbouring points read neighbouring
  // elements.)
  bool warpable =
      elementType.isIntOrFloat() && elementType.getIntOrFloatBitWidth() == 32;
  if ((full || isRowReduction(op)) && warpable &&
      count >= limits.warpElements &&
      count <= cuda::kWarpSize * limits.laneElements) {
    warpReduction(rewriter, op, *loops, combine, kind);
    return success();
  }
  if (count < (full ? limits.minElements : limits.minRowElements))
    return failure();
  int64_t fullThreads = limits.fullThreads,
          elementsPerThread = limits.elementsPerThread,
          rowThreads = limits.rowThreads;
  // A full reduction: `elementsPerThread` elements a thread, up to
  // `fullThreads` (so that its threads fill the GPU: 10M elements are
  // 163,840 threads, more than two waves of 132 SMs). A row: a warp at
  // least, 32 elements each, up to `rowThreads` (and a column of values
  // shuffles do not move: its partials are folded by a thread each). A
  // column of 32-bit values: about sqrt(32 x count) threads (a multiple of
  // 32, up to `rowThreads`), so that a thread of the first stage folds as
  // many elements as a lane of the warp reduction of its partials (1,024
  // rows: 6 each, 192 partials).
  int64_t threads;
  if (full)
    threads = std::max<int64_t>(
        1, std::min<int64_t>(fullThreads,
                             llvm::divideCeil(count, elementsPerThread)));
  else if (threadsFirst && warpable)
    threads = std::min<int64_t>(
        count,
        std::clamp<int64_t>(
            llvm::alignTo(int64_t(std::sqrt(double(cuda::kWarpSize * count))),
                          cuda::kWarpSize),
            cuda::kWarpSize, rowThreads));
  else
    threads = std::min<int64_t>(
        count, std::min<int64_t>(rowThreads,
                                 std::max<int64_t>(32, (count + 31) / 32)));
  // Partials: the output's shape with the threads' dimension last (first
  // for a column of values a warp does not reduce: one thread per point
  // folds its partials, neighbouring threads reading neighbouring ones).
  bool partialsFirst = threadsFirst && !warpable;
  SmallVector<int64_t> partialShape(outType.getShape());
  partialShape.insert(partialsFirst ? partialShape.begin() : partialShape.end(),
                      threads);
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
      foldInLoops(rewriter, op, *loops, partialInit, threads,
                  !threadsFirst   ? ThreadLoop::Last
                  : partialsFirst ? ThreadLoop::First
                                  : ThreadLoop::FirstStoredLast,
                  [&](OpBuilder &b, Location l) {
                    return arith::getIdentityValue(kind, elementType, b, l);
                  });

  // Stage 2: the partials fold, in order, into the original init.
  Block &oldBody = op.getRegion().front();
  SmallVector<AffineExpr> pointDims;
  for (int64_t j = 0; j < rank; ++j)
    pointDims.push_back(getAffineDimExpr(j, ctx));
  // Stage 2 iterates (point, thread): the partials' map puts the thread
  // where the partials have it.
  SmallVector<AffineExpr> partialDims(pointDims);
  partialDims.insert(partialsFirst ? partialDims.begin() : partialDims.end(),
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
  // The partials are a reduction of their own (a row, unless kept
  // threads-first): split again (a third stage, and so on) or reduced by
  // warps, so that no thread folds more than a few.
  if (!partialsFirst) {
    rewriter.setInsertionPoint(stage2);
    (void)splitReduction(rewriter, stage2, limits);
  }
  return success();
}

/// A reduction (not a product, which is a GEMM, but for a dot product per
/// row: isDotProducts) into a constant fill (a
/// sum's zeros, a maximum's -inf) folds each point's elements from that
/// constant in its thread's registers, in the same order, instead of
/// reading the filled buffer: a kernel fewer, and nothing to read.
LogicalResult foldFillInit(RewriterBase &rewriter, linalg::GenericOp op) {
  std::optional<ReductionLoops> loops = reductionLoops(op);
  if (!loops || op->hasAttr(cuda::kWarpLanes) ||
      (codegen::matchContraction(op) && !isDotProducts(op)))
    return failure();
  linalg::FillOp fill = constantFill(op.getDpsInits()[0]);
  if (!fill)
    return failure();
  Value value = fill.getInputs()[0];
  Value init = fill.getOutputs()[0];
  rewriter.setInsertionPoint(op);
  Value empty = rewriter.clone(*init.getDefiningOp())->getResult(0);
  Value folded =
      foldInLoops(rewriter, op, *loops, empty, /*threads=*/1, ThreadLoop::None,
                  [&](OpBuilder &, Location) { return value; });
  rewriter.replaceOp(op, folded);
  return success();
}

struct CudaSplitReductionsPass
    : public accrue::cuda::impl::CudaSplitReductionsBase<
          CudaSplitReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    // A bias gradient stays whole: its GEMM's epilogue computes it.
    llvm::DenseSet<Operation *> biasGradients =
        cuda::markBiasGradients(getOperation());
    // One walk, not a fixpoint: splitReduction splits the partials of a
    // full reduction itself while there are many.
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!op->getParentOfType<linalg::LinalgOp>() &&
          !biasGradients.contains(op))
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : candidates) {
      rewriter.setInsertionPoint(op);
      (void)splitReduction(rewriter, op,
                           Limits{partials, elementsPerThread, minElements,
                                  rowThreads, minRowElements, warpElements,
                                  laneElements});
    }
    // Then every reduction into a constant fill (unsplit ones, the last
    // stages of split ones) starts from the constant.
    SmallVector<linalg::GenericOp> reductions;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!op->getParentOfType<linalg::LinalgOp>() &&
          !biasGradients.contains(op))
        reductions.push_back(op);
    });
    for (linalg::GenericOp op : reductions)
      (void)foldFillInit(rewriter, op);
  }
};

} // namespace
