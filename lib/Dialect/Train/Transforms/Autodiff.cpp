//===- Autodiff.cpp - reverse-mode differentiation --------------*- C++ -*-===//
//
// Plain reverse mode over one SSA function: clone the forward body, find the
// ops on a path from a differentiated argument to the loss, visit them in
// reverse order summing adjoints of multiply-used values, and let each op's
// DifferentiableOpInterface emit its operands' adjoints. Forward values the
// backward needs are ordinary SSA uses; bufferization and liveness decide
// memory.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINAUTODIFF
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// Builds `@<callee>_grad...`: the callee's results followed by the gradient
/// of result 0 with respect to the arguments in `wrt`. With `seeded`, the
/// function takes a trailing tensor<f32>, the adjoint of result 0 the
/// backward starts from (loss scaling), instead of 1.
FailureOr<func::FuncOp> buildGradientFunction(func::FuncOp callee,
                                              ArrayRef<int64_t> wrt,
                                              bool seeded,
                                              SymbolTable &symbols) {
  if (!callee.getBody().hasOneBlock())
    return callee.emitError("cannot differentiate '")
           << callee.getSymName() << "': it has more than one block";

  FunctionType type = callee.getFunctionType();
  SmallVector<Type> resultTypes(type.getResults());
  for (int64_t index : wrt)
    resultTypes.push_back(type.getInput(index));

  OpBuilder builder(callee);
  SmallVector<Type> inputs(type.getInputs());
  if (seeded)
    inputs.push_back(RankedTensorType::get({}, builder.getF32Type()));
  auto gradFn = func::FuncOp::create(
      builder, callee.getLoc(),
      (callee.getSymName() + (seeded ? "_grad_seeded" : "_grad")).str(),
      builder.getFunctionType(inputs, resultTypes));
  gradFn.setPrivate();
  symbols.insert(gradFn); // renames on collision
  IRMapping mapping;
  callee.getBody().cloneInto(&gradFn.getBody(), gradFn.getBody().begin(),
                             mapping);
  Block &body = gradFn.getBody().front();
  Value seed;
  if (seeded)
    seed = body.addArgument(inputs.back(), callee.getLoc());
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Activity: values that depend on a differentiated argument (forward) and
  // that the loss depends on (backward).
  DenseSet<Value> varied;
  for (int64_t index : wrt)
    varied.insert(body.getArgument(index));
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() != 0)
      return op.emitError("cannot differentiate an op with regions");
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      for (Value result : op.getResults())
        if (isFloatTensor(result))
          varied.insert(result);
  }
  DenseSet<Value> useful{ret.getOperand(0)};
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return useful.contains(v); }))
      useful.insert(op.getOperands().begin(), op.getOperands().end());
  auto isActive = [&](Value v) {
    return varied.contains(v) && useful.contains(v);
  };

  // Reverse sweep, emitted just before the return.
  builder.setInsertionPoint(ret);
  DenseMap<Value, Value> adjoints;
  auto addAdjoint = [&](Value value, Value adjoint, Location loc) {
    auto [it, inserted] = adjoints.try_emplace(value, adjoint);
    if (!inserted)
      it->second = nn::AddOp::create(builder, loc, it->second, adjoint);
  };
  nn::NNBuilder nnb(builder, ret.getLoc());
  Value loss = ret.getOperand(0);
  if (isActive(loss))
    adjoints[loss] = seed ? seed : nnb.scalar(builder.getF32Type(), 1.0);

  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultAdjoints;
    bool any = false;
    for (Value result : op->getResults()) {
      Value adj = isActive(result) ? adjoints.lookup(result) : Value();
      resultAdjoints.push_back(adj);
      any |= static_cast<bool>(adj);
    }
    if (!any)
      continue;
    auto differentiable = dyn_cast<nn::DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitError("'")
             << op->getName() << "' has no gradient rule, but the loss "
             << "depends on it through a trainable parameter";
    SmallVector<Value> operandAdjoints;
    if (failed(
            differentiable.buildVJP(builder, resultAdjoints, operandAdjoints)))
      return failure();
    assert(operandAdjoints.size() == op->getNumOperands() &&
           "a VJP rule must return one adjoint per operand");
    for (auto [operand, adjoint] :
         llvm::zip(op->getOperands(), operandAdjoints))
      if (adjoint && isActive(operand))
        addAdjoint(operand, adjoint, op->getLoc());
  }

  SmallVector<Value> results(ret.getOperands());
  for (int64_t index : wrt) {
    Value arg = body.getArgument(index);
    Value adj = adjoints.lookup(arg);
    // A parameter the loss does not depend on has a zero gradient.
    if (!adj)
      adj = nnb.splat(cast<RankedTensorType>(arg.getType()), 0.0);
    results.push_back(adj);
  }
  func::ReturnOp::create(builder, ret.getLoc(), results);
  ret.erase();
  return gradFn;
}

struct TrainAutodiffPass
    : public train::impl::TrainAutodiffBase<TrainAutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    // One gradient function per (callee, wrt) pair.
    std::map<std::pair<std::string, SmallVector<int64_t>>, func::FuncOp> cache;
    SmallVector<ValueAndGradOp> ops;
    module.walk([&](ValueAndGradOp op) { ops.push_back(op); });
    for (ValueAndGradOp op : ops) {
      if (op.getMicroBatch()) {
        op.emitError("value_and_grad over a whole effective batch must be "
                     "split by train-microbatch before train-autodiff");
        return signalPassFailure();
      }
      auto callee = symbols.lookup<func::FuncOp>(op.getCallee());
      if (!callee) {
        op.emitError("unknown callee '") << op.getCallee() << "'";
        return signalPassFailure();
      }
      bool seeded = static_cast<bool>(op.getSeed());
      auto key = std::make_pair(op.getCallee().str() + (seeded ? "#seed" : ""),
                                SmallVector<int64_t>(op.getWrt()));
      func::FuncOp &gradFn = cache[key];
      if (!gradFn) {
        FailureOr<func::FuncOp> built =
            buildGradientFunction(callee, op.getWrt(), seeded, symbols);
        if (failed(built))
          return signalPassFailure();
        gradFn = *built;
      }
      OpBuilder builder(op);
      SmallVector<Value> args(op.getArgs());
      if (seeded)
        args.push_back(tensor::FromElementsOp::create(
            builder, op.getLoc(), RankedTensorType::get({}, op.getSeed().getType()),
            ValueRange{op.getSeed()}));
      auto call = func::CallOp::create(builder, op.getLoc(), gradFn, args);
      op.replaceAllUsesWith(call.getResults());
      op.erase();
    }
  }
};

} // namespace
