//===- Differentiate.cpp - reverse sweep over a block of nn ops -*- C++ -*-===//
//
// Plain reverse mode: activity analysis, then each op with an adjoint on an
// active result emits its operands' adjoints through its
// DifferentiableOpInterface, last op first, summing the adjoints of values
// used more than once.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::nn;

LogicalResult accrue::nn::findActiveValues(Block &block, ValueRange sources,
                                           ValueRange sinks,
                                           DenseSet<Value> &varied,
                                           DenseSet<Value> &useful) {
  varied.insert(sources.begin(), sources.end());
  for (Operation &op : block.without_terminator()) {
    if (op.getNumRegions() != 0 && !isa<ScanOp>(op))
      return op.emitError("cannot differentiate an op with regions");
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      for (Value result : op.getResults())
        if (isFloatTensor(result))
          varied.insert(result);
  }
  useful.insert(sinks.begin(), sinks.end());
  for (Operation &op : llvm::reverse(block.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return useful.contains(v); }))
      useful.insert(op.getOperands().begin(), op.getOperands().end());
  return success();
}

void accrue::nn::accumulateAdjoint(OpBuilder &b, Location loc,
                                   DenseMap<Value, Value> &adjoints,
                                   Value value, Value adjoint) {
  auto [it, inserted] = adjoints.try_emplace(value, adjoint);
  if (!inserted)
    it->second = AddOp::create(b, loc, it->second, adjoint);
}

LogicalResult accrue::nn::reverseSweep(OpBuilder &b, ArrayRef<Operation *> ops,
                                       function_ref<bool(Value)> isActive,
                                       DenseMap<Value, Value> &adjoints) {
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultAdjoints;
    bool any = false;
    for (Value result : op->getResults()) {
      Value adj = isActive(result) ? adjoints.lookup(result) : Value();
      resultAdjoints.push_back(adj);
      any |= static_cast<bool>(adj);
    }
    if (!any)
      continue;
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitError("'")
             << op->getName() << "' has no gradient rule, but the loss "
             << "depends on it through a trainable parameter";
    SmallVector<Value> operandAdjoints;
    if (failed(differentiable.buildVJP(b, resultAdjoints, operandAdjoints)))
      return failure();
    assert(operandAdjoints.size() == op->getNumOperands() &&
           "a VJP rule must return one adjoint per operand");
    for (auto [operand, adjoint] :
         llvm::zip(op->getOperands(), operandAdjoints))
      if (adjoint && isActive(operand))
        accumulateAdjoint(b, op->getLoc(), adjoints, operand, adjoint);
  }
  return success();
}
