//===- SortGatherGrads.cpp - embedding gradients by sorted rows -*- C++ -*-===//
//
// The gradient of a gather along its first axis (an embedding's table) is
// a scatter-add of the adjoint's rows into the rows the ids name. As a loop
// over the tokens it is serial in the tokens: cuda-form-kernels can give
// every feature (and range of rows) a thread, but each thread still walks
// every token, and one that owns a frequent id does all of its updates.
// Here the tokens are sorted by (row, position) instead, as PyTorch's
// deterministic embedding backward does, and each row's segment of the
// sorted tokens is summed in tiles: every thread's work is bounded by the
// shapes, whatever the ids.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/NN/IR/NN.h"

#include "../../Conversion/NNToLinalg/LoweringUtils.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDASORTGATHERGRADS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;
using nn::lowering::filledTensor;
using nn::lowering::normalizeIndex;
using nn::lowering::reshapeTensor;

namespace {

/// The shapes of one rewrite: `tokens` ids, each naming one of `rows` rows
/// of `features` elements; the sorted tokens in `tiles` tiles of `tile`
/// (the last padded with a key past every row).
struct Plan {
  int64_t tokens, rows, features, tile, tiles;
};

/// Builds the rewrite of one nn.gather_grad at the builder's point.
class Sorter {
public:
  Sorter(OpBuilder &b, Location loc, Plan plan, Value ids, Value dy)
      : b(b), loc(loc), plan(plan), ids(ids), dy(dy),
        elementType(cast<RankedTensorType>(dy.getType()).getElementType()) {}

  /// The [rows, features] gradient.
  Value build() {
    Value rank = ranks();
    Value sorted = sortedKeys(rank);
    Value tails = tileTails(sorted);
    return segmentSums(sorted, tails);
  }

private:
  Value index(OpBuilder &ib, int64_t v) {
    return arith::ConstantIndexOp::create(ib, loc, v);
  }
  Value i64(OpBuilder &ib, int64_t v) {
    return arith::ConstantIntOp::create(ib, loc, ib.getI64Type(), v);
  }
  Value asIndex(OpBuilder &ib, Value v) {
    return arith::IndexCastOp::create(ib, loc, ib.getIndexType(), v);
  }

  /// Token `position`'s sort key, row * tokens + position (i64): unique,
  /// ordered by row, then by position. The row is the one nn.gather reads:
  /// a negative id counts from the end, one out of range reads row 0.
  Value key(OpBuilder &ib, Value id, Value position) {
    Value row = arith::IndexCastOp::create(
        ib, loc, ib.getI64Type(), normalizeIndex(ib, loc, id, plan.rows));
    Value scaled = arith::MulIOp::create(ib, loc, row, i64(ib, plan.tokens));
    return arith::AddIOp::create(
        ib, loc, scaled,
        arith::IndexCastOp::create(ib, loc, ib.getI64Type(), position));
  }
  Value rowOf(OpBuilder &ib, Value key) {
    return arith::DivUIOp::create(ib, loc, key, i64(ib, plan.tokens));
  }
  Value positionOf(OpBuilder &ib, Value key) {
    return asIndex(ib,
                   arith::RemUIOp::create(ib, loc, key, i64(ib, plan.tokens)));
  }

  /// rank[t]: how many keys are smaller than token t's (its place in the
  /// sorted order), a reduction over the tokens. Token t's own id comes
  /// first: cuda-split-reductions splits it as a column reduction, its
  /// partials threads-first, so that a warp's threads take neighbouring
  /// tokens and read each other id together (a broadcast), and the second
  /// stage reads the partials along rows.
  Value ranks() {
    MLIRContext *ctx = b.getContext();
    auto type = RankedTensorType::get({plan.tokens}, b.getI64Type());
    AffineExpr t = getAffineDimExpr(0, ctx), u = getAffineDimExpr(1, ctx);
    auto map = [&](AffineExpr e) { return AffineMap::get(2, 0, e); };
    auto generic = linalg::GenericOp::create(
        b, loc, type, ValueRange{ids, ids}, filledTensor(b, loc, type, 0),
        ArrayRef<AffineMap>{map(t), map(u), map(t)},
        {utils::IteratorType::parallel, utils::IteratorType::reduction},
        [&](OpBuilder &ib, Location, ValueRange args) {
          Value own = key(ib, args[0], linalg::IndexOp::create(ib, loc, 0));
          Value other = key(ib, args[1], linalg::IndexOp::create(ib, loc, 1));
          Value less = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::ult,
                                             other, own);
          Value one = arith::ExtUIOp::create(ib, loc, ib.getI64Type(), less);
          linalg::YieldOp::create(
              ib, loc,
              arith::AddIOp::create(ib, loc, args[2], one).getResult());
        });
    return generic.getResult(0);
  }

  /// The keys in sorted order: each token writes its key at its rank (no
  /// two ranks are equal: a loop of independent iterations), into
  /// tiles x tile keys whose padding is past every row.
  Value sortedKeys(Value rank) {
    int64_t padded = plan.tiles * plan.tile;
    auto type = RankedTensorType::get({padded}, b.getI64Type());
    Value init = filledTensor(b, loc, type, double(plan.rows * plan.tokens));
    auto loop = scf::ForOp::create(
        b, loc, index(b, 0), index(b, plan.tokens), index(b, 1),
        ValueRange{init},
        [&](OpBuilder &ib, Location, Value t, ValueRange iter) {
          Value k = key(ib, tensor::ExtractOp::create(ib, loc, ids, t), t);
          Value at = asIndex(ib, tensor::ExtractOp::create(ib, loc, rank, t));
          scf::YieldOp::create(
              ib, loc,
              tensor::InsertOp::create(ib, loc, k, iter[0], at).getResult());
        });
    loop->setAttr(nn::kIndependentIterations, b.getUnitAttr());
    return loop.getResult(0);
  }

  /// The adjoint's element `feature` of the token with sorted key `k`
  /// when its row is `row`, zero otherwise.
  Value termOf(OpBuilder &ib, Value k, Value row, Value feature) {
    Value same = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::eq,
                                       rowOf(ib, k), row);
    Value value = tensor::ExtractOp::create(
        ib, loc, dy, ValueRange{positionOf(ib, k), feature});
    Value zero =
        arith::ConstantOp::create(ib, loc, ib.getFloatAttr(elementType, 0.0));
    return arith::SelectOp::create(ib, loc, same, value, zero);
  }

  /// tails[tile, f]: the sum over the tile's tokens of the row its last
  /// token names (the part of a segment that may continue into the next
  /// tiles), in order, from 0.
  Value tileTails(Value sorted) {
    MLIRContext *ctx = b.getContext();
    auto tiledType =
        RankedTensorType::get({plan.tiles, plan.tile}, b.getI64Type());
    Value tiled = reshapeTensor(b, loc, sorted, tiledType);
    auto type = RankedTensorType::get({plan.tiles, plan.features}, elementType);
    AffineExpr tile = getAffineDimExpr(0, ctx), f = getAffineDimExpr(1, ctx),
               j = getAffineDimExpr(2, ctx);
    auto map = [&](ArrayRef<AffineExpr> e) {
      return AffineMap::get(3, 0, e, ctx);
    };
    auto generic = linalg::GenericOp::create(
        b, loc, type, ValueRange{tiled, tiled}, filledTensor(b, loc, type, 0.0),
        ArrayRef<AffineMap>{
            map({tile, j}),
            map({tile, getAffineConstantExpr(plan.tile - 1, ctx)}),
            map({tile, f})},
        {utils::IteratorType::parallel, utils::IteratorType::parallel,
         utils::IteratorType::reduction},
        [&](OpBuilder &ib, Location, ValueRange args) {
          Value term = termOf(ib, args[0], rowOf(ib, args[1]),
                              linalg::IndexOp::create(ib, loc, 1));
          linalg::YieldOp::create(
              ib, loc,
              arith::AddFOp::create(ib, loc, args[2], term).getResult());
        });
    return generic.getResult(0);
  }

  /// The gradient: zero rows, and for each token that ends its row's
  /// segment (the next sorted token names another row) and each feature,
  /// the segment's sum written into the row: the tails of the earlier
  /// tiles of the segment, then the segment's tokens in its own tile, each
  /// in order, from 0. One row per segment: no two iterations write one
  /// element.
  Value segmentSums(Value sorted, Value tails) {
    auto type = RankedTensorType::get({plan.rows, plan.features}, elementType);
    Value zeros = filledTensor(b, loc, type, 0.0);
    auto loop = scf::ForOp::create(
        b, loc, index(b, 0), index(b, plan.tokens * plan.features), index(b, 1),
        ValueRange{zeros},
        [&](OpBuilder &ib, Location, Value i, ValueRange iter) {
          Value features = index(ib, plan.features);
          Value s = arith::DivUIOp::create(ib, loc, i, features);
          Value f = arith::RemUIOp::create(ib, loc, i, features);
          Value k = tensor::ExtractOp::create(ib, loc, sorted, s);
          Value row = rowOf(ib, k);
          Value next = tensor::ExtractOp::create(
              ib, loc, sorted,
              arith::AddIOp::create(ib, loc, s, index(ib, 1)).getResult());
          Value ends = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::ne,
                                             rowOf(ib, next), row);
          auto write = scf::IfOp::create(ib, loc, TypeRange{type}, ends,
                                         /*withElseRegion=*/true);
          {
            OpBuilder tb = write.getThenBodyBuilder();
            Value own =
                arith::DivUIOp::create(tb, loc, s, index(tb, plan.tile));
            Value zero = arith::ConstantOp::create(
                tb, loc, tb.getFloatAttr(elementType, 0.0));
            // The earlier tiles' tails that belong to the segment (their
            // last token names its row).
            auto earlier = scf::ForOp::create(
                tb, loc, index(tb, 0), index(tb, plan.tiles), index(tb, 1),
                ValueRange{zero},
                [&](OpBuilder &lb, Location, Value tile, ValueRange acc) {
                  Value last = tensor::ExtractOp::create(
                      lb, loc, sorted,
                      arith::AddIOp::create(
                          lb, loc,
                          arith::MulIOp::create(lb, loc, tile,
                                                index(lb, plan.tile)),
                          index(lb, plan.tile - 1))
                          .getResult());
                  Value before = arith::CmpIOp::create(
                      lb, loc, arith::CmpIPredicate::ult, tile, own);
                  Value same = arith::CmpIOp::create(
                      lb, loc, arith::CmpIPredicate::eq, rowOf(lb, last), row);
                  Value tail = tensor::ExtractOp::create(lb, loc, tails,
                                                         ValueRange{tile, f});
                  Value term = arith::SelectOp::create(
                      lb, loc, arith::AndIOp::create(lb, loc, before, same),
                      tail, zero);
                  scf::YieldOp::create(
                      lb, loc,
                      arith::AddFOp::create(lb, loc, acc[0], term).getResult());
                });
            // The segment's tokens in its own tile.
            Value first =
                arith::MulIOp::create(tb, loc, own, index(tb, plan.tile));
            auto inTile = scf::ForOp::create(
                tb, loc, index(tb, 0), index(tb, plan.tile), index(tb, 1),
                earlier.getResults(),
                [&](OpBuilder &lb, Location, Value j, ValueRange acc) {
                  Value other = tensor::ExtractOp::create(
                      lb, loc, sorted,
                      arith::AddIOp::create(lb, loc, first, j).getResult());
                  scf::YieldOp::create(
                      lb, loc,
                      arith::AddFOp::create(lb, loc, acc[0],
                                            termOf(lb, other, row, f))
                          .getResult());
                });
            Value inserted =
                tensor::InsertOp::create(tb, loc, inTile.getResult(0), iter[0],
                                         ValueRange{asIndex(tb, row), f});
            scf::YieldOp::create(tb, loc, inserted);
          }
          {
            OpBuilder eb = write.getElseBodyBuilder();
            scf::YieldOp::create(eb, loc, iter[0]);
          }
          scf::YieldOp::create(ib, loc, write.getResults());
        });
    loop->setAttr(nn::kIndependentIterations, b.getUnitAttr());
    return loop.getResult(0);
  }

  OpBuilder &b;
  Location loc;
  Plan plan;
  Value ids, dy;
  Type elementType;
};

/// The plan for `op`, if it is the gradient of a gather along axis 0 by
/// ids computed at run time, of static shapes and enough tokens.
std::optional<Plan> planFor(nn::GatherGradOp op, int64_t minTokens) {
  auto resultType = dyn_cast<RankedTensorType>(op.getType());
  auto indicesType = dyn_cast<RankedTensorType>(op.getIndices().getType());
  auto dyType = dyn_cast<RankedTensorType>(op.getDresult().getType());
  if (op.getAxis() != 0 || !resultType || !indicesType || !dyType ||
      !resultType.hasStaticShape() || !indicesType.hasStaticShape() ||
      !dyType.hasStaticShape() || resultType.getRank() < 1 ||
      matchPattern(op.getIndices(), m_Constant()))
    return std::nullopt;
  Plan plan;
  plan.tokens = indicesType.getNumElements();
  plan.rows = resultType.getDimSize(0);
  plan.features = resultType.getNumElements() / std::max<int64_t>(plan.rows, 1);
  if (plan.tokens < minTokens || plan.rows < 2 || plan.features < 1 ||
      dyType.getNumElements() != plan.tokens * plan.features)
    return std::nullopt;
  // About sqrt(tokens) a tile: a segment's sum walks its own tile and the
  // earlier tiles' tails, tile + tiles terms.
  plan.tile = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(std::sqrt(double(plan.tokens)))));
  // One key of padding at least: the last token's successor is past
  // every row.
  plan.tiles = llvm::divideCeil(plan.tokens + 1, plan.tile);
  return plan;
}

struct CudaSortGatherGradsPass
    : public accrue::cuda::impl::CudaSortGatherGradsBase<
          CudaSortGatherGradsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<nn::GatherGradOp> grads;
    getOperation().walk([&](nn::GatherGradOp op) { grads.push_back(op); });
    for (nn::GatherGradOp op : grads) {
      std::optional<Plan> plan = planFor(op, minTokens);
      if (!plan)
        continue;
      OpBuilder b(op);
      Location loc = op.getLoc();
      auto indicesType = cast<RankedTensorType>(op.getIndices().getType());
      auto dyType = cast<RankedTensorType>(op.getDresult().getType());
      Value ids = reshapeTensor(
          b, loc, op.getIndices(),
          RankedTensorType::get({plan->tokens}, indicesType.getElementType()));
      Value dy =
          reshapeTensor(b, loc, op.getDresult(),
                        RankedTensorType::get({plan->tokens, plan->features},
                                              dyType.getElementType()));
      Value grad = Sorter(b, loc, *plan, ids, dy).build();
      op.replaceAllUsesWith(
          reshapeTensor(b, loc, grad, cast<RankedTensorType>(op.getType())));
      op.erase();
    }
  }
};

} // namespace
