//===- ShardOptimizer.cpp - ZeRO stage 1 over the flat arenas ---*- C++ -*-===//
//
// Data parallelism keeps G copies of the optimizer state, one per rank, all
// equal. Sharding it (ZeRO stage 1) keeps one: the accumulator is
// reduce-scattered instead of all-reduced, each rank updates its shard of
// the flat arenas with its shard of the state, and the parameters are
// all-gathered. The bytes moved are the all-reduce's (an all-reduce is a
// reduce-scatter and an all-gather); the state takes 1/G of the memory.
//
// The shards are the host's to decide (StepABI.h's accrueShard, called
// through the contract's accrue_shard_begin and accrue_shard_size hooks), so
// one artifact runs at any number of ranks; the states are tensor<?xf32>.
//
// Stage 2 (`gradients`) shards the accumulator as well: the micro-batch loop
// carries this rank's shard, and each gradient is reduce-scattered into it
// as soon as the backward has computed it, so that its buffer dies there
// instead of living until the micro-batch's end. That is K collectives per
// optimizer step instead of one, the price of an accumulator of 1/G.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINSHARDOPTIMIZER
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

struct TrainShardOptimizerPass
    : public train::impl::TrainShardOptimizerBase<TrainShardOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr(StepAttrs::kStep))
      return;
    SmallVector<FusedUpdateOp> updates;
    func.walk([&](FusedUpdateOp op) { updates.push_back(op); });
    if (updates.size() != 1) {
      func.emitError("train-shard-optimizer: the step has ")
          << updates.size()
          << " fused optimizer updates; sharding needs exactly one "
             "(shard_optimizer needs fuse_optimizer)";
      return signalPassFailure();
    }
    if (failed(shard(func, updates.front())))
      signalPassFailure();
  }

  LogicalResult shard(func::FuncOp func, FusedUpdateOp update);
  FailureOr<Value> shardAccumulator(func::FuncOp func, AllReduceOp reduce);
};

/// The shard type, tensor<?xf32>.
RankedTensorType shardType(MLIRContext *ctx) {
  return RankedTensorType::get({ShapedType::kDynamic}, Float32Type::get(ctx));
}

/// Stage 2: the accumulator that `reduce` sums after the micro-batch loop
/// becomes this rank's shard, and the loop's train.accumulate one
/// train.reduce_scatter_add per gradient, each right after the gradient's
/// producer. `reduce` is replaced by an all-reduce of its two scalars.
/// Returns the loop's summed shard.
FailureOr<Value> TrainShardOptimizerPass::shardAccumulator(func::FuncOp func,
                                                           AllReduceOp reduce) {
  auto fail = [&](Operation *at, const Twine &why) {
    at->emitError("train-shard-optimizer: ")
        << why << " (shard_gradients needs the accumulator carried by the "
        << "micro-batch loop and summed by one train.accumulate in it)";
    return failure();
  };
  auto result = dyn_cast<OpResult>(reduce.getAccumulator());
  auto loop = result ? dyn_cast<scf::ForOp>(result.getOwner()) : nullptr;
  if (!loop)
    return fail(reduce, "the all-reduced accumulator is not a loop's result");
  unsigned index = result.getResultNumber();
  auto init = dyn_cast<BlockArgument>(loop.getInitArgs()[index]);
  Block &entry = func.getBody().front();
  if (!init || init.getOwner() != &entry ||
      getArgRole(func, init.getArgNumber()) != ACCRUE_ROLE_ACCUMULATOR ||
      !init.hasOneUse())
    return fail(loop, "the loop does not start from the step's accumulator "
                      "argument alone");
  BlockArgument carried = loop.getRegionIterArg(index);
  auto accumulate = carried.hasOneUse()
                        ? dyn_cast<AccumulateOp>(*carried.getUsers().begin())
                        : nullptr;
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  if (!accumulate || accumulate.getAccumulator() != carried ||
      yield.getOperand(index) != accumulate.getResult() ||
      !accumulate.getResult().hasOneUse() || !result.hasOneUse())
    return fail(loop, "the carried accumulator is not only summed into by "
                      "one train.accumulate");

  // The gradients in the order the backward computes them.
  Block *body = loop.getBody();
  auto position = [&](Value v) -> Operation * {
    Operation *def = v.getDefiningOp();
    return def ? body->findAncestorOpInBlock(*def) : nullptr;
  };
  SmallVector<std::pair<Value, int64_t>> gradients;
  for (auto [gradient, offset] :
       llvm::zip(accumulate.getGradients(), accumulate.getOffsets()))
    gradients.push_back({gradient, offset});
  llvm::stable_sort(gradients, [&](const auto &a, const auto &b) {
    Operation *x = position(a.first), *y = position(b.first);
    if (!x || !y)
      return !x && y;
    return x != y && x->isBeforeInBlock(y);
  });

  MLIRContext *ctx = func.getContext();
  RankedTensorType shard = shardType(ctx);
  int64_t arenaSize =
      cast<RankedTensorType>(accumulate.getType()).getNumElements();
  init.setType(shard);
  carried.setType(shard);
  result.setType(shard);
  OpBuilder b(ctx);
  Value sum = carried;
  Operation *last = nullptr;
  for (auto [gradient, offset] : gradients) {
    Operation *after = position(gradient);
    if (last && (!after || after->isBeforeInBlock(last)))
      after = last;
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(body);
    auto scatter = ReduceScatterAddOp::create(b, accumulate.getLoc(), shard,
                                              sum, gradient, offset, arenaSize);
    sum = scatter.getResult();
    last = scatter;
    ++numScattered;
  }
  yield.setOperand(index, sum);
  accumulate.erase();

  // After the loop only the loss sum and count remain to be summed.
  b.setInsertionPoint(reduce);
  Location loc = reduce.getLoc();
  auto pair = RankedTensorType::get({2}, Float32Type::get(ctx));
  Value summed = AllReduceArenaOp::create(
      b, loc,
      tensor::FromElementsOp::create(
          b, loc, pair, ValueRange{reduce.getLossSum(), reduce.getCount()}));
  auto element = [&](int64_t i) -> Value {
    return tensor::ExtractOp::create(
        b, loc, summed, ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
  };
  reduce.getNewLossSum().replaceAllUsesWith(element(0));
  reduce.getNewCount().replaceAllUsesWith(element(1));
  reduce.getResult().replaceAllUsesWith(result);
  reduce.erase();
  return Value(result);
}

LogicalResult TrainShardOptimizerPass::shard(func::FuncOp func,
                                             FusedUpdateOp update) {
  auto reduce = update.getAccumulator().getDefiningOp<AllReduceOp>();
  if (!reduce)
    return update.emitError("train-shard-optimizer: the update's gradients "
                            "are not summed over the ranks by one "
                            "train.all_reduce after the micro-batch loop "
                            "(shard_optimizer needs data_parallel with "
                            "collectives=deferred)");
  // Outside this rank's shard the reduce-scattered arena holds no sum:
  // nothing but the update may read it.
  for (Operation *user : reduce.getResult().getUsers())
    if (user != update)
      return user->emitError("train-shard-optimizer: reads the summed "
                             "gradients, of which a sharded rank holds "
                             "only its shard");
  // The states must be the step's own arguments, updated once in place.
  Block &entry = func.getBody().front();
  auto returnOp = cast<func::ReturnOp>(entry.getTerminator());
  RankedTensorType shard = shardType(func.getContext());
  SmallVector<unsigned> stateArgs;
  for (auto [state, newState] :
       llvm::zip(update.getStates(), update.getNewStates())) {
    auto arg = dyn_cast<BlockArgument>(state);
    if (!arg || arg.getOwner() != &entry ||
        getArgRole(func, arg.getArgNumber()) != ACCRUE_ROLE_STATE ||
        !arg.hasOneUse())
      return update.emitError("train-shard-optimizer: optimizer state "
                              "operand is not a state argument of the step "
                              "that only the update reads");
    std::optional<unsigned> result;
    for (OpOperand &use : newState.getUses())
      if (use.getOwner() == returnOp && !result)
        result = use.getOperandNumber();
      else
        return update.emitError("train-shard-optimizer: a new optimizer "
                                "state is used other than as the step's "
                                "result");
    if (!result)
      return update.emitError("train-shard-optimizer: a new optimizer state "
                              "is not a result of the step");
    stateArgs.push_back(arg.getArgNumber());
  }

  Value accumulator = update.getAccumulator();
  if (gradients) {
    FailureOr<Value> summed = shardAccumulator(func, reduce);
    if (failed(summed))
      return failure();
    accumulator = *summed;
  } else {
    reduce.setScatter(true);
  }
  for (unsigned arg : stateArgs)
    entry.getArgument(arg).setType(shard);
  OpBuilder b(update);
  auto sharded = FusedUpdateOp::create(
      b, update.getLoc(), update.getParams(), accumulator, update.getStates(),
      update.getGradScale(), update.getLr(), update.getStep(),
      update.getOptimizer(), update.getMaxNormAttr(),
      update.getSkipNonfiniteAttr(), b.getUnitAttr());
  update.replaceAllUsesWith(sharded.getResults());
  update.erase();

  // The block's argument types: the states', and stage 2's accumulator.
  SmallVector<Type> inputs(entry.getArgumentTypes());
  func.setType(
      FunctionType::get(func.getContext(), inputs, returnOp.getOperandTypes()));
  ++numSharded;
  return success();
}

} // namespace
