//===- VectorizeContractions.cpp - register-tiled matmuls --------*- C++ -*-===//
//
// Scalar loops leave a CPU's vector units mostly idle on the contractions
// that dominate a training step. Each contraction on buffers whose output
// and right-hand side are contiguous along n (C[m, n] += A[m, k] * B[k, n],
// either operand possibly transposed on the other dims) is tiled into
// Tm x Tn blocks of C with k innermost, each block becomes a vector.contract
// lowered to outer products (Tm broadcast FMAs of a Tn-wide row of B per
// k), and the block of C is hoisted out of the k loop, so it lives in
// registers while the whole k extent streams through.
//
//===----------------------------------------------------------------------===//

#include "accrue/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace accrue {
#define GEN_PASS_DEF_VECTORIZECONTRACTIONS
#include "accrue/Conversion/Passes.h.inc"
} // namespace accrue

using namespace mlir;

namespace {

/// The largest of `candidates` that divides `extent`, or 0.
int64_t largestDivisor(int64_t extent, ArrayRef<int64_t> candidates) {
  for (int64_t c : candidates)
    if (extent % c == 0)
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
  SmallVector<unsigned> batch;
  unsigned m, n, k;
  unsigned a, b;
  int64_t tileM, tileN;
};

/// Whether the last dimension of `value`'s memref is contiguous.
bool unitInnerStride(Value value) {
  auto type = cast<MemRefType>(value.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         !strides.empty() && strides.back() == 1;
}

FailureOr<Plan> planContraction(linalg::LinalgOp op, int64_t tileM,
                                int64_t tileN) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !linalg::isaContractionOpInterface(op))
    return failure();
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return failure();
  }
  // Every operand indexed by plain loop dimensions (no sums or constants).
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isProjectedPermutation(/*allowZeroInResults=*/false))
      return failure();
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1)
    return failure();
  Plan plan;
  plan.batch.assign(dims->batch.begin(), dims->batch.end());
  plan.m = dims->m[0];
  plan.n = dims->n[0];
  plan.k = dims->k[0];
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineExpr n = getAffineDimExpr(plan.n, op.getContext());
  plan.b = maps[0].getResultPosition(n) ? 0 : 1;
  plan.a = 1 - plan.b;
  // A row of B and a row of C are one vector load each.
  if (!innermostIs(maps[2], plan.n) || !innermostIs(maps[plan.b], plan.n) ||
      !unitInnerStride(op->getOperand(2)) ||
      !unitInnerStride(op->getOperand(plan.b)))
    return failure();
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  plan.tileM = largestDivisor(bounds[plan.m], {tileM, 4, 2, 1});
  plan.tileN = largestDivisor(bounds[plan.n], {tileN, 16, 8});
  if (!plan.tileM || !plan.tileN)
    return failure();
  return plan;
}

/// The indices into an operand indexed by `map` at loop position `ivs`.
SmallVector<Value> indicesOf(AffineMap map, ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults())
    indices.push_back(ivs[cast<AffineDimExpr>(e).getPosition()]);
  return indices;
}

/// Replaces `op` by loops over blocks of C (tileM rows of tileN), each
/// accumulated in registers over the whole k extent: per k, one row of B is
/// loaded and each row of the block gets a broadcast FMA with its element
/// of A.
void emitBlockedContraction(RewriterBase &rewriter, linalg::LinalgOp op,
                            const Plan &plan) {
  Location loc = op.getLoc();
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value a = op->getOperand(plan.a), b = op->getOperand(plan.b),
        c = op->getOperand(2);
  auto rowType = VectorType::get({plan.tileN}, rewriter.getF32Type());
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  };
  Value zero = constant(0);

  // Outer loops: batch dimensions, then blocks of m and n.
  SmallVector<Value> ivs(bounds.size(), zero);
  SmallVector<std::pair<unsigned, int64_t>> outer;
  for (unsigned d : plan.batch)
    outer.push_back({d, 1});
  outer.push_back({plan.m, plan.tileM});
  outer.push_back({plan.n, plan.tileN});
  OpBuilder::InsertionGuard guard(rewriter);
  for (auto [dim, step] : outer) {
    auto loop = scf::ForOp::create(rewriter, loc, zero, constant(bounds[dim]),
                                   constant(step));
    ivs[dim] = loop.getInductionVar();
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  }
  Value rowStart = ivs[plan.m];
  auto atRow = [&](OpBuilder &builder, int64_t i) {
    SmallVector<Value> at(ivs);
    at[plan.m] = i == 0 ? rowStart
                        : arith::AddIOp::create(builder, loc, rowStart,
                                                constant(i))
                              .getResult();
    return at;
  };
  SmallVector<Value> block;
  for (int64_t i = 0; i < plan.tileM; ++i)
    block.push_back(vector::LoadOp::create(rewriter, loc, rowType, c,
                                           indicesOf(maps[2], atRow(rewriter, i))));
  auto kLoop = scf::ForOp::create(rewriter, loc, zero, constant(bounds[plan.k]),
                                  constant(1), block);
  {
    OpBuilder::InsertionGuard inner(rewriter);
    rewriter.setInsertionPointToStart(kLoop.getBody());
    ivs[plan.k] = kLoop.getInductionVar();
    Value row =
        vector::LoadOp::create(rewriter, loc, rowType, b, indicesOf(maps[plan.b], ivs));
    SmallVector<Value> next;
    for (int64_t i = 0; i < plan.tileM; ++i) {
      Value element = memref::LoadOp::create(
          rewriter, loc, a, indicesOf(maps[plan.a], atRow(rewriter, i)));
      Value splat = vector::BroadcastOp::create(rewriter, loc, rowType, element);
      next.push_back(vector::FMAOp::create(rewriter, loc, splat, row,
                                           kLoop.getRegionIterArgs()[i]));
    }
    scf::YieldOp::create(rewriter, loc, next);
  }
  ivs[plan.k] = zero;
  for (int64_t i = 0; i < plan.tileM; ++i)
    vector::StoreOp::create(rewriter, loc, kLoop.getResult(i), c,
                            indicesOf(maps[2], atRow(rewriter, i)));
}

struct VectorizeContractionsPass
    : accrue::impl::VectorizeContractionsBase<VectorizeContractionsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::LinalgOp> contractions;
    func.walk([&](linalg::LinalgOp op) { contractions.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : contractions) {
      FailureOr<Plan> plan = planContraction(op, tileM, tileN);
      if (failed(plan))
        continue;
      rewriter.setInsertionPoint(op);
      emitBlockedContraction(rewriter, op, *plan);
      rewriter.eraseOp(op);
      ++numVectorized;
    }
  }
};

} // namespace
