//===- ScanVJP.cpp - backpropagation through an nn.scan ---------*- C++ -*-===//
//
// The VJP of a scan is a scan in the opposite direction (backpropagation
// through time). The adjoint of a weight the step reads is a sum over the
// steps; when each step's term is itself a sum over the step's samples (a
// weight's dW = h^T dz, a bias's column sums of dz), the whole adjoint is
// one contraction over samples and steps of the stacked step values after
// the loop, as cuDNN's and PyTorch's RNN backward compute it: one large
// product instead of T rank-N updates of the whole weight, each a pass over
// its memory.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
using namespace accrue::nn;

namespace {

/// Where a step value of a scan's body is stacked over the steps: a
/// scanned input (the value is its step) or a step output.
struct Stacked {
  bool isInput;
  int64_t index;
};

/// One step's term of a weight's adjoint that sums over the step's samples
/// (dimension 0): a^T d (`a` [N, I], `d` [N, J]), or `d` reduced over
/// `axes`, 0 among them; `aAt` and `dAt` say where `a` and `d` are stacked.
struct SampleSum {
  Value a, d;
  SmallVector<int64_t> axes;
  RankedTensorType type;
  Stacked aAt = {}, dAt = {};
};

bool isRows(Value v, int64_t batch) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getRank() == 2 && type.getDimSize(0) == batch;
}

/// Splits `term`, what a step adds to a running sum, into sums over the
/// step's samples; fails when some part is not one.
LogicalResult splitSampleSums(Value term, int64_t batch,
                              SmallVectorImpl<SampleSum> &sums) {
  auto type = cast<RankedTensorType>(term.getType());
  Operation *op = term.getDefiningOp();
  if (!op)
    return failure();
  if (auto add = dyn_cast<AddOp>(op))
    return success(add.getLhs().getType() == type &&
                   add.getRhs().getType() == type &&
                   succeeded(splitSampleSums(add.getLhs(), batch, sums)) &&
                   succeeded(splitSampleSums(add.getRhs(), batch, sums)));
  // (a^T d)^T = d^T a: the adjoint of a weight the step reads transposed.
  bool transposed = false;
  if (auto t = dyn_cast<TransposeOp>(op);
      t && llvm::equal(t.getPerm(), ArrayRef<int64_t>{1, 0})) {
    transposed = true;
    op = t.getInput().getDefiningOp();
    if (!op)
      return failure();
  }
  Value a, d;
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    auto t = matmul.getLhs().getDefiningOp<TransposeOp>();
    if (t && llvm::equal(t.getPerm(), ArrayRef<int64_t>{1, 0}))
      a = t.getInput(), d = matmul.getRhs();
  } else if (auto gemm = dyn_cast<GemmOp>(op)) {
    if (gemm.getTransA() && !gemm.getTransB() && !gemm.getC() &&
        gemm.getAlpha().convertToDouble() == 1.0)
      a = gemm.getA(), d = gemm.getB();
  }
  if (a) {
    if (!isRows(a, batch) || !isRows(d, batch))
      return failure();
    if (transposed)
      std::swap(a, d);
    sums.push_back({a, d, {}, type});
    return success();
  }
  if (transposed)
    return failure();
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    op = reshape.getInput().getDefiningOp();
  auto reduce = dyn_cast_if_present<ReduceSumOp>(op);
  if (!reduce || reduce.getAxes().empty() || reduce.getAxes().front() != 0 ||
      cast<RankedTensorType>(reduce.getInput().getType()).getDimSize(0) !=
          batch)
    return failure();
  sums.push_back(
      {Value(), reduce.getInput(), llvm::to_vector(reduce.getAxes()), type});
  return success();
}

/// Where `v`, a step value of `scan`'s body, is stacked; a step output not
/// yet yielded is appended to `outputs`, the values the rebuilt body yields
/// as outputs.
Stacked stackOf(ScanOp scan, Value v, SmallVectorImpl<Value> &outputs) {
  int64_t carries = scan.getNumCarries();
  if (auto arg = dyn_cast<BlockArgument>(v))
    if (arg.getArgNumber() >= carries &&
        arg.getArgNumber() < carries + scan.getNumScanned())
      return {true, static_cast<int64_t>(arg.getArgNumber())};
  const auto *it = llvm::find(outputs, v);
  if (it != outputs.end())
    return {false, static_cast<int64_t>(it - outputs.begin())};
  outputs.push_back(v);
  return {false, static_cast<int64_t>(outputs.size()) - 1};
}

/// Moves the running sums of `back`'s carries [first, first + count), each
/// starting at zero, whose step terms all sum over the step's samples, after
/// the loop (see the file comment). Returns the scan that replaces `back`
/// (`back` itself when no sum moves; its results must be unused) and sets
/// `sums` to the final value of each of those carries.
ScanOp sumAfterLoop(OpBuilder &b, ScanOp back, int64_t first, int64_t count,
                    SmallVectorImpl<Value> &sums) {
  Block &body = back.getBodyBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  int64_t carries = back.getNumCarries(), steps = back.getNumSteps();
  int64_t batch =
      cast<RankedTensorType>(back.getScanned().front().getType()).getDimSize(0);
  SmallVector<std::pair<int64_t, SmallVector<SampleSum>>> moved;
  for (int64_t c = first; c < first + count; ++c) {
    BlockArgument running = body.getArgument(c);
    auto add = yield.getValues()[c].getDefiningOp<AddOp>();
    if (!add || !running.hasOneUse() || !add->hasOneUse() ||
        add.getType() != running.getType() ||
        (add.getLhs() != running && add.getRhs() != running))
      continue;
    SmallVector<SampleSum> terms;
    if (succeeded(splitSampleSums(add.getLhs() == running ? add.getRhs()
                                                          : add.getLhs(),
                                  batch, terms)))
      moved.push_back({c, std::move(terms)});
  }
  sums.assign(back.getResults().begin() + first,
              back.getResults().begin() + first + count);
  if (moved.empty())
    return back;

  // The step values the sums read, stacked.
  SmallVector<Value> outputs(yield.getValues().drop_front(carries));
  for (auto &[c, terms] : moved)
    for (SampleSum &term : terms) {
      if (term.a)
        term.aAt = stackOf(back, term.a, outputs);
      term.dAt = stackOf(back, term.d, outputs);
    }

  // The scan without those carries, yielding the new outputs.
  llvm::BitVector gone(body.getNumArguments());
  for (auto &[c, terms] : moved)
    gone.set(c);
  SmallVector<Value> inputs, values;
  SmallVector<Type> types;
  for (int64_t c = 0; c < carries; ++c)
    if (!gone.test(c)) {
      inputs.push_back(back.getInputs()[c]);
      values.push_back(yield.getValues()[c]);
      types.push_back(back.getResult(c).getType());
    }
  llvm::append_range(inputs, back.getInputs().drop_front(carries));
  for (Value v : outputs) {
    values.push_back(v);
    types.push_back(ScanOp::stackedType(v.getType(), steps));
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(back);
  Location loc = back.getLoc();
  auto scan = ScanOp::create(b, loc, types, inputs, carries - moved.size(),
                             back.getNumScanned(), back.getReverse(),
                             /*saves_carries=*/false);
  scan.getBody().takeBody(back.getBody());
  b.setInsertionPoint(yield);
  YieldOp::create(b, yield.getLoc(), values);
  SmallVector<Operation *> adds;
  for (auto &[c, terms] : moved)
    adds.push_back(yield.getValues()[c].getDefiningOp());
  yield.erase();
  for (Operation *add : adds)
    add->erase();
  body.eraseArguments(gone);

  // Each sum: the terms' contractions over samples and steps.
  b.setInsertionPointAfter(scan);
  NNBuilder nn(b, loc);
  auto stacked = [&](Stacked s) -> Value {
    return s.isInput ? back.getInputs()[s.index]
                     : scan.getStackedOutputs()[s.index];
  };
  for (auto &[c, terms] : moved) {
    Value total;
    for (SampleSum &term : terms) {
      Value sum;
      Value d = stacked(term.dAt);
      if (term.a) {
        // [N, T, I]^T [N, T, J] as one product over N x T rows.
        sum = nn.rowsProduct(stacked(term.aAt), d);
      } else {
        // The step's axes over [N, ...] are the stacked value's over
        // [N, T, ...], T among them.
        SmallVector<int64_t> axes = {0, 1};
        for (int64_t axis : ArrayRef(term.axes).drop_front())
          axes.push_back(axis + 1);
        sum = ReduceSumOp::create(b, loc, d, axes, /*keepdims=*/true);
      }
      sum = nn.reshape(sum, term.type);
      total = total ? nn.add(total, sum) : sum;
    }
    sums[c - first] = total;
  }
  int64_t next = 0;
  for (int64_t c = first; c < first + count; ++c)
    if (!gone.test(c))
      sums[c - first] = scan.getResult(first + next++);
  back.erase();
  return scan;
}

} // namespace

// The backward is a scan in the opposite direction. Its carries are the
// adjoints of the forward carries and the running sums of the invariants'
// adjoints (those that sum over samples then move after the loop); it scans
// the saved carries, the forward's scanned inputs, the step outputs'
// adjoints and the forward's stacked step values it reads; its body
// recomputes the rest of the forward step from the carries entering it and
// differentiates it.
LogicalResult ScanOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  int64_t carries = getNumCarries(), outputs = getNumOutputs();
  if (!getSavesCarries())
    return emitOpError("needs its carries saved to be differentiated");
  for (Value v : dys.drop_front(carries + outputs))
    if (v)
      return emitOpError("saved carries cannot be differentiated");
  for (Value init : getCarryInits())
    if (!isFloatTensor(init))
      return emitOpError("cannot differentiate integer carries");
  auto zerosLike = [&](OpBuilder &builder, Type type) {
    return NNBuilder(builder, loc).splat(cast<RankedTensorType>(type), 0.0);
  };

  // Backward inputs: carries (adjoints, then invariant adjoint sums),
  // scanned (saved carries, forward scanned, output adjoints), invariants.
  SmallVector<Value> inputs;
  for (int64_t i = 0; i < carries; ++i)
    inputs.push_back(dys[i] ? dys[i]
                            : zerosLike(b, getCarryInits()[i].getType()));
  SmallVector<int64_t> sums; // invariant indices with an adjoint sum
  for (auto [i, inv] : llvm::enumerate(getInvariants()))
    if (isFloatTensor(inv)) {
      sums.push_back(i);
      inputs.push_back(zerosLike(b, inv.getType()));
    }
  int64_t backCarries = inputs.size();
  llvm::append_range(inputs, getSavedCarries());
  llvm::append_range(inputs, getScanned());
  SmallVector<int64_t> seeded; // outputs with an adjoint
  for (int64_t i = 0; i < outputs; ++i)
    if (Value dy = dys[carries + i]) {
      seeded.push_back(i);
      inputs.push_back(dy);
    }
  // Step values the forward stacks (its contractions', see
  // saveForBackward) are read, not recomputed.
  Block &forward = getBodyBlock();
  auto yield = cast<YieldOp>(forward.getTerminator());
  DenseMap<Value, int64_t> stackedAt;
  for (int64_t i = 0; i < outputs; ++i)
    stackedAt.try_emplace(yield.getValues()[carries + i], i);
  SmallVector<Operation *> reread;
  int64_t firstReread = inputs.size();
  for (Operation &op : forward.without_terminator())
    if (op.getNumRegions() == 0 && op.getNumResults() != 0 &&
        llvm::all_of(op.getResults(),
                     [&](Value v) { return stackedAt.contains(v); })) {
      reread.push_back(&op);
      for (Value v : op.getResults())
        inputs.push_back(getStackedOutputs()[stackedAt.lookup(v)]);
    }
  int64_t backScanned = inputs.size() - backCarries;
  llvm::append_range(inputs, getInvariants());

  // Result types: the carries, then one stacked adjoint per float scanned
  // input.
  SmallVector<Type> types;
  for (int64_t i = 0; i < backCarries; ++i)
    types.push_back(inputs[i].getType());
  SmallVector<int64_t> stepAdjoints; // float scanned inputs
  for (auto [i, x] : llvm::enumerate(getScanned()))
    if (isFloatTensor(x)) {
      stepAdjoints.push_back(i);
      types.push_back(x.getType());
    }
  auto back = ScanOp::create(b, loc, types, inputs, backCarries, backScanned,
                             !getReverse(), /*saves_carries=*/false);

  Block *block = &back.addBody();
  auto arg = [&](int64_t i) { return block->getArgument(i); };
  int64_t scannedForward = getNumScanned();
  // The forward step, recomputed from the carries entering it.
  IRMapping mapping;
  for (int64_t i = 0; i < carries; ++i)
    mapping.map(forward.getArgument(i), arg(backCarries + i));
  for (int64_t i = 0; i < scannedForward; ++i)
    mapping.map(forward.getArgument(carries + i),
                arg(backCarries + carries + i));
  int64_t invariantArgs = backCarries + backScanned;
  for (int64_t i = 0, e = getInvariants().size(); i < e; ++i)
    mapping.map(forward.getArgument(carries + scannedForward + i),
                arg(invariantArgs + i));
  OpBuilder inner = OpBuilder::atBlockEnd(block);
  SmallVector<Operation *> ops;
  for (Operation &op : forward.without_terminator()) {
    Operation *clone = inner.clone(op, mapping);
    // A scan in the step is differentiated like this one: from what it
    // saves.
    if (auto nested = dyn_cast<ScanOp>(clone);
        nested && !nested.getSavesCarries()) {
      clone = saveForBackward(nested);
      for (auto [from, to] : llvm::zip(op.getResults(), clone->getResults()))
        mapping.map(from, to);
    }
    ops.push_back(clone);
  }
  auto yielded = [&](int64_t i) {
    return mapping.lookupOrDefault(yield.getValues()[i]);
  };

  // Differentiate it: sources are every float argument of the step, sinks
  // the seeded yields.
  DenseMap<Value, Value> adjoints;
  SmallVector<Value> sinks;
  for (int64_t i = 0; i < carries; ++i) {
    accumulateAdjoint(inner, loc, adjoints, yielded(i), arg(i));
    sinks.push_back(yielded(i));
  }
  for (auto [k, i] : llvm::enumerate(seeded)) {
    Value dy = arg(backCarries + carries + scannedForward + k);
    accumulateAdjoint(inner, loc, adjoints, yielded(carries + i), dy);
    sinks.push_back(yielded(carries + i));
  }
  SmallVector<Value> sources;
  for (BlockArgument a : block->getArguments().drop_front(backCarries))
    if (isFloatTensor(a))
      sources.push_back(a);
  DenseSet<Value> varied, useful;
  if (failed(findActiveValues(*block, sources, sinks, varied, useful)))
    return failure();
  auto isActive = [&](Value v) {
    return varied.contains(v) && useful.contains(v);
  };
  if (failed(reverseSweep(inner, ops, isActive, adjoints)))
    return failure();
  // The values read from the forward's stacks replace their recomputation
  // (the sweep differentiated it, so that adjoints reach its operands).
  int64_t readArg = firstReread;
  for (Operation *op : reread) {
    Operation *clone = mapping.lookup(op->getResult(0)).getDefiningOp();
    for (Value v : clone->getResults())
      v.replaceAllUsesWith(arg(readArg++));
    clone->erase();
  }

  SmallVector<Value> next;
  auto adjointOr0 = [&](Value v) {
    Value adj = adjoints.lookup(v);
    return adj ? adj : zerosLike(inner, v.getType());
  };
  for (int64_t i = 0; i < carries; ++i)
    next.push_back(adjointOr0(arg(backCarries + i)));
  for (auto [k, i] : llvm::enumerate(sums)) {
    Value sum = arg(carries + k);
    if (Value adj = adjoints.lookup(arg(invariantArgs + i)))
      sum = NNBuilder(inner, loc).add(sum, adj);
    next.push_back(sum);
  }
  for (int64_t i : stepAdjoints)
    next.push_back(adjointOr0(arg(backCarries + carries + i)));
  YieldOp::create(inner, loc, next);
  SmallVector<Value> invariantSums;
  back = sumAfterLoop(b, back, carries, sums.size(), invariantSums);

  // Operand adjoints: carry inits, scanned inputs, invariants.
  for (int64_t i = 0; i < carries; ++i)
    dxs.push_back(back.getResult(i));
  SmallVector<Value> scannedAdjoints(scannedForward);
  for (auto [k, i] : llvm::enumerate(stepAdjoints))
    scannedAdjoints[i] = back.getStackedOutputs()[k];
  llvm::append_range(dxs, scannedAdjoints);
  SmallVector<Value> invariantAdjoints(getInvariants().size());
  for (auto [k, i] : llvm::enumerate(sums))
    invariantAdjoints[i] = invariantSums[k];
  llvm::append_range(dxs, invariantAdjoints);
  return success();
}
