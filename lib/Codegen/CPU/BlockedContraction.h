//===- BlockedContraction.h - the vector kernels' loops ---------*- C++ -*-===//
//
// What vectorize-contractions' kernels share: a contraction's plan (its
// blocked dimensions, operands and tiles) and the loops over its blocks of
// C. The f32 kernels are in VectorizeContractions.cpp, the bf16 ones on
// vdpbf16ps in BF16Contractions.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CPU_BLOCKEDCONTRACTION_H
#define ACCRUE_CODEGEN_CPU_BLOCKEDCONTRACTION_H

#include "accrue/Codegen/CPU/ContractionKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace accrue::cpu {

// A private header of the kernel sources (lib/Codegen/CPU): its code reads
// as theirs does.
using namespace mlir;

/// Whether the last result of `map` is the loop dimension `dim`.
inline bool innermostIs(AffineMap map, unsigned dim) {
  return map.getNumResults() > 0 &&
         map.getResults().back() == getAffineDimExpr(dim, map.getContext());
}

/// Whether the last dimension of `value`'s memref is contiguous.
inline bool unitInnerStride(Value value) {
  auto type = cast<MemRefType>(value.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         !strides.empty() && strides.back() == 1;
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
  /// Outer products over many rows copy each block of k's rows of B into
  /// a contiguous buffer first (packB), and its columns of A where A is
  /// contiguous along m (packA).
  bool packA = false, packB = false;
  /// C starts as zeros (a zero fill folded into the op, `accrue.zero_init`):
  /// the first k block does not read it.
  bool zeroInit = false;
  /// The ranges of m and n this kernel covers (multiples of the tiles); a
  /// remainder gets a kernel of its own with smaller tiles, or, for m
  /// (tailM rows from mEnd), one smaller block in each block of n after its
  /// blocks of m, which reads that block's rows of B while they are cached
  /// instead of a second pass over all of B (blocks of m inside blocks of
  /// n only).
  int64_t mBegin = 0, mEnd = 0, nBegin = 0, nEnd = 0, tailM = 0;
  /// k is split into blocks of tileK, the outermost loop after the batch:
  /// the rows of B (and A) of one k block stay in cache while every block
  /// of C accumulates them.
  int64_t tileK;
  /// Dot products only: 0, or the first outer k dimension runs in blocks
  /// of this many iterations around the blocks of C, instead of inside
  /// each (see planLayout), so that a block of C's rows of A and B over
  /// one such block stay in L1 while the blocks of C of its block of n
  /// reuse them. The vector partial sums wait between blocks in a buffer.
  int64_t outerKBlock = 0;

  /// Whether the kernel copies operands into packed buffers once per block
  /// of k: where enough rows of A reuse them (8 blocks of 8 rows) and no
  /// extra k dimensions run inside the blocks of C.
  bool packsPerKBlock() const { return outerK.empty() && mEnd - mBegin >= 64; }
};

/// Whether an outer-product kernel packs `op`'s A per block of k (with
/// Plan::packsPerKBlock): where A is contiguous along m, a transposed
/// operand (the X of a weight gradient X^T dY) whose elements a block of C
/// reads at each step of k lie in one row of A, and the rows far apart.
inline bool packsA(linalg::LinalgOp op, const Plan &plan) {
  return plan.packsPerKBlock() &&
         innermostIs(op.getIndexingMapsArray()[plan.a], plan.m) &&
         unitInnerStride(op->getOperand(plan.a));
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
    if (plan.outerKBlock)
      groups.push_back({{plan.outerK.front()}, false});
    groups.push_back({{plan.k}, false});
    unsigned outer = plan.mOuter ? plan.m : plan.n;
    unsigned inner = plan.mOuter ? plan.n : plan.m;
    parallelBlocks = plan.parallel && !parallelBatch;
    // A tail block of m follows the blocks of m in each block of n: the
    // parallel loop is over blocks of n only.
    assert((!plan.tailM || !plan.mOuter) && "a tail of m needs m inside n");
    if (parallelBlocks && plan.tailM) {
      groups.push_back({{outer}, true});
      groups.push_back({{inner}, false});
    } else if (parallelBlocks) {
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
        else if (plan.outerKBlock && dim == plan.outerK.front())
          step = plan.outerKBlock;
        lbs.push_back(constant(begin));
        ubs.push_back(constant(end));
        steps.push_back(constant(step));
      }
      if (parallel) {
        auto loop = scf::ParallelOp::create(rewriter, loc, lbs, ubs, steps);
        loop->setAttr(kParallelKernelAttr, rewriter.getUnitAttr());
        for (auto [dim, iv] : llvm::zip(dims, loop.getInductionVars()))
          ivs[dim] = iv;
        rewriter.setInsertionPoint(loop.getBody()->getTerminator());
        continue;
      }
      for (auto [dim, lb, ub, step] : llvm::zip(dims, lbs, ubs, steps)) {
        auto loop = scf::ForOp::create(rewriter, loc, lb, ub, step);
        ivs[dim] = loop.getInductionVar();
        rewriter.setInsertionPoint(loop.getBody()->getTerminator());
        if (plan.outerKBlock && dim == plan.outerK.front())
          outerKBlocks = loop;
        if (dim == plan.k) {
          kBlocks = loop;
          if (inKBlock)
            inKBlock(*this);
        }
        if (dim == inner)
          innerBlocks = loop;
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
      // A blocked outer k dimension runs over its current block.
      Value begin = constant(0), end = constant(bounds[dim]);
      if (outer == 0 && plan.outerKBlock) {
        begin = outerKBlocks.getInductionVar();
        end = arith::AddIOp::create(rewriter, loc, begin,
                                    constant(plan.outerKBlock));
      }
      auto loop =
          scf::ForOp::create(rewriter, loc, begin, end, constant(1), init);
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
  /// The loop over blocks of k, and the innermost loop over blocks of C
  /// (null when the blocks of C are one scf.parallel loop).
  scf::ForOp kBlocks, innerBlocks;
  /// With Plan::outerKBlock, the loop over blocks of the first outer k
  /// dimension (around kBlocks).
  scf::ForOp outerKBlocks;
  /// Whether the blocks of C in each block of k are an scf.parallel loop.
  bool parallelBlocks = false;
};

/// Replaces bf16 `op` by the blocks of `plan` on vdpbf16ps
/// (BF16Contractions.cpp); `lanes` f32 lanes a vector.
void emitBlockedContractionBF16(RewriterBase &rewriter, linalg::LinalgOp op,
                                const Plan &plan, int64_t lanes);

} // namespace accrue::cpu

#endif // ACCRUE_CODEGEN_CPU_BLOCKEDCONTRACTION_H
