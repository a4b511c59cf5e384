//===- Microbatch.cpp - gradient accumulation loops -------------*- C++ -*-===//
//
// Rewrites the loss and gradients of a whole effective batch into a loop over
// micro-batches whose gradients are accumulated in place, with exact loss
// normalization: a mean-reduced loss L = N / D is split into its sum N and
// count D; N's gradient and both N and D are summed over micro-batches, and
// the accumulated gradient is divided once by the total D.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINMICROBATCH
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// How the loss of the whole batch relates to the micro-batch losses.
enum class LossKind {
  /// L = N / D with N and D sums over samples: exact sum + count.
  Mean,
  /// L is already a sum over samples: sum the micro-batch losses.
  Sum,
  /// Unrecognized (or requested): average the micro-batch losses.
  MeanOfMeans,
};

/// The forward function rewritten to return (N, D) and how to combine them.
struct SplitLoss {
  func::FuncOp function;
  LossKind kind;
};

Value lookThroughIdentity(Value v) {
  while (auto id = v.getDefiningOp<nn::IdentityOp>())
    v = id.getInput();
  return v;
}

bool reducesAllAxes(ArrayRef<int64_t> axes, Value input) {
  return static_cast<int64_t>(axes.size()) ==
         cast<RankedTensorType>(input.getType()).getRank();
}

/// Returns N and D for the loss `loss` (built at `builder`), or nothing if
/// the form is not recognized. Sets `kind`.
std::optional<std::pair<Value, Value>>
splitLossValue(OpBuilder &builder, Value loss, LossKind &kind) {
  nn::NNBuilder nnb(builder, loss.getLoc());
  Value root = lookThroughIdentity(loss);
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  auto toScalar = [&](Value v) { return nnb.reshape(v, scalarType); };

  if (auto mean = root.getDefiningOp<nn::ReduceMeanOp>();
      mean && reducesAllAxes(mean.getAxes(), mean.getInput())) {
    builder.setInsertionPointAfter(mean);
    nnb.loc = mean.getLoc();
    auto inType = cast<RankedTensorType>(mean.getInput().getType());
    Value sum = nn::ReduceSumOp::create(builder, mean.getLoc(), mean.getInput(),
                                        mean.getAxes(),
                                        /*keepdims=*/false);
    kind = LossKind::Mean;
    return std::make_pair(
        toScalar(sum),
        nnb.scalar(builder.getF32Type(),
                   static_cast<double>(inType.getNumElements())));
  }
  if (auto sce = root.getDefiningOp<nn::SoftmaxCrossEntropyLossOp>()) {
    builder.setInsertionPointAfter(sce);
    nnb.loc = sce.getLoc();
    if (sce.getReduction() == nn::LossReduction::Mean) {
      auto sum = nn::SoftmaxCrossEntropyLossOp::create(
          builder, sce.getLoc(), sce.getScores(), sce.getLabels(),
          sce.getWeights(), nn::LossReduction::Sum, sce.getIgnoreIndexAttr());
      Value count = nn::ClassWeightSumOp::create(
          builder, sce.getLoc(), scalarType, sce.getLabels(), sce.getWeights(),
          sce.getIgnoreIndexAttr());
      kind = LossKind::Mean;
      return std::make_pair(Value(sum), count);
    }
    if (sce.getReduction() == nn::LossReduction::Sum) {
      kind = LossKind::Sum;
      return std::make_pair(loss, nnb.scalar(builder.getF32Type(), 1.0));
    }
  }
  if (auto sum = root.getDefiningOp<nn::ReduceSumOp>();
      sum && reducesAllAxes(sum.getAxes(), sum.getInput())) {
    builder.setInsertionPointAfterValue(loss);
    kind = LossKind::Sum;
    return std::make_pair(loss, nnb.scalar(builder.getF32Type(), 1.0));
  }
  return std::nullopt;
}

/// Clones `forward` into a function returning (N, D).
SplitLoss splitLoss(func::FuncOp forward, bool exact, SymbolTable &symbols) {
  OpBuilder builder(forward);
  auto type = forward.getFunctionType();
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  auto split = func::FuncOp::create(
      builder, forward.getLoc(), (forward.getSymName() + "_split").str(),
      builder.getFunctionType(type.getInputs(), {scalarType, scalarType}));
  split.setPrivate();
  symbols.insert(split);
  IRMapping mapping;
  forward.getBody().cloneInto(&split.getBody(), mapping);
  auto ret = cast<func::ReturnOp>(split.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);

  LossKind kind = LossKind::MeanOfMeans;
  std::optional<std::pair<Value, Value>> nd;
  if (exact)
    nd = splitLossValue(builder, loss, kind);
  if (!nd) {
    kind = LossKind::MeanOfMeans;
    builder.setInsertionPoint(ret);
    nn::NNBuilder nnb(builder, ret.getLoc());
    nd = std::make_pair(loss, nnb.scalar(builder.getF32Type(), 1.0));
    if (exact) {
      Operation *def = lookThroughIdentity(loss).getDefiningOp();
      InFlightDiagnostic diag =
          emitWarning(def ? def->getLoc() : forward.getLoc())
          << "loss is not a recognized mean- or sum-reduced form";
      if (def)
        diag << " ('" << def->getName() << "')";
      diag << "; averaging it over micro-batches (mean of means), which "
              "differs from the whole-batch loss when micro-batch counts "
              "differ";
    }
  }
  builder.setInsertionPoint(ret);
  func::ReturnOp::create(builder, ret.getLoc(),
                         ValueRange{nd->first, nd->second});
  ret.erase();
  return {split, kind};
}

struct TrainMicrobatchPass
    : public train::impl::TrainMicrobatchBase<TrainMicrobatchPass> {
  using Base::Base;

  void runOnOperation() override {
    if (normalization != "exact" && normalization != "per-micro-batch") {
      getOperation().emitError("train-microbatch: normalization must be "
                               "'exact' or 'per-micro-batch', not '")
          << normalization << "'";
      return signalPassFailure();
    }
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

LogicalResult TrainMicrobatchPass::rewrite(ValueAndGradOp op,
                                           SymbolTable &symbols) {
  Location loc = op.getLoc();
  int64_t microBatch = *op.getMicroBatch();
  auto callee = symbols.lookup<func::FuncOp>(op.getCallee());
  if (!callee)
    return op.emitError("unknown callee '") << op.getCallee() << "'";
  if (op.getNumCalleeResults() != 1)
    return op.emitError("micro-batching needs a callee with one result "
                        "(the loss), '")
           << op.getCallee() << "' has " << op.getNumCalleeResults();

  // The gradients must all feed one train.accumulate, which moves into the
  // loop so the flat accumulator is carried (and updated in place).
  AccumulateOp accumulate;
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

  // Which operands are whole batches (they get sliced per micro-batch).
  FunctionType calleeType = callee.getFunctionType();
  SmallVector<unsigned> batchOperands;
  for (auto [i, operand] : llvm::enumerate(op.getArgs()))
    if (operand.getType() != calleeType.getInput(i))
      batchOperands.push_back(i);
  if (batchOperands.empty())
    return op.emitError("no operand holds a whole batch; nothing to split");

  std::string key = op.getCallee().str();
  auto it = splitCache.find(key);
  if (it == splitCache.end())
    it = splitCache
             .emplace(key, splitLoss(callee, normalization == "exact", symbols))
             .first;
  SplitLoss split = it->second;
  if (split.kind == LossKind::MeanOfMeans)
    ++numMeanOfMeans;
  else
    ++numExact;

  OpBuilder b(op);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value bConst = arith::ConstantIndexOp::create(b, loc, microBatch);
  Value numSteps;
  if (steps > 0) {
    numSteps = arith::ConstantIndexOp::create(b, loc, steps);
  } else {
    Value batch0 = op.getArgs()[batchOperands.front()];
    Value rows = tensor::DimOp::create(b, loc, batch0, 0);
    numSteps = arith::DivUIOp::create(b, loc, rows, bConst);
  }
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  SmallVector<Value> inits{accumulate.getAccumulator(), zero, zero};

  auto loop = scf::ForOp::create(
      b, loc, c0, numSteps, c1, inits,
      [&](OpBuilder &lb, Location l, Value iv, ValueRange iterArgs) {
        Value offset = arith::MulIOp::create(lb, l, iv, bConst);
        SmallVector<Value> args(op.getArgs());
        // An argument holding the global index of the batch's first sample
        // (role sample_index) moves to the micro-batch's first sample.
        for (unsigned i = 0; i < args.size(); ++i) {
          auto role = callee.getArgAttrOfType<StringAttr>(i, StepAttrs::kRole);
          if (!role || role.getValue() != "sample_index")
            continue;
          Value base = tensor::ExtractOp::create(lb, l, args[i]);
          Value shift = arith::IndexCastOp::create(lb, l, lb.getI64Type(),
                                                   offset);
          args[i] = tensor::FromElementsOp::create(
              lb, l, args[i].getType(),
              ValueRange{arith::AddIOp::create(lb, l, base, shift)});
        }
        for (unsigned i : batchOperands) {
          auto argType = cast<RankedTensorType>(calleeType.getInput(i));
          SmallVector<OpFoldResult> offsets(argType.getRank(),
                                            lb.getIndexAttr(0));
          offsets[0] = offset;
          SmallVector<OpFoldResult> sizes;
          for (int64_t d : argType.getShape())
            sizes.push_back(lb.getIndexAttr(d));
          SmallVector<OpFoldResult> strides(argType.getRank(),
                                            lb.getIndexAttr(1));
          args[i] = tensor::ExtractSliceOp::create(lb, l, argType, args[i],
                                                   offsets, sizes, strides);
        }
        SmallVector<Type> resultTypes{split.function.getResultTypes()};
        llvm::append_range(resultTypes, op.getGradients().getTypes());
        auto step = ValueAndGradOp::create(
            lb, l, resultTypes, split.function.getSymName(), args, op.getWrt(),
            /*micro_batch=*/nullptr);
        // The accumulate takes the gradients in its own order.
        SmallVector<Value> grads;
        for (Value g : accumulate.getGradients()) {
          unsigned index =
              cast<OpResult>(g).getResultNumber() - op.getNumCalleeResults();
          grads.push_back(step.getResult(2 + index));
        }
        Value acc = AccumulateOp::create(lb, l, iterArgs[0], grads,
                                         accumulate.getOffsets());
        Value n = tensor::ExtractOp::create(lb, l, step.getResult(0));
        Value d = tensor::ExtractOp::create(lb, l, step.getResult(1));
        Value nSum = arith::AddFOp::create(lb, l, iterArgs[1], n);
        Value dSum = arith::AddFOp::create(lb, l, iterArgs[2], d);
        scf::YieldOp::create(lb, l, ValueRange{acc, nSum, dSum});
      });

  loop->setAttr(StepAttrs::kMicrobatchLoop, b.getUnitAttr());
  Value accumulated = loop.getResult(0);
  Value lossSum = loop.getResult(1);
  Value loss = lossSum, gradient = accumulated;
  if (split.kind != LossKind::Sum) {
    // One division by the total count (for mean of means, the count is K).
    Value count = loop.getResult(2);
    loss = arith::DivFOp::create(b, loc, lossSum, count);
    Value inv = arith::DivFOp::create(
        b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)),
        count);
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
  accumulate.erase();
  op.erase();
  return success();
}

} // namespace
