//===- VectorizeContractions.cpp - register-tiled matmuls --------*- C++ -*-===//
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
  SmallVector<unsigned> batch;
  unsigned m, n, k;
  unsigned a, b;
  int64_t tileM, tileN, width = 1;
  /// k is split into blocks of tileK, the outermost loop after the batch:
  /// the rows of B (and A) of one k block stay in cache while every block
  /// of C accumulates them.
  int64_t tileK;
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
                                int64_t tileN, int64_t tileK,
                                int64_t dotWidth) {
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
  if (failed(dims) || dims->m.empty() || dims->n.size() != 1 ||
      dims->k.size() != 1)
    return failure();
  // The last m dimension is blocked; the others (say, a batch dimension
  // the right-hand side is broadcast over) are outer loops, as batch
  // dimensions are.
  Plan plan;
  plan.batch.assign(dims->batch.begin(), dims->batch.end());
  plan.batch.append(dims->m.begin(), dims->m.end() - 1);
  plan.m = dims->m.back();
  plan.n = dims->n[0];
  plan.k = dims->k[0];
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineExpr n = getAffineDimExpr(plan.n, op.getContext());
  plan.b = maps[0].getResultPosition(n) ? 0 : 1;
  plan.a = 1 - plan.b;
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  // A row of B and a row of C are one vector load each.
  if (innermostIs(maps[2], plan.n) && innermostIs(maps[plan.b], plan.n) &&
      unitInnerStride(op->getOperand(2)) &&
      unitInnerStride(op->getOperand(plan.b))) {
    plan.kind = Plan::Kind::OuterProduct;
    plan.tileM = largestDivisor(bounds[plan.m], {tileM, 4, 2, 1});
    plan.tileN = largestDivisor(bounds[plan.n], {tileN, tileN / 2});
    if (!plan.tileM || !plan.tileN)
      return failure();
    plan.tileK = largestDivisor(bounds[plan.k], {tileK, 128, 64, 32, 16, 8});
    if (!plan.tileK)
      plan.tileK = bounds[plan.k];
    return plan;
  }
  // A row of A and a row of B along k are one vector load each.
  if (innermostIs(maps[plan.a], plan.k) && innermostIs(maps[plan.b], plan.k) &&
      unitInnerStride(op->getOperand(plan.a)) &&
      unitInnerStride(op->getOperand(plan.b))) {
    plan.kind = Plan::Kind::Dot;
    plan.width = largestDivisor(bounds[plan.k], {dotWidth, dotWidth / 2});
    plan.tileM = largestDivisor(bounds[plan.m], {4, 2, 1});
    plan.tileN = largestDivisor(bounds[plan.n], {4, 2, 1});
    if (!plan.width)
      return failure();
    plan.tileK = largestDivisor(bounds[plan.k], {tileK, 128, 64, 32, 16, 8});
    if (plan.tileK % plan.width)
      plan.tileK = bounds[plan.k];
    return plan;
  }
  return failure();
}

/// The indices into an operand indexed by `map` at loop position `ivs`.
SmallVector<Value> indicesOf(AffineMap map, ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults())
    indices.push_back(ivs[cast<AffineDimExpr>(e).getPosition()]);
  return indices;
}

/// Loops over the batch dimensions and the blocks of k, n and m, in that
/// order; leaves the insertion point in the innermost body. Returns the
/// position of every loop dimension (the start of its block).
SmallVector<Value> buildBlockLoops(RewriterBase &rewriter, Location loc,
                                   const Plan &plan,
                                   ArrayRef<int64_t> bounds) {
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  };
  Value zero = constant(0);
  SmallVector<Value> ivs(bounds.size(), zero);
  SmallVector<std::pair<unsigned, int64_t>> outer;
  for (unsigned d : plan.batch)
    outer.push_back({d, 1});
  outer.push_back({plan.k, plan.tileK});
  outer.push_back({plan.n, plan.tileN});
  outer.push_back({plan.m, plan.tileM});
  for (auto [dim, step] : outer) {
    auto loop = scf::ForOp::create(rewriter, loc, zero, constant(bounds[dim]),
                                   constant(step));
    ivs[dim] = loop.getInductionVar();
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  }
  return ivs;
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

  OpBuilder::InsertionGuard guard(rewriter);
  SmallVector<Value> ivs = buildBlockLoops(rewriter, loc, plan, bounds);
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
  Value kStart = ivs[plan.k];
  Value kEnd = arith::AddIOp::create(rewriter, loc, kStart, constant(plan.tileK));
  auto kLoop =
      scf::ForOp::create(rewriter, loc, kStart, kEnd, constant(1), block);
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

/// Replaces `op` by loops over blocks of C (tileM x tileN), each the dot
/// products of tileM rows of A with tileN rows of B along k: tileM x tileN
/// vector partial sums over `width` consecutive k, reduced and added to C.
void emitBlockedDot(RewriterBase &rewriter, linalg::LinalgOp op,
                    const Plan &plan) {
  Location loc = op.getLoc();
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value a = op->getOperand(plan.a), b = op->getOperand(plan.b),
        c = op->getOperand(2);
  auto vectorType = VectorType::get({plan.width}, rewriter.getF32Type());
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  };

  OpBuilder::InsertionGuard guard(rewriter);
  SmallVector<Value> ivs = buildBlockLoops(rewriter, loc, plan, bounds);
  auto offset = [&](unsigned dim, int64_t i) {
    return i == 0 ? ivs[dim]
                  : arith::AddIOp::create(rewriter, loc, ivs[dim], constant(i))
                        .getResult();
  };
  auto at = [&](std::initializer_list<std::pair<unsigned, Value>> values) {
    SmallVector<Value> position(ivs);
    for (auto [dim, value] : values)
      position[dim] = value;
    return position;
  };
  Value zeros = arith::ConstantOp::create(
      rewriter, loc, vectorType, rewriter.getZeroAttr(vectorType));
  SmallVector<Value> rowsOfM, rowsOfN;
  for (int64_t i = 0; i < plan.tileM; ++i)
    rowsOfM.push_back(offset(plan.m, i));
  for (int64_t j = 0; j < plan.tileN; ++j)
    rowsOfN.push_back(offset(plan.n, j));
  SmallVector<Value> sums(plan.tileM * plan.tileN, zeros);
  Value kStart = ivs[plan.k];
  Value kEnd = arith::AddIOp::create(rewriter, loc, kStart, constant(plan.tileK));
  auto kLoop = scf::ForOp::create(rewriter, loc, kStart, kEnd,
                                  constant(plan.width), sums);
  {
    OpBuilder::InsertionGuard inner(rewriter);
    rewriter.setInsertionPointToStart(kLoop.getBody());
    Value k = kLoop.getInductionVar();
    SmallVector<Value> as, bs, next;
    for (Value row : rowsOfM)
      as.push_back(vector::LoadOp::create(
          rewriter, loc, vectorType, a,
          indicesOf(maps[plan.a], at({{plan.m, row}, {plan.k, k}}))));
    for (Value row : rowsOfN)
      bs.push_back(vector::LoadOp::create(
          rewriter, loc, vectorType, b,
          indicesOf(maps[plan.b], at({{plan.n, row}, {plan.k, k}}))));
    for (int64_t i = 0; i < plan.tileM; ++i)
      for (int64_t j = 0; j < plan.tileN; ++j)
        next.push_back(vector::FMAOp::create(
            rewriter, loc, as[i], bs[j],
            kLoop.getRegionIterArgs()[i * plan.tileN + j]));
    scf::YieldOp::create(rewriter, loc, next);
  }
  for (int64_t i = 0; i < plan.tileM; ++i)
    for (int64_t j = 0; j < plan.tileN; ++j) {
      SmallVector<Value> position = indicesOf(
          maps[2], at({{plan.m, rowsOfM[i]}, {plan.n, rowsOfN[j]}}));
      Value old = memref::LoadOp::create(rewriter, loc, c, position);
      Value sum = vector::ReductionOp::create(
          rewriter, loc, vector::CombiningKind::ADD,
          kLoop.getResult(i * plan.tileN + j), old);
      memref::StoreOp::create(rewriter, loc, sum, c, position);
    }
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
      FailureOr<Plan> plan = planContraction(op, tileM, tileN, tileK, dotWidth);
      if (failed(plan))
        continue;
      rewriter.setInsertionPoint(op);
      if (plan->kind == Plan::Kind::OuterProduct)
        emitBlockedContraction(rewriter, op, *plan);
      else
        emitBlockedDot(rewriter, op, *plan);
      rewriter.eraseOp(op);
      ++numVectorized;
    }
  }
};

} // namespace
