//===- Autodiff.cpp - reverse-mode differentiation --------------*- C++ -*-===//
//
// Plain reverse mode over one SSA function: clone the forward body, find the
// ops on a path from a differentiated argument to the loss, visit them in
// reverse order summing adjoints of multiply-used values, and let each op's
// DifferentiableOpInterface emit its operands' adjoints. Forward values the
// backward needs are ordinary SSA uses; bufferization and liveness decide
// memory, and recomputation (checkpointing) shortens their lives by cloning
// the ops that compute them into the backward.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Regex.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINAUTODIFF
#define GEN_PASS_DEF_TRAINSTRIPRECOMPUTEBARRIERS
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// Which forward ops the backward recomputes instead of keeping their
/// results (see the pass description).
using RecomputeFn = function_ref<bool(Operation *)>;

/// What the pass options ask to recompute.
struct RecomputePolicy {
  /// Everything between the forward's cuts (see findCuts).
  bool segments = false;
  /// Elementwise ops that fusion keeps in registers (see
  /// findFusedElementwise).
  bool elementwise = false;
  /// The ops of the ONNX nodes whose names match.
  const llvm::Regex *nodes = nullptr;
};

/// Whether one of the names in `op`'s location matches `regex`.
bool namedBy(Operation *op, const llvm::Regex &regex) {
  bool named = false;
  op->getLoc()->walk([&](Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc);
        name && regex.match(name.getName().strref()))
      named = true;
    return WalkResult::advance();
  });
  return named;
}

/// The activations of the forward (values computed from the arguments not
/// in `wrt`: the batch inputs) and its cuts: differentiated activations
/// (`varied`: they also depend on parameters) that are, after the op
/// defining them, the only differentiated activation computed so far that
/// a later forward op (or the result) still reads. Every differentiated
/// path from the batch inputs to the loss passes through a cut; in a
/// transformer they are the residual stream between sub-blocks, in an MLP
/// every layer's output. (Masks computed from the inputs alone may cross
/// cuts: they are kept.)
void findCuts(Block &body, ArrayRef<Operation *> forwardOps,
              ArrayRef<int64_t> wrt, const DenseSet<Value> &varied,
              DenseSet<Value> &activations, DenseSet<Value> &cuts) {
  for (BlockArgument arg : body.getArguments())
    if (!llvm::is_contained(wrt, arg.getArgNumber()))
      activations.insert(arg);
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(forwardOps))
    position[op] = i;
  int64_t end = forwardOps.size();
  // Live activations after each op: +1 where one is defined, -1 after its
  // last forward use.
  SmallVector<int64_t> delta(end + 1, 0);
  for (auto [i, op] : llvm::enumerate(forwardOps)) {
    if (llvm::none_of(op->getOperands(),
                      [&](Value v) { return activations.contains(v); }))
      continue;
    for (Value result : op->getResults()) {
      activations.insert(result);
      if (!varied.contains(result))
        continue;
      // Forward uses only (the backward may exist already); the result
      // lives to the end.
      int64_t last = i;
      for (Operation *user : result.getUsers())
        if (auto it = position.find(user); it != position.end())
          last = std::max(last, it->second);
        else if (user == body.getTerminator())
          last = end;
      ++delta[i];
      --delta[last];
    }
  }
  int64_t live = 0;
  for (auto [i, op] : llvm::enumerate(forwardOps)) {
    live += delta[i];
    // Counted after op i: values whose last use is op i are gone.
    if (op->getNumResults() != 1)
      continue;
    Value result = op->getResult(0);
    if (live == 1 && activations.contains(result) && varied.contains(result) &&
        nn::isFloatTensor(result))
      cuts.insert(result);
  }
}

/// The forward's elementwise ops whose results only other elementwise ops
/// of the forward read (so that fusion keeps them in registers and only the
/// backward would have them stored), that apply a function to one tensor
/// and constants, and whose tensor the backward reads anyway: an argument,
/// a value the backward uses itself, or the result of another such op. A
/// GELU's x / sqrt(2), erf of it and 1 + that are recomputed from the
/// GELU's input, as PyTorch's fused kernels save only their inputs. Ops of
/// two tensors stay (a LayerNorm's normalized rows, the centred rows times
/// 1 / sqrt(var + eps)): recomputed, they would be a product's operand
/// again (gamma's gradient, a GEMM over the rows) and its own kernel.
DenseSet<Operation *> findFusedElementwise(ArrayRef<Operation *> forwardOps,
                                           Operation *terminator) {
  DenseSet<Operation *> forward(forwardOps.begin(), forwardOps.end());
  DenseSet<Operation *> found;
  auto elementwise = [](Operation *op) {
    return op->hasTrait<nn::trait::Elementwise>() && op->getNumResults() == 1;
  };
  auto constant = [](Value value) {
    Operation *def = value.getDefiningOp();
    return def && def->hasTrait<OpTrait::ConstantLike>();
  };
  auto shape = [](Value v) { return cast<ShapedType>(v.getType()).getShape(); };
  auto available = [&](Value value) {
    if (isa<BlockArgument>(value) || found.contains(value.getDefiningOp()))
      return true;
    return llvm::any_of(value.getUsers(), [&](Operation *user) {
      return !forward.contains(user) && user != terminator;
    });
  };
  for (Operation *op : forwardOps) {
    if (!elementwise(op))
      continue;
    // Read by forward elementwise ops at their own shape: a value they
    // broadcast (a row's 1 / sqrt(var + eps)) is small and kept.
    Value result = op->getResult(0);
    bool fused = llvm::all_of(result.getUsers(), [&](Operation *user) {
      return !forward.contains(user) ||
             (elementwise(user) && shape(user->getResult(0)) == shape(result));
    });
    if (!fused || llvm::is_contained(result.getUsers(), terminator))
      continue;
    SmallVector<Value> tensors;
    for (Value operand : op->getOperands())
      if (!constant(operand))
        tensors.push_back(operand);
    if (tensors.size() == 1 && available(tensors.front()))
      found.insert(op);
  }
  return found;
}

/// Clones each forward op that `recompute` selects and the backward uses
/// just before its first backward use, and points the backward's uses at
/// the clone. Visiting the forward last to first, a clone's selected
/// operands are cloned after it is made: their first backward use is at the
/// latest that clone, so they land before it. The clones read the forward
/// values they start from through train.recompute_barrier, so that CSE
/// does not merge them back. Returns the ops cloned.
int64_t recomputeInBackward(ArrayRef<Operation *> forwardOps,
                            Operation *terminator, RecomputeFn recompute) {
  DenseSet<Operation *> forward(forwardOps.begin(), forwardOps.end());
  SmallVector<Operation *> clones;
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (!recompute(op))
      continue;
    SmallVector<OpOperand *> backwardUses;
    Operation *first = nullptr;
    for (Value result : op->getResults())
      for (OpOperand &use : result.getUses()) {
        Operation *user = use.getOwner();
        if (forward.contains(user) || user == terminator)
          continue;
        backwardUses.push_back(&use);
        if (!first || user->isBeforeInBlock(first))
          first = user;
      }
    if (backwardUses.empty())
      continue;
    OpBuilder builder(first);
    Operation *clone = builder.clone(*op);
    for (OpOperand *use : backwardUses)
      use->set(clone->getResult(cast<OpResult>(use->get()).getResultNumber()));
    clones.push_back(clone);
  }
  // One barrier per forward value the clones read, before the first of
  // them (the value itself dominates the whole backward).
  DenseSet<Operation *> cloned(clones.begin(), clones.end());
  DenseMap<Value, Operation *> barriers;
  for (Operation *clone : clones)
    for (OpOperand &operand : clone->getOpOperands()) {
      Value value = operand.get();
      // A constant needs none: merged or not, it is the same constant (and
      // a barrier would keep a cast of it from folding).
      Operation *def = value.getDefiningOp();
      if (cloned.contains(def) || !isa<RankedTensorType>(value.getType()) ||
          (def && def->hasTrait<OpTrait::ConstantLike>()))
        continue;
      Operation *&barrier = barriers[value];
      if (!barrier) {
        OpBuilder builder(clone);
        barrier = RecomputeBarrierOp::create(builder, value.getLoc(), value);
      } else if (clone->isBeforeInBlock(barrier)) {
        barrier->moveBefore(clone);
      }
      operand.set(barrier->getResult(0));
    }
  return clones.size();
}

/// Builds `@<callee>_grad...`: the callee's results followed by the gradient
/// of result 0 with respect to the arguments in `wrt`. With `seeded`, the
/// function takes a trailing tensor<f32>, the adjoint of result 0 the
/// backward starts from (loss scaling), instead of 1. The backward
/// recomputes the forward ops `policy` selects; `recomputed` counts them.
FailureOr<func::FuncOp> buildGradientFunction(func::FuncOp callee,
                                              ArrayRef<int64_t> wrt,
                                              bool seeded, SymbolTable &symbols,
                                              const RecomputePolicy &policy,
                                              int64_t &recomputed) {
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

  // A scan's backward reads the carries entering each step and the step's
  // contractions: the forward saves them.
  for (auto scan : llvm::make_early_inc_range(body.getOps<nn::ScanOp>()))
    if (!scan.getSavesCarries())
      nn::ScanOp::saveForBackward(scan);

  // Activity: values that depend on a differentiated argument (forward) and
  // that the loss depends on (backward).
  SmallVector<Value> sources;
  for (int64_t index : wrt)
    sources.push_back(body.getArgument(index));
  DenseSet<Value> varied, useful;
  if (failed(nn::findActiveValues(body, sources, ret.getOperand(0), varied,
                                  useful)))
    return failure();
  auto isActive = [&](Value v) {
    return varied.contains(v) && useful.contains(v);
  };

  // Reverse sweep, emitted just before the return.
  builder.setInsertionPoint(ret);
  DenseMap<Value, Value> adjoints;
  nn::NNBuilder nnb(builder, ret.getLoc());
  Value loss = ret.getOperand(0);
  if (isActive(loss))
    adjoints[loss] = seed ? seed : nnb.scalar(builder.getF32Type(), 1.0);

  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  if (failed(nn::reverseSweep(builder, forwardOps, isActive, adjoints)))
    return failure();

  DenseSet<Value> activations, cuts;
  if (policy.segments)
    findCuts(body, forwardOps, wrt, varied, activations, cuts);
  DenseSet<Operation *> fusedElementwise;
  if (policy.elementwise)
    fusedElementwise = findFusedElementwise(forwardOps, ret);
  auto recompute = [&](Operation *op) {
    if (policy.nodes && namedBy(op, *policy.nodes))
      return true;
    if (fusedElementwise.contains(op))
      return true;
    // Between cuts: ops computing differentiated activations other than a
    // cut (masks computed from the inputs alone are small and kept).
    return policy.segments && op->getNumResults() > 0 &&
           llvm::all_of(op->getResults(), [&](Value v) {
             return activations.contains(v) && varied.contains(v) &&
                    !cuts.contains(v);
           });
  };
  recomputed += recomputeInBackward(forwardOps, ret, recompute);

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
    std::optional<llvm::Regex> nodes;
    if (!recomputeNodes.empty()) {
      nodes.emplace("^(" + recomputeNodes + ")$");
      std::string error;
      if (!nodes->isValid(error)) {
        module.emitError("recompute-nodes: invalid regex '")
            << recomputeNodes << "': " << error;
        return signalPassFailure();
      }
    }
    RecomputePolicy policy;
    policy.segments = recomputeSegments;
    policy.elementwise = recomputeElementwise;
    policy.nodes = nodes ? &*nodes : nullptr;
    int64_t recomputed = 0;
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
        FailureOr<func::FuncOp> built = buildGradientFunction(
            callee, op.getWrt(), seeded, symbols, policy, recomputed);
        if (failed(built))
          return signalPassFailure();
        gradFn = *built;
      }
      OpBuilder builder(op);
      SmallVector<Value> args(op.getArgs());
      if (seeded)
        args.push_back(tensor::FromElementsOp::create(
            builder, op.getLoc(),
            RankedTensorType::get({}, op.getSeed().getType()),
            ValueRange{op.getSeed()}));
      auto call = func::CallOp::create(builder, op.getLoc(), gradFn, args);
      op.replaceAllUsesWith(call.getResults());
      op.erase();
    }
    numRecomputed += recomputed;
    if (policy.segments || policy.nodes) {
      if (recomputed)
        emitRemark(module.getLoc())
            << "recomputing " << recomputed << " op(s) in the backward";
      else
        emitWarning(module.getLoc())
            << "nothing to recompute: "
            << (policy.nodes
                    ? "the backward needs no op of a node the recomputation "
                      "regex matches"
                    : "every activation the backward needs is a cut of the "
                      "forward (a chain of layers)");
    }
  }
};

struct TrainStripRecomputeBarriersPass
    : public train::impl::TrainStripRecomputeBarriersBase<
          TrainStripRecomputeBarriersPass> {
  void runOnOperation() override {
    getOperation().walk([](RecomputeBarrierOp barrier) {
      barrier.getResult().replaceAllUsesWith(barrier.getInput());
      barrier.erase();
    });
  }
};

} // namespace
