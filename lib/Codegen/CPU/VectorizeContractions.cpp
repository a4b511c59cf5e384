//===- VectorizeContractions.cpp - register-blocked matmuls -----*- C++ -*-===//
//
// Scalar loops leave a CPU's vector units mostly idle on the contractions
// that dominate a training step. A contraction on static f32 buffers,
// C[.., m, n] += A[.., m, k] * B[.., k, n] in any layout of its operands,
// is replaced by loops over blocks of C whose body keeps the block in
// vector registers for a block of k:
//   - outer products when B and C are contiguous along n: per k, one row of
//     B and a broadcast FMA per row of the block;
//   - dot products when A and B are contiguous along k: per step of k, one
//     vector of each row of A and of B, an FMA per pair; the vectors are
//     reduced into C after the k block.
// Other layouts keep their scalar loops.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/ContractionKernels.h"
#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace accrue::cpu {
#define GEN_PASS_DEF_VECTORIZECONTRACTIONS
#include "accrue/Codegen/CPU/Passes.h.inc"
} // namespace accrue::cpu

using namespace mlir;

namespace {

/// The largest of `candidates` that divides `extent`, or 0.
int64_t largestDivisor(int64_t extent, ArrayRef<int64_t> candidates) {
  for (int64_t c : candidates)
    if (c > 0 && extent % c == 0)
      return c;
  return 0;
}

/// Whether the last result of `map` is the loop dimension `dim`.
bool innermostIs(AffineMap map, unsigned dim) {
  return map.getNumResults() > 0 &&
         map.getResults().back() == getAffineDimExpr(dim, map.getContext());
}

/// How one contraction is computed: its loop dimensions, which operand is
/// A (m, k) and which is B (k, n), and the block of C held in registers.
struct Plan {
  /// OuterProduct: B and C contiguous along n; a tileM x tileN block of C
  /// in registers, one row of B and tileM broadcasts of A per k.
  /// Dot: A and B contiguous along k; tileM x tileN partial sums, each a
  /// vector of `width` consecutive k, reduced into C at the end.
  enum class Kind { OuterProduct, Dot } kind;
  /// Outer loops: parallel dimensions (batch, and m or n dimensions beyond
  /// the blocked ones), then reduction dimensions beyond the blocked k.
  SmallVector<unsigned> batch, outerK;
  unsigned m, n, k;
  unsigned a, b;
  int64_t tileM, tileN, width = 1;
  /// Whether the blocks run as an scf.parallel loop (see the pass).
  bool parallel = false;
  /// Blocks of m are the outer loop, blocks of n the inner one (see
  /// planLayout).
  bool mOuter = false;
  /// C starts as zeros (a zero fill folded into the op, `accrue.zero_init`):
  /// the first k block does not read it.
  bool zeroInit = false;
  /// The ranges of m and n this kernel covers (multiples of the tiles); a
  /// remainder gets a kernel of its own with smaller tiles.
  int64_t mBegin = 0, mEnd = 0, nBegin = 0, nEnd = 0;
  /// k is split into blocks of tileK, the outermost loop after the batch:
  /// the rows of B (and A) of one k block stay in cache while every block
  /// of C accumulates them.
  int64_t tileK;
};

/// The bytes of an operand's panel (a block of k by all of m or n) that
/// the blocks of C may stream from cache: half of a 2 MiB L2.
constexpr int64_t kPanelBytes = 1 << 20;

/// Whether the last dimension of `value`'s memref is contiguous.
bool unitInnerStride(Value value) {
  auto type = cast<MemRefType>(value.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         !strides.empty() && strides.back() == 1;
}

/// The plan of a contraction with these indexing maps (A, B, C in operand
/// order) and static loop ranges; `contiguous` says which operands have a
/// unit stride in their last dimension.
FailureOr<Plan> planLayout(ArrayRef<AffineMap> maps, ArrayRef<int64_t> bounds,
                           const accrue::cpu::ContractionTiles &tiles,
                           std::array<bool, 3> contiguous) {
  // Every operand indexed by plain loop dimensions (no sums or constants).
  for (AffineMap map : maps)
    if (!map.isProjectedPermutation(/*allowZeroInResults=*/false))
      return failure();
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(maps);
  if (failed(dims) || dims->m.empty() || dims->n.empty() || dims->k.empty())
    return failure();
  // One m, one n and one k dimension are blocked: the last m, the n that is
  // innermost in C (else the last) and the k that is innermost in an
  // operand (else the last). The other m and n dimensions (say, a batch
  // dimension the right-hand side is broadcast over, or the samples of a
  // convolution's columns) are outer loops, as batch dimensions are; the
  // other k dimensions are outer loops too, each accumulating into C.
  auto pick = [](ArrayRef<unsigned> candidates, ArrayRef<AffineMap> inner) {
    for (AffineMap map : inner)
      for (unsigned d : candidates)
        if (innermostIs(map, d))
          return d;
    return candidates.back();
  };
  // A and B can trade roles: when C's innermost dimension is one of A's,
  // A is the B of the kernels (a transposed product, C^T = B^T A^T).
  SmallVector<unsigned, 2> ms = dims->m, ns = dims->n;
  if (auto inner = dyn_cast_if_present<AffineDimExpr>(
          maps[2].getNumResults() ? maps[2].getResults().back() : AffineExpr());
      inner && llvm::is_contained(ms, inner.getPosition()))
    std::swap(ms, ns);
  Plan plan;
  plan.m = ms.back();
  plan.n = pick(ns, {maps[2]});
  plan.k = pick(dims->k, {maps[0], maps[1]});
  plan.batch.assign(dims->batch.begin(), dims->batch.end());
  for (unsigned d : llvm::concat<const unsigned>(dims->m, dims->n))
    if (d != plan.m && d != plan.n)
      plan.batch.push_back(d);
  for (unsigned d : dims->k)
    if (d != plan.k)
      plan.outerK.push_back(d);
  AffineExpr n = getAffineDimExpr(plan.n, maps[0].getContext());
  plan.b = maps[0].getResultPosition(n) ? 0 : 1;
  plan.a = 1 - plan.b;
  // A row of B and a row of C are one vector load each.
  if (innermostIs(maps[2], plan.n) && innermostIs(maps[plan.b], plan.n) &&
      contiguous[2] && contiguous[plan.b]) {
    plan.kind = Plan::Kind::OuterProduct;
    plan.tileM = std::min(tiles.m, bounds[plan.m]);
    plan.tileN = largestDivisor(bounds[plan.n], {tiles.n, tiles.n / 2});
    if (!plan.tileN)
      return failure();
    plan.tileK = largestDivisor(bounds[plan.k], {tiles.k, 128, 64, 32, 16, 8});
    if (!plan.tileK)
      plan.tileK = bounds[plan.k];
    // Blocks of n outside blocks of m: one block's rows of B stay in cache
    // while the blocks of m stream A's panel (tileK x m). When that panel
    // outgrows the cache and B's does not (a weight gradient dY^T X over a
    // large vocabulary), the blocks of m go outside instead.
    int64_t aPanel = plan.tileK * bounds[plan.m] * 4;
    int64_t bPanel = plan.tileK * bounds[plan.n] * 4;
    plan.mOuter = aPanel > kPanelBytes && bPanel < aPanel;
    return plan;
  }
  // A row of A and a row of B along k are one vector load each.
  if (innermostIs(maps[plan.a], plan.k) && innermostIs(maps[plan.b], plan.k) &&
      contiguous[plan.a] && contiguous[plan.b]) {
    plan.kind = Plan::Kind::Dot;
    plan.width =
        largestDivisor(bounds[plan.k], {tiles.dotWidth, tiles.dotWidth / 2});
    plan.tileM = std::min<int64_t>(4, bounds[plan.m]);
    plan.tileN = std::min<int64_t>(4, bounds[plan.n]);
    if (!plan.width)
      return failure();
    plan.tileK = largestDivisor(bounds[plan.k], {tiles.k, 128, 64, 32, 16, 8});
    // No block size divides k (k = 12 with 4-wide vectors): one block.
    if (!plan.tileK || plan.tileK % plan.width)
      plan.tileK = bounds[plan.k];
    return plan;
  }
  return failure();
}

/// The plan of a contraction on static f32 buffers, or failure.
FailureOr<Plan> planContraction(linalg::LinalgOp op,
                                const accrue::cpu::ContractionTiles &tiles) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !linalg::isaContractionOpInterface(op))
    return failure();
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return failure();
  }
  return planLayout(op.getIndexingMapsArray(), op.getStaticLoopRanges(), tiles,
                    {unitInnerStride(op->getOperand(0)),
                     unitInnerStride(op->getOperand(1)),
                     unitInnerStride(op->getOperand(2))});
}

/// What both kernels are built from: the contraction's operands and maps,
/// the loops over its blocks (batch dimensions, then blocks of k, n and m,
/// created by the constructor, which leaves the insertion point in the
/// innermost body) and the position of each loop dimension there.
struct BlockedContraction {
  BlockedContraction(RewriterBase &rewriter, linalg::LinalgOp op,
                     const Plan &plan)
      : rewriter(rewriter), loc(op.getLoc()), plan(plan),
        maps(op.getIndexingMapsArray()), a(op->getOperand(plan.a)),
        b(op->getOperand(plan.b)), c(op->getOperand(2)) {
    bounds = op.getStaticLoopRanges();
    Value zero = constant(0);
    ivs.assign(bounds.size(), zero);
    // Loop groups, outermost first; a parallel plan makes one group an
    // scf.parallel: the batch dimensions when they have enough iterations,
    // else the blocks of C inside each k block.
    int64_t batchIterations = 1;
    for (unsigned d : plan.batch)
      batchIterations *= bounds[d];
    bool parallelBatch = plan.parallel && batchIterations >= 4;
    SmallVector<std::pair<SmallVector<unsigned>, bool>> groups;
    if (!plan.batch.empty())
      groups.push_back({SmallVector<unsigned>(plan.batch), parallelBatch});
    groups.push_back({{plan.k}, false});
    unsigned outer = plan.mOuter ? plan.m : plan.n;
    unsigned inner = plan.mOuter ? plan.n : plan.m;
    if (plan.parallel && !parallelBatch) {
      groups.push_back({{outer, inner}, true});
    } else {
      groups.push_back({{outer}, false});
      groups.push_back({{inner}, false});
    }
    for (auto &[dims, parallel] : groups) {
      SmallVector<Value> lbs, ubs, steps;
      for (unsigned dim : dims) {
        int64_t begin = 0, end = bounds[dim], step = 1;
        if (dim == plan.m)
          std::tie(begin, end, step) =
              std::make_tuple(plan.mBegin, plan.mEnd, plan.tileM);
        else if (dim == plan.n)
          std::tie(begin, end, step) =
              std::make_tuple(plan.nBegin, plan.nEnd, plan.tileN);
        else if (dim == plan.k)
          step = plan.tileK;
        lbs.push_back(constant(begin));
        ubs.push_back(constant(end));
        steps.push_back(constant(step));
      }
      if (parallel) {
        auto loop = scf::ParallelOp::create(rewriter, loc, lbs, ubs, steps);
        loop->setAttr("accrue.parallel_kernel", rewriter.getUnitAttr());
        for (auto [dim, iv] : llvm::zip(dims, loop.getInductionVars()))
          ivs[dim] = iv;
        rewriter.setInsertionPoint(loop.getBody()->getTerminator());
        continue;
      }
      for (auto [dim, lb, ub, step] : llvm::zip(dims, lbs, ubs, steps)) {
        auto loop = scf::ForOp::create(rewriter, loc, lb, ub, step);
        ivs[dim] = loop.getInductionVar();
        rewriter.setInsertionPoint(loop.getBody()->getTerminator());
      }
    }
  }

  Value constant(int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  }

  /// `load()` (values of C), or with a zero-initialized C, zeros of the same
  /// types in the first k block, which must not read C.
  SmallVector<Value> loadC(TypeRange types,
                           function_ref<SmallVector<Value>()> load) {
    if (!plan.zeroInit)
      return load();
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        ivs[plan.k], constant(0));
    auto branch = scf::IfOp::create(rewriter, loc, types, first,
                                    /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&branch.getThenRegion().front());
    SmallVector<Value> zeros;
    for (Type type : types)
      zeros.push_back(arith::ConstantOp::create(rewriter, loc, type,
                                                rewriter.getZeroAttr(type)));
    scf::YieldOp::create(rewriter, loc, zeros);
    rewriter.setInsertionPointToStart(&branch.getElseRegion().front());
    scf::YieldOp::create(rewriter, loc, load());
    return SmallVector<Value>(branch.getResults());
  }

  /// The first `count` positions of block dimension `dim`.
  SmallVector<Value> positions(unsigned dim, int64_t count) {
    SmallVector<Value> values{ivs[dim]};
    for (int64_t i = 1; i < count; ++i)
      values.push_back(
          arith::AddIOp::create(rewriter, loc, ivs[dim], constant(i)));
    return values;
  }

  /// The indices into an operand indexed by `map`, at the block's position
  /// with the given dimensions moved.
  SmallVector<Value> indices(AffineMap map,
                             ArrayRef<std::pair<unsigned, Value>> moved) {
    SmallVector<Value> position(ivs);
    for (auto [dim, value] : moved)
      position[dim] = value;
    SmallVector<Value> result;
    for (AffineExpr e : map.getResults())
      result.push_back(position[cast<AffineDimExpr>(e).getPosition()]);
    return result;
  }

  /// The loop over this block of k in steps of `step`, carrying `init`;
  /// `body` gets k and the carried values and returns the next ones. The
  /// other k dimensions are loops around it, so the block of C stays in
  /// registers over all of them.
  scf::ForOp kLoop(int64_t step, ValueRange init,
                   function_ref<SmallVector<Value>(Value, ValueRange)> body,
                   unsigned outer = 0) {
    if (outer < plan.outerK.size()) {
      unsigned dim = plan.outerK[outer];
      auto loop = scf::ForOp::create(rewriter, loc, constant(0),
                                     constant(bounds[dim]), constant(1), init);
      OpBuilder::InsertionGuard inner(rewriter);
      rewriter.setInsertionPointToStart(loop.getBody());
      ivs[dim] = loop.getInductionVar();
      scf::ForOp nested =
          kLoop(step, loop.getRegionIterArgs(), body, outer + 1);
      scf::YieldOp::create(rewriter, loc, nested.getResults());
      return loop;
    }
    Value start = ivs[plan.k];
    Value end =
        arith::AddIOp::create(rewriter, loc, start, constant(plan.tileK));
    auto loop =
        scf::ForOp::create(rewriter, loc, start, end, constant(step), init);
    OpBuilder::InsertionGuard inner(rewriter);
    rewriter.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(
        rewriter, loc, body(loop.getInductionVar(), loop.getRegionIterArgs()));
    return loop;
  }

  RewriterBase &rewriter;
  Location loc;
  const Plan &plan;
  SmallVector<int64_t> bounds;
  SmallVector<AffineMap> maps;
  Value a, b, c;
  SmallVector<Value> ivs;
};

/// Replaces `op` by loops over blocks of C (tileM rows of tileN), each
/// accumulated in registers over a block of k: per k, one row of B is
/// loaded and each row of the block gets a broadcast FMA with its element
/// of A.
void emitBlockedContraction(RewriterBase &rewriter, linalg::LinalgOp op,
                            const Plan &plan) {
  OpBuilder::InsertionGuard guard(rewriter);
  BlockedContraction blocks(rewriter, op, plan);
  Location loc = blocks.loc;
  auto rowType = VectorType::get({plan.tileN}, rewriter.getF32Type());
  SmallVector<Value> rows = blocks.positions(plan.m, plan.tileM);
  SmallVector<Value> block =
      blocks.loadC(SmallVector<Type>(rows.size(), rowType), [&] {
        SmallVector<Value> loaded;
        for (Value row : rows)
          loaded.push_back(vector::LoadOp::create(
              rewriter, loc, rowType, blocks.c,
              blocks.indices(blocks.maps[2], {{plan.m, row}})));
        return loaded;
      });
  scf::ForOp loop = blocks.kLoop(1, block, [&](Value kPos, ValueRange sums) {
    Value rowOfB = vector::LoadOp::create(
        rewriter, loc, rowType, blocks.b,
        blocks.indices(blocks.maps[plan.b], {{plan.k, kPos}}));
    SmallVector<Value> next;
    for (auto [row, sum] : llvm::zip(rows, sums)) {
      Value element = memref::LoadOp::create(
          rewriter, loc, blocks.a,
          blocks.indices(blocks.maps[plan.a], {{plan.m, row}, {plan.k, kPos}}));
      Value splat =
          vector::BroadcastOp::create(rewriter, loc, rowType, element);
      next.push_back(vector::FMAOp::create(rewriter, loc, splat, rowOfB, sum));
    }
    return next;
  });
  for (auto [row, sum] : llvm::zip(rows, loop.getResults()))
    vector::StoreOp::create(rewriter, loc, sum, blocks.c,
                            blocks.indices(blocks.maps[2], {{plan.m, row}}));
}

/// Replaces `op` by loops over blocks of C (tileM x tileN), each the dot
/// products of tileM rows of A with tileN rows of B along a block of k:
/// tileM x tileN vector partial sums over `width` consecutive k, reduced
/// and added to C.
void emitBlockedDot(RewriterBase &rewriter, linalg::LinalgOp op,
                    const Plan &plan) {
  OpBuilder::InsertionGuard guard(rewriter);
  BlockedContraction blocks(rewriter, op, plan);
  Location loc = blocks.loc;
  auto vectorType = VectorType::get({plan.width}, rewriter.getF32Type());
  Value zeros = arith::ConstantOp::create(rewriter, loc, vectorType,
                                          rewriter.getZeroAttr(vectorType));
  SmallVector<Value> rowsOfM = blocks.positions(plan.m, plan.tileM);
  SmallVector<Value> rowsOfN = blocks.positions(plan.n, plan.tileN);
  SmallVector<Value> init(plan.tileM * plan.tileN, zeros);
  auto body = [&](Value kPos, ValueRange sums) {
    SmallVector<Value> as, bs, next;
    for (Value row : rowsOfM)
      as.push_back(vector::LoadOp::create(
          rewriter, loc, vectorType, blocks.a,
          blocks.indices(blocks.maps[plan.a],
                         {{plan.m, row}, {plan.k, kPos}})));
    for (Value row : rowsOfN)
      bs.push_back(vector::LoadOp::create(
          rewriter, loc, vectorType, blocks.b,
          blocks.indices(blocks.maps[plan.b],
                         {{plan.n, row}, {plan.k, kPos}})));
    for (int64_t i = 0; i < plan.tileM; ++i)
      for (int64_t j = 0; j < plan.tileN; ++j)
        next.push_back(vector::FMAOp::create(rewriter, loc, as[i], bs[j],
                                             sums[i * plan.tileN + j]));
    return next;
  };
  scf::ForOp loop = blocks.kLoop(plan.width, init, body);
  for (int64_t i = 0; i < plan.tileM; ++i)
    for (int64_t j = 0; j < plan.tileN; ++j) {
      SmallVector<Value> position = blocks.indices(
          blocks.maps[2], {{plan.m, rowsOfM[i]}, {plan.n, rowsOfN[j]}});
      Value old = blocks.loadC(rewriter.getF32Type(), [&] {
        return SmallVector<Value>{
            memref::LoadOp::create(rewriter, loc, blocks.c, position)};
      })[0];
      Value sum =
          vector::ReductionOp::create(rewriter, loc, vector::CombiningKind::ADD,
                                      loop.getResult(i * plan.tileN + j), old);
      memref::StoreOp::create(rewriter, loc, sum, blocks.c, position);
    }
}

struct VectorizeContractionsPass
    : accrue::cpu::impl::VectorizeContractionsBase<VectorizeContractionsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::LinalgOp> contractions;
    func.walk([&](linalg::LinalgOp op) { contractions.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : contractions) {
      FailureOr<Plan> plan =
          planContraction(op, {tileM, tileN, tileK, dotWidth});
      bool zeroInit = op->hasAttr("accrue.zero_init");
      if (failed(plan)) {
        // Not a kernel of ours: the zero fill folded into it comes back.
        if (zeroInit) {
          rewriter.setInsertionPoint(op);
          Value zero = arith::ConstantOp::create(
              rewriter, op.getLoc(),
              rewriter.getZeroAttr(
                  getElementTypeOrSelf(op.getDpsInits()[0].getType())));
          linalg::FillOp::create(rewriter, op.getLoc(), zero,
                                 op.getDpsInits()[0]);
          op->removeAttr("accrue.zero_init");
        }
        continue;
      }
      plan->zeroInit = zeroInit;
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      int64_t flops = 1;
      for (int64_t r : ranges)
        flops *= r;
      plan->parallel = parallel && flops >= minParallelFlops;
      rewriter.setInsertionPoint(op);
      // Whole tiles of m and n, then the remainders with smaller tiles
      // (the vectors along n of the outer-product kernel divide n).
      SmallVector<int64_t> bounds = op.getStaticLoopRanges();
      auto pieces = [](int64_t extent, int64_t tile) {
        SmallVector<std::array<int64_t, 3>> result;
        int64_t whole = extent - extent % tile;
        if (whole)
          result.push_back({0, whole, tile});
        if (whole != extent)
          result.push_back({whole, extent, extent - whole});
        return result;
      };
      for (auto [mBegin, mEnd, tileM] : pieces(bounds[plan->m], plan->tileM))
        for (auto [nBegin, nEnd, tileN] :
             pieces(bounds[plan->n], plan->tileN)) {
          Plan piece = *plan;
          piece.mBegin = mBegin, piece.mEnd = mEnd, piece.tileM = tileM;
          piece.nBegin = nBegin, piece.nEnd = nEnd, piece.tileN = tileN;
          if (piece.kind == Plan::Kind::OuterProduct)
            emitBlockedContraction(rewriter, op, piece);
          else
            emitBlockedDot(rewriter, op, piece);
        }
      rewriter.eraseOp(op);
      ++numVectorized;
    }
  }
};

} // namespace

namespace accrue::cpu {

ContractionTiles contractionTilesFor(int64_t vectorBits) {
  int64_t lanes = std::max<int64_t>(vectorBits / 32, 4);
  ContractionTiles tiles;
  tiles.n = 2 * lanes;
  tiles.dotWidth = lanes;
  tiles.m = lanes >= 8 ? 8 : 4;
  return tiles;
}

ContractionKernel contractionKernel(ArrayRef<AffineMap> maps,
                                    ArrayRef<int64_t> bounds,
                                    const ContractionTiles &tiles) {
  FailureOr<Plan> plan = planLayout(maps, bounds, tiles, {true, true, true});
  if (failed(plan))
    return ContractionKernel::None;
  return plan->kind == Plan::Kind::OuterProduct
             ? ContractionKernel::OuterProduct
             : ContractionKernel::Dot;
}

} // namespace accrue::cpu
