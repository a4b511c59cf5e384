//===- GemmPlans.cpp - contractions as strided batched GEMMs ----*- C++ -*-===//

#include "GemmPlans.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::codegen;
using namespace accrue::cuda::gemm;

namespace accrue::cuda::gemm {

std::optional<AccrueDType> gemmType(Type type) {
  if (type.isF32())
    return ACCRUE_DTYPE_FLOAT32;
  if (type.isBF16())
    return ACCRUE_DTYPE_BFLOAT16;
  if (type.isF16())
    return ACCRUE_DTYPE_FLOAT16;
  return std::nullopt;
}

/// Whether loop `outer` is laid out right outside loop `inner` in every
/// operand of `plan` that has them (but those in the bit mask `ignored`,
/// bit x for operand x): the two collapse into one dimension. An operand
/// that has one of them but not the other (a batch loop only the output
/// and one input have) does not collapse them.
static bool collapsible(const Plan &plan, int64_t outer, int64_t inner,
                        unsigned ignored = 0) {
  if (ShapedType::isDynamic(plan.ranges[inner]))
    return false;
  for (int x = A; x <= C; ++x) {
    int64_t o = plan.position[x][outer], i = plan.position[x][inner];
    if (ignored & 1u << x || (o < 0 && i < 0))
      continue;
    if (o < 0 || i < 0 ||
        plan.strides[x][o] != plan.strides[x][i] * plan.ranges[inner])
      return false;
  }
  return true;
}

/// `loops` (sorted) split into runs whose neighbours collapse.
static SmallVector<SmallVector<int64_t>>
collapsingRuns(const Plan &plan, ArrayRef<int64_t> loops) {
  SmallVector<SmallVector<int64_t>> runs;
  for (int64_t loop : loops) {
    if (runs.empty() || !collapsible(plan, runs.back().back(), loop))
      runs.emplace_back();
    runs.back().push_back(loop);
  }
  return runs;
}

/// Of `plan`'s batch loops (sorted by C's position), the run of collapsing
/// loops with the most iterations (the innermost of equals; a dynamic
/// extent counts as the most) stays the GEMM's batch dimension; the other
/// runs become host loops around the call.
static void chooseBatchRun(Plan &plan) {
  SmallVector<SmallVector<int64_t>> runs =
      collapsingRuns(plan, plan.loops[Batch]);
  auto iterations = [&](ArrayRef<int64_t> run) {
    int64_t product = 1;
    for (int64_t loop : run) {
      if (ShapedType::isDynamic(plan.ranges[loop]) ||
          product > std::numeric_limits<int64_t>::max() / plan.ranges[loop])
        return std::numeric_limits<int64_t>::max();
      product *= plan.ranges[loop];
    }
    return product;
  };
  size_t chosen = runs.empty() ? 0 : runs.size() - 1;
  for (size_t r = runs.size(); r-- > 0;)
    if (iterations(runs[r]) > iterations(runs[chosen]))
      chosen = r;
  plan.loops[Batch].clear();
  for (size_t r = 0; r < runs.size(); ++r)
    llvm::append_range(r == chosen ? plan.loops[Batch] : plan.hostLoops,
                       runs[r]);
}

/// Sorts `plan`'s loops of each kind into the GEMM's dimensions: loops of
/// one iteration go (they add nothing to any address) unless their kind
/// has no other; of M's and N's loops, the innermost that collapse are the
/// dimension and the loops outside them batch loops that one input does
/// not have (a convolution's samples for its weight: batch stride 0); K's
/// must collapse (else splitReduction: compactReductionInputs copies the
/// inputs so that they do); then chooseBatchRun.
static void collapseLoops(Plan &plan) {
  for (SmallVector<int64_t> &loops : plan.loops)
    if (llvm::any_of(loops,
                     [&](int64_t loop) { return plan.ranges[loop] != 1; }))
      llvm::erase_if(loops,
                     [&](int64_t loop) { return plan.ranges[loop] == 1; });
  auto byPosition = [&](OperandIndex x) {
    return [&plan, x](int64_t l, int64_t r) {
      return plan.position[x][l] < plan.position[x][r];
    };
  };
  for (int kind : {M, N}) {
    SmallVector<int64_t> &loops = plan.loops[kind];
    if (loops.empty())
      continue;
    llvm::sort(loops, byPosition(C));
    SmallVector<SmallVector<int64_t>> runs = collapsingRuns(plan, loops);
    loops = runs.pop_back_val();
    for (ArrayRef<int64_t> run : runs)
      llvm::append_range(plan.loops[Batch], run);
  }
  llvm::sort(plan.loops[K], byPosition(A));
  if (collapsingRuns(plan, plan.loops[K]).size() > 1)
    plan.splitReduction = true;
  llvm::sort(plan.loops[Batch], byPosition(C));
  chooseBatchRun(plan);
}

FailureOr<Plan> planGemm(linalg::GenericOp op, const Contraction &c) {
  Plan plan;
  plan.buffers[A] = op.getDpsInputs()[c.lhs];
  plan.buffers[B] = op.getDpsInputs()[c.rhs];
  plan.buffers[C] = op.getDpsInits()[0];
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap operandMaps[3] = {maps[c.lhs], maps[c.rhs], maps[2]};
  int64_t numLoops = op.getNumLoops();
  plan.ranges = op.getStaticLoopRanges();
  for (int x = A; x <= C; ++x) {
    auto type = cast<MemRefType>(plan.buffers[x].getType());
    int64_t offset;
    if (failed(type.getStridesAndOffset(plan.strides[x], offset)))
      return failure();
    plan.position[x].assign(numLoops, -1);
    for (auto [dim, loop] : llvm::enumerate(*loopsOf(operandMaps[x]))) {
      if (loop < 0)
        continue;
      if (plan.position[x][loop] >= 0 ||
          ShapedType::isDynamic(plan.strides[x][dim]))
        return failure(); // a diagonal, or strides known only at run time
      plan.position[x][loop] = dim;
    }
  }
  // Element types: A and B alike, C f32.
  std::optional<AccrueDType> a = gemmType(c.lhsElement),
                             b = gemmType(c.rhsElement);
  if (!a || a != b ||
      !cast<MemRefType>(plan.buffers[C].getType()).getElementType().isF32())
    return failure();
  plan.inputType = *a;
  // Sort the loops by kind.
  auto iterators = op.getIteratorTypesArray();
  for (int64_t loop = 0; loop < numLoops; ++loop) {
    bool inA = plan.position[A][loop] >= 0, inB = plan.position[B][loop] >= 0,
         inC = plan.position[C][loop] >= 0;
    bool parallel = iterators[loop] == utils::IteratorType::parallel;
    Kind kind;
    if (inA && inB && inC && parallel)
      kind = Batch;
    else if (inA && !inB && inC && parallel)
      kind = M;
    else if (!inA && inB && inC && parallel)
      kind = N;
    else if (inA && inB && !inC && !parallel)
      kind = K;
    else
      return failure(); // a broadcast or a reduction of one operand
    plan.loops[kind].push_back(loop);
  }
  if (plan.loops[K].empty())
    return failure();
  collapseLoops(plan);
  // Each matrix needs unit stride along its rows or its columns (or a
  // dimension of size 1).
  auto groupSize = [&](int kind) {
    int64_t size = 1;
    for (int64_t loop : plan.loops[kind])
      size = ShapedType::isDynamic(plan.ranges[loop]) ||
                     ShapedType::isDynamic(size)
                 ? ShapedType::kDynamic
                 : size * plan.ranges[loop];
    return size;
  };
  auto innerStride = [&](int x, int kind) -> int64_t {
    if (plan.loops[kind].empty())
      return 0;
    return plan.strides[x][plan.position[x][plan.loops[kind].back()]];
  };
  std::pair<int, int> matrices[3] = {{M, K}, {K, N}, {M, N}};
  for (int x = A; x <= C; ++x) {
    auto [rows, cols] = matrices[x];
    if (innerStride(x, rows) != 1 && innerStride(x, cols) != 1 &&
        groupSize(rows) != 1 && groupSize(cols) != 1)
      return failure();
  }
  return plan;
}

/// The batch loops of `plan` (the host loops and the GEMM's batch
/// dimension's), in C's order.
static SmallVector<int64_t> batchLoops(const Plan &plan) {
  SmallVector<int64_t> loops(plan.hostLoops);
  llvm::append_range(loops, plan.loops[Batch]);
  llvm::sort(loops, [&](int64_t l, int64_t r) {
    return plan.position[C][l] < plan.position[C][r];
  });
  return loops;
}

/// Whether the batch loops collapse into one in every operand but those in
/// the bit mask `ignored`.
static bool batchCollapses(const Plan &plan, ArrayRef<int64_t> loops,
                           unsigned ignored) {
  for (size_t i = 0; i + 1 < loops.size(); ++i)
    if (!collapsible(plan, loops[i], loops[i + 1], ignored))
      return false;
  return true;
}

/// Copies the inputs of `op` in `copies` (A or B, with the order of its
/// dimensions in the copy: copy dimension k is the input's `order[k]`) into
/// buffers of their own, and makes `op` read the copies.
static void copyInputs(RewriterBase &rewriter, linalg::GenericOp op,
                       const Contraction &c, const Plan &plan,
                       ArrayRef<std::pair<int, SmallVector<int64_t>>> copies) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  rewriter.setInsertionPoint(op);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<std::pair<unsigned, Value>> operands;
  for (auto &[x, order] : copies) {
    unsigned input = x == A ? c.lhs : c.rhs;
    Value source = plan.buffers[x];
    auto type = cast<MemRefType>(source.getType());
    SmallVector<int64_t> shape;
    for (int64_t d : order)
      shape.push_back(type.getDimSize(d));
    Value compact = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(shape, type.getElementType()));
    // compact[i0, i1, ...] = source[..., i_k at order[k], ...].
    SmallVector<AffineExpr> sourceDims(type.getRank());
    for (auto [k, d] : llvm::enumerate(order))
      sourceDims[d] = getAffineDimExpr(k, ctx);
    int64_t rank = type.getRank();
    linalg::GenericOp::create(
        rewriter, loc, ValueRange{source}, ValueRange{compact},
        {AffineMap::get(rank, 0, sourceDims, ctx),
         AffineMap::getMultiDimIdentityMap(rank, ctx)},
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, args[0]);
        });
    // The product reads the copy: its map's results in the new order.
    SmallVector<AffineExpr> results;
    for (int64_t d : order)
      results.push_back(maps[input].getResult(d));
    maps[input] = AffineMap::get(maps[input].getNumDims(), 0, results, ctx);
    operands.emplace_back(input, compact);
  }
  rewriter.modifyOpInPlace(op, [&] {
    for (auto [input, compact] : operands)
      op->setOperand(input, compact);
    op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
  });
}

/// The order of input `x`'s dimensions with those of `loops` moved, in
/// that order, to the front (`last`: to the back); empty if `x` does not
/// have them all or its shape is not static.
static SmallVector<int64_t> orderWith(const Plan &plan, int x,
                                      ArrayRef<int64_t> loops, bool last) {
  auto type = cast<MemRefType>(plan.buffers[x].getType());
  if (!type.hasStaticShape() ||
      llvm::any_of(loops, [&](int64_t l) { return plan.position[x][l] < 0; }))
    return {};
  SmallVector<int64_t> moved, order;
  for (int64_t loop : loops)
    moved.push_back(plan.position[x][loop]);
  if (!last)
    order = moved;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!llvm::is_contained(moved, d))
      order.push_back(d);
  if (last)
    llvm::append_range(order, moved);
  return order;
}

/// When the batch loops of `op`'s GEMM collapse in its output but not in
/// one or both of its inputs (attention's products reading [batch,
/// sequence, heads, dim] through a transpose: samples and heads in two
/// strides), copies each such input into a buffer of its own with the
/// batch dimensions outermost, in the output's order, and the others after
/// them as they were, so that one strided batched call does what a call
/// per host loop iteration did (a copy kernel instead of 7 more calls for
/// the 10M GPT's 8 samples). Returns whether it did.
bool compactBatchInputs(RewriterBase &rewriter, linalg::GenericOp op,
                        const Contraction &c, const Plan &plan) {
  if (plan.hostLoops.empty())
    return false;
  SmallVector<int64_t> loops = batchLoops(plan);
  if (!batchCollapses(plan, loops, 1u << A | 1u << B))
    return false;
  SmallVector<std::pair<int, SmallVector<int64_t>>> copies;
  for (int x : {A, B}) {
    if (batchCollapses(plan, loops, 0b111u & ~(1u << x)))
      continue;
    // A batch loop the input does not have (its batch stride is 0) cannot
    // be laid out by copying it.
    SmallVector<int64_t> order = orderWith(plan, x, loops, /*last=*/false);
    // The innermost dimension stays innermost (the GEMM's unit stride).
    if (order.empty() ||
        order.back() !=
            cast<MemRefType>(plan.buffers[x].getType()).getRank() - 1)
      return false;
    copies.emplace_back(x, std::move(order));
  }
  copyInputs(rewriter, op, c, plan, copies);
  return true;
}

/// When the K loops of `op`'s GEMM do not collapse in an input (a
/// convolution's weight gradient, summed over samples and output pixels
/// laid out [samples, channels, pixels]), copies each such input into a
/// buffer of its own with the K dimensions innermost, in A's order, so that
/// one call sums over all of them. Returns whether it did.
bool compactReductionInputs(RewriterBase &rewriter, linalg::GenericOp op,
                            const Contraction &c, const Plan &plan) {
  ArrayRef<int64_t> loops = plan.loops[K];
  SmallVector<std::pair<int, SmallVector<int64_t>>> copies;
  for (int x : {A, B}) {
    unsigned others = 0b111u & ~(1u << x);
    bool collapses = true;
    for (size_t i = 0; i + 1 < loops.size(); ++i)
      collapses &= collapsible(plan, loops[i], loops[i + 1], others);
    if (collapses)
      continue;
    SmallVector<int64_t> order = orderWith(plan, x, loops, /*last=*/true);
    if (order.empty())
      return false;
    copies.emplace_back(x, std::move(order));
  }
  copyInputs(rewriter, op, c, plan, copies);
  return true;
}

} // namespace accrue::cuda::gemm
