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
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

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
};

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
  auto shard = RankedTensorType::get({ShapedType::kDynamic},
                                     Float32Type::get(func.getContext()));
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

  reduce.setScatter(true);
  for (unsigned arg : stateArgs)
    entry.getArgument(arg).setType(shard);
  OpBuilder b(update);
  auto sharded = FusedUpdateOp::create(
      b, update.getLoc(), update.getParams(), update.getAccumulator(),
      update.getStates(), update.getGradScale(), update.getLr(),
      update.getStep(), update.getOptimizer(), update.getMaxNormAttr(),
      update.getSkipNonfiniteAttr(), b.getUnitAttr());
  update.replaceAllUsesWith(sharded.getResults());
  update.erase();

  SmallVector<Type> inputs(func.getArgumentTypes());
  for (unsigned arg : stateArgs)
    inputs[arg] = shard;
  func.setType(
      FunctionType::get(func.getContext(), inputs, returnOp.getOperandTypes()));
  ++numSharded;
  return success();
}

} // namespace
