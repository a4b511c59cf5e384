//===- Microbatch.cpp - gradient accumulation loops -------------*- C++ -*-===//
//
// Rewrites the loss and gradients of a whole effective batch into a loop over
// micro-batches whose gradients are accumulated in place, with exact loss
// normalization: a mean-reduced loss L = N / D is split into its sum N and
// count D; N's gradient and both N and D are summed over micro-batches, and
// the accumulated gradient is divided once by the total D.
//
// How a loss splits into N and D (and masks padding) is LossSplitting.cpp's
// business; this file builds the loop: the counting pass of a combined loss,
// the micro-batches' slices, the carried buffers (running statistics), the
// accumulation and the one division at the end.
//
//===----------------------------------------------------------------------===//

#include "LossSplitting.h"
#include "SampleMask.h"

#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>
#include <limits>

namespace accrue::train {
#define GEN_PASS_DEF_TRAINMICROBATCH
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// 1 / P as an f32, with P the largest power of two not above
/// `fullCount` * K (computed in f32; K is `steps` or, when that is 0, the
/// run-time `numSteps`).
Value inversePowerOfTwoBelow(OpBuilder &b, Location loc, double fullCount,
                             int64_t steps, Value numSteps) {
  float unit = static_cast<float>(fullCount);
  if (steps > 0) {
    float units = std::max(unit * static_cast<float>(steps), 1.0f);
    return arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(std::ldexp(1.0f, -std::ilogb(units))));
  }
  // The same at run time: clearing the mantissa bits of a positive normal
  // float leaves the power of two at or below it.
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Value k = arith::UIToFPOp::create(
      b, loc, f32,
      arith::IndexCastUIOp::create(b, loc, b.getI64Type(), numSteps));
  Value units = arith::MaximumFOp::create(
      b, loc,
      arith::MulFOp::create(
          b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(unit)),
          k),
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)));
  Value exponent = arith::AndIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, units),
      arith::ConstantIntOp::create(b, loc, 0x7F800000, 32));
  return arith::DivFOp::create(
      b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)),
      arith::BitcastOp::create(b, loc, f32, exponent));
}

/// The loop over micro-batches of one value_and_grad with micro_batch, one
/// job per method, in the order rewrite() runs them.
class MicrobatchRewrite {
public:
  MicrobatchRewrite(ValueAndGradOp op, func::FuncOp callee,
                    AccrueCollectives collectives, int64_t steps)
      : op(op), callee(callee), collectives(collectives), steps(steps),
        microBatch(*op.getMicroBatch()), loc(op.getLoc()), b(op) {}

  /// Checks the op's form: what it carries from micro-batch to micro-batch,
  /// the one train.accumulate of its gradients, its whole-batch operands.
  LogicalResult analyze();
  /// The operands holding a whole batch (sliced per micro-batch).
  ArrayRef<unsigned> getBatchOperands() const { return batchOperands; }
  /// Replaces the op, with `split` (its callee returning N and D), by the
  /// loop and the one normalization after it.
  void rewrite(const SplitLoss &split);

private:
  /// K: `steps`, or the batch's rows / b at run time.
  Value countMicroBatches();
  /// The backward's seed under loss scaling (see below), or null.
  Value lossScaleSeed();
  /// The arguments of the micro-batch whose first sample is `offset`: the
  /// batch operands sliced, the sample base moved, and, when masked, its
  /// number of valid samples.
  SmallVector<Value> microBatchArgs(OpBuilder &lb, Location l, Value offset);
  /// A combined loss: the counting pass over the window that gives each
  /// mean term's total count first (see SplitLoss::counts).
  void countWindow();
  /// The loop: each micro-batch's loss and gradients, accumulated.
  scf::ForOp buildLoop();
  SmallVector<Value> accumulateMicroBatch(OpBuilder &lb, Location l, Value iv,
                                          ValueRange iterArgs);
  /// The carried value `k` after a micro-batch: its new value, unless the
  /// micro-batch is padding only (a partial last window; PyTorch never runs
  /// it), written over the old one so the loop updates one buffer in place.
  Value carryOver(OpBuilder &lb, Location l, Value next, Value previous,
                  Value hasSamples);
  /// After the loop: the loss and the gradient divided once by the total
  /// count (for mean of means, the count is K) and the seed; the op's uses
  /// take them.
  void normalize(scf::ForOp loop);

  ValueAndGradOp op;
  func::FuncOp callee;
  AccrueCollectives collectives;
  int64_t steps;
  int64_t microBatch;
  Location loc;
  OpBuilder b;

  // From analyze().
  SmallVector<unsigned> carriedArgs;
  AccumulateOp accumulate;
  int64_t scalarsAt = 0;
  SmallVector<unsigned> batchOperands;

  // From rewrite().
  SplitLoss split;
  Value c0, c1, bConst, numSteps, zero, seed;
  SmallVector<Value> totals;
};

LogicalResult MicrobatchRewrite::analyze() {
  // Results after the loss are new values of arguments (train.tied: the
  // model's buffers, such as running statistics), carried from micro-batch
  // to micro-batch.
  for (unsigned r = 1; r < op.getNumCalleeResults(); ++r) {
    auto tiedTo = callee.getResultAttrOfType<IntegerAttr>(r, StepAttrs::kTied);
    if (!tiedTo || tiedTo.getInt() < 0 ||
        tiedTo.getInt() >= static_cast<int64_t>(op.getArgs().size()) ||
        op.getArgs()[tiedTo.getInt()].getType() != op.getResult(r).getType())
      return op.emitError("micro-batching needs a callee whose results after "
                          "the loss are new values of its arguments "
                          "(train.tied); result #")
             << r << " of '" << op.getCallee() << "' is not";
    carriedArgs.push_back(tiedTo.getInt());
  }

  // The gradients must all feed one train.accumulate, which moves into the
  // loop so the flat accumulator is carried (and updated in place).
  for (Value grad : op.getGradients()) {
    if (!grad.hasOneUse())
      return op.emitError("each gradient of a micro-batched value_and_grad "
                          "must have exactly one use, a train.accumulate");
    auto user = dyn_cast<AccumulateOp>(*grad.getUsers().begin());
    if (!user || (accumulate && user != accumulate))
      return op.emitError("the gradients of a micro-batched value_and_grad "
                          "must all feed the same train.accumulate");
    accumulate = user;
  }
  if (!accumulate || accumulate.getGradients().size() != op.getWrt().size())
    return op.emitError("the train.accumulate must take exactly the "
                        "gradients of the value_and_grad");
  if (accumulate.getAccumulator().getDefiningOp() &&
      !accumulate.getAccumulator().getDefiningOp()->isBeforeInBlock(op))
    return accumulate.emitError("accumulator must be defined before the "
                                "value_and_grad");
  // A data-parallel step's loss sum and count ride in the accumulator, after
  // its last gradient, so that one collective on one buffer sums them all.
  for (auto [offset, gradient] :
       llvm::zip(accumulate.getOffsets(), accumulate.getGradients()))
    scalarsAt = std::max(
        scalarsAt,
        offset + cast<RankedTensorType>(gradient.getType()).getNumElements());
  auto arena = cast<RankedTensorType>(accumulate.getType());
  if (collectives != ACCRUE_COLLECTIVES_NONE &&
      (!arena.hasStaticShape() || scalarsAt + 2 > arena.getNumElements()))
    return accumulate.emitError("the accumulator has no room after its last "
                                "gradient for the all-reduce's loss sum and "
                                "count (two elements)");

  // Which operands are whole batches (they get sliced per micro-batch).
  FunctionType calleeType = callee.getFunctionType();
  for (auto [i, operand] : llvm::enumerate(op.getArgs()))
    if (operand.getType() != calleeType.getInput(i))
      batchOperands.push_back(i);
  if (batchOperands.empty())
    return op.emitError("no operand holds a whole batch; nothing to split");
  return success();
}

void MicrobatchRewrite::rewrite(const SplitLoss &splitLoss) {
  split = splitLoss;
  c0 = arith::ConstantIndexOp::create(b, loc, 0);
  c1 = arith::ConstantIndexOp::create(b, loc, 1);
  bConst = arith::ConstantIndexOp::create(b, loc, microBatch);
  numSteps = countMicroBatches();
  zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  seed = lossScaleSeed();
  if (split.counts)
    countWindow();
  scf::ForOp loop = buildLoop();
  loop->setAttr(StepAttrs::kMicrobatchLoop, b.getUnitAttr());
  normalize(loop);
}

Value MicrobatchRewrite::countMicroBatches() {
  if (steps > 0)
    return arith::ConstantIndexOp::create(b, loc, steps);
  Value batch0 = op.getArgs()[batchOperands.front()];
  Value rows = tensor::DimOp::create(b, loc, batch0, 0);
  return arith::DivUIOp::create(b, loc, rows, bConst);
}

Value MicrobatchRewrite::lossScaleSeed() {
  // Loss scaling seeds the backward of each micro-batch's loss sum with
  // S / P, P the power of two at or below the window's full count, so the
  // gradients are as large as those of the mean loss scaled by S (PyTorch's
  // GradScaler with each micro-batch's loss divided by K) and overflow
  // starts at the same scale. A power of two keeps static scaling exact.
  Value seed = op.getSeed();
  if (seed && split.kind != LossKind::Sum)
    seed = arith::MulFOp::create(
        b, loc, seed,
        inversePowerOfTwoBelow(b, loc, split.fullCount, steps, numSteps));
  return seed;
}

SmallVector<Value> MicrobatchRewrite::microBatchArgs(OpBuilder &lb, Location l,
                                                     Value offset) {
  FunctionType calleeType = callee.getFunctionType();
  SmallVector<Value> args(op.getArgs());
  // An argument holding the global index of the batch's first sample
  // (role sample_base) moves to the micro-batch's first sample.
  for (unsigned i = 0; i < args.size(); ++i) {
    if (getArgRole(callee, i) != ACCRUE_ROLE_SAMPLE_BASE)
      continue;
    Value base = tensor::ExtractOp::create(lb, l, args[i]);
    Value shift = arith::IndexCastOp::create(lb, l, lb.getI64Type(), offset);
    args[i] = tensor::FromElementsOp::create(
        lb, l, args[i].getType(),
        ValueRange{arith::AddIOp::create(lb, l, base, shift)});
  }
  for (unsigned i : batchOperands) {
    auto argType = cast<RankedTensorType>(calleeType.getInput(i));
    SmallVector<OpFoldResult> offsets(argType.getRank(), lb.getIndexAttr(0));
    offsets[0] = offset;
    SmallVector<OpFoldResult> sizes;
    for (int64_t d : argType.getShape())
      sizes.push_back(lb.getIndexAttr(d));
    SmallVector<OpFoldResult> strides(argType.getRank(), lb.getIndexAttr(1));
    args[i] = tensor::ExtractSliceOp::create(lb, l, argType, args[i], offsets,
                                             sizes, strides);
  }
  if (split.masked) {
    // valid_k = clamp(valid - k * b, 0, b).
    Value start = arith::IndexCastOp::create(lb, l, lb.getI64Type(), offset);
    Value left = arith::SubIOp::create(lb, l, op.getValid(), start);
    Value zero64 = arith::ConstantIntOp::create(lb, l, 0, 64);
    Value b64 = arith::ConstantIntOp::create(lb, l, microBatch, 64);
    Value count = arith::MinSIOp::create(
        lb, l, arith::MaxSIOp::create(lb, l, left, zero64), b64);
    args.push_back(tensor::FromElementsOp::create(
        lb, l, RankedTensorType::get({}, lb.getI64Type()), ValueRange{count}));
  }
  return args;
}

void MicrobatchRewrite::countWindow() {
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  SmallVector<Value> zeros(split.countFloors.size(), zero);
  auto counting = scf::ForOp::create(
      b, loc, c0, numSteps, c1, zeros,
      [&](OpBuilder &lb, Location l, Value iv, ValueRange iterArgs) {
        auto call = func::CallOp::create(
            lb, l, split.counts,
            microBatchArgs(lb, l, arith::MulIOp::create(lb, l, iv, bConst)));
        SmallVector<Value> sums;
        for (auto [count, sum] : llvm::zip(call.getResults(), iterArgs))
          sums.push_back(arith::AddFOp::create(
              lb, l, sum, tensor::ExtractOp::create(lb, l, count)));
        scf::YieldOp::create(lb, l, sums);
      });
  SmallVector<Value> counted(counting.getResults());
  if (collectives != ACCRUE_COLLECTIVES_NONE) {
    // Data parallelism: the counts are the whole effective batch's, summed
    // over the ranks (one small collective before the loop).
    auto countsType = RankedTensorType::get(
        {static_cast<int64_t>(counted.size())}, b.getF32Type());
    Value packed = tensor::FromElementsOp::create(b, loc, countsType, counted);
    Value summed = AllReduceArenaOp::create(b, loc, packed);
    for (size_t i = 0; i < counted.size(); ++i)
      counted[i] = tensor::ExtractOp::create(
          b, loc, summed,
          ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
  }
  for (auto [total, floor] : llvm::zip(counted, split.countFloors)) {
    Value t = total;
    if (floor)
      t = arith::MaximumFOp::create(
          b, loc, t,
          arith::ConstantOp::create(
              b, loc, b.getF32FloatAttr(static_cast<float>(*floor))));
    totals.push_back(
        tensor::FromElementsOp::create(b, loc, scalar, ValueRange{t}));
  }
}

scf::ForOp MicrobatchRewrite::buildLoop() {
  // Carried: the accumulator, the loss sum and count, the buffers.
  SmallVector<Value> inits{accumulate.getAccumulator(), zero, zero};
  for (unsigned arg : carriedArgs)
    inits.push_back(op.getArgs()[arg]);
  return scf::ForOp::create(
      b, loc, c0, numSteps, c1, inits,
      [&](OpBuilder &lb, Location l, Value iv, ValueRange iterArgs) {
        scf::YieldOp::create(lb, l, accumulateMicroBatch(lb, l, iv, iterArgs));
      });
}

SmallVector<Value>
MicrobatchRewrite::accumulateMicroBatch(OpBuilder &lb, Location l, Value iv,
                                        ValueRange iterArgs) {
  unsigned numCarried = carriedArgs.size();
  Value offset = arith::MulIOp::create(lb, l, iv, bConst);
  SmallVector<Value> args = microBatchArgs(lb, l, offset);
  for (auto [k, arg] : llvm::enumerate(carriedArgs))
    args[arg] = iterArgs[3 + k];
  // The window's counts go before the valid-sample count.
  args.insert(args.end() - (split.masked ? 1 : 0), totals.begin(),
              totals.end());
  SmallVector<Type> resultTypes{split.function.getResultTypes()};
  llvm::append_range(resultTypes, op.getGradients().getTypes());
  auto step = ValueAndGradOp::create(
      lb, l, resultTypes, split.function.getSymName(), args,
      /*valid=*/Value(), seed, op.getWrt(),
      /*micro_batch=*/nullptr, /*loss_divisor=*/nullptr);
  // The accumulate takes the gradients in its own order.
  SmallVector<Value> grads;
  for (Value g : accumulate.getGradients()) {
    unsigned index =
        cast<OpResult>(g).getResultNumber() - op.getNumCalleeResults();
    grads.push_back(step.getResult(2 + numCarried + index));
  }
  Value n = tensor::ExtractOp::create(lb, l, step.getResult(0));
  Value d = tensor::ExtractOp::create(lb, l, step.getResult(1));
  Value acc;
  if (collectives == ACCRUE_COLLECTIVES_PER_MICRO_BATCH) {
    // What a data-parallel step graph does: sum each micro-batch's
    // gradients over the ranks, then accumulate.
    // train-defer-collectives moves the sum after the loop.
    auto arenaType = cast<RankedTensorType>(iterArgs[0].getType());
    Value empty = tensor::EmptyOp::create(lb, l, arenaType.getShape(),
                                          arenaType.getElementType());
    Value zero = arith::ConstantOp::create(lb, l, lb.getF32FloatAttr(0));
    Value fresh = linalg::FillOp::create(lb, l, zero, empty).getResult(0);
    Value mine =
        AccumulateOp::create(lb, l, fresh, grads, accumulate.getOffsets());
    auto reduced = AllReduceOp::create(lb, l, mine, n, d, scalarsAt);
    acc = AccumulateOp::create(lb, l, iterArgs[0],
                               ValueRange{reduced.getResult()},
                               ArrayRef<int64_t>{0});
    n = reduced.getNewLossSum();
    d = reduced.getNewCount();
  } else {
    acc = AccumulateOp::create(lb, l, iterArgs[0], grads,
                               accumulate.getOffsets());
  }
  Value nSum = arith::AddFOp::create(lb, l, iterArgs[1], n);
  Value dSum = arith::AddFOp::create(lb, l, iterArgs[2], d);
  SmallVector<Value> yielded{acc, nSum, dSum};
  // A micro-batch of padding only (a partial last window) keeps the
  // carried values: PyTorch never runs it.
  Value hasSamples;
  if (numCarried && op.getValid())
    hasSamples = arith::CmpIOp::create(
        lb, l, arith::CmpIPredicate::sgt, op.getValid(),
        arith::IndexCastOp::create(lb, l, lb.getI64Type(), offset));
  for (unsigned k = 0; k < numCarried; ++k)
    yielded.push_back(
        carryOver(lb, l, step.getResult(2 + k), iterArgs[3 + k], hasSamples));
  return yielded;
}

Value MicrobatchRewrite::carryOver(OpBuilder &lb, Location l, Value next,
                                   Value previous, Value hasSamples) {
  if (hasSamples) {
    // Elementwise, so a device target selects on the device.
    auto type = cast<RankedTensorType>(next.getType());
    AffineMap identity = lb.getMultiDimIdentityMap(type.getRank());
    next = linalg::GenericOp::create(
               lb, l, TypeRange{type}, ValueRange{next, previous},
               ValueRange{tensor::EmptyOp::create(lb, l, type.getShape(),
                                                  type.getElementType())},
               SmallVector<AffineMap>(3, identity),
               SmallVector<utils::IteratorType>(type.getRank(),
                                                utils::IteratorType::parallel),
               [&](OpBuilder &gb, Location gl, ValueRange args) {
                 linalg::YieldOp::create(
                     gb, gl,
                     ValueRange{arith::SelectOp::create(gb, gl, hasSamples,
                                                        args[0], args[1])});
               })
               .getResult(0);
  }
  // Written over the carried value (which the micro-batch has read by
  // then), so the loop updates one buffer in place.
  return linalg::CopyOp::create(lb, l, ValueRange{next}, ValueRange{previous})
      .getResult(0);
}

void MicrobatchRewrite::normalize(scf::ForOp loop) {
  unsigned numCarried = carriedArgs.size();
  Value accumulated = loop.getResult(0);
  Value lossSum = loop.getResult(1);
  Value totalCount = loop.getResult(2);
  Value loss = lossSum, gradient = accumulated;
  // The gradient is divided once by the total count (for mean of means,
  // the count is K) and by the loss-scaling seed.
  Value divisor = seed;
  if (split.kind != LossKind::Sum) {
    Value count = totalCount;
    if (split.countFloor)
      count = arith::MaximumFOp::create(
          b, loc, count,
          arith::ConstantOp::create(
              b, loc,
              b.getF32FloatAttr(static_cast<float>(*split.countFloor))));
    loss = arith::DivFOp::create(b, loc, lossSum, count);
    divisor = divisor
                  ? arith::MulFOp::create(b, loc, count, divisor).getResult()
                  : count;
  }
  if (divisor) {
    Value inv = arith::DivFOp::create(
        b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)),
        divisor);
    gradient = ScaleOp::create(b, loc, accumulated, inv);
  }
  Value lossTensor = tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({}, b.getF32Type()), loss);
  // Uses of the accumulated gradient see the normalized one, except the
  // reset of the accumulator (a zero fill), which keeps the raw buffer.
  accumulate.getResult().replaceUsesWithIf(gradient, [](OpOperand &use) {
    return !isa<linalg::FillOp>(use.getOwner());
  });
  accumulate.getResult().replaceAllUsesWith(accumulated);
  op.getResult(0).replaceAllUsesWith(lossTensor);
  for (unsigned k = 0; k < numCarried; ++k)
    op.getResult(1 + k).replaceAllUsesWith(loop.getResult(3 + k));
  accumulate.erase();
  op.erase();
}

struct TrainMicrobatchPass
    : public train::impl::TrainMicrobatchBase<TrainMicrobatchPass> {
  using Base::Base;

  void runOnOperation() override {
    if (steps < 0) {
      getOperation().emitError("train-microbatch: steps must be >= 1 "
                               "(or 0 for a run-time count), got ")
          << static_cast<int64_t>(steps);
      return signalPassFailure();
    }
    SymbolTable symbols(getOperation());
    SmallVector<ValueAndGradOp> ops;
    getOperation().walk([&](ValueAndGradOp op) {
      if (op.getMicroBatch())
        ops.push_back(op);
    });
    for (ValueAndGradOp op : ops)
      if (failed(rewrite(op, symbols)))
        return signalPassFailure();
  }

  LogicalResult rewrite(ValueAndGradOp op, SymbolTable &symbols);
  std::map<std::string, SplitLoss> splitCache;
};

/// When padded samples cannot be masked out of `forward`'s loss and the
/// loss depends on an op that did not say how its results hold the
/// samples, says which op (the first): a new op without
/// SampleRowsOpInterface should not cost partial windows silently.
static void remarkUnexplainedOp(func::FuncOp forward,
                                ArrayRef<unsigned> batchArgs,
                                int64_t microBatch) {
  SampleMask rows(forward, batchArgs, microBatch, /*valid=*/Value());
  Value loss = forward.front().getTerminator()->getOperand(0);
  SetVector<Operation *> lossSlice;
  if (Operation *def = loss.getDefiningOp()) {
    BackwardSliceOptions options;
    options.inclusive = true;
    (void)getBackwardSlice(def, &lossSlice, options);
  }
  for (Operation *op : rows.getUnexplainedOps()) {
    if (!lossSlice.contains(op))
      continue;
    op->emitRemark("padded samples of partial windows cannot be masked out "
                   "of the loss: '")
        << op->getName()
        << "' does not say how its results hold the micro-batch's samples "
           "(nn.SampleRowsOpInterface or the Elementwise trait), so they "
           "count as mixing samples";
    return;
  }
}

LogicalResult TrainMicrobatchPass::rewrite(ValueAndGradOp op,
                                           SymbolTable &symbols) {
  int64_t microBatch = *op.getMicroBatch();
  auto callee = symbols.lookup<func::FuncOp>(op.getCallee());
  if (!callee)
    return op.emitError("unknown callee '") << op.getCallee() << "'";
  MicrobatchRewrite rewriter(op, callee, collectives, steps);
  if (failed(rewriter.analyze()))
    return failure();

  // With a count of valid samples, padding is masked out of the loss when
  // the loss form allows it (and only in exact mode).
  bool wantMask =
      op.getValid() && normalization == ACCRUE_LOSS_NORMALIZATION_EXACT;
  LossDivisorAttr lossDivisor = op.getLossDivisorAttr();
  std::string key = op.getCallee().str() + (wantMask ? "#masked" : "");
  if (lossDivisor)
    key += "#divisor=" +
           std::to_string(
               lossDivisor.getPerSample().bitcastToAPInt().getZExtValue());
  auto it = splitCache.find(key);
  if (it == splitCache.end()) {
    std::optional<SplitLoss> built;
    if (wantMask) {
      built = splitLoss(callee, /*exact=*/true, /*mask=*/true,
                        rewriter.getBatchOperands(), microBatch, lossDivisor,
                        symbols);
      if (!built)
        remarkUnexplainedOp(callee, rewriter.getBatchOperands(), microBatch);
    }
    if (!built)
      built =
          splitLoss(callee, normalization == ACCRUE_LOSS_NORMALIZATION_EXACT,
                    /*mask=*/false, rewriter.getBatchOperands(), microBatch,
                    lossDivisor, symbols);
    it = splitCache.emplace(key, *built).first;
  }
  SplitLoss split = it->second;
  auto stepFunction = op->getParentOfType<func::FuncOp>();
  if (auto known =
          stepFunction->getAttrOfType<IntegerAttr>(StepAttrs::kMicroBatch);
      known && known.getInt() != microBatch)
    return op.emitError("a step loops over one micro-batch size; this "
                        "value_and_grad's is ")
           << microBatch << ", an earlier one's " << known.getInt();
  stepFunction->setAttr(
      StepAttrs::kMicroBatch,
      IntegerAttr::get(IntegerType::get(op.getContext(), 64), microBatch));
  if (split.masked)
    op->getParentOfType<func::FuncOp>()->setAttr(
        StepAttrs::kPartialWindows, UnitAttr::get(op.getContext()));
  if (split.kind == LossKind::MeanOfMeans)
    ++numMeanOfMeans;
  else
    ++numExact;

  rewriter.rewrite(split);
  return success();
}

} // namespace
