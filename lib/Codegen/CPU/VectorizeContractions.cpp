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

#include "BlockedContraction.h"

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
using namespace accrue::cpu;

namespace {

/// The largest of `candidates` that divides `extent`, or 0.
int64_t largestDivisor(int64_t extent, ArrayRef<int64_t> candidates) {
  for (int64_t c : candidates)
    if (c > 0 && extent % c == 0)
      return c;
  return 0;
}

/// The bytes of the rows of A and B a dot-product block of C may read over
/// its k before the first outer k dimension is blocked (Plan::outerKBlock):
/// half of a 32 KiB L1.
constexpr int64_t kDotRowsBytes = 16 << 10;

/// The longest k (over all of a kernel's k dimensions) an outer product
/// adds into the C it loads that leaves it bound by C's traffic (see
/// planLayout).
constexpr int64_t kShortK = 64;

/// f32 elements per 64-byte cache line.
constexpr int64_t kFloatsPerCacheLine = 16;

/// The plan of a contraction with these indexing maps (A, B, C in operand
/// order) and static loop ranges; `contiguous` says which operands have a
/// unit stride in their last dimension; `bf16`, whether A and B are bf16
/// (for vdpbf16ps, which needs k in pairs); `zeroInit`, whether C starts
/// as zeros (Plan::zeroInit) rather than values the kernel loads and adds
/// into.
FailureOr<Plan> planLayout(ArrayRef<AffineMap> maps, ArrayRef<int64_t> bounds,
                           const accrue::cpu::ContractionTiles &tiles,
                           std::array<bool, 3> contiguous, bool bf16 = false,
                           bool zeroInit = false) {
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
  plan.zeroInit = zeroInit;
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
    // Blocks of n outside blocks of m: one block's rows of B stay in L1
    // while the blocks of m stream A's panel (tileK x m), tileM elements
    // per step of k. Where A's panel outgrows half of L2 and B's fits in
    // it (a weight gradient dY^T X over a large vocabulary, or an LM
    // head's data gradient, whose rows of A lie 16 KiB apart), the blocks
    // of m go outside: a block's rows of A stay in L1 while the blocks of
    // n read B's panel from L2. Where neither fits, streaming A costs less.
    //
    // A kernel that adds a short k into the C it loads (a weight gradient
    // accumulated in place over a micro-batch of 32 rows: 32 FMAs per
    // element of C loaded and stored) is bound by C's traffic, and C is
    // larger than L2. Blocks of m outside walk C along its rows, tileM
    // sequential streams the prefetchers follow; blocks of n outside walk
    // down tileN-wide columns, a new page every row. With the blocks of m
    // outside, the MLP's step took 15% less time on Zen 4, one thread and
    // two alike.
    int64_t aPanel = plan.tileK * bounds[plan.m] * elementBytes;
    int64_t bPanel = plan.tileK * bounds[plan.n] * elementBytes;
    int64_t panelBytes = tiles.l2Bytes / 2;
    int64_t kPerLoadOfC = plan.tileK;
    for (unsigned d : plan.outerK)
      kPerLoadOfC *= bounds[d];
    bool streamsC = !zeroInit && kPerLoadOfC <= kShortK;
    plan.mOuter = (aPanel > panelBytes || streamsC) && bPanel <= panelBytes;
    plan.packA = tiles.packA;
    plan.packB = tiles.packB;
    return plan;
  }
  // A row of A and a row of B along k are one vector load each.
  if (innermostIs(maps[plan.a], plan.k) && innermostIs(maps[plan.b], plan.k) &&
      contiguous[plan.a] && contiguous[plan.b]) {
    plan.kind = Plan::Kind::Dot;
    // A vdpbf16ps vector holds twice as many k, as bf16, as an f32 one.
    int64_t width = bf16 ? 2 * tiles.dotWidth : tiles.dotWidth;
    plan.width = largestDivisor(bounds[plan.k], {width, width / 2});
    plan.tileM = std::min(tiles.dotM, bounds[plan.m]);
    plan.tileN = std::min(tiles.dotN, bounds[plan.n]);
    if (!plan.width)
      return failure();
    // One block of k: each element's vector partial sums are reduced
    // once, at the end (in blocks of k, the horizontal reductions cost
    // about as much as the products).
    plan.tileK = bounds[plan.k];
    // Over a long outer k (a convolution's weight gradient sums over the
    // samples and the pixels), a block of C's rows of A and B outgrow L1,
    // and each block of n streams all of A again from beyond L2. The
    // first outer k dimension then runs in blocks around the blocks of C
    // (without batch dimensions, which would need partial sums each).
    int64_t batch = 1;
    for (unsigned d : plan.batch)
      batch *= bounds[d];
    if (plan.outerK.empty() || batch != 1)
      return plan;
    // The bytes of rows per iteration of the first outer k dimension.
    int64_t rowBytes =
        (plan.tileM + plan.tileN) * elementBytes * bounds[plan.k];
    for (unsigned d : ArrayRef<unsigned>(plan.outerK).drop_front())
      rowBytes *= bounds[d];
    int64_t outer = bounds[plan.outerK.front()];
    if (rowBytes * outer <= kDotRowsBytes)
      return plan;
    plan.outerKBlock = 1;
    for (int64_t block = outer / 2; block > 1; --block)
      if (outer % block == 0 && rowBytes * block <= kDotRowsBytes) {
        plan.outerKBlock = block;
        break;
      }
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
                    bf16, op->hasAttr(kZeroInitAttr));
}

/// The block of `tile` positions of [begin, ..) along a loop dimension
/// that `position` starts: where a packed buffer (packPanel) holds it.
Value blockIndex(BlockedContraction &blocks, Value position, int64_t begin,
                 int64_t tile) {
  RewriterBase &rewriter = blocks.rewriter;
  return arith::DivUIOp::create(rewriter, blocks.loc,
                                arith::SubIOp::create(rewriter, blocks.loc,
                                                      position,
                                                      blocks.constant(begin)),
                                blocks.constant(tile));
}

/// A buffer of this block of k's elements of `operand` (indexed by `map`,
/// contiguous along its loop dimension `dim`) over [begin, end) of `dim`,
/// in blocks of `tile`: [block][kk] holds the `tile` elements at k + kk
/// that a block of C reads, so that it reads them from consecutive
/// addresses instead of one row of the operand per step of k (rows a power
/// of two apart share a few cache sets). The buffer is allocated before the
/// blocks of k, each of which fills it (in parallel over k when the blocks
/// of C are parallel); the caller frees it after them.
Value packPanel(BlockedContraction &blocks, Value operand, AffineMap map,
                unsigned dim, int64_t begin, int64_t end, int64_t tile) {
  RewriterBase &rewriter = blocks.rewriter;
  Location loc = blocks.loc;
  const Plan &plan = blocks.plan;
  Value packed;
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(blocks.kBlocks);
    packed = memref::AllocOp::create(
        rewriter, loc,
        MemRefType::get({(end - begin) / tile, plan.tileK, tile},
                        rewriter.getF32Type()),
        rewriter.getI64IntegerAttr(64));
  }
  SmallVector<Value> lbs = {blocks.constant(0), blocks.constant(begin)};
  SmallVector<Value> ubs = {blocks.constant(plan.tileK), blocks.constant(end)};
  SmallVector<Value> steps = {blocks.constant(1), blocks.constant(tile)};
  OpBuilder::InsertionGuard guard(rewriter);
  SmallVector<Value> ivs;
  if (blocks.parallelBlocks) {
    auto loop = scf::ParallelOp::create(rewriter, loc, lbs, ubs, steps);
    loop->setAttr(kParallelKernelAttr, rewriter.getUnitAttr());
    llvm::append_range(ivs, loop.getInductionVars());
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  } else {
    for (auto [lb, ub, step] : llvm::zip(lbs, ubs, steps)) {
      auto loop = scf::ForOp::create(rewriter, loc, lb, ub, step);
      ivs.push_back(loop.getInductionVar());
      rewriter.setInsertionPoint(loop.getBody()->getTerminator());
    }
  }
  Value kk = ivs[0], j = ivs[1];
  Value k = arith::AddIOp::create(rewriter, loc, blocks.ivs[plan.k], kk);
  Value elements = vector::LoadOp::create(
      rewriter, loc, VectorType::get({tile}, rewriter.getF32Type()), operand,
      blocks.indices(map, {{plan.k, k}, {dim, j}}));
  vector::StoreOp::create(
      rewriter, loc, elements, packed,
      ValueRange{blockIndex(blocks, j, begin, tile), kk, blocks.constant(0)});
  return packed;
}

/// Replaces `op` by loops over blocks of C (tileM rows of tileN), each
/// accumulated in registers over a block of k: per k, one row of B is
/// loaded and each row of the block gets a broadcast FMA with its element
/// of A. Over many rows (Plan::packsPerKBlock), each block of k first packs
/// B's rows (packB) and, where A is contiguous along m (a transposed
/// operand, as the X of a weight gradient X^T dY), A's columns (packA). A
/// tail of m (Plan::tailM) is one more block in each block of n.
void emitBlockedContraction(RewriterBase &rewriter, linalg::LinalgOp op,
                            const Plan &plan) {
  OpBuilder::InsertionGuard guard(rewriter);
  auto rowType = VectorType::get({plan.tileN}, rewriter.getF32Type());
  bool packB = plan.packB && plan.packsPerKBlock();
  bool packA = plan.packA && packsA(op, plan);
  Value packedA, packedB;
  BlockedContraction blocks(
      rewriter, op, plan, [&](BlockedContraction &blocks) {
        if (packB)
          packedB = packPanel(blocks, blocks.b, blocks.maps[plan.b], plan.n,
                              plan.nBegin, plan.nEnd, plan.tileN);
        if (packA)
          packedA = packPanel(blocks, blocks.a, blocks.maps[plan.a], plan.m,
                              plan.mBegin, plan.mEnd, plan.tileM);
      });
  Location loc = blocks.loc;
  // The block of `count` rows at the current position of m; `packedRows`:
  // its elements of A are in packedA.
  auto emitBlock = [&](int64_t count, bool packedRows) {
    SmallVector<Value> rows = blocks.positions(plan.m, count);
    SmallVector<Value> block =
        blocks.loadC(SmallVector<Type>(rows.size(), rowType), [&] {
          SmallVector<Value> loaded;
          for (Value row : rows)
            loaded.push_back(vector::LoadOp::create(
                rewriter, loc, rowType, blocks.c,
                blocks.indices(blocks.maps[2], {{plan.m, row}})));
          return loaded;
        });
    Value blockOfB =
        packB ? blockIndex(blocks, blocks.ivs[plan.n], plan.nBegin, plan.tileN)
              : Value();
    Value blockOfA = packedRows ? blockIndex(blocks, blocks.ivs[plan.m],
                                             plan.mBegin, plan.tileM)
                                : Value();
    // Unpacked, B's rows of this block of n lie a row of B apart, as many
    // streams as the block of k has rows, more than the hardware
    // prefetchers follow: each step of k prefetches its row in the next
    // block of n (this block's at the last one), so the block of C after
    // this one finds its rows of B in cache.
    Value nextOfB;
    if (!packB) {
      Value at = blocks.ivs[plan.n];
      Value next =
          arith::AddIOp::create(rewriter, loc, at, blocks.constant(plan.tileN));
      Value inside =
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, next,
                                blocks.constant(plan.nEnd));
      nextOfB = arith::SelectOp::create(rewriter, loc, inside, next, at);
    }
    scf::ForOp loop = blocks.kLoop(1, block, [&](Value kPos, ValueRange sums) {
      Value kk =
          packedRows || packB
              ? arith::SubIOp::create(rewriter, loc, kPos, blocks.ivs[plan.k])
              : Value();
      Value rowOfB =
          packB ? vector::LoadOp::create(
                      rewriter, loc, rowType, packedB,
                      ValueRange{blockOfB, kk, blocks.constant(0)})
                : vector::LoadOp::create(
                      rewriter, loc, rowType, blocks.b,
                      blocks.indices(blocks.maps[plan.b], {{plan.k, kPos}}));
      if (nextOfB) {
        // Every cache line of the row (two of 16 floats on AVX-512).
        for (int64_t column = 0; column < plan.tileN;
             column += kFloatsPerCacheLine) {
          Value at = column ? arith::AddIOp::create(rewriter, loc, nextOfB,
                                                    blocks.constant(column))
                            : nextOfB;
          memref::PrefetchOp::create(
              rewriter, loc, blocks.b,
              blocks.indices(blocks.maps[plan.b],
                             {{plan.k, kPos}, {plan.n, at}}),
              /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
        }
      }
      SmallVector<Value> next;
      for (auto [i, row, sum] : llvm::enumerate(rows, sums)) {
        Value element =
            packedRows
                ? memref::LoadOp::create(
                      rewriter, loc, packedA,
                      ValueRange{blockOfA, kk,
                                 blocks.constant(static_cast<int64_t>(i))})
                : memref::LoadOp::create(
                      rewriter, loc, blocks.a,
                      blocks.indices(blocks.maps[plan.a],
                                     {{plan.m, row}, {plan.k, kPos}}));
        Value splat =
            vector::BroadcastOp::create(rewriter, loc, rowType, element);
        next.push_back(
            vector::FMAOp::create(rewriter, loc, splat, rowOfB, sum));
      }
      return next;
    });
    for (auto [row, sum] : llvm::zip(rows, loop.getResults()))
      vector::StoreOp::create(rewriter, loc, sum, blocks.c,
                              blocks.indices(blocks.maps[2], {{plan.m, row}}));
  };
  emitBlock(plan.tileM, packA);
  // The tail of m, after the blocks of m in this block of n; packA packed
  // the whole blocks only.
  if (plan.tailM) {
    rewriter.setInsertionPointAfter(blocks.innerBlocks);
    blocks.ivs[plan.m] = blocks.constant(plan.mEnd);
    emitBlock(plan.tailM, /*packedRows=*/false);
  }
  // The packed buffers are refilled by each block of k.
  rewriter.setInsertionPointAfter(blocks.kBlocks);
  for (Value packed : {packedA, packedB})
    if (packed)
      memref::DeallocOp::create(rewriter, loc, packed);
}

/// The sums of the lanes of each of `vectors` (as many as each has lanes,
/// a power of two) as one vector, vector i's sum in lane i. Each level
/// pairs the vectors and adds the low half of every group of lanes to its
/// high half, so that each lane's sum is the tree of halves (for 16 lanes:
/// 8 + 8, 4 + 4, 2 + 2, 1 + 1) that LLVM lowers a reassociating
/// vector.reduction of one vector to on x86, in 15 vector adds instead of
/// 16 x 4 (and 16 x 15 for an ordered one).
Value reduceLanes(OpBuilder &builder, Location loc, ValueRange vectors) {
  auto lanes = static_cast<int64_t>(vectors.size());
  assert(llvm::isPowerOf2_64(lanes) &&
         cast<VectorType>(vectors.front().getType()).getNumElements() ==
             lanes &&
         "one vector per lane");
  SmallVector<Value> level(vectors);
  // Each vector of `level` holds groups of `group` lanes, a partial sum of
  // one of the original vectors each.
  for (int64_t group = lanes; group > 1; group /= 2) {
    SmallVector<int64_t> low, high;
    for (int64_t operand : {0, 1})
      for (int64_t start = 0; start < lanes; start += group)
        for (int64_t lane = 0; lane < group / 2; ++lane) {
          low.push_back(operand * lanes + start + lane);
          high.push_back(operand * lanes + start + group / 2 + lane);
        }
    SmallVector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2) {
      Value lows =
          vector::ShuffleOp::create(builder, loc, level[i], level[i + 1], low);
      Value highs =
          vector::ShuffleOp::create(builder, loc, level[i], level[i + 1], high);
      next.push_back(arith::AddFOp::create(builder, loc, lows, highs));
    }
    level = std::move(next);
  }
  return level.front();
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
  // With blocks of the outer k, the partial sums of each block of C wait in
  // `partial` ([m][n][lane]) from one block to the next: the same sums in
  // the same order as in registers.
  Value partial, last;
  SmallVector<SmallVector<Value>> partialAt;
  if (plan.outerKBlock) {
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(blocks.outerKBlocks);
      partial = memref::AllocOp::create(
          rewriter, loc,
          MemRefType::get({plan.mEnd - plan.mBegin, plan.nEnd - plan.nBegin,
                           sumType.getNumElements()},
                          rewriter.getF32Type()),
          rewriter.getI64IntegerAttr(64));
      rewriter.setInsertionPointAfter(blocks.outerKBlocks);
      memref::DeallocOp::create(rewriter, loc, partial);
    }
    Value start = blocks.outerKBlocks.getInductionVar();
    int64_t lastStart = blocks.bounds[plan.outerK.front()] - plan.outerKBlock;
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        start, blocks.constant(0));
    last = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, start,
                                 blocks.constant(lastStart));
    for (Value row : rowsOfM) {
      Value i = arith::SubIOp::create(rewriter, loc, row,
                                      blocks.constant(plan.mBegin));
      for (Value column : rowsOfN)
        partialAt.push_back(
            {i,
             arith::SubIOp::create(rewriter, loc, column,
                                   blocks.constant(plan.nBegin)),
             blocks.constant(0)});
    }
    auto resume = scf::IfOp::create(
        rewriter, loc, SmallVector<Type>(init.size(), sumType), first,
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&resume.getThenRegion().front());
    scf::YieldOp::create(rewriter, loc, init);
    rewriter.setInsertionPointToStart(&resume.getElseRegion().front());
    SmallVector<Value> saved;
    for (ArrayRef<Value> at : partialAt)
      saved.push_back(
          vector::LoadOp::create(rewriter, loc, sumType, partial, at));
    scf::YieldOp::create(rewriter, loc, saved);
    init.assign(resume.getResults().begin(), resume.getResults().end());
  }
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
  OpBuilder::InsertionGuard guard2(rewriter);
  if (plan.outerKBlock) {
    // Saved for the next block of k, or, after the last, reduced into C.
    auto save = scf::IfOp::create(rewriter, loc, TypeRange(), last,
                                  /*withElseRegion=*/true);
    rewriter.setInsertionPointToStart(&save.getElseRegion().front());
    for (auto [sum, at] : llvm::zip(loop.getResults(), partialAt))
      vector::StoreOp::create(rewriter, loc, sum, partial, at);
    rewriter.setInsertionPointToStart(&save.getThenRegion().front());
  }
  // A whole block's partial sums (as many vectors as lanes: 4 x 4 of 16)
  // are reduced together; a block of the remainders of m or n, each alone.
  // Either way, a lane's sum is the same tree of halves.
  int64_t lanes = sumType.getNumElements();
  bool together = plan.tileM * plan.tileN == lanes;
  Value reduced =
      together ? reduceLanes(rewriter, loc, loop.getResults()) : nullptr;
  // Where C is contiguous along n, each row of the block is one vector.
  if (together && innermostIs(blocks.maps[2], plan.n) &&
      unitInnerStride(blocks.c)) {
    auto rowType = VectorType::get({plan.tileN}, rewriter.getF32Type());
    for (int64_t i = 0; i < plan.tileM; ++i) {
      SmallVector<Value> position = blocks.indices(
          blocks.maps[2], {{plan.m, rowsOfM[i]}, {plan.n, rowsOfN[0]}});
      Value old = blocks.loadC(rowType, [&] {
        return SmallVector<Value>{
            vector::LoadOp::create(rewriter, loc, rowType, blocks.c, position)};
      })[0];
      Value sums = vector::ExtractStridedSliceOp::create(
          rewriter, loc, reduced, ArrayRef<int64_t>{i * plan.tileN},
          ArrayRef<int64_t>{plan.tileN}, ArrayRef<int64_t>{1});
      Value sum = arith::AddFOp::create(rewriter, loc, sums, old);
      vector::StoreOp::create(rewriter, loc, sum, blocks.c, position);
    }
    return;
  }
  for (int64_t i = 0; i < plan.tileM; ++i)
    for (int64_t j = 0; j < plan.tileN; ++j) {
      SmallVector<Value> position = blocks.indices(
          blocks.maps[2], {{plan.m, rowsOfM[i]}, {plan.n, rowsOfN[j]}});
      Value old = blocks.loadC(rewriter.getF32Type(), [&] {
        return SmallVector<Value>{
            memref::LoadOp::create(rewriter, loc, blocks.c, position)};
      })[0];
      Value sum;
      if (together) {
        Value lane = vector::ExtractOp::create(rewriter, loc, reduced,
                                               i * plan.tileN + j);
        sum = arith::AddFOp::create(rewriter, loc, lane, old);
      } else {
        sum = vector::ReductionOp::create(rewriter, loc,
                                          vector::CombiningKind::ADD,
                                          loop.getResult(i * plan.tileN + j),
                                          old, arith::FastMathFlags::reassoc);
      }
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
          planContraction(op,
                          {tileM, tileN, tileK, dotWidth, dotTileM, dotTileN,
                           packA, packB, fuseMTail, l2Bytes},
                          bf16Dot);
      bool zeroInit = op->hasAttr(kZeroInitAttr);
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
          op->removeAttr(kZeroInitAttr);
        }
        continue;
      }
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
      // With fuse-m-tail, an outer product's remainder of m is a block in
      // each block of n of the whole blocks' kernel (Plan::tailM) where the
      // blocks of m are inside those of n and, if parallel, the blocks of n
      // alone are enough to share (schedule-parallel-loops keeps only them
      // from 16 blocks on).
      auto mPieces = pieces(bounds[plan->m], plan->tileM);
      int64_t tailM = 0;
      if (fuseMTail && plan->kind == Plan::Kind::OuterProduct && !plan->bf16 &&
          !plan->mOuter && mPieces.size() == 2 &&
          (!plan->parallel || bounds[plan->n] / plan->tileN >= 16)) {
        tailM = mPieces.back()[2];
        mPieces.pop_back();
      }
      for (auto [mBegin, mEnd, tileM] : mPieces)
        for (auto [nBegin, nEnd, tileN] :
             pieces(bounds[plan->n], plan->tileN)) {
          Plan piece = *plan;
          piece.mBegin = mBegin, piece.mEnd = mEnd, piece.tileM = tileM;
          piece.tailM = tailM;
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
  tiles.m = lanes >= 16 ? 8 : (lanes >= 8 ? 6 : 4);
  // 16 registers (AVX2, SSE): 8 accumulators and the 6 rows they load;
  // 3 x 4 and 4 x 4 spill or stall there (the MLP's forward ran 15-20%
  // slower on AVX2).
  tiles.dotM = lanes >= 16 ? 4 : 2;
  // Measured on AVX2 only (Zen 3: a GPT step 1.1-1.35x faster, the LSTM
  // LM's 1.1-1.45x); AVX-512 keeps its unpacked kernels until measured.
  tiles.packA = tiles.packB = tiles.fuseMTail = lanes < 16;
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
