//===- RowKernels.cpp - a warp or a block per row ---------------*- C++ -*-===//
//
// The kernel forms of cuda-form-kernels that take a row per warp or per
// block: a warp reduction (kWarpLanes) as a warp per output point (or a
// block of warps, where a lane would fold several elements), and a row
// group (kRowGroup: a LayerNorm's or a softmax's reductions and the row
// maps between them) as one kernel of a block per point, its warps
// sharing each reduction through workgroup memory, and the rows only the
// group uses (kRowLocal) kept there too.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/KernelReport.h"

#include "BufferOps.h"
#include "KernelForms.h"
#include "WarpReductions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace accrue::cuda::forms;
using accrue::cuda::combinerKind;
using accrue::cuda::kWarpSize;

namespace {

/// The warps of a block that share each point (the block form of a row
/// group): this thread's warp, their count, and the workgroup memory
/// where each warp leaves its value.
struct BlockWarps {
  Value warp;
  int64_t warps;
  Value shared;
  /// Whether a barrier orders the warps' values before thread 0's fold.
  bool barrier = true;
};

/// A warp reduction (kWarpLanes, buffer semantics) taken apart for a
/// kernel of a warp per output point: lane l computes the body up to its
/// last combine (its share of the point, from the identity), five xor
/// shuffles combine the lanes' values (every lane ends with the same
/// value: the combiners commute), and lane 0 combines that into the
/// output point (or the constant lane 0 starts from) and stores it. The
/// shuffles are outside any branch: every lane of the warp reaches them
/// (a warp past the last point folds nothing, from the identity). An
/// epilogue (cuda-fuse-kernels: the body's ops after the combine, with the
/// op's further inputs and outputs) runs in lane 0 on the point's value.
struct WarpReduction {
  /// `op`'s parts; an error on `op` where it is not of that form.
  static FailureOr<WarpReduction> get(linalg::GenericOp op);

  /// The work of the warp of `point` (`lane` its thread's lane, `valid`
  /// whether the point is one of `op`'s), at the insertion point in a
  /// launch of a warp per point; `ranges` are `op`'s loop ranges.
  void emit(RewriterBase &rewriter, Location loc, ArrayRef<Range> ranges,
            Value point, Value lane, Value valid,
            const BlockWarps *block = nullptr);

  /// The epilogue: what the body computes after the combine.
  bool inEpilogue(Operation &bodyOp) const {
    return combine->isBeforeInBlock(&bodyOp) && &bodyOp != yield;
  }
  /// Its inputs and the old values of its outputs: the op's arguments but
  /// the lanes' and the running value.
  bool epilogueArg(unsigned number) const {
    return number > 0 && number != numInputs;
  }

  linalg::GenericOp op;
  linalg::YieldOp yield;
  Operation *combine = nullptr;
  unsigned numInputs = 0;
  BlockArgument outArg;
  arith::AtomicRMWKind kind;
  /// Whether the combine takes the running value first.
  bool outFirst = false;
  /// The running value (the output, or the constant lane 0 starts from),
  /// the lane's share, and that constant.
  Value acc, share, start;
  Operation *startDef = nullptr;
  /// Whether the constant is defined in the body (cloned where lane 0
  /// uses it).
  bool startInBody = false;
  /// The loop over a lane's elements (l, l + 32, ...) that folds its share
  /// from the identity, if the share is one (from 0 in steps of 1 to
  /// `shareTrips`, each iteration combining its element into the running
  /// value and nothing else reading it), and whether the share may be
  /// split over the warps of a block (that loop, or no loop: one element a
  /// lane).
  scf::ForOp shareLoop;
  int64_t shareTrips = 1;
  bool splitsOverWarps = false;
};

FailureOr<WarpReduction> WarpReduction::get(linalg::GenericOp op) {
  WarpReduction w;
  w.op = op;
  Block &opBody = op.getRegion().front();
  w.yield = cast<linalg::YieldOp>(opBody.getTerminator());
  auto yield = w.yield;
  Operation *combine = w.combine = yield.getOperand(0).getDefiningOp();
  unsigned numLoops = op.getNumLoops();
  unsigned numInputs = w.numInputs = op.getNumDpsInputs();
  BlockArgument lanesArg = opBody.getArgument(0);
  BlockArgument outArg = w.outArg = opBody.getArgument(numInputs);
  std::optional<arith::AtomicRMWKind> kind =
      combine ? combinerKind(combine) : std::nullopt;
  if (!kind)
    return op.emitError("malformed warp reduction");
  w.kind = *kind;
  auto inEpilogue = [&](Operation &bodyOp) { return w.inEpilogue(bodyOp); };
  auto epilogueArg = [&](unsigned number) { return w.epilogueArg(number); };
  bool epilogueArgsUnused =
      llvm::all_of(opBody.getArguments(), [&](BlockArgument arg) {
        return !epilogueArg(arg.getArgNumber()) ||
               llvm::all_of(arg.getUsers(), [&](Operation *user) {
                 return inEpilogue(*opBody.findAncestorOpInBlock(*user));
               });
      });
  // It reads the point's value, its own inputs and what is defined outside
  // the op; nothing else the body computes per lane.
  auto epilogueReads = [&](Value value) {
    if (combine && value == combine->getResult(0))
      return true;
    if (auto arg = dyn_cast<BlockArgument>(value))
      return arg.getOwner() != &opBody || epilogueArg(arg.getArgNumber());
    Operation *def = value.getDefiningOp();
    return !op->isAncestor(def) ||
           (def->getBlock() == &opBody && inEpilogue(*def)) ||
           (def->getBlock() != &opBody &&
            inEpilogue(*opBody.findAncestorOpInBlock(*def)));
  };
  bool epilogueSelfContained = true;
  if (combine && combine->getBlock() == &opBody)
    for (Operation &bodyOp : opBody)
      if (inEpilogue(bodyOp) || &bodyOp == yield)
        bodyOp.walk([&](Operation *nested) {
          for (Value operand : nested->getOperands())
            if (!(nested == yield && operand == yield.getOperand(0)) &&
                !epilogueReads(operand))
              epilogueSelfContained = false;
        });
  if (!kind || numInputs == 0 || op.getNumDpsInits() == 0 ||
      !epilogueArgsUnused || !epilogueSelfContained ||
      combine->getBlock() != &opBody || !lanesArg.use_empty() ||
      numLoops == 0 ||
      op.getIteratorTypesArray().back() != utils::IteratorType::reduction ||
      op.getStaticLoopRanges().back() != kWarpSize)
    return op.emitError("malformed warp reduction");
  // The accumulator: the output, or the constant lane 0 starts from.
  auto isAccumulator = [&](Value v) {
    auto select = v.getDefiningOp<arith::SelectOp>();
    return v == outArg || (select && select.getFalseValue() == outArg);
  };
  bool outFirst = w.outFirst = isAccumulator(combine->getOperand(0));
  Value acc = w.acc = combine->getOperand(outFirst ? 0 : 1);
  Value share = w.share = combine->getOperand(outFirst ? 1 : 0);
  if (!isAccumulator(acc) || isAccumulator(share))
    return op.emitError("malformed warp reduction");
  Value &start = w.start;
  if (auto select = acc.getDefiningOp<arith::SelectOp>())
    start = select.getTrueValue();
  // (A constant the body defines itself is cloned where lane 0 uses it.)
  Operation *startDef = w.startDef = start ? start.getDefiningOp() : nullptr;
  bool startInBody = w.startInBody =
      start && start.getParentRegion() == &op.getRegion();
  if (startInBody && !(startDef && startDef->hasTrait<OpTrait::ConstantLike>()))
    return op.emitError("malformed warp reduction");
  auto loop = share.getDefiningOp<scf::ForOp>();
  if (!loop || loop->getBlock() != &opBody) {
    w.splitsOverWarps = !loop && llvm::none_of(opBody, [](Operation &bodyOp) {
      return isa<LoopLikeOpInterface>(bodyOp);
    });
    return w;
  }
  OpBuilder b(op);
  Attribute init;
  std::optional<int64_t> trips = getConstantIntValue(loop.getUpperBound());
  // Each iteration folds its element into the running value with the
  // combiner (perhaps only where a select lets it): the iterations may be
  // split over warps and their values combined after.
  auto foldsEach = [&] {
    BlockArgument running = loop.getRegionIterArgs()[0];
    Value next = loop.getBody()->getTerminator()->getOperand(0);
    Operation *fold = next.getDefiningOp();
    if (auto select = dyn_cast_or_null<arith::SelectOp>(fold)) {
      if (select.getFalseValue() != running)
        return false;
      fold = select.getTrueValue().getDefiningOp();
    }
    return fold && fold->getBlock() == loop.getBody() &&
           combinerKind(fold) == w.kind &&
           llvm::is_contained(fold->getOperands(), running) &&
           llvm::all_of(running.getUsers(), [&](Operation *user) {
             return user == fold || user == next.getDefiningOp();
           });
  };
  if (loop.getNumResults() == 1 && trips &&
      isConstantIntValue(loop.getLowerBound(), 0) &&
      isConstantIntValue(loop.getStep(), 1) &&
      matchPattern(loop.getInitArgs()[0], m_Constant(&init)) &&
      init == arith::getIdentityValueAttr(w.kind, share.getType(), b,
                                          op.getLoc()) &&
      foldsEach()) {
    w.shareLoop = loop;
    w.shareTrips = *trips;
    w.splitsOverWarps = true;
  }
  return w;
}

void WarpReduction::emit(RewriterBase &rewriter, Location loc,
                         ArrayRef<Range> ranges, Value point, Value lane,
                         Value valid, const BlockWarps *block) {
  Block &opBody = op.getRegion().front();
  unsigned numLoops = op.getNumLoops();
  SmallVector<unsigned> pointDims =
      llvm::to_vector(llvm::seq<unsigned>(0, numLoops - 1));
  Value start = this->start;
  Type type = share.getType();
  Value identity = arith::getIdentityValue(kind, type, rewriter, loc);

  // This lane's share, in a branch the warp takes or skips as a whole.
  auto branch = scf::IfOp::create(rewriter, loc, TypeRange{type}, valid,
                                  /*withElseRegion=*/true);
  // The point's loops (row-major over them), at the insertion point.
  SmallVector<Value> ivs(numLoops);
  auto pointLoops = [&] {
    delinearize(rewriter, loc, point, ranges, pointDims, ivs);
  };
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(branch.thenBlock());
    pointLoops();
    ivs.back() = lane;
    Value warps =
        block ? arith::ConstantIndexOp::create(rewriter, loc, block->warps)
              : Value();
    IRMapping mapping;
    mapping.map(outArg, identity); // read by the last combine only
    for (Operation &bodyOp : opBody.without_terminator()) {
      if (&bodyOp == combine || inEpilogue(bodyOp) ||
          (bodyOp.getNumResults() == 1 && bodyOp.getResult(0) == acc))
        continue;
      if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
        mapping.map(index.getResult(), ivs[index.getDim()]);
        continue;
      }
      rewriter.clone(bodyOp, mapping);
    }
    Value laneShare = mapping.lookup(share);
    if (block) {
      // Warp w folds the iterations w, w + warps, ... of the lane's loop
      // (or, without one, warp 0 the lane's element).
      if (shareLoop) {
        auto loop = laneShare.getDefiningOp<scf::ForOp>();
        loop.setLowerBound(block->warp);
        loop.setStep(warps);
      } else {
        Value firstWarp = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::eq, block->warp,
            arith::ConstantIndexOp::create(rewriter, loc, 0));
        laneShare = arith::SelectOp::create(rewriter, loc, firstWarp, laneShare,
                                            identity);
      }
    }
    scf::YieldOp::create(rewriter, loc, laneShare);
    rewriter.setInsertionPointToStart(branch.elseBlock());
    scf::YieldOp::create(rewriter, loc, identity);
  }

  // The butterfly.
  Value value = branch.getResult(0);
  for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    Value other = gpu::ShuffleOp::create(rewriter, loc, value, offset,
                                         kWarpSize, gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    value = arith::getReductionOp(kind, rewriter, loc, value, other);
  }

  // Lane 0 of a warp of a point writes it.
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                      lane, zero);
  if (block) {
    // The warps of the block leave their values in workgroup memory;
    // after a barrier, thread 0 folds them in order (the same sum for a
    // given block size) and stores the point.
    auto leave = scf::IfOp::create(rewriter, loc, first,
                                   /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(leave.thenBlock());
      memref::StoreOp::create(rewriter, loc, value, block->shared,
                              ValueRange{block->warp});
    }
    if (block->barrier)
      gpu::BarrierOp::create(rewriter, loc);
    first = arith::AndIOp::create(
        rewriter, loc, first,
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                              block->warp, zero));
  }
  auto store = scf::IfOp::create(
      rewriter, loc, arith::AndIOp::create(rewriter, loc, first, valid),
      /*withElseRegion=*/false);
  rewriter.setInsertionPointToStart(store.thenBlock());
  if (block) {
    value =
        memref::LoadOp::create(rewriter, loc, block->shared, ValueRange{zero});
    for (int64_t w = 1; w < block->warps; ++w)
      value = arith::getReductionOp(
          kind, rewriter, loc, value,
          memref::LoadOp::create(
              rewriter, loc, block->shared,
              ValueRange{arith::ConstantIndexOp::create(rewriter, loc, w)}));
  }
  pointLoops();
  OpOperand *init = op.getDpsInitOperand(0);
  SmallVector<Value> indices =
      applyMap(rewriter, loc, op.getMatchingIndexingMap(init), ivs);
  if (startInBody)
    start = rewriter.clone(*startDef)->getResult(0);
  Value into = start
                   ? start
                   : memref::LoadOp::create(rewriter, loc, init->get(), indices)
                         .getResult();
  Value result = outFirst
                     ? arith::getReductionOp(kind, rewriter, loc, into, value)
                     : arith::getReductionOp(kind, rewriter, loc, value, into);
  memref::StoreOp::create(rewriter, loc, result, init->get(), indices);
  // The epilogue, at the point, on its value: as the last lane computes it
  // (its inputs and outputs loaded at the point once).
  IRMapping mapping;
  mapping.map(combine->getResult(0), result);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
    BlockArgument arg = opBody.getArgument(k);
    if (!epilogueArg(k) || arg.use_empty())
      continue;
    if (!isa<MemRefType>(operand.getType())) {
      mapping.map(arg, operand); // a scalar input
      continue;
    }
    mapping.map(arg,
                memref::LoadOp::create(rewriter, loc, operand,
                                       applyMap(rewriter, loc, maps[k], ivs)));
  }
  Value lastLane = arith::ConstantIndexOp::create(rewriter, loc, kWarpSize - 1);
  for (Operation &bodyOp : opBody.without_terminator()) {
    if (!inEpilogue(bodyOp))
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
      mapping.map(index.getResult(), index.getDim() == numLoops - 1
                                         ? lastLane
                                         : ivs[index.getDim()]);
      continue;
    }
    rewriter.clone(bodyOp, mapping);
  }
  for (unsigned k = 1; k < op.getNumDpsInits(); ++k) {
    OpOperand *out = op.getDpsInitOperand(k);
    memref::StoreOp::create(
        rewriter, loc, mapping.lookupOrDefault(yield.getOperand(k)), out->get(),
        applyMap(rewriter, loc, maps[out->getOperandNumber()], ivs));
  }
  // What follows in the launch (the next member of a row group) runs in
  // every lane.
  rewriter.setInsertionPointAfter(store);
}

/// A launch of a warp per point of `ranges`' loops but the last, at the
/// insertion point, which moves into its body: the thread's point, its
/// lane, and whether the point is one of them.
std::tuple<Value, Value, Value> createWarpLaunch(RewriterBase &rewriter,
                                                 Location loc,
                                                 ArrayRef<Range> ranges,
                                                 int64_t blockSize) {
  // The points: every loop but the lanes'.
  SmallVector<unsigned> pointDims =
      llvm::to_vector(llvm::seq<unsigned>(0, ranges.size() - 1));
  auto [points, staticPoints] = extentProduct(rewriter, loc, ranges, pointDims);
  int64_t threads = blockSize;
  if (staticPoints && *staticPoints * kWarpSize < blockSize)
    threads = std::max<int64_t>(*staticPoints, 1) * kWarpSize;
  Value warpSize = arith::ConstantIndexOp::create(rewriter, loc, kWarpSize);
  Value blockDim = arith::ConstantIndexOp::create(rewriter, loc, threads);
  Value blocks = arith::CeilDivUIOp::create(
      rewriter, loc, arith::MulIOp::create(rewriter, loc, points, warpSize),
      blockDim);
  Value thread = createLinearLaunch(rewriter, loc, blocks, blockDim);
  Value point = arith::DivUIOp::create(rewriter, loc, thread, warpSize);
  Value lane = arith::RemUIOp::create(rewriter, loc, thread, warpSize);
  Value valid = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                      point, points);
  return {point, lane, valid};
}

/// The body of the elementwise op `op` at the point `ivs`: its operands
/// loaded there (but the block arguments `loaded` maps), its results
/// stored there.
void emitElementwiseBody(OpBuilder &b, Location loc, linalg::GenericOp op,
                         ArrayRef<Value> ivs, const IRMapping &loaded = {}) {
  IRMapping mapping = loaded;
  Block &body = op.getRegion().front();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
    BlockArgument arg = body.getArgument(k);
    if (!isa<MemRefType>(operand.getType())) {
      mapping.map(arg, operand); // a scalar input
      continue;
    }
    if (!arg.use_empty() && !mapping.contains(arg))
      mapping.map(arg, memref::LoadOp::create(b, loc, operand,
                                              applyMap(b, loc, maps[k], ivs)));
  }
  cloneBodyAt(b, body, ivs, mapping);
  for (auto [k, yielded] :
       llvm::enumerate(body.getTerminator()->getOperands())) {
    OpOperand *init = op.getDpsInitOperand(k);
    memref::StoreOp::create(
        b, loc, mapping.lookupOrDefault(yielded), init->get(),
        applyMap(b, loc, maps[init->getOperandNumber()], ivs));
  }
}

/// The allocations only the row group `members` touches (kRowLocal, of
/// its group), with their row strides, in the order the members reach
/// them.
SmallVector<std::pair<memref::AllocOp, int64_t>>
rowLocalBuffers(ArrayRef<linalg::GenericOp> members) {
  Attribute group = members.front()->getAttr(accrue::cuda::kRowGroup);
  SmallVector<std::pair<memref::AllocOp, int64_t>> locals;
  auto consider = [&](Value memref) {
    auto alloc =
        accrue::cuda::viewRoot(memref).getDefiningOp<memref::AllocOp>();
    auto mark =
        alloc ? alloc->getAttrOfType<DenseI64ArrayAttr>(accrue::cuda::kRowLocal)
              : nullptr;
    if (!mark || !group ||
        llvm::is_contained(llvm::make_first_range(locals), alloc))
      return;
    for (int64_t k = 0; k + 1 < mark.size(); k += 2)
      if (mark[k] == cast<IntegerAttr>(group).getInt())
        locals.emplace_back(alloc, mark[k + 1]);
  };
  for (linalg::GenericOp op : members)
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (isa<MemRefType>(operand.getType()))
          consider(operand);
    });
  return locals;
}

/// Moves the accesses `launch` makes to `alloc` (through views) into
/// `shared`, the block's copy of its point's `stride` elements: the
/// element at offset e of `alloc` is shared[e - stride x `point`]. The
/// allocation and its views go.
void keepInWorkgroupMemory(RewriterBase &rewriter, gpu::LaunchOp launch,
                           memref::AllocOp alloc, int64_t stride, Value shared,
                           Value point) {
  SmallVector<Operation *> accesses;
  launch.getBody().walk([&](Operation *op) {
    if (isa<memref::LoadOp, memref::StoreOp>(op) &&
        accrue::cuda::viewRoot(isa<memref::LoadOp>(op)
                                   ? cast<memref::LoadOp>(op).getMemRef()
                                   : cast<memref::StoreOp>(op).getMemRef()) ==
            alloc.getResult())
      accesses.push_back(op);
  });
  for (Operation *op : accesses) {
    auto load = dyn_cast<memref::LoadOp>(op);
    auto store = dyn_cast<memref::StoreOp>(op);
    Value memref = load ? load.getMemRef() : store.getMemRef();
    ValueRange indices = load ? load.getIndices() : store.getIndices();
    // cuda-group-rows marked only buffers whose views have static layouts.
    auto [strides, offset] = *accrue::cuda::staticLayout(memref);
    rewriter.setInsertionPoint(op);
    Location loc = op->getLoc();
    Value element = arith::ConstantIndexOp::create(rewriter, loc, offset);
    for (auto [index, s] : llvm::zip(indices, strides))
      element = arith::AddIOp::create(
          rewriter, loc, element,
          arith::MulIOp::create(
              rewriter, loc, index,
              arith::ConstantIndexOp::create(rewriter, loc, s)));
    Value local = arith::SubIOp::create(
        rewriter, loc, element,
        arith::MulIOp::create(
            rewriter, loc, point,
            arith::ConstantIndexOp::create(rewriter, loc, stride)));
    if (load)
      rewriter.replaceOpWithNewOp<memref::LoadOp>(load, shared,
                                                  ValueRange{local});
    else
      rewriter.replaceOpWithNewOp<memref::StoreOp>(
          store, store.getValueToStore(), shared, ValueRange{local});
  }
  // The views, then the allocation, once nothing uses them (another
  // group's members may still).
  std::function<void(Value)> erase = [&](Value value) {
    for (Operation *user : llvm::make_early_inc_range(value.getUsers())) {
      if (!isa<ViewLikeOpInterface>(user))
        continue;
      for (Value result : user->getResults())
        erase(result);
      if (user->use_empty())
        rewriter.eraseOp(user);
    }
  };
  erase(alloc.getResult());
  if (alloc->use_empty())
    rewriter.eraseOp(alloc);
}

/// The row map `op` (an elementwise op whose last loop is its row) for
/// the threads of `point`, at the insertion point in a launch of `stride`
/// threads per point: the thread `first` takes the row's elements first,
/// first + stride, ... (a warp reads 32 neighbours at once). Operands the
/// row does not index are loaded once, before the loop. `ranges` are
/// `op`'s loop ranges.
void emitRowMap(RewriterBase &rewriter, Location loc, linalg::GenericOp op,
                ArrayRef<Range> ranges, Value point, Value first,
                int64_t stride, Value valid) {
  OpBuilder::InsertionGuard guard(rewriter);
  auto branch = scf::IfOp::create(rewriter, loc, valid, false);
  rewriter.setInsertionPointToStart(branch.thenBlock());
  unsigned numLoops = op.getNumLoops();
  SmallVector<Value> ivs(numLoops);
  delinearize(rewriter, loc, point, ranges,
              llvm::to_vector(llvm::seq<unsigned>(0, numLoops - 1)), ivs);
  Value row =
      getValueOrCreateConstantIndexOp(rewriter, loc, ranges.back().size);
  Value step = arith::ConstantIndexOp::create(rewriter, loc, stride);
  // What the row does not index, loaded once.
  IRMapping invariant;
  Block &body = op.getRegion().front();
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = body.getArgument(operand.getOperandNumber());
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (op.isDpsInput(&operand) && !arg.use_empty() &&
        isa<MemRefType>(operand.get().getType()) &&
        !map.isFunctionOfDim(numLoops - 1)) {
      ivs.back() = first; // unused by the map
      invariant.map(arg,
                    memref::LoadOp::create(rewriter, loc, operand.get(),
                                           applyMap(rewriter, loc, map, ivs)));
    }
  }
  scf::ForOp::create(rewriter, loc, first, row, step, ValueRange{},
                     [&](OpBuilder &b, Location, Value iv, ValueRange) {
                       ivs.back() = iv;
                       emitElementwiseBody(b, loc, op, ivs, invariant);
                       scf::YieldOp::create(b, loc);
                     });
}

} // namespace

namespace accrue::cuda::forms {

/// Replaces the warp reduction `op` by a kernel of a warp per output
/// point (WarpReduction), or of a block of warps per point.
LogicalResult formWarpKernel(RewriterBase &rewriter, linalg::GenericOp op,
                             int64_t blockSize, RowGroupBarriers barriers) {
  FailureOr<WarpReduction> warp = WarpReduction::get(op);
  if (failed(warp))
    return failure();
  // A lane that would fold several elements: a block of as many warps
  // per point shares them (a row group of one), each lane one share.
  if (warp->splitsOverWarps && warp->shareTrips > 1)
    return formRowGroup(rewriter, {op}, blockSize, barriers);
  Location loc = FusedLoc::get(op.getContext(), {op.getLoc()},
                               rewriter.getStringAttr(kernelTag(op)));
  rewriter.setInsertionPoint(op);
  SmallVector<Range, 4> ranges =
      cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(rewriter, loc);
  auto [point, lane, valid] =
      createWarpLaunch(rewriter, loc, ranges, blockSize);
  warp->emit(rewriter, loc, ranges, point, lane, valid);
  rewriter.eraseOp(op);
  return success();
}

/// Replaces the members of a row group (kRowGroup: warp reductions and
/// row maps over the same points, in order, nothing with memory effects
/// between them) by one kernel: each point's threads do each member's
/// work for the point in turn, with a block barrier between two (what one
/// member writes and a later one touches lies in the point's own rows,
/// cuda-group-rows made sure). Where every warp reduction's share splits
/// over warps, a block of up to `blockSize` threads takes a point (as
/// many warps as the longest member has elements a lane, 32 a warp): its
/// warps fold a share of each reduction, leave their values in workgroup
/// memory and thread 0 folds those in order; a row map's threads take
/// every (warps x 32)-th element. Otherwise a block of one warp takes a
/// point. What lies between the members (views, constants) moves before
/// the kernel.
LogicalResult formRowGroup(RewriterBase &rewriter,
                           ArrayRef<linalg::GenericOp> members,
                           int64_t blockSize, RowGroupBarriers barriers) {
  SmallVector<std::optional<WarpReduction>> warps;
  bool splits = true;
  int64_t elementsPerLane = 1;
  for (linalg::GenericOp op : members) {
    warps.emplace_back();
    if (!op->hasAttr(accrue::cuda::kWarpLanes)) {
      elementsPerLane = std::max<int64_t>(
          elementsPerLane,
          llvm::divideCeil(op.getStaticLoopRanges().back(), kWarpSize));
      continue;
    }
    FailureOr<WarpReduction> warp = WarpReduction::get(op);
    if (failed(warp))
      return failure();
    splits = splits && warp->splitsOverWarps;
    elementsPerLane = std::max(elementsPerLane, warp->shareTrips);
    warps.back() = *warp;
  }
  int64_t blockWarps =
      splits ? std::clamp<int64_t>(elementsPerLane, 1,
                                   std::max<int64_t>(blockSize / kWarpSize, 1))
             : 1;
  Operation *first = members.front(), *last = members.back();
  for (Operation *op = first == last ? last : first->getNextNode(), *next;
       op != last; op = next) {
    next = op->getNextNode();
    if (llvm::is_contained(members, op))
      continue;
    if (!isMemoryEffectFree(op) && !isa<memref::AllocOp>(op))
      return op->emitError("an op with memory effects inside a row group");
    op->moveBefore(first);
  }
  SmallVector<Location> locs;
  for (linalg::GenericOp op : members)
    locs.push_back(op.getLoc());
  Location loc = FusedLoc::get(first->getContext(), locs,
                               rewriter.getStringAttr(kernelTag(members[0])));
  rewriter.setInsertionPoint(first);
  SmallVector<SmallVector<Range, 4>> ranges;
  for (linalg::GenericOp op : members)
    ranges.push_back(cast<linalg::LinalgOp>(op.getOperation())
                         .createLoopRanges(rewriter, loc));
  // A block per point, with workgroup memory for each reduction's warps
  // where there are several.
  SmallVector<unsigned> pointDims =
      llvm::to_vector(llvm::seq<unsigned>(0, ranges.front().size() - 1));
  Value points = extentProduct(rewriter, loc, ranges.front(), pointDims).first;
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value threads =
      arith::ConstantIndexOp::create(rewriter, loc, blockWarps * kWarpSize);
  auto workgroup = gpu::AddressSpaceAttr::get(rewriter.getContext(),
                                              gpu::AddressSpace::Workgroup);
  SmallVector<Type> shared;
  for (std::optional<WarpReduction> &warp : warps)
    if (warp && blockWarps > 1)
      shared.push_back(MemRefType::get({blockWarps}, warp->share.getType(),
                                       MemRefLayoutAttrInterface(), workgroup));
  // The group's own buffers (kRowLocal): a point's rows of each in
  // workgroup memory, after the reductions'.
  SmallVector<std::pair<memref::AllocOp, int64_t>> locals =
      rowLocalBuffers(members);
  unsigned firstLocal = shared.size();
  for (auto [alloc, stride] : locals)
    shared.push_back(MemRefType::get({stride}, alloc.getType().getElementType(),
                                     MemRefLayoutAttrInterface(), workgroup));
  auto launch =
      gpu::LaunchOp::create(rewriter, loc, points, one, one, threads, one, one,
                            nullptr, nullptr, ValueRange{}, shared);
  Block &body = launch.getBody().front();
  rewriter.setInsertionPointToStart(&body);
  gpu::TerminatorOp::create(rewriter, loc);
  rewriter.setInsertionPointToStart(&body);
  Value point = launch.getBlockIds().x;
  Value thread = launch.getThreadIds().x;
  Value warpSize = arith::ConstantIndexOp::create(rewriter, loc, kWarpSize);
  Value warp = arith::DivUIOp::create(rewriter, loc, thread, warpSize);
  Value lane = arith::RemUIOp::create(rewriter, loc, thread, warpSize);
  Value valid = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
  unsigned nextShared = 0;
  for (auto [k, op] : llvm::enumerate(members)) {
    if (k > 0 && barriers.betweenMembers)
      gpu::BarrierOp::create(rewriter, loc);
    if (!warps[k]) {
      emitRowMap(rewriter, loc, op, ranges[k], point, thread,
                 blockWarps * kWarpSize, valid);
      continue;
    }
    std::optional<BlockWarps> block;
    if (blockWarps > 1)
      block = BlockWarps{warp, blockWarps,
                         launch.getWorkgroupAttributions()[nextShared++],
                         barriers.inReductions};
    warps[k]->emit(rewriter, loc, ranges[k], point, lane, valid,
                   block ? &*block : nullptr);
  }
  for (linalg::GenericOp op : members)
    rewriter.eraseOp(op);
  for (auto [k, local] : llvm::enumerate(locals))
    keepInWorkgroupMemory(rewriter, launch, local.first, local.second,
                          launch.getWorkgroupAttributions()[firstLocal + k],
                          point);
  return success();
}

} // namespace accrue::cuda::forms
