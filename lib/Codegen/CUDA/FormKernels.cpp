//===- FormKernels.cpp - one gpu.launch per linalg op -----------*- C++ -*-===//
//
// Each linalg op on buffers becomes one kernel. The op's parallel loops are
// linearized and spread over a 1-D grid, one thread per point; each thread
// runs the op's reduction loops in order, keeping the outputs that do not
// depend on them in registers. This is the loop nest linalg's own lowering
// would build, with the parallel loops taken by threads, so every thread
// reads and writes exactly the elements of its point and no thread waits
// for another: no shared memory, no barriers. The forms with vector
// accesses (streaming, tiled transposes) are in VectorKernels.cpp; loops
// over buffer elements (scatters) become kernels here too.
//
//===----------------------------------------------------------------------===//

#include "KernelForms.h"
#include "WarpReductions.h"

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAFORMKERNELS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;

namespace accrue::cuda::forms {

/// `index` values of `map`'s results at `ivs`.
SmallVector<Value> applyMap(OpBuilder &b, Location loc, AffineMap map,
                            ValueRange ivs) {
  SmallVector<Value> indices;
  for (AffineExpr expr : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
      indices.push_back(ivs[dim.getPosition()]);
      continue;
    }
    if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
      indices.push_back(
          arith::ConstantIndexOp::create(b, loc, constant.getValue()));
      continue;
    }
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(map.getNumDims(), 0, expr), ivs));
  }
  return indices;
}

void cloneBodyAt(OpBuilder &b, Block &body, ValueRange ivs,
                 IRMapping &mapping) {
  for (Operation &bodyOp : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
      mapping.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(bodyOp, mapping);
  }
}

/// A gpu.launch of `blocks` x `threads` at the insertion point (threads
/// and blocks along x; `rows` rows of blocks along y where given), which
/// moves into its body; returns the thread's linear index along x there.
Value createLinearLaunch(RewriterBase &rewriter, Location loc, Value blocks,
                         Value threads, Value rows) {
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  auto launch = gpu::LaunchOp::create(rewriter, loc, blocks, rows ? rows : one,
                                      one, threads, one, one);
  Block &body = launch.getBody().front();
  rewriter.setInsertionPointToStart(&body);
  gpu::TerminatorOp::create(rewriter, loc);
  rewriter.setInsertionPointToStart(&body);
  return arith::AddIOp::create(rewriter, loc,
                               arith::MulIOp::create(rewriter, loc,
                                                     launch.getBlockIds().x,
                                                     launch.getBlockSize().x),
                               launch.getThreadIds().x);
}

std::string nodeTag(Location loc) {
  std::string node = accrue::cuda::nodeOf(loc);
  return node.empty() ? "kernel" : node;
}

/// What a kernel computes, for its name: "update" for the op that writes
/// the parameters, else the ONNX node it comes from, else "kernel".
std::string kernelTag(linalg::GenericOp op) {
  auto step = op->getParentOfType<func::FuncOp>();
  for (Value init : op.getDpsInits()) {
    auto arg = dyn_cast<BlockArgument>(init);
    if (arg && step && arg.getOwner() == &step.getBody().front() &&
        accrue::train::getArgRole(step, arg.getArgNumber()) ==
            ACCRUE_ROLE_PARAMS)
      return "update";
  }
  return nodeTag(op.getLoc());
}

/// The product of the extents of `ranges`' loops `dims` at the insertion
/// point, and its value when they are all constants.
std::pair<Value, std::optional<int64_t>>
extentProduct(RewriterBase &rewriter, Location loc, ArrayRef<Range> ranges,
              ArrayRef<unsigned> dims) {
  Value total = arith::ConstantIndexOp::create(rewriter, loc, 1);
  std::optional<int64_t> staticTotal = 1;
  for (unsigned d : dims) {
    total = arith::MulIOp::create(
        rewriter, loc, total,
        getValueOrCreateConstantIndexOp(rewriter, loc, ranges[d].size));
    std::optional<int64_t> extent = getConstantIntValue(ranges[d].size);
    staticTotal = extent && staticTotal ? std::optional(*staticTotal * *extent)
                                        : std::nullopt;
  }
  return {total, staticTotal};
}

/// Sets `ivs[d]` for the loops `dims` of `ranges` to the point the linear
/// index `linear` is, row-major over them.
void delinearize(RewriterBase &rewriter, Location loc, Value linear,
                 ArrayRef<Range> ranges, ArrayRef<unsigned> dims,
                 MutableArrayRef<Value> ivs) {
  Value rest = linear;
  for (unsigned d : llvm::reverse(dims)) {
    Value extent =
        getValueOrCreateConstantIndexOp(rewriter, loc, ranges[d].size);
    ivs[d] = arith::RemUIOp::create(rewriter, loc, rest, extent);
    rest = arith::DivUIOp::create(rewriter, loc, rest, extent);
  }
}

} // namespace accrue::cuda::forms

using namespace accrue::cuda::forms;
using accrue::cuda::combinerKind;
using accrue::cuda::kWarpSize;

namespace {

/// Replaces the generic op `op` (buffer semantics) by a kernel.
LogicalResult formKernel(RewriterBase &rewriter, linalg::GenericOp op,
                         int64_t blockSize) {
  // The kernel keeps the op's location, tagged with what it computes
  // (cuda-merge-kernel-modules names it after the tag).
  Location loc = FusedLoc::get(op.getContext(), {op.getLoc()},
                               rewriter.getStringAttr(kernelTag(op)));
  rewriter.setInsertionPoint(op);
  SmallVector<Range, 4> ranges =
      cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(rewriter, loc);
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<unsigned> parallel, reduction;
  for (auto [d, kind] : llvm::enumerate(iterators))
    (kind == utils::IteratorType::parallel ? parallel : reduction).push_back(d);
  auto size = [&](unsigned d) {
    return getValueOrCreateConstantIndexOp(rewriter, loc, ranges[d].size);
  };
  // The number of threads: the product of the parallel extents.
  auto [total, staticTotal] = extentProduct(rewriter, loc, ranges, parallel);
  int64_t threads = blockSize;
  if (staticTotal && *staticTotal < blockSize)
    threads = std::max<int64_t>(*staticTotal, 1);
  Value blockDim = arith::ConstantIndexOp::create(rewriter, loc, threads);
  Value blocks = arith::CeilDivUIOp::create(rewriter, loc, total, blockDim);
  Value thread = createLinearLaunch(rewriter, loc, blocks, blockDim);
  Value inRange = arith::CmpIOp::create(
      rewriter, loc, arith::CmpIPredicate::ult, thread, total);
  auto guard = scf::IfOp::create(rewriter, loc, inRange, false);
  rewriter.setInsertionPointToStart(guard.thenBlock());

  // This thread's point of the parallel loops (row-major over them); the
  // reduction positions, unused by register outputs, start at zero.
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  SmallVector<Value> ivs(op.getNumLoops(), zero);
  delinearize(rewriter, loc, thread, ranges, parallel, ivs);
  SmallVector<Value> outerPoint = ivs;

  Block &opBody = op.getRegion().front();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned numInputs = op.getNumDpsInputs();
  // Outputs whose element does not move with the reduction loops stay in
  // registers across them.
  SmallVector<bool> inRegister;
  SmallVector<Value> carried;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = maps[init.getOperandNumber()];
    bool registers = llvm::none_of(
        reduction, [&](unsigned d) { return map.isFunctionOfDim(d); });
    inRegister.push_back(registers);
    if (registers) {
      SmallVector<Value> indices = applyMap(rewriter, loc, map, ivs);
      carried.push_back(
          memref::LoadOp::create(rewriter, loc, init.get(), indices));
    }
  }

  // The body at the full point `ivs`, given the carried outputs; returns
  // the new carried outputs.
  auto emitBody = [&](OpBuilder &b, ArrayRef<Value> point,
                      ValueRange registers) -> SmallVector<Value> {
    IRMapping mapping;
    for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
      BlockArgument arg = opBody.getArgument(k);
      if (k >= numInputs && inRegister[k - numInputs]) {
        unsigned slot = llvm::count(
            ArrayRef<bool>(inRegister).take_front(k - numInputs), true);
        mapping.map(arg, registers[slot]);
        continue;
      }
      if (!isa<MemRefType>(operand.getType())) {
        mapping.map(arg, operand); // a scalar input
        continue;
      }
      SmallVector<Value> indices = applyMap(b, loc, maps[k], point);
      mapping.map(arg, memref::LoadOp::create(b, loc, operand, indices));
    }
    for (Operation &bodyOp : opBody.without_terminator()) {
      if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
        mapping.map(index.getResult(), point[index.getDim()]);
        continue;
      }
      b.clone(bodyOp, mapping);
    }
    SmallVector<Value> next;
    for (auto [k, yielded] :
         llvm::enumerate(opBody.getTerminator()->getOperands())) {
      Value value = mapping.lookupOrDefault(yielded);
      if (inRegister[k]) {
        next.push_back(value);
        continue;
      }
      OpOperand *init = op.getDpsInitOperand(k);
      SmallVector<Value> indices =
          applyMap(b, loc, maps[init->getOperandNumber()], point);
      memref::StoreOp::create(b, loc, value, init->get(), indices);
    }
    return next;
  };

  // The reduction loops, outermost first, carrying the register outputs.
  std::function<SmallVector<Value>(OpBuilder &, unsigned, ValueRange)> nest =
      [&](OpBuilder &b, unsigned level,
          ValueRange registers) -> SmallVector<Value> {
    if (level == reduction.size())
      return emitBody(b, ivs, registers);
    unsigned d = reduction[level];
    Value lower = getValueOrCreateConstantIndexOp(b, loc, ranges[d].offset);
    Value upper = arith::AddIOp::create(b, loc, lower, size(d));
    Value stride = getValueOrCreateConstantIndexOp(b, loc, ranges[d].stride);
    auto loop = scf::ForOp::create(
        b, loc, lower, upper, stride, registers,
        [&](OpBuilder &lb, Location, Value iv, ValueRange iterArgs) {
          ivs[d] = iv;
          scf::YieldOp::create(lb, loc, nest(lb, level + 1, iterArgs));
        });
    return SmallVector<Value>(loop.getResults());
  };
  SmallVector<Value> final = nest(rewriter, 0, carried);
  unsigned slot = 0;
  for (auto [k, init] : llvm::enumerate(op.getDpsInitsMutable())) {
    if (!inRegister[k])
      continue;
    AffineMap map = maps[init.getOperandNumber()];
    memref::StoreOp::create(rewriter, loc, final[slot++], init.get(),
                            applyMap(rewriter, loc, map, outerPoint));
  }
  rewriter.eraseOp(op);
  return success();
}

/// Whether host loop `loop` works on buffer elements itself (a scatter-add
/// written as a loop): it runs in one thread as a whole.
bool isSerialKernel(scf::ForOp loop) {
  bool touchesMemory = false;
  WalkResult walk = loop.getBody()->walk([&](Operation *op) {
    if (isa<gpu::LaunchOp, linalg::LinalgOp, CallOpInterface>(op))
      return WalkResult::interrupt();
    touchesMemory |= isa<memref::LoadOp, memref::StoreOp>(op);
    return WalkResult::advance();
  });
  return touchesMemory && !walk.wasInterrupted();
}

/// Whether `loop` is a loop of independent iterations
/// (nn::kIndependentIterations) from 0 in steps of 1 to a constant.
bool isIndependentLoop(scf::ForOp loop) {
  return loop->hasAttr(accrue::nn::kIndependentIterations) &&
         matchPattern(loop.getLowerBound(), m_Zero()) &&
         matchPattern(loop.getStep(), m_One()) &&
         getConstantIntValue(loop.getUpperBound());
}

/// The loop of independent iterations that is all `loop` runs, if there
/// is one.
scf::ForOp independentInnerLoop(scf::ForOp loop) {
  scf::ForOp inner;
  for (Operation &op : loop.getBody()->without_terminator()) {
    auto nested = dyn_cast<scf::ForOp>(&op);
    if (nested && isIndependentLoop(nested) && !inner) {
      inner = nested;
      continue;
    }
    if (!isMemoryEffectFree(&op) || op.getNumRegions())
      return nullptr;
  }
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  if (!inner || yield.getOperands() != ValueRange(inner.getResults()))
    return nullptr;
  return inner;
}

/// How many row ranges a scatter's threads split its result into (see
/// scatterStore): enough threads to fill the GPU for an embedding's
/// gradient (64 x d), while each thread still reads every index once.
constexpr int64_t kScatterRowRanges = 64;

/// The one store of the independent iteration `inner` when the iteration
/// is a read-modify-write of one element (a scatter-add: every load of the
/// stored buffer reads the element it stores) into a buffer of static
/// rows; null otherwise.
memref::StoreOp scatterStore(scf::ForOp inner) {
  memref::StoreOp store;
  for (Operation &op : inner.getBody()->without_terminator()) {
    if (auto s = dyn_cast<memref::StoreOp>(&op)) {
      if (store)
        return nullptr;
      store = s;
      continue;
    }
    if (op.getNumRegions() ||
        !(isMemoryEffectFree(&op) || isa<memref::LoadOp>(&op)))
      return nullptr;
  }
  if (!store)
    return nullptr;
  MemRefType type = store.getMemRefType();
  if (type.getRank() == 0 || type.isDynamicDim(0) || type.getDimSize(0) < 2)
    return nullptr;
  for (Operation &op : inner.getBody()->without_terminator()) {
    auto load = dyn_cast<memref::LoadOp>(&op);
    if (load && load.getMemRef() == store.getMemRef() &&
        load.getIndices() != store.getIndices())
      return nullptr;
  }
  return store;
}

/// Guards the read-modify-write `store` of its element (and everything in
/// its iteration only it uses: the element's load, the addend's load, the
/// add) by `row <= store's row < row + rows`, so the thread only updates
/// the rows of its range (it still computes every index).
void guardRows(RewriterBase &rewriter, memref::StoreOp store, Value first,
               int64_t rows) {
  Location loc = store.getLoc();
  Block *body = store->getBlock();
  rewriter.setInsertionPoint(store);
  Value offset =
      arith::SubIOp::create(rewriter, loc, store.getIndices()[0], first);
  Value inRange = arith::CmpIOp::create(
      rewriter, loc, arith::CmpIPredicate::ult, offset,
      arith::ConstantIndexOp::create(rewriter, loc, rows));
  auto guard = scf::IfOp::create(rewriter, loc, inRange, /*withElse=*/false);
  store->moveBefore(guard.thenBlock()->getTerminator());
  // Backwards, so an op whose users all moved in follows them.
  SmallVector<Operation *> before;
  for (Operation &op : *body) {
    if (&op == offset.getDefiningOp())
      break;
    before.push_back(&op);
  }
  for (Operation *op : llvm::reverse(before)) {
    bool onlyInside = llvm::all_of(op->getUsers(), [&](Operation *user) {
      return guard->isProperAncestor(user);
    });
    if (onlyInside && !op->use_empty())
      op->moveBefore(&guard.thenBlock()->front());
  }
}

/// Moves `loop` into a kernel: of one thread per iteration when its own
/// iterations are independent (the sorted gather gradient's writes of
/// distinct elements, cuda-sort-gather-grads); of one thread, or, when it
/// only runs a loop of independent iterations, of one thread per
/// iteration of that loop, each running `loop` for its own iteration. (For each
/// element the iterations that write it stay in `loop`'s order: the same sums.)
/// When each iteration adds into one element (a scatter-add: an embedding's
/// gradient walks the tokens, each adding a row of features), the
/// result's rows are further split into ranges, one per block row of the
/// grid (blockIdx.y): every thread walks all of `loop` but updates only
/// the elements of its range, so each element still sums its terms in
/// `loop`'s order, in one thread.
void formSerialKernel(RewriterBase &rewriter, scf::ForOp loop,
                      int64_t blockSize) {
  scf::ForOp inner =
      isIndependentLoop(loop) ? loop : independentInnerLoop(loop);
  if (inner) {
    // Named after its ONNX node, as formKernel names a kernel.
    Location loc =
        FusedLoc::get(loop.getContext(), {loop.getLoc()},
                      rewriter.getStringAttr(nodeTag(loop.getLoc())));
    rewriter.setInsertionPoint(loop);
    int64_t count = getConstantIntValue(inner.getUpperBound()).value();
    int64_t threads = std::min(blockSize, std::max<int64_t>(count, 1));
    memref::StoreOp store = inner == loop ? nullptr : scatterStore(inner);
    int64_t rowsPerRange = 0, ranges = 1;
    if (store) {
      int64_t rows = store.getMemRefType().getDimSize(0);
      rowsPerRange = llvm::divideCeil(rows, kScatterRowRanges);
      ranges = llvm::divideCeil(rows, rowsPerRange);
    }
    Value blocks = arith::ConstantIndexOp::create(
        rewriter, loc, llvm::divideCeil(count, threads));
    Value blockDim = arith::ConstantIndexOp::create(rewriter, loc, threads);
    Value rowsOfBlocks = arith::ConstantIndexOp::create(rewriter, loc, ranges);
    Value thread =
        createLinearLaunch(rewriter, loc, blocks, blockDim, rowsOfBlocks);
    auto launch = cast<gpu::LaunchOp>(rewriter.getBlock()->getParentOp());
    Value firstRow;
    if (store)
      firstRow = arith::MulIOp::create(
          rewriter, loc, launch.getBlockIds().y,
          arith::ConstantIndexOp::create(rewriter, loc, rowsPerRange));
    Value inside = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, thread,
        arith::ConstantIndexOp::create(rewriter, loc, count));
    auto guard = scf::IfOp::create(rewriter, loc, inside, /*withElse=*/false);
    loop->moveBefore(guard.thenBlock()->getTerminator());
    if (store)
      guardRows(rewriter, store, firstRow, rowsPerRange);
    // The independent loop's body, for this thread's iteration.
    SmallVector<Value> arguments{thread};
    llvm::append_range(arguments, inner.getInitArgs());
    rewriter.inlineBlockBefore(inner.getBody(), inner, arguments);
    auto yield = cast<scf::YieldOp>(inner->getPrevNode());
    rewriter.replaceOp(inner, yield.getOperands());
    rewriter.eraseOp(yield);
    return;
  }
  Location loc = loop.getLoc();
  rewriter.setInsertionPoint(loop);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  auto launch =
      gpu::LaunchOp::create(rewriter, loc, one, one, one, one, one, one);
  Block &body = launch.getBody().front();
  rewriter.setInsertionPointToStart(&body);
  auto terminator = gpu::TerminatorOp::create(rewriter, loc);
  loop->moveBefore(terminator);
}

struct CudaFormKernelsPass
    : public accrue::cuda::impl::CudaFormKernelsBase<CudaFormKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Loops over buffer elements run in one thread each. (Their results
    // are buffers, unused after bufferization made them in place.)
    SmallVector<scf::ForOp> serial;
    getOperation().walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
      if (loop->getParentOfType<linalg::LinalgOp>() ||
          loop->getParentOfType<gpu::LaunchOp>())
        return WalkResult::skip();
      if (!isSerialKernel(loop))
        return WalkResult::advance();
      serial.push_back(loop);
      return WalkResult::skip();
    });
    for (scf::ForOp loop : serial) {
      // Bufferized in place, each result is the buffer it started from.
      for (auto [result, init] :
           llvm::zip(loop.getResults(), loop.getInitArgs())) {
        if (result.use_empty())
          continue;
        if (!isa<MemRefType>(result.getType())) {
          loop.emitError("a loop over buffer elements returns a value the "
                         "host would need");
          return signalPassFailure();
        }
        result.replaceAllUsesWith(init);
      }
      formSerialKernel(rewriter, loop, blockSize);
    }
    // Copies become copy generics, named ops generics.
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (op->getParentOfType<gpu::LaunchOp>() ||
          op->getParentOfType<linalg::LinalgOp>())
        return;
      if (isa<linalg::LinalgOp, memref::CopyOp>(op))
        ops.push_back(op);
    });
    for (auto it = ops.begin(); it != ops.end(); ++it) {
      Operation *op = *it;
      // A row group: its members follow in `ops`.
      if (Attribute group = op->getAttr(accrue::cuda::kRowGroup)) {
        SmallVector<linalg::GenericOp> members;
        for (; it != ops.end() &&
               (*it)->getAttr(accrue::cuda::kRowGroup) == group;
             ++it)
          members.push_back(cast<linalg::GenericOp>(*it));
        --it;
        if (failed(formRowGroup(rewriter, members, blockSize,
                                {rowBarriers, reductionBarriers})))
          return signalPassFailure();
        continue;
      }
      rewriter.setInsertionPoint(op);
      if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        auto linalgCopy = linalg::CopyOp::create(
            rewriter, copy.getLoc(), copy.getSource(), copy.getTarget());
        rewriter.eraseOp(copy);
        op = linalgCopy;
      }
      auto linalgOp = cast<linalg::LinalgOp>(op);
      if (!linalgOp.hasPureBufferSemantics()) {
        op->emitError("a linalg op on tensors is left after bufferization");
        return signalPassFailure();
      }
      linalg::GenericOp generic = dyn_cast<linalg::GenericOp>(op);
      if (!generic) {
        FailureOr<linalg::GenericOp> generalized =
            linalg::generalizeNamedOp(rewriter, linalgOp);
        if (failed(generalized)) {
          op->emitError("cannot turn this op into a kernel");
          return signalPassFailure();
        }
        generic = *generalized;
      }
      if (generic->hasAttr(accrue::cuda::kWarpLanes)) {
        if (failed(formWarpKernel(rewriter, generic, blockSize,
                                  {rowBarriers, reductionBarriers})))
          return signalPassFailure();
        continue;
      }
      if (succeeded(
              formStreamingKernel(rewriter, generic, blockSize, maxBlocks)))
        continue;
      if (succeeded(formTransposeKernel(rewriter, generic, blockSize)))
        continue;
      if (failed(formKernel(rewriter, generic, blockSize)))
        return signalPassFailure();
    }
    // Constant globals are host memory: each kernel reads its own copy
    // (kernel outlining copies the global into the kernel's module).
    getOperation().walk([&](gpu::LaunchOp launch) {
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(launch.getBody(), captured);
      for (Value value : captured) {
        auto global = value.getDefiningOp<memref::GetGlobalOp>();
        if (!global)
          continue;
        rewriter.setInsertionPointToStart(&launch.getBody().front());
        Value local = rewriter.clone(*global)->getResult(0);
        replaceAllUsesInRegionWith(value, local, launch.getBody());
      }
    });
  }
};

} // namespace
