//===- Scan.cpp - nn.scan: verifier, canonicalization -----------*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
using namespace accrue::nn;

RankedTensorType ScanOp::stackedType(Type type, int64_t steps) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape.insert(shape.begin() + 1, steps);
  return RankedTensorType::get(shape, tensor.getElementType());
}

RankedTensorType ScanOp::stepType(Type type) {
  auto stacked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(stacked.getShape());
  shape.erase(shape.begin() + 1);
  return RankedTensorType::get(shape, stacked.getElementType());
}

Block &ScanOp::addBody() {
  Block *block = new Block();
  getBody().push_back(block);
  int64_t carries = getNumCarries(), scanned = getNumScanned();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    bool isScanned = static_cast<int64_t>(i) >= carries &&
                     static_cast<int64_t>(i) < carries + scanned;
    block->addArgument(isScanned ? stepType(input.getType()) : input.getType(),
                       input.getLoc());
  }
  return *block;
}

int64_t ScanOp::getNumSteps() {
  return cast<RankedTensorType>(getScanned().front().getType()).getDimSize(1);
}

int64_t ScanOp::getNumOutputs() {
  return getNumResults() - getNumCarries() * (getSavesCarries() ? 2 : 1);
}

OperandRange ScanOp::getCarryInits() {
  return getInputs().take_front(getNumCarries());
}
OperandRange ScanOp::getScanned() {
  return getInputs().slice(getNumCarries(), getNumScanned());
}
OperandRange ScanOp::getInvariants() {
  return getInputs().drop_front(getNumCarries() + getNumScanned());
}
ResultRange ScanOp::getFinalCarries() {
  return getResults().take_front(getNumCarries());
}
ResultRange ScanOp::getStackedOutputs() {
  return getResults().slice(getNumCarries(), getNumOutputs());
}
ResultRange ScanOp::getSavedCarries() {
  return getResults().drop_front(getNumCarries() + getNumOutputs());
}

SmallVector<int64_t> ScanOp::getInPlaceSources() {
  Block &body = getBodyBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  int64_t carries = getNumCarries(), scanned = getNumScanned();
  SmallVector<int64_t> sources(getNumOutputs(), -1);
  for (int64_t i = 0; i < getNumOutputs(); ++i) {
    auto add = yield.getValues()[carries + i].getDefiningOp<AddOp>();
    if (!add || add.getLhs().getType() != add.getRhs().getType())
      continue;
    for (Value operand : add->getOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg || arg.getOwner() != &body || !arg.hasOneUse() ||
          arg.getArgNumber() < carries ||
          arg.getArgNumber() >= carries + scanned)
        continue;
      int64_t j = arg.getArgNumber() - carries;
      if (getScanned()[j].hasOneUse() &&
          getScanned()[j].getType() == getStackedOutputs()[i].getType() &&
          !llvm::is_contained(sources, j)) {
        sources[i] = j;
        break;
      }
    }
  }
  return sources;
}

LogicalResult ScanOp::verify() {
  int64_t carries = getNumCarries(), scanned = getNumScanned();
  int64_t inputs = getInputs().size();
  if (carries < 0 || scanned < 1 || carries > inputs ||
      scanned > inputs - carries)
    return emitOpError("needs at least one scanned input, and num_carries + "
                       "num_scanned at most the number of inputs");
  int64_t results = getNumResults() - carries * (getSavesCarries() ? 2 : 1);
  if (results < 0)
    return emitOpError("has fewer results than its carries need");
  if (getNumResults() == 0)
    return emitOpError("has no results");
  for (Type type :
       llvm::concat<const Type>(getInputs().getTypes(), getResultTypes()))
    if (!cast<RankedTensorType>(type).hasStaticShape())
      return emitOpError("needs static shapes, not ") << type;
  auto first = cast<RankedTensorType>(getScanned().front().getType());
  if (first.getRank() < 2 || first.getDimSize(1) < 1)
    return emitOpError("scanned inputs must be [N, T, ...] with T >= 1");
  int64_t batch = first.getDimSize(0), steps = first.getDimSize(1);
  Block &body = getBodyBlock();
  if (static_cast<int64_t>(body.getNumArguments()) != inputs)
    return emitOpError("body must take one argument per input");
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    Type expected = input.getType();
    if (static_cast<int64_t>(i) >= carries &&
        static_cast<int64_t>(i) < carries + scanned) {
      auto type = cast<RankedTensorType>(input.getType());
      if (type.getRank() < 2 || type.getDimSize(0) != batch ||
          type.getDimSize(1) != steps)
        return emitOpError("scanned input ")
               << i << " must be [" << batch << ", " << steps << ", ...], not "
               << type;
      expected = stepType(type);
    }
    if (body.getArgument(i).getType() != expected)
      return emitOpError("body argument ")
             << i << " must be " << expected << ", not "
             << body.getArgument(i).getType();
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in nn.yield");
  if (static_cast<int64_t>(yield.getValues().size()) != carries + results)
    return emitOpError("body yields ")
           << yield.getValues().size() << " values, not " << carries + results
           << " (carries and step outputs)";
  for (int64_t i = 0; i < carries; ++i) {
    Type type = getCarryInits()[i].getType();
    if (yield.getValues()[i].getType() != type ||
        getFinalCarries()[i].getType() != type)
      return emitOpError("carry ") << i << " must keep its type " << type;
    // (Carries need not be batch-major: a backward's running sums of
    // weight adjoints are carries.)
    if (getSavesCarries() &&
        (cast<RankedTensorType>(type).getRank() < 1 ||
         getSavedCarries()[i].getType() != stackedType(type, steps)))
      return emitOpError("saved carry ")
             << i << " must be " << stackedType(type, steps);
  }
  for (int64_t i = 0; i < results; ++i) {
    Type step = yield.getValues()[carries + i].getType();
    if (cast<RankedTensorType>(step).getRank() < 1 ||
        cast<RankedTensorType>(step).getDimSize(0) != batch ||
        getStackedOutputs()[i].getType() != stackedType(step, steps))
      return emitOpError("output ") << i << " must be the step output " << step
                                    << " stacked along axis 1";
  }
  return success();
}

ScanOp ScanOp::saveForBackward(ScanOp op) {
  Block &body = op.getBodyBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  int64_t carries = op.getNumCarries(), steps = op.getNumSteps();
  int64_t batch =
      cast<RankedTensorType>(op.getScanned().front().getType()).getDimSize(0);
  // The step's contractions, stacked as new outputs (unless already one),
  // each after the adds that are its only use: an RNN's gate
  // pre-activations (x W^T + h R^T + biases) are then read back whole
  // instead of summed again in every backward step, and the add's adjoint
  // needs no value of its operands.
  ValueRange outputs = yield.getValues().drop_front(carries);
  SmallVector<Value> products;
  // Stacks a batch-major step value, unless it already is.
  auto stack = [&](Value result) {
    auto type = cast<RankedTensorType>(result.getType());
    if (type.getRank() >= 1 && type.getDimSize(0) == batch &&
        !llvm::is_contained(outputs, result) &&
        !llvm::is_contained(products, result))
      products.push_back(result);
  };
  for (Operation &inner : body.without_terminator())
    if (isa<MatMulOp, GemmOp, ConvOp>(inner))
      for (Value result : inner.getResults()) {
        while (result.hasOneUse()) {
          auto add = dyn_cast<AddOp>(*result.getUsers().begin());
          if (!add || add.getType() != result.getType())
            break;
          result = add.getResult();
        }
        stack(result);
      }
  // The results of sigmoid, tanh and exp, whose adjoints read their result
  // alone (y (1 - y), 1 - y^2, y), stacked too, as PyTorch's autograd saves
  // them: an LSTM's backward step reads its gates and tanh(c) instead of
  // recomputing five transcendentals per element from the pre-activations.
  for (Operation &inner : body.without_terminator())
    if (isa<SigmoidOp, TanhOp, ExpOp>(inner))
      stack(inner.getResult(0));
  SmallVector<Type> types(op.getFinalCarries().getTypes());
  llvm::append_range(types, op.getStackedOutputs().getTypes());
  for (Value product : products)
    types.push_back(stackedType(product.getType(), steps));
  for (Value init : op.getCarryInits())
    types.push_back(stackedType(init.getType(), steps));
  OpBuilder b(op);
  auto scan = ScanOp::create(b, op.getLoc(), types, op.getInputs(), carries,
                             op.getNumScanned(), op.getReverse(),
                             /*saves_carries=*/true);
  scan.getBody().takeBody(op.getBody());
  SmallVector<Value> values(yield.getValues());
  llvm::append_range(values, products);
  b.setInsertionPoint(yield);
  YieldOp::create(b, yield.getLoc(), values);
  yield.erase();
  for (auto [from, to] : llvm::zip(op.getResults(), scan.getResults()))
    from.replaceAllUsesWith(to);
  op.erase();
  return scan;
}

namespace {

/// A scan like `op` with other result types, inputs and counts, which takes
/// `op`'s body (the caller adjusts its arguments and yield).
ScanOp rebuildScan(PatternRewriter &rewriter, ScanOp op, TypeRange types,
                   ValueRange inputs, int64_t carries, int64_t scanned,
                   bool saves) {
  auto scan = ScanOp::create(rewriter, op.getLoc(), types, inputs, carries,
                             scanned, op.getReverse(), saves);
  rewriter.inlineRegionBefore(op.getBody(), scan.getBody(),
                              scan.getBody().end());
  return scan;
}

/// Drops step outputs nothing reads (what a backward computes for inputs
/// that are not differentiated), but those stacked in the place of a
/// scanned input the function computes (getInPlaceSources: dropped, the
/// sum would need a buffer of its own each step; an argument's place would
/// be a copy of it), and saved carries when none is read.
struct DropUnusedOutputs : public OpRewritePattern<ScanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScanOp op,
                                PatternRewriter &rewriter) const override {
    int64_t carries = op.getNumCarries();
    SmallVector<int64_t> inPlace = op.getInPlaceSources();
    auto computedInPlace = [&](int64_t i) {
      return inPlace[i] >= 0 && op.getScanned()[inPlace[i]].getDefiningOp();
    };
    SmallVector<int64_t> kept;
    for (auto [i, result] : llvm::enumerate(op.getStackedOutputs()))
      if (!result.use_empty() || computedInPlace(i))
        kept.push_back(i);
    bool saves = op.getSavesCarries() &&
                 llvm::any_of(op.getSavedCarries(),
                              [](Value v) { return !v.use_empty(); });
    if (static_cast<int64_t>(kept.size()) == op.getNumOutputs() &&
        saves == op.getSavesCarries())
      return failure();
    SmallVector<Type> types(op.getFinalCarries().getTypes());
    for (int64_t i : kept)
      types.push_back(op.getStackedOutputs()[i].getType());
    if (saves)
      llvm::append_range(types, op.getSavedCarries().getTypes());
    auto scan = rebuildScan(rewriter, op, types, op.getInputs(), carries,
                            op.getNumScanned(), saves);
    auto yield = cast<YieldOp>(scan.getBodyBlock().getTerminator());
    SmallVector<Value> values(yield.getValues().take_front(carries));
    for (int64_t i : kept)
      values.push_back(yield.getValues()[carries + i]);
    rewriter.setInsertionPoint(yield);
    rewriter.replaceOpWithNewOp<YieldOp>(yield, values);

    SmallVector<Value> replacements(op.getNumResults());
    for (int64_t i = 0; i < carries; ++i)
      replacements[i] = scan.getResult(i);
    for (auto [k, i] : llvm::enumerate(kept))
      replacements[carries + i] = scan.getResult(carries + k);
    if (saves)
      for (int64_t i = 0; i < carries; ++i)
        replacements[carries + op.getNumOutputs() + i] =
            scan.getSavedCarries()[i];
    for (auto [from, to] : llvm::zip(op.getResults(), replacements))
      if (to)
        rewriter.replaceAllUsesWith(from, to);
    rewriter.eraseOp(op);
    return success();
  }
};

/// Moves body ops that read only invariants (and constants) out of the
/// loop: their results become new invariants (R^T of a recurrent
/// contraction, the transposes of its VJP).
struct HoistInvariants : public OpRewritePattern<ScanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScanOp op,
                                PatternRewriter &rewriter) const override {
    Block &body = op.getBodyBlock();
    int64_t firstInvariant = op.getNumCarries() + op.getNumScanned();
    // Body values that do not change between steps.
    DenseSet<Value> invariant;
    for (int64_t i = firstInvariant, e = body.getNumArguments(); i < e; ++i)
      invariant.insert(body.getArgument(i));
    SmallVector<Operation *> hoisted;
    for (Operation &inner : body.without_terminator()) {
      if (inner.getNumRegions() != 0 || !isMemoryEffectFree(&inner) ||
          !llvm::all_of(inner.getOperands(),
                        [&](Value v) { return invariant.contains(v); }))
        continue;
      invariant.insert(inner.getResults().begin(), inner.getResults().end());
      // Constants stay (copied out only for the ops that are hoisted).
      if (!inner.hasTrait<OpTrait::ConstantLike>())
        hoisted.push_back(&inner);
    }
    if (hoisted.empty())
      return failure();
    IRMapping outside;
    for (auto [i, inv] : llvm::enumerate(op.getInvariants()))
      outside.map(body.getArgument(firstInvariant + i), inv);
    rewriter.setInsertionPoint(op);
    for (Operation *inner : hoisted) {
      for (Value operand : inner->getOperands())
        if (!outside.contains(operand))
          rewriter.clone(*operand.getDefiningOp(), outside);
      rewriter.clone(*inner, outside);
    }
    // The hoisted results read inside the body (or yielded) become
    // invariants.
    SmallVector<Value> inputs(op.getInputs());
    SmallVector<Value> innerValues;
    for (Operation *inner : hoisted)
      for (Value result : inner->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !llvm::is_contained(hoisted, user);
            })) {
          innerValues.push_back(result);
          inputs.push_back(outside.lookup(result));
        }
    auto scan = rebuildScan(rewriter, op, op.getResultTypes(), inputs,
                            op.getNumCarries(), op.getNumScanned(),
                            op.getSavesCarries());
    Block &moved = scan.getBodyBlock();
    for (Value value : innerValues)
      rewriter.replaceAllUsesWith(
          value, moved.addArgument(value.getType(), value.getLoc()));
    for (Operation *inner : llvm::reverse(hoisted))
      rewriter.eraseOp(inner);
    rewriter.replaceOp(op, scan.getResults());
    return success();
  }
};

/// x_t + (p + b), with x a scanned input and b an invariant vector, is
/// (x + b)_t + p: the scanned input takes the invariant once, outside the
/// loop, where the add fuses with what computes x (an RNN's input
/// projection and its bias), and the step adds one value to its product
/// instead of two. Each use is the only one: x's step, the inner sum.
struct AddInvariantsToScanned : public OpRewritePattern<ScanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScanOp op,
                                PatternRewriter &rewriter) const override {
    Block &body = op.getBodyBlock();
    int64_t carries = op.getNumCarries(), scanned = op.getNumScanned();
    int64_t firstInvariant = carries + scanned;
    for (int64_t j = 0; j < scanned; ++j) {
      BlockArgument step = body.getArgument(carries + j);
      if (!step.hasOneUse() || !op.getScanned()[j].hasOneUse())
        continue;
      auto outer = dyn_cast<AddOp>(*step.getUsers().begin());
      if (!outer || outer.getType() != step.getType())
        continue;
      unsigned innerIndex = outer.getLhs() == step ? 1 : 0;
      auto inner = outer->getOperand(innerIndex).getDefiningOp<AddOp>();
      if (!inner || !inner->hasOneUse() || inner.getType() != step.getType())
        continue;
      for (unsigned k = 0; k < 2; ++k) {
        auto invariant = dyn_cast<BlockArgument>(inner->getOperand(k));
        Value product = inner->getOperand(1 - k);
        if (!invariant || invariant.getOwner() != &body ||
            invariant.getArgNumber() < firstInvariant ||
            product.getType() != step.getType())
          continue;
        // b broadcasts along the last dimension (or is a scalar), the same
        // against the step [N, ..., F] as against the stack [N, T, ..., F].
        auto stepType = cast<RankedTensorType>(step.getType());
        auto type = dyn_cast<RankedTensorType>(invariant.getType());
        if (!type || type.getRank() > 1 ||
            (type.getRank() == 1 && stepType.getRank() < 2))
          continue;
        rewriter.setInsertionPoint(op);
        Value shifted = NNBuilder(rewriter, op.getLoc())
                            .add(op.getScanned()[j],
                                 op.getInputs()[invariant.getArgNumber()]);
        rewriter.modifyOpInPlace(op,
                                 [&] { op->setOperand(carries + j, shifted); });
        rewriter.modifyOpInPlace(
            outer, [&] { outer->setOperand(innerIndex, product); });
        rewriter.eraseOp(inner);
        return success();
      }
    }
    return failure();
  }
};

/// Drops scanned inputs (but the last: it gives the steps) and invariants
/// the body does not read, such as saved carries a backward step does not
/// need.
struct DropUnusedInputs : public OpRewritePattern<ScanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScanOp op,
                                PatternRewriter &rewriter) const override {
    Block &body = op.getBodyBlock();
    int64_t carries = op.getNumCarries(), scanned = op.getNumScanned();
    llvm::BitVector dead(body.getNumArguments());
    int64_t keptScanned = scanned;
    for (int64_t i = carries, e = body.getNumArguments(); i < e; ++i) {
      bool isScanned = i < carries + scanned;
      if (!body.getArgument(i).use_empty() || (isScanned && keptScanned == 1))
        continue;
      dead.set(i);
      keptScanned -= isScanned;
    }
    if (dead.none())
      return failure();
    SmallVector<Value> inputs;
    for (auto [i, input] : llvm::enumerate(op.getInputs()))
      if (!dead.test(i))
        inputs.push_back(input);
    auto scan = rebuildScan(rewriter, op, op.getResultTypes(), inputs, carries,
                            keptScanned, op.getSavesCarries());
    rewriter.modifyOpInPlace(scan,
                             [&] { scan.getBodyBlock().eraseArguments(dead); });
    rewriter.replaceOp(op, scan.getResults());
    return success();
  }
};

/// A carry the body yields unchanged is an invariant: its final value is
/// its initial one (the running sum of an invariant's adjoint when the step
/// does not depend on that invariant).
struct CarriesToInvariants : public OpRewritePattern<ScanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScanOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getSavesCarries())
      return failure();
    Block &body = op.getBodyBlock();
    auto yield = cast<YieldOp>(body.getTerminator());
    int64_t carries = op.getNumCarries();
    SmallVector<int64_t> fixed;
    for (int64_t i = 0; i < carries; ++i)
      if (yield.getValues()[i] == body.getArgument(i))
        fixed.push_back(i);
    if (fixed.empty())
      return failure();
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    for (int64_t i = 0; i < carries; ++i)
      if (!llvm::is_contained(fixed, i)) {
        inputs.push_back(op.getCarryInits()[i]);
        types.push_back(op.getFinalCarries()[i].getType());
      }
    llvm::append_range(inputs, op.getInputs().drop_front(carries));
    for (int64_t i : fixed)
      inputs.push_back(op.getCarryInits()[i]);
    llvm::append_range(types, op.getStackedOutputs().getTypes());
    int64_t kept = carries - fixed.size();
    auto scan = rebuildScan(rewriter, op, types, inputs, kept,
                            op.getNumScanned(), /*saves_carries=*/false);
    Block &moved = scan.getBodyBlock();
    llvm::BitVector gone(moved.getNumArguments());
    for (int64_t i : fixed) {
      BlockArgument carry = moved.getArgument(i);
      rewriter.replaceAllUsesWith(
          carry, moved.addArgument(carry.getType(), carry.getLoc()));
      gone.set(i);
    }
    SmallVector<Value> values;
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      if (i >= static_cast<size_t>(carries) ||
          !llvm::is_contained(fixed, static_cast<int64_t>(i)))
        values.push_back(v);
    rewriter.setInsertionPoint(yield);
    rewriter.replaceOpWithNewOp<YieldOp>(yield, values);
    // (Sized for the arguments just added too.)
    gone.resize(moved.getNumArguments());
    rewriter.modifyOpInPlace(scan, [&] { moved.eraseArguments(gone); });

    SmallVector<Value> replacements;
    int64_t next = 0;
    for (int64_t i = 0; i < carries; ++i)
      replacements.push_back(llvm::is_contained(fixed, i)
                                 ? op.getCarryInits()[i]
                                 : scan.getResult(next++));
    llvm::append_range(replacements, scan.getResults().drop_front(kept));
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

} // namespace

void ScanOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  patterns.add<DropUnusedOutputs, DropUnusedInputs, CarriesToInvariants,
               HoistInvariants, AddInvariantsToScanned>(context);
}
