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
// Other layouts keep their scalar loops. With AVX512-BF16, a contraction
// of two bf16 operands into f32 (as --precision bf16 forms them) gets the
// same kernels on vdpbf16ps, which sums the products of pairs of bf16
// into f32 lanes: the outer products take k in pairs (two rows of B
// interleaved, so each lane holds its column's pair, and a broadcast of
// A's pair; for large blocks of C, packed once per block of k), the dot
// products twice the k per vector.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CPU/ContractionKernels.h"
#include "accrue/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

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
  /// A and B are bf16, multiplied in pairs along k by vdpbf16ps (`width`
  /// then counts bf16 elements, two per f32 lane of the partial sums).
  bool bf16 = false;
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

/// The rows of A (of one kernel) for which the bf16 outer products pack
/// B's pairs once per block of k rather than interleave B's rows in each
/// block of C: 8 blocks of 8 rows.
constexpr int64_t kMinPackingRows = 64;

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
/// unit stride in their last dimension; `bf16`, whether A and B are bf16
/// (for vdpbf16ps, which needs k in pairs).
FailureOr<Plan> planLayout(ArrayRef<AffineMap> maps, ArrayRef<int64_t> bounds,
                           const accrue::cpu::ContractionTiles &tiles,
                           std::array<bool, 3> contiguous, bool bf16 = false) {
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
  plan.bf16 = bf16;
  int64_t elementBytes = bf16 ? 2 : 4;
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
    // vdpbf16ps takes k in pairs; every vector along n is a whole register.
    if (bf16 && (plan.tileK % 2 || plan.tileN % tiles.dotWidth))
      return failure();
    // Blocks of n outside blocks of m: one block's rows of B stay in cache
    // while the blocks of m stream A's panel (tileK x m). When that panel
    // outgrows the cache and B's does not (a weight gradient dY^T X over a
    // large vocabulary), the blocks of m go outside instead.
    int64_t aPanel = plan.tileK * bounds[plan.m] * elementBytes;
    int64_t bPanel = plan.tileK * bounds[plan.n] * elementBytes;
    plan.mOuter = aPanel > kPanelBytes && bPanel < aPanel;
    return plan;
  }
  // A row of A and a row of B along k are one vector load each.
  if (innermostIs(maps[plan.a], plan.k) && innermostIs(maps[plan.b], plan.k) &&
      contiguous[plan.a] && contiguous[plan.b]) {
    plan.kind = Plan::Kind::Dot;
    // A vdpbf16ps vector holds twice as many k, as bf16, as an f32 one.
    int64_t width = bf16 ? 2 * tiles.dotWidth : tiles.dotWidth;
    plan.width = largestDivisor(bounds[plan.k], {width, width / 2});
    plan.tileM = std::min<int64_t>(4, bounds[plan.m]);
    plan.tileN = std::min<int64_t>(4, bounds[plan.n]);
    if (!plan.width)
      return failure();
    // One block of k: each element's vector partial sums are reduced
    // once, at the end (in blocks of k, the horizontal reductions cost
    // about as much as the products).
    plan.tileK = bounds[plan.k];
    return plan;
  }
  return failure();
}

/// The plan of a contraction on static buffers, f32 or (with `bf16Dot`)
/// two bf16 inputs into f32, or failure.
FailureOr<Plan> planContraction(linalg::LinalgOp op,
                                const accrue::cpu::ContractionTiles &tiles,
                                bool bf16Dot) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !linalg::isaContractionOpInterface(op))
    return failure();
  SmallVector<Type, 3> elements;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.hasStaticShape())
      return failure();
    elements.push_back(type.getElementType());
  }
  bool bf16 = bf16Dot && elements[0].isBF16() && elements[1].isBF16();
  if (!elements[2].isF32() ||
      !(bf16 || (elements[0].isF32() && elements[1].isF32())))
    return failure();
  return planLayout(op.getIndexingMapsArray(), op.getStaticLoopRanges(), tiles,
                    {unitInnerStride(op->getOperand(0)),
                     unitInnerStride(op->getOperand(1)),
                     unitInnerStride(op->getOperand(2))},
                    bf16);
}

/// What the kernels are built from: the contraction's operands and maps,
/// the loops over its blocks (batch dimensions, then blocks of k, n and m,
/// created by the constructor, which leaves the insertion point in the
/// innermost body; `inKBlock`, if given, emits code in each block of k
/// before its blocks of C) and the position of each loop dimension there.
struct BlockedContraction {
  BlockedContraction(RewriterBase &rewriter, linalg::LinalgOp op,
                     const Plan &plan,
                     function_ref<void(BlockedContraction &)> inKBlock = {})
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
        if (dim == plan.k) {
          kBlocks = loop;
          if (inKBlock)
            inKBlock(*this);
        }
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
  /// The loop over blocks of k.
  scf::ForOp kBlocks;
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

/// Index `value` of a block of k steps of 2 from `start`: (value - start) / 2.
Value pairIndex(RewriterBase &rewriter, Location loc, Value value,
                Value start) {
  Value offset = arith::SubIOp::create(rewriter, loc, value, start);
  return arith::ShRUIOp::create(
      rewriter, loc, offset, arith::ConstantIndexOp::create(rewriter, loc, 1));
}

/// Where a buffer of pairs (packPairs) holds position `value` of
/// [begin, ..) in blocks of `tile`: its block and its column in the block.
std::pair<Value, Value> pairPlace(RewriterBase &rewriter, Location loc,
                                  Value value, int64_t begin, int64_t tile) {
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  };
  Value offset = arith::SubIOp::create(rewriter, loc, value, constant(begin));
  Value block = arith::DivUIOp::create(rewriter, loc, offset, constant(tile));
  Value within = arith::RemUIOp::create(rewriter, loc, offset, constant(tile));
  return {block, arith::AddIOp::create(rewriter, loc, within, within)};
}

/// A buffer of this block of k's pairs of `operand` (read through `map`)
/// along [begin, end) of its loop dimension `dim`, in which it is
/// contiguous, in blocks of `tile` positions (the kernel's): [block][kk]
/// holds, for each position of the block, the elements at steps 2kk and
/// 2kk + 1 of the block of k, the pair vdpbf16ps multiplies, so that a
/// block of C reads its pairs from consecutive addresses. `lanes`
/// positions at a time are interleaved where they divide the range and
/// the tile divides them or they divide the tile; otherwise pairs move one
/// at a time.
Value packPairs(BlockedContraction &blocks, Value operand, AffineMap map,
                unsigned dim, int64_t begin, int64_t end, int64_t tile,
                int64_t lanes) {
  RewriterBase &rewriter = blocks.rewriter;
  Location loc = blocks.loc;
  const Plan &plan = blocks.plan;
  Type bf16 = rewriter.getBF16Type();
  Value packed = memref::AllocOp::create(
      rewriter, loc,
      MemRefType::get({(end - begin) / tile, plan.tileK / 2, 2 * tile}, bf16),
      rewriter.getI64IntegerAttr(64));
  auto pairs =
      scf::ForOp::create(rewriter, loc, blocks.constant(0),
                         blocks.constant(plan.tileK / 2), blocks.constant(1));
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(pairs.getBody()->getTerminator());
  Value kk = pairs.getInductionVar();
  Value k = arith::AddIOp::create(rewriter, loc, blocks.ivs[plan.k],
                                  arith::AddIOp::create(rewriter, loc, kk, kk));
  Value kNext = arith::AddIOp::create(rewriter, loc, k, blocks.constant(1));
  bool vectors =
      (end - begin) % lanes == 0 && (tile % lanes == 0 || lanes % tile == 0);
  int64_t step = vectors ? lanes : 1;
  auto loop = scf::ForOp::create(rewriter, loc, blocks.constant(begin),
                                 blocks.constant(end), blocks.constant(step));
  rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  Value j = loop.getInductionVar();
  SmallVector<Value> first = blocks.indices(map, {{plan.k, k}, {dim, j}});
  SmallVector<Value> second = blocks.indices(map, {{plan.k, kNext}, {dim, j}});
  auto [block, column] = pairPlace(rewriter, loc, j, begin, tile);
  if (!vectors) {
    Value pair = vector::FromElementsOp::create(
        rewriter, loc, VectorType::get({2}, bf16),
        ValueRange{memref::LoadOp::create(rewriter, loc, operand, first),
                   memref::LoadOp::create(rewriter, loc, operand, second)});
    vector::StoreOp::create(rewriter, loc, pair, packed,
                            ValueRange{block, kk, column});
    return packed;
  }
  auto rowType = VectorType::get({lanes}, bf16);
  Value interleaved = vector::InterleaveOp::create(
      rewriter, loc,
      vector::LoadOp::create(rewriter, loc, rowType, operand, first),
      vector::LoadOp::create(rewriter, loc, rowType, operand, second));
  if (tile % lanes == 0) {
    vector::StoreOp::create(rewriter, loc, interleaved, packed,
                            ValueRange{block, kk, column});
    return packed;
  }
  // The vector spans lanes / tile blocks.
  for (int64_t piece = 0; piece < lanes / tile; ++piece) {
    Value slice = vector::ExtractStridedSliceOp::create(
        rewriter, loc, interleaved, ArrayRef<int64_t>{2 * tile * piece},
        ArrayRef<int64_t>{2 * tile}, ArrayRef<int64_t>{1});
    Value at =
        arith::AddIOp::create(rewriter, loc, block, blocks.constant(piece));
    vector::StoreOp::create(rewriter, loc, slice, packed,
                            ValueRange{at, kk, blocks.constant(0)});
  }
  return packed;
}

/// Replaces bf16 `op` by loops over blocks of C as emitBlockedContraction
/// does, on vdpbf16ps, which adds to each f32 lane the products of a pair
/// along k: per pair of k, each row of the block gets its pair of A
/// broadcast to every lane and multiplied with a vector of B's pairs, one
/// per `lanes` columns. Each block of k packs B's pairs (two rows
/// interleaved) before its blocks of C, and A's too where A is contiguous
/// along m (along k, a pair is one 32-bit load already). With extra k
/// dimensions (loops inside the blocks) or fewer than kMinPackingRows
/// rows, the blocks interleave B's rows themselves and load A's pairs an
/// element at a time.
void emitBlockedContractionBF16(RewriterBase &rewriter, linalg::LinalgOp op,
                                const Plan &plan, int64_t lanes) {
  OpBuilder::InsertionGuard guard(rewriter);
  Type bf16 = rewriter.getBF16Type();
  auto sumType = VectorType::get({lanes}, rewriter.getF32Type());
  auto pairType = VectorType::get({2}, bf16);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value a = op->getOperand(plan.a);
  bool pairedA = innermostIs(maps[plan.a], plan.k) && unitInnerStride(a);
  bool pack = plan.outerK.empty() && plan.mEnd - plan.mBegin >= kMinPackingRows;
  bool packA = pack && !pairedA && innermostIs(maps[plan.a], plan.m) &&
               unitInnerStride(a);
  Value packedA, packedB;
  BlockedContraction blocks(
      rewriter, op, plan, [&](BlockedContraction &blocks) {
        if (!pack)
          return;
        packedB = packPairs(blocks, blocks.b, maps[plan.b], plan.n, plan.nBegin,
                            plan.nEnd, plan.tileN, lanes);
        if (packA)
          packedA = packPairs(blocks, a, maps[plan.a], plan.m, plan.mBegin,
                              plan.mEnd, plan.tileM, lanes);
      });
  Location loc = blocks.loc;
  SmallVector<Value> rows = blocks.positions(plan.m, plan.tileM);
  SmallVector<Value> columns;
  for (int64_t j = 0; j < plan.tileN; j += lanes)
    columns.push_back(j ? arith::AddIOp::create(rewriter, loc,
                                                blocks.ivs[plan.n],
                                                blocks.constant(j))
                        : blocks.ivs[plan.n]);
  auto positionOfC = [&](Value row, Value column) {
    return blocks.indices(blocks.maps[2], {{plan.m, row}, {plan.n, column}});
  };
  SmallVector<Value> block = blocks.loadC(
      SmallVector<Type>(rows.size() * columns.size(), sumType), [&] {
        SmallVector<Value> loaded;
        for (Value row : rows)
          for (Value column : columns)
            loaded.push_back(vector::LoadOp::create(
                rewriter, loc, sumType, blocks.c, positionOfC(row, column)));
        return loaded;
      });
  scf::ForOp loop = blocks.kLoop(2, block, [&](Value kPos, ValueRange sums) {
    Value kNext =
        arith::AddIOp::create(rewriter, loc, kPos, blocks.constant(1));
    Value kk =
        pack ? pairIndex(rewriter, loc, kPos, blocks.ivs[plan.k]) : Value();
    SmallVector<Value> pairsOfB;
    for (Value column : columns) {
      if (pack) {
        auto [block, at] =
            pairPlace(rewriter, loc, column, plan.nBegin, plan.tileN);
        pairsOfB.push_back(vector::LoadOp::create(
            rewriter, loc, VectorType::get({2 * lanes}, bf16), packedB,
            ValueRange{block, kk, at}));
        continue;
      }
      auto rowOfB = [&](Value k) {
        return vector::LoadOp::create(
            rewriter, loc, VectorType::get({lanes}, bf16), blocks.b,
            blocks.indices(blocks.maps[plan.b],
                           {{plan.k, k}, {plan.n, column}}));
      };
      pairsOfB.push_back(vector::InterleaveOp::create(
          rewriter, loc, rowOfB(kPos), rowOfB(kNext)));
    }
    SmallVector<Value> next;
    for (auto [i, rowOfA] : llvm::enumerate(rows)) {
      Value row = rowOfA;
      auto indexOfA = [&](Value k) {
        return blocks.indices(blocks.maps[plan.a],
                              {{plan.m, row}, {plan.k, k}});
      };
      Value pair;
      if (packA) {
        auto [block, at] =
            pairPlace(rewriter, loc, row, plan.mBegin, plan.tileM);
        pair = vector::LoadOp::create(rewriter, loc, pairType, packedA,
                                      ValueRange{block, kk, at});
      } else if (pairedA) {
        pair =
            vector::LoadOp::create(rewriter, loc, pairType, a, indexOfA(kPos));
      } else {
        pair = vector::FromElementsOp::create(
            rewriter, loc, pairType,
            ValueRange{
                memref::LoadOp::create(rewriter, loc, a, indexOfA(kPos)),
                memref::LoadOp::create(rewriter, loc, a, indexOfA(kNext))});
      }
      // The pair as one 32-bit word, in every lane.
      Value word = vector::ExtractOp::create(
          rewriter, loc,
          vector::BitCastOp::create(
              rewriter, loc, VectorType::get({1}, rewriter.getI32Type()), pair),
          ArrayRef<int64_t>{0});
      Value splat = vector::BitCastOp::create(
          rewriter, loc, VectorType::get({2 * lanes}, bf16),
          vector::BroadcastOp::create(
              rewriter, loc, VectorType::get({lanes}, rewriter.getI32Type()),
              word));
      for (auto [j, pairs] : llvm::enumerate(pairsOfB))
        next.push_back(x86vector::DotBF16Op::create(
            rewriter, loc, sumType, sums[i * columns.size() + j], splat,
            pairs));
    }
    return next;
  });
  for (auto [i, row] : llvm::enumerate(rows))
    for (auto [j, column] : llvm::enumerate(columns))
      vector::StoreOp::create(rewriter, loc,
                              loop.getResult(i * columns.size() + j), blocks.c,
                              positionOfC(row, column));
  // The packed pairs live for one block of k.
  rewriter.setInsertionPoint(blocks.kBlocks.getBody()->getTerminator());
  for (Value packed : {packedA, packedB})
    if (packed)
      memref::DeallocOp::create(rewriter, loc, packed);
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
  // The vectors of A and B, and of the partial sums (with bf16, one f32
  // lane per pair of k).
  auto vectorType = VectorType::get(
      {plan.width}, plan.bf16 ? rewriter.getBF16Type() : rewriter.getF32Type());
  auto sumType = VectorType::get({plan.bf16 ? plan.width / 2 : plan.width},
                                 rewriter.getF32Type());
  Value zeros = arith::ConstantOp::create(rewriter, loc, sumType,
                                          rewriter.getZeroAttr(sumType));
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
      for (int64_t j = 0; j < plan.tileN; ++j) {
        Value sum = sums[i * plan.tileN + j];
        next.push_back(
            plan.bf16 ? x86vector::DotBF16Op::create(rewriter, loc, sumType,
                                                     sum, as[i], bs[j])
                            .getResult()
                      : vector::FMAOp::create(rewriter, loc, as[i], bs[j], sum)
                            .getResult());
      }
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
          planContraction(op, {tileM, tileN, tileK, dotWidth}, bf16Dot);
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
          if (piece.kind == Plan::Kind::OuterProduct && piece.bf16)
            emitBlockedContractionBF16(rewriter, op, piece, dotWidth);
          else if (piece.kind == Plan::Kind::OuterProduct)
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
                                    const ContractionTiles &tiles, bool bf16) {
  FailureOr<Plan> plan =
      planLayout(maps, bounds, tiles, {true, true, true}, bf16);
  if (failed(plan))
    return ContractionKernel::None;
  return plan->kind == Plan::Kind::OuterProduct
             ? ContractionKernel::OuterProduct
             : ContractionKernel::Dot;
}

} // namespace accrue::cpu
