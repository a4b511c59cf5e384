//===- DeferCollectives.cpp - one all-reduce per optimizer step -*- C++ -*-===//
//
// A data-parallel step graph sums every micro-batch's gradients over the
// ranks and then accumulates them. Summation commutes, so when the sums only
// feed loop-carried accumulators the all-reduce can run once, after the
// loop, on the accumulated values: K collectives become one, and ranks no
// longer need the same number of micro-batches.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallBitVector.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINDEFERCOLLECTIVES
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// Where one all-reduce result goes: the iter_arg it is summed into.
struct CarriedSum {
  unsigned iterIndex;
  Operation *sum; // the train.accumulate or arith.addf
};

/// Whether `value` is zero when the loop starts: a zero constant, a zero
/// fill, or the step's accumulator argument (zero at entry by the step ABI).
bool isZeroAtEntry(Value value) {
  if (matchPattern(value, m_AnyZeroFloat()))
    return true;
  if (auto fill = value.getDefiningOp<linalg::FillOp>())
    return matchPattern(fill.value(), m_AnyZeroFloat());
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.getBody().front())
    return false;
  return getArgRole(func, arg.getArgNumber()) == ACCRUE_ROLE_ACCUMULATOR;
}

/// Finds how result `result` of an all-reduce in `loop` is summed into a
/// loop-carried value, or says why it is not.
FailureOr<CarriedSum> matchCarriedSum(scf::ForOp loop, OpResult result,
                                      std::string &why) {
  llvm::raw_string_ostream os(why);
  std::string name = "result #" + std::to_string(result.getResultNumber());
  if (!result.hasOneUse()) {
    os << name << " has " << std::distance(result.use_begin(), result.use_end())
       << " uses; it must only be summed into a loop-carried value";
    return failure();
  }
  Operation *user = *result.getUsers().begin();
  Value carried;
  if (auto acc = dyn_cast<AccumulateOp>(user)) {
    if (acc.getGradients().size() != 1 ||
        acc.getGradients()[0].getType() != acc.getType() ||
        acc.getOffsets()[0] != 0 || acc.getAccumulator() == result) {
      os << name << " is accumulated into part of an arena, not added to a "
         << "whole one";
      return failure();
    }
    carried = acc.getAccumulator();
  } else if (auto add = dyn_cast<arith::AddFOp>(user)) {
    carried = add.getLhs() == result ? add.getRhs() : add.getLhs();
  } else {
    os << name << " is used by '" << user->getName()
       << "', which is not a sum into a loop-carried value";
    return failure();
  }
  auto arg = dyn_cast<BlockArgument>(carried);
  if (!arg || arg.getOwner() != loop.getBody() || arg.getArgNumber() == 0) {
    os << name << " is added to a value that is not carried by the loop";
    return failure();
  }
  unsigned iterIndex = arg.getArgNumber() - 1;
  if (!arg.hasOneUse()) {
    os << name << " is summed into iter_arg #" << iterIndex
       << ", whose partial sums are also used inside the loop";
    return failure();
  }
  Value sum = user->getResult(0);
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  if (!sum.hasOneUse() || *sum.getUsers().begin() != yield ||
      yield.getOperand(iterIndex) != sum) {
    os << name << "'s sum is used for more than carrying iter_arg #"
       << iterIndex;
    return failure();
  }
  return CarriedSum{iterIndex, user};
}

struct TrainDeferCollectivesPass
    : train::impl::TrainDeferCollectivesBase<TrainDeferCollectivesPass> {
  void runOnOperation() override {
    SmallVector<AllReduceOp> allReduces;
    getOperation().walk([&](AllReduceOp op) { allReduces.push_back(op); });
    for (AllReduceOp op : allReduces) {
      auto loop = op->getParentOfType<scf::ForOp>();
      if (!loop)
        continue;
      std::string why;
      if (failed(defer(op, loop, why))) {
        op.emitWarning("train-defer-collectives: this all-reduce stays "
                       "inside the loop (once per iteration): ")
            << why;
        ++numKept;
      } else {
        ++numDeferred;
      }
    }
  }

  LogicalResult defer(AllReduceOp op, scf::ForOp loop, std::string &why);
};

LogicalResult TrainDeferCollectivesPass::defer(AllReduceOp op, scf::ForOp loop,
                                               std::string &why) {
  if (op->getParentOp() != loop) {
    why = "it is nested in a region inside the loop";
    return failure();
  }
  // Each result is summed into its own iter_arg; an unused loss sum or
  // count is summed as zero.
  SmallVector<std::optional<CarriedSum>, 3> sums;
  llvm::SmallBitVector taken(loop.getNumRegionIterArgs());
  for (OpResult result : op->getResults()) {
    if (result.use_empty() && result.getResultNumber() != 0) {
      sums.push_back(std::nullopt);
      continue;
    }
    if (result.use_empty()) {
      why = "its gradient result is unused";
      return failure();
    }
    FailureOr<CarriedSum> sum = matchCarriedSum(loop, result, why);
    if (failed(sum))
      return failure();
    if (taken.test(sum->iterIndex)) {
      why = "two of its results are summed into the same iter_arg";
      return failure();
    }
    taken.set(sum->iterIndex);
    sums.push_back(*sum);
  }

  // Inside the loop, accumulate the local values. (What the new all-reduce
  // takes from the old one is read before the old one is erased.)
  Location loc = op.getLoc();
  auto scalarsAt = op.getScalarsAt();
  IRRewriter rewriter(op);
  for (auto [result, local] : llvm::zip(op->getResults(), op->getOperands()))
    rewriter.replaceAllUsesWith(result, local);
  rewriter.eraseOp(op);

  // Carried values that may not start at zero start at zero and are added
  // back after the sum over ranks.
  SmallVector<Value> initials(sums.size());
  rewriter.setInsertionPoint(loop);
  for (auto [i, sum] : llvm::enumerate(sums)) {
    if (!sum)
      continue;
    OpOperand &init = loop.getInitArgsMutable()[sum->iterIndex];
    if (isZeroAtEntry(init.get()))
      continue;
    initials[i] = init.get();
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(0));
    if (auto type = dyn_cast<RankedTensorType>(init.get().getType())) {
      Value empty = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                            type.getElementType());
      zero = linalg::FillOp::create(rewriter, loc, zero, empty).getResult(0);
    }
    rewriter.modifyOpInPlace(loop, [&] { init.set(zero); });
  }

  // One all-reduce after the loop, on the three accumulated values.
  rewriter.setInsertionPointAfter(loop);
  SmallVector<Value, 3> operands;
  for (auto sum : sums)
    operands.push_back(sum ? loop.getResult(sum->iterIndex)
                           : arith::ConstantOp::create(
                                 rewriter, loc, rewriter.getF32FloatAttr(0)));
  auto reduced = AllReduceOp::create(rewriter, loc, operands[0], operands[1],
                                     operands[2], scalarsAt);
  for (auto [i, sum] : llvm::enumerate(sums)) {
    if (!sum)
      continue;
    Value total = reduced->getResult(i);
    if (Value initial = initials[i]) {
      if (isa<RankedTensorType>(initial.getType()))
        total = AccumulateOp::create(rewriter, loc, initial, ValueRange{total},
                                     ArrayRef<int64_t>{0});
      else
        total = arith::AddFOp::create(rewriter, loc, initial, total);
    }
    rewriter.replaceAllUsesExcept(loop.getResult(sum->iterIndex), total,
                                  reduced);
  }
  return success();
}

} // namespace
