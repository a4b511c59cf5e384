//===- BF16Contractions.cpp - bf16 contractions on vdpbf16ps ----*- C++ -*-===//
//
// vectorize-contractions' kernels for contractions of two bf16 operands
// into f32 on AVX512-BF16: vdpbf16ps adds to each f32 lane the products of
// a pair of bf16 along k, so the outer products take k in pairs.
//
//===----------------------------------------------------------------------===//

#include "BlockedContraction.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace accrue::cpu;

namespace {

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
  // The pairs of the block of k: independent copies, in parallel where the
  // blocks of C are (else the other threads wait for one to pack a block
  // of k of an LM head's B, 4096 x 256).
  OpBuilder::InsertionGuard guard(rewriter);
  Value kk;
  Value zero = blocks.constant(0), pairCount = blocks.constant(plan.tileK / 2),
        one = blocks.constant(1);
  if (blocks.parallelBlocks) {
    auto pairs =
        scf::ParallelOp::create(rewriter, loc, ValueRange{zero},
                                ValueRange{pairCount}, ValueRange{one});
    pairs->setAttr(kParallelKernelAttr, rewriter.getUnitAttr());
    rewriter.setInsertionPoint(pairs.getBody()->getTerminator());
    kk = pairs.getInductionVars()[0];
  } else {
    auto pairs = scf::ForOp::create(rewriter, loc, zero, pairCount, one);
    rewriter.setInsertionPoint(pairs.getBody()->getTerminator());
    kk = pairs.getInductionVar();
  }
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

} // namespace

/// Replaces bf16 `op` by loops over blocks of C as emitBlockedContraction
/// does, on vdpbf16ps, which adds to each f32 lane the products of a pair
/// along k: per pair of k, each row of the block gets its pair of A
/// broadcast to every lane and multiplied with a vector of B's pairs, one
/// per `lanes` columns. Each block of k packs B's pairs (two rows
/// interleaved) before its blocks of C, and A's too where A is contiguous
/// along m (along k, a pair is one 32-bit load already). With extra k
/// dimensions (loops inside the blocks) or fewer than 64 rows
/// (Plan::packsPerKBlock), the blocks interleave B's rows themselves and
/// load A's pairs an element at a time.
void accrue::cpu::emitBlockedContractionBF16(RewriterBase &rewriter,
                                             linalg::LinalgOp op,
                                             const Plan &plan, int64_t lanes) {
  OpBuilder::InsertionGuard guard(rewriter);
  Type bf16 = rewriter.getBF16Type();
  auto sumType = VectorType::get({lanes}, rewriter.getF32Type());
  auto pairType = VectorType::get({2}, bf16);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value a = op->getOperand(plan.a);
  bool pairedA = innermostIs(maps[plan.a], plan.k) && unitInnerStride(a);
  bool pack = plan.packsPerKBlock();
  bool packA = packsA(op, plan);
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
