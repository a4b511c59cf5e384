//===- FuseKernels.cpp - neighbouring ops as one kernel ---------*- C++ -*-===//
//
// On buffers, after bufferization and before the workspace is planned: two
// elementwise linalg ops that follow each other (nothing with memory
// effects between them) and run over the same points become one op, so
// one kernel, when every buffer one of them writes and the other touches
// is accessed by both at the same element of the same point. A thread then
// does, for its point, what the two kernels' threads did for that point,
// in the same order: the same values. What the second reads of what the
// first writes is passed in registers; a buffer the first writes that
// nothing reads afterwards (a temporary between the two) is not written at
// all, and its memory is not planned. This counts where a tensor-level
// fusion does not: an intermediate with several users is still computed
// once (and stored, for the others), and an op that writes in place.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/Passes.h"

#include "BufferOps.h"
#include "WarpReductions.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAFUSEKERNELS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;

namespace {

/// The buffer a view looks into: a memref.alloc, a global or a block
/// argument (the step's arguments are distinct buffers).
using accrue::cuda::viewRoot;
using namespace accrue::cuda;

/// The buffers `op`'s body reads itself (a first stage's loop over a row),
/// at elements of other points.
SmallVector<Value> bodyBuffers(linalg::LinalgOp op) {
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op->getRegion(0), captured);
  SmallVector<Value> buffers;
  for (Value value : captured)
    if (isa<MemRefType>(value.getType()))
      buffers.push_back(viewRoot(value));
  return buffers;
}

/// How two ops become one: the fused op's loops (B's, or a warp
/// reduction A's, whose points B's loops are) and each op's point of them
/// (a loop of one iteration may have no counterpart: it reads as 0).
struct Plan {
  AffineMap toA, toB;
  SmallVector<int64_t> ranges;
  /// A is a warp reduction and B its epilogue: the fused op's last loop is
  /// the lanes', which B's maps do not use.
  bool epilogue = false;
};

/// A buffer operand of an op, its map in the fused op's loops.
struct Access {
  Value buffer;
  AffineMap map;
  bool writes;
  AffineExpr element; // elementOf, in the fused loops
};

SmallVector<Access> accessesOf(linalg::LinalgOp op, AffineMap toOp,
                               ArrayRef<int64_t> ranges) {
  SmallVector<Access> accesses;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand).compose(toOp);
    accesses.push_back({operand.get(), map, op.isDpsInit(&operand),
                        elementOf(operand.get(), map, ranges)});
  }
  return accesses;
}

/// Whether `map` (of the fused loops) gives each point its own element:
/// every loop of the points (all but the lanes') of more than one
/// iteration is one of its results, once; the lanes' is none.
bool pointwise(AffineMap map, const Plan &plan) {
  unsigned points = plan.ranges.size() - (plan.epilogue ? 1 : 0);
  if (!map.isProjectedPermutation(/*allowZeroInResults=*/true) ||
      (plan.epilogue && map.isFunctionOfDim(points)))
    return false;
  for (unsigned d = 0; d < points; ++d)
    if (plan.ranges[d] != 1 && !map.isFunctionOfDim(d))
      return false;
  return true;
}

/// Whether `x` and `y` reach the same element of the same buffer at every
/// point of the fused loops (through views, perhaps different ones).
bool sameElement(const Access &x, const Access &y) {
  if (x.buffer == y.buffer && x.map == y.map)
    return true;
  return viewRoot(x.buffer) == viewRoot(y.buffer) && x.element &&
         x.element == y.element;
}

/// Whether everything A and B do to a buffer one of them writes happens
/// at the same element of the same point of the fused loops.
bool sameElements(linalg::LinalgOp a, linalg::LinalgOp b, const Plan &plan) {
  SmallVector<Access> first = accessesOf(a, plan.toA, plan.ranges);
  SmallVector<Access> second = accessesOf(b, plan.toB, plan.ranges);
  // What a body reads itself, the other op must not write.
  auto writes = [](ArrayRef<Access> accesses, ArrayRef<Value> roots) {
    return llvm::any_of(accesses, [&](const Access &access) {
      return access.writes &&
             llvm::is_contained(roots, viewRoot(access.buffer));
    });
  };
  if (writes(first, bodyBuffers(b)) || writes(second, bodyBuffers(a)))
    return false;
  for (const Access &x : first)
    for (const Access &y : second) {
      if (!x.writes && !y.writes)
        continue;
      if (viewRoot(x.buffer) != viewRoot(y.buffer))
        continue;
      // An epilogue writes the reduction's outputs only through the same
      // view (see alignEpilogue).
      bool same = plan.epilogue && x.writes && y.writes
                      ? x.buffer == y.buffer && x.map == y.map
                      : sameElement(x, y);
      if (!same || !pointwise(x.map, plan) || !pointwise(y.map, plan))
        return false;
    }
  if (!plan.epilogue)
    return true;
  // An epilogue runs, read as linalg reads the op, at every lane and
  // writes its results at the last (see fuse): it may write nothing the op
  // reads (but the reduction's outputs, which it reads from registers).
  SmallVector<Value> read;
  for (Value in : a.getDpsInputs())
    read.push_back(viewRoot(in));
  for (Value in : b.getDpsInputs())
    if (!llvm::is_contained(a.getDpsInits(), in))
      read.push_back(viewRoot(in));
  for (Value out : b.getDpsInits())
    if (llvm::is_contained(read, viewRoot(out)))
      return false;
  return true;
}

/// The map from `to`'s loops to `from`'s that pairs their loops of more
/// than one iteration in order (the others read as 0), where those have
/// the same extents.
std::optional<AffineMap> pairLoops(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                                   MLIRContext *context) {
  SmallVector<unsigned> toDims;
  for (auto [d, range] : llvm::enumerate(to))
    if (range != 1)
      toDims.push_back(d);
  SmallVector<AffineExpr> results;
  unsigned next = 0;
  for (int64_t range : from) {
    if (range == 1) {
      results.push_back(getAffineConstantExpr(0, context));
      continue;
    }
    if (next == toDims.size() || to[toDims[next]] != range)
      return std::nullopt;
    results.push_back(getAffineDimExpr(toDims[next++], context));
  }
  if (next != toDims.size())
    return std::nullopt;
  return AffineMap::get(to.size(), 0, results, context);
}

/// B's point in A's loops, when A's loop ranges are B's reordered: from a
/// buffer A writes and B reads (A's element of B's point), else pairing
/// their loops in order (loops of one iteration aside).
std::optional<Plan> alignLoops(linalg::LinalgOp a, linalg::LinalgOp b) {
  SmallVector<int64_t> rangesA = a.getStaticLoopRanges();
  SmallVector<int64_t> rangesB = b.getStaticLoopRanges();
  SmallVector<AffineMap> candidates;
  for (OpOperand &out : a.getDpsInitsMutable())
    for (OpOperand &in : b->getOpOperands()) {
      if (in.get() != out.get())
        continue;
      AffineMap written = a.getMatchingIndexingMap(&out);
      AffineMap read = b.getMatchingIndexingMap(&in);
      if (written.isPermutation() && read.isPermutation())
        candidates.push_back(inversePermutation(written).compose(read));
    }
  AffineMap identity =
      AffineMap::getMultiDimIdentityMap(rangesB.size(), b.getContext());
  if (rangesA == rangesB)
    candidates.push_back(identity);
  if (std::optional<AffineMap> paired =
          pairLoops(rangesA, rangesB, a.getContext()))
    candidates.push_back(*paired);
  for (AffineMap toA : candidates) {
    bool matches = toA.getNumResults() == rangesA.size();
    for (auto [d, expr] : llvm::enumerate(toA.getResults())) {
      auto dim = dyn_cast<AffineDimExpr>(expr);
      matches &=
          dim ? rangesA[d] == rangesB[dim.getPosition()] : rangesA[d] == 1;
    }
    Plan plan{toA, identity, rangesB};
    if (matches && sameElements(a, b, plan))
      return plan;
  }
  return std::nullopt;
}

/// Whether warp reduction `op`'s running value starts, at lane 0, from a
/// constant rather than what its output held (SplitReductions' warp
/// reductions into a fill): its output may then be any buffer.
bool startsFromConstant(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  BlockArgument out = body->getArgument(op.getNumDpsInputs());
  if (op.getNumDpsInits() != 1 || !out.hasOneUse())
    return false;
  auto select = dyn_cast<arith::SelectOp>(*out.getUsers().begin());
  return select && select.getFalseValue() == out &&
         select.getTrueValue() != out;
}

/// The plan making B the epilogue of warp reduction A: B's loops are A's
/// points (all of A's loops but the last, the lanes', paired in order,
/// loops of one iteration aside).
std::optional<Plan> alignEpilogue(linalg::LinalgOp a, linalg::LinalgOp b) {
  SmallVector<int64_t> rangesA = a.getStaticLoopRanges();
  SmallVector<int64_t> rangesB = b.getStaticLoopRanges();
  if (rangesA.empty() || a.getNumDpsInits() == 0)
    return std::nullopt;
  MLIRContext *context = a.getContext();
  SmallVector<int64_t> points(ArrayRef<int64_t>(rangesA).drop_back());
  std::optional<AffineMap> toB;
  if (points == rangesB) {
    SmallVector<AffineExpr> dims;
    for (unsigned d = 0; d < points.size(); ++d)
      dims.push_back(getAffineDimExpr(d, context));
    toB = AffineMap::get(rangesA.size(), 0, dims, context);
  } else {
    // The lanes' loop is never paired with B's.
    points.push_back(1);
    toB = pairLoops(rangesB, points, context);
  }
  if (!toB)
    return std::nullopt;
  Plan plan{AffineMap::getMultiDimIdentityMap(rangesA.size(), context), *toB,
            rangesA, /*epilogue=*/true};
  if (!sameElements(a, b, plan))
    return std::nullopt;
  // B writing A's output over: A's running value moves to a buffer of its
  // own (see fuse), which it may only where it starts from a constant.
  for (Value out : b.getDpsInits())
    if (llvm::is_contained(a.getDpsInits(), out) && !startsFromConstant(a))
      return std::nullopt;
  return plan;
}

/// Whether `op` writes all of `root` (its output, a permutation of its
/// loops) without reading what it held.
bool overwrites(Operation *op, Value root) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || linalgOp.getNumReductionLoops() != 0)
    return false;
  bool writes = false;
  for (OpOperand &operand : op->getOpOperands()) {
    if (viewRoot(operand.get()) != root)
      continue;
    if (!linalgOp.isDpsInit(&operand) || operand.get() != root ||
        !linalgOp.getMatchingIndexingMap(&operand).isPermutation() ||
        linalgOp.payloadUsesValueFromOperand(&operand))
      return false;
    writes = true;
  }
  return writes;
}

/// Whether any op in `range` (or nested in it) touches a view of `root`;
/// `overwritten` says whether the first that does writes all of it first.
bool touches(Block::iterator begin, Block::iterator end, Value root,
             bool &overwritten) {
  for (Operation &op : llvm::make_range(begin, end)) {
    bool uses = false;
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (isa<MemRefType>(operand.getType()) && viewRoot(operand) == root)
          uses = true;
    });
    if (!uses)
      continue;
    overwritten = overwrites(&op, root);
    return true;
  }
  return false;
}

/// Whether the contents of `buffer` after `op` are never read: the next
/// op that touches it (after `op`, in its block, around its loops for a
/// buffer from outside them, then after them) overwrites it, or none does
/// and it was allocated inside.
bool deadAfter(Operation *op, Value buffer) {
  Value root = viewRoot(buffer);
  if (!root.getDefiningOp<memref::AllocOp>())
    return false;
  Operation *at = op;
  while (at) {
    Block *block = at->getBlock();
    bool overwritten = false;
    if (touches(std::next(at->getIterator()), block->end(), root, overwritten))
      return overwritten;
    if (root.getParentBlock() == block)
      return true;
    Operation *parent = block->getParentOp();
    if (isa<LoopLikeOpInterface>(parent) &&
        touches(block->begin(), at->getIterator(), root, overwritten))
      return overwritten;
    if (isa<func::FuncOp>(parent))
      return false;
    at = parent;
  }
  return false;
}

/// Replaces `a` and `b` (in that order, nothing with memory effects
/// between) by one generic op at `b` over the loops of `plan`; fails,
/// changing nothing, where the op would lose a transpose's tiled form.
FailureOr<linalg::GenericOp> fuse(RewriterBase &rewriter, linalg::LinalgOp a,
                                  linalg::LinalgOp b, const Plan &plan) {
  // A slot is an operand of the fused op; each block argument of A and B
  // reads one, or, for what B reads of what A writes, A's yielded value.
  struct Slot {
    Value buffer;
    AffineMap map;
  };
  SmallVector<Slot> inputs, outputs;
  auto slotOf = [](SmallVector<Slot> &slots, Value buffer,
                   AffineMap map) -> unsigned {
    for (auto [k, slot] : llvm::enumerate(slots))
      if (slot.buffer == buffer && slot.map == map)
        return k;
    slots.push_back({buffer, map});
    return slots.size() - 1;
  };
  auto mapOf = [&](linalg::LinalgOp op, OpOperand &operand) {
    return op.getMatchingIndexingMap(&operand).compose(op == a ? plan.toA
                                                               : plan.toB);
  };
  // Whether `x` of A and `y` of B reach the same element at every point.
  auto same = [&](OpOperand &x, OpOperand &y) {
    if (!isa<MemRefType>(x.get().getType()) ||
        !isa<MemRefType>(y.get().getType()))
      return false;
    AffineMap mapX = mapOf(a, x), mapY = mapOf(b, y);
    return sameElement(
        {x.get(), mapX, false, elementOf(x.get(), mapX, plan.ranges)},
        {y.get(), mapY, false, elementOf(y.get(), mapY, plan.ranges)});
  };
  enum Kind { Input, Output, Forwarded, Unused };
  struct Source {
    Kind kind;
    unsigned index;
  };
  // Outputs: A's first (a warp reduction's running value stays its first
  // output), then B's; one slot where both write the same elements, which
  // takes B's value.
  SmallVector<int> outputOfA(a.getNumDpsInits(), -1);
  SmallVector<unsigned> outputOfB;
  for (auto [k, out] : llvm::enumerate(a.getDpsInitsMutable())) {
    Value buffer = out.get();
    AffineMap map = mapOf(a, out);
    bool rewritten = llvm::any_of(b.getDpsInitsMutable(), [&](OpOperand &o) {
      return o.get() == buffer && mapOf(b, o) == map;
    });
    // B writes the element through another view: A's store would be lost.
    OpOperand &mine = out;
    bool rewrittenElsewhere =
        !rewritten && llvm::any_of(b.getDpsInitsMutable(),
                                   [&](OpOperand &o) { return same(mine, o); });
    if (rewrittenElsewhere) {
      if (plan.epilogue || a.payloadUsesValueFromOperand(&out))
        return failure();
      continue;
    }
    if (plan.epilogue && rewritten) {
      // B writes over the reduction's output: the running value gets a
      // buffer of its own.
      auto type = cast<MemRefType>(buffer.getType());
      rewriter.setInsertionPoint(a);
      buffer = memref::AllocOp::create(
          rewriter, a.getLoc(),
          MemRefType::get(type.getShape(), type.getElementType()));
    } else if ((!plan.epilogue || k > 0) && !rewritten &&
               deadAfter(b, buffer) && !a.payloadUsesValueFromOperand(&out)) {
      // A temporary only B reads (not a reduction's running value).
      continue;
    }
    outputOfA[k] = slotOf(outputs, buffer, map);
  }
  for (OpOperand &out : b.getDpsInitsMutable())
    outputOfB.push_back(slotOf(outputs, out.get(), mapOf(b, out)));

  SmallVector<Source> argsA, argsB;
  for (OpOperand &operand : a->getOpOperands()) {
    if (a.isDpsInit(&operand)) {
      int slot = outputOfA[operand.getOperandNumber() - a.getNumDpsInputs()];
      argsA.push_back(slot >= 0 ? Source{Output, static_cast<unsigned>(slot)}
                                : Source{Unused, 0}); // unread by A's body
      continue;
    }
    argsA.push_back({Input, slotOf(inputs, operand.get(), mapOf(a, operand))});
  }
  for (OpOperand &operand : b->getOpOperands()) {
    AffineMap map = mapOf(b, operand);
    std::optional<unsigned> written;
    for (auto [k, out] : llvm::enumerate(a.getDpsInitsMutable()))
      if (same(out, operand))
        written = k;
    bool readsOld =
        !b.isDpsInit(&operand) || b.payloadUsesValueFromOperand(&operand);
    if (written && readsOld)
      argsB.push_back({Forwarded, *written});
    else if (b.isDpsInit(&operand))
      argsB.push_back(
          {Output,
           outputOfB[operand.getOperandNumber() - b.getNumDpsInputs()]});
    else
      argsB.push_back({Input, slotOf(inputs, operand.get(), map)});
  }
  // A transpose keeps its tiled form only alone with its output (with the
  // elementwise work before or after it in its body).
  if (!plan.epilogue && (isTranspose(a) || isTranspose(b))) {
    unsigned buffers = llvm::count_if(inputs, [](const Slot &slot) {
      auto type = dyn_cast<MemRefType>(slot.buffer.getType());
      return type && type.getRank() != 0;
    });
    if (outputs.size() != 1 || buffers != 1)
      return failure();
  }

  SmallVector<Value> inputValues, outputValues;
  SmallVector<AffineMap> maps;
  for (const Slot &slot : inputs) {
    inputValues.push_back(slot.buffer);
    maps.push_back(slot.map);
  }
  for (const Slot &slot : outputs) {
    outputValues.push_back(slot.buffer);
    maps.push_back(slot.map);
  }
  Location loc = rewriter.getFusedLoc({a.getLoc(), b.getLoc()});
  rewriter.setInsertionPoint(b);
  auto fused = linalg::GenericOp::create(
      rewriter, loc, TypeRange{}, inputValues, outputValues, maps,
      // The loops are B's, or the warp reduction A's for an epilogue.
      (plan.epilogue ? a : b).getIteratorTypesArray(),
      [&](OpBuilder &builder, Location, ValueRange args) {
        // Clones `op`'s body, its block arguments from `sources`, its
        // linalg.index from the fused loops through `toOp`; returns what
        // it yields.
        auto clone = [&](linalg::LinalgOp op, ArrayRef<Source> sources,
                         ArrayRef<Value> yieldedA, AffineMap toOp) {
          Block *body = op.getBlock();
          IRMapping mapping;
          for (auto [arg, source] : llvm::zip(body->getArguments(), sources)) {
            if (source.kind == Input)
              mapping.map(arg, args[source.index]);
            else if (source.kind == Output)
              mapping.map(arg, args[inputs.size() + source.index]);
            else if (source.kind == Forwarded)
              mapping.map(arg, yieldedA[source.index]);
          }
          for (Operation &bodyOp : body->without_terminator()) {
            if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
              // A loop of one iteration without a counterpart is at 0.
              AffineExpr at = toOp.getResult(index.getDim());
              Value position;
              if (auto dim = dyn_cast<AffineDimExpr>(at))
                position = linalg::IndexOp::create(builder, index.getLoc(),
                                                   dim.getPosition());
              else
                position =
                    arith::ConstantIndexOp::create(builder, index.getLoc(), 0);
              mapping.map(index.getResult(), position);
              continue;
            }
            builder.clone(bodyOp, mapping);
          }
          SmallVector<Value> values;
          for (Value value : body->getTerminator()->getOperands())
            values.push_back(mapping.lookupOrDefault(value));
          return values;
        };
        SmallVector<Value> yielded(outputs.size());
        SmallVector<Value> valuesA = clone(a, argsA, {}, plan.toA);
        for (auto [k, slot] : llvm::enumerate(outputOfA))
          if (slot >= 0)
            yielded[slot] = valuesA[k];
        SmallVector<Value> valuesB = clone(b, argsB, valuesA, plan.toB);
        // An epilogue's results are the last lane's (the point's value):
        // before it, its outputs keep what they held.
        Value last;
        if (plan.epilogue) {
          unsigned lanes = plan.ranges.size() - 1;
          Value lane = linalg::IndexOp::create(builder, loc, lanes);
          Value lastLane = arith::ConstantIndexOp::create(
              builder, loc, plan.ranges[lanes] - 1);
          last = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq,
                                       lane, lastLane);
        }
        for (auto [k, slot] : llvm::enumerate(outputOfB))
          yielded[slot] =
              last ? arith::SelectOp::create(builder, loc, last, valuesB[k],
                                             args[inputs.size() + slot])
                         .getResult()
                   : valuesB[k];
        linalg::YieldOp::create(builder, loc, yielded);
      });
  if (plan.epilogue)
    fused->setAttr(accrue::cuda::kWarpLanes, rewriter.getUnitAttr());
  rewriter.eraseOp(b);
  rewriter.eraseOp(a);
  return fused;
}

/// The buffers `op` and the ops it holds read, and those they may write
/// (a buffer whose address is taken may be written: a GEMM's output).
void accessedBy(Operation *op, SmallVector<Value> &reads,
                SmallVector<Value> &writes) {
  op->walk([&](Operation *nested) {
    if (isa<ViewLikeOpInterface>(nested))
      return; // a view accesses nothing itself
    auto linalgOp = dyn_cast<linalg::LinalgOp>(nested);
    for (OpOperand &operand : nested->getOpOperands()) {
      if (!isa<MemRefType>(operand.get().getType())) {
        // An address (and arithmetic on it) passed on: the runtime's GEMM
        // writes through it.
        SmallVector<Value> sources{operand.get()};
        while (!sources.empty()) {
          Operation *def = sources.pop_back_val().getDefiningOp();
          if (auto address =
                  dyn_cast_or_null<memref::ExtractAlignedPointerAsIndexOp>(def))
            writes.push_back(address.getSource());
          else if (def && isa<arith::ArithDialect>(def->getDialect()))
            sources.append(def->operand_begin(), def->operand_end());
        }
        continue;
      }
      bool onlyReads =
          (linalgOp && !linalgOp.isDpsInit(&operand)) ||
          isa<memref::LoadOp>(nested) ||
          (isa<memref::CopyOp>(nested) && operand.getOperandNumber() == 0);
      (onlyReads ? reads : writes).push_back(operand.get());
    }
  });
}

/// Whether `op` and `other` may touch an element one of them writes.
bool conflict(Operation *op, Operation *other) {
  SmallVector<Value> reads, writes, otherReads, otherWrites;
  accessedBy(op, reads, writes);
  accessedBy(other, otherReads, otherWrites);
  // Effects on no buffer we can name (a call given no address): anything.
  if (reads.empty() && writes.empty() && !isMemoryEffectFree(op))
    return true;
  auto overlaps = [](ArrayRef<Value> xs, ArrayRef<Value> ys) {
    return llvm::any_of(xs, [&](Value x) {
      return llvm::any_of(ys, [&](Value y) { return mayOverlap(x, y); });
    });
  };
  return overlaps(writes, otherReads) || overlaps(writes, otherWrites) ||
         overlaps(reads, otherWrites);
}

/// Moves each elementwise op up to just after the op that last wrote or
/// read what it touches (the gradient accumulation the micro-batch's end
/// holds, to the reduction or transpose computing that gradient), with the
/// views it reads through, where it fuses with that op: nothing between
/// them touches an element the moved op reads or writes (views of one
/// buffer at disjoint static spans do not meet), so every op sees the
/// values it saw.
void moveToProducers(Block &block) {
  SmallVector<linalg::LinalgOp> candidates;
  for (Operation &op : block)
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
        linalgOp && isFusible(linalgOp))
      candidates.push_back(linalgOp);
  for (linalg::LinalgOp op : candidates) {
    Operation *producer = op->getPrevNode();
    bool adjacent = true;
    for (; producer; producer = producer->getPrevNode()) {
      if (staysBetween(*producer))
        continue;
      if (conflict(producer, op))
        break;
      adjacent = false;
    }
    auto linalgProducer = dyn_cast_or_null<linalg::LinalgOp>(producer);
    if (adjacent || !linalgProducer)
      continue;
    bool fuses = isWarpReduction(linalgProducer)
                     ? alignEpilogue(linalgProducer, op).has_value()
                     : isFusible(linalgProducer) &&
                           alignLoops(linalgProducer, op).has_value();
    if (!fuses)
      continue;
    // What defines its operands after the producer moves with it.
    llvm::SetVector<Operation *> defs;
    SmallVector<Value> worklist(op->getOperands());
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegion(0), captured);
    worklist.append(captured.begin(), captured.end());
    bool movable = true;
    while (!worklist.empty() && movable) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || def->getBlock() != &block || def->isBeforeInBlock(producer) ||
          defs.contains(def))
        continue;
      movable = staysBetween(*def);
      defs.insert(def);
      worklist.append(def->operand_begin(), def->operand_end());
    }
    if (!movable)
      continue;
    SmallVector<Operation *> moved(defs.begin(), defs.end());
    llvm::sort(moved, [](Operation *x, Operation *y) {
      return x->isBeforeInBlock(y);
    });
    Operation *at = producer;
    for (Operation *def : moved) {
      def->moveAfter(at);
      at = def;
    }
    op->moveAfter(at);
  }
}

/// Replaces `copy` by a linalg.copy that may join its producer; a copy
/// out of a collapsed view copies the view's source into the target
/// expanded alike (a split's part into its place in the whole), where the
/// target's layout allows: the same elements, over the producer's loops.
void copyAsLinalg(RewriterBase &rewriter, memref::CopyOp copy) {
  Value source = copy.getSource(), target = copy.getTarget();
  rewriter.setInsertionPoint(copy);
  if (auto collapse = source.getDefiningOp<memref::CollapseShapeOp>()) {
    MemRefType sourceType = collapse.getSrcType();
    FailureOr<MemRefType> expanded = memref::ExpandShapeOp::computeExpandedType(
        cast<MemRefType>(target.getType()), sourceType.getShape(),
        collapse.getReassociationIndices());
    if (sourceType.hasStaticShape() && succeeded(expanded)) {
      target = memref::ExpandShapeOp::create(
          rewriter, copy.getLoc(), *expanded, target,
          collapse.getReassociationIndices());
      source = collapse.getSrc();
    }
  }
  linalg::CopyOp::create(rewriter, copy.getLoc(), source, target);
  rewriter.eraseOp(copy);
}

struct CudaFuseKernelsPass
    : public accrue::cuda::impl::CudaFuseKernelsBase<CudaFuseKernelsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) {
      Operation *parent = block->getParentOp();
      if (!isa<linalg::LinalgOp>(parent) &&
          !parent->getParentOfType<linalg::LinalgOp>())
        blocks.push_back(block);
    });
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      if (!copy->getParentOfType<linalg::LinalgOp>())
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies)
      copyAsLinalg(rewriter, copy);
    for (Block *block : blocks)
      moveToProducers(*block);
    for (Block *block : blocks) {
      // The op before, if the one after may join it.
      linalg::LinalgOp previous;
      for (Operation *op = &block->front(), *next; op; op = next) {
        next = op->getNextNode();
        auto current = dyn_cast<linalg::LinalgOp>(op);
        if (!current) {
          if (!staysBetween(*op))
            previous = {};
          continue;
        }
        if (!isFusible(current)) {
          previous = isWarpReduction(current) ? current : linalg::LinalgOp();
          continue;
        }
        std::optional<Plan> plan;
        if (previous)
          plan = isWarpReduction(previous) ? alignEpilogue(previous, current)
                                           : alignLoops(previous, current);
        if (!plan) {
          previous = current;
          continue;
        }
        auto generalize = [&](linalg::LinalgOp linalgOp) {
          if (isa<linalg::GenericOp>(linalgOp))
            return linalgOp;
          rewriter.setInsertionPoint(linalgOp);
          return linalg::LinalgOp(
              *linalg::generalizeNamedOp(rewriter, linalgOp));
        };
        linalg::LinalgOp a = generalize(previous);
        linalg::LinalgOp b = generalize(current);
        FailureOr<linalg::GenericOp> fused = fuse(rewriter, a, b, *plan);
        previous = succeeded(fused) ? *fused : b;
      }
    }
    // Temporaries no op writes any more, and their views.
    SmallVector<Operation *> unused;
    getOperation().walk([&](Operation *op) {
      if (isa<memref::AllocOp, ViewLikeOpInterface>(op) &&
          op->getNumResults() == 1 && op->use_empty())
        unused.push_back(op);
    });
    for (Operation *op : unused) {
      Value source;
      if (auto view = dyn_cast<ViewLikeOpInterface>(op))
        source = view.getViewSource();
      rewriter.eraseOp(op);
      // A view's source may be unused now.
      while (source && source.use_empty()) {
        Operation *def = source.getDefiningOp();
        if (!def || !isa<memref::AllocOp, ViewLikeOpInterface>(def))
          break;
        source = {};
        if (auto view = dyn_cast<ViewLikeOpInterface>(def))
          source = view.getViewSource();
        rewriter.eraseOp(def);
      }
    }
  }
};

} // namespace
