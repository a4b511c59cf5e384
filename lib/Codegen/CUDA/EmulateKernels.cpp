//===- EmulateKernels.cpp - run kernels as host loops -----------*- C++ -*-===//
//
// Each gpu.launch becomes loops over its blocks and threads; a kernel with
// shuffles or barriers, loops over its blocks and, for each phase between
// them, over the block's threads: every thread of a block has run a phase
// before any runs the next, as a barrier guarantees (and as the lanes of
// a warp exchange values at a shuffle). With
// count-accesses the loops also report every global access to the
// runtime's counter (the counting emulator, StepABI.h): the accesses are
// instrumented inside the launch body first, then the body is cloned into
// the loops like any other.
//
//===----------------------------------------------------------------------===//

#include "WarpReductions.h"

#include "accrue/Codegen/CUDA/KernelReport.h"
#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue-runtime/StepABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDAEMULATEKERNELS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using accrue::cuda::kWarpSize;

namespace {

/// The runtime entries of the counting emulator, declared once per module.
struct CounterEntries {
  func::FuncOp launch, launchEnd, thread, access, barrier;

  static CounterEntries declare(ModuleOp module) {
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Type i64 = b.getI64Type();
    auto declare = [&](StringRef name, unsigned arguments) {
      if (auto existing = module.lookupSymbol<func::FuncOp>(name))
        return existing;
      auto function = func::FuncOp::create(
          b, module.getLoc(), name,
          b.getFunctionType(SmallVector<Type>(arguments, i64), {}));
      function.setPrivate();
      return function;
    };
    return {declare(ACCRUE_EMU_LAUNCH_FUNCTION, 8),
            declare(ACCRUE_EMU_LAUNCH_END_FUNCTION, 0),
            declare(ACCRUE_EMU_THREAD_FUNCTION, 6),
            declare(ACCRUE_EMU_ACCESS_FUNCTION, 6),
            declare(ACCRUE_EMU_BARRIER_FUNCTION, 0)};
  }
};

Value toI64(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

Value constantI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}

/// Loops over `ids[from, to)` (extents `extents`, outermost first) at
/// `b`, each id mapped to its loop's index, with `body` innermost.
void nestLoops(OpBuilder &b, Location loc, ArrayRef<Value> extents,
               ArrayRef<Value> ids, unsigned from, unsigned to,
               IRMapping &mapping, function_ref<void(OpBuilder &)> body) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  std::function<void(OpBuilder &, unsigned)> nest = [&](OpBuilder &nb,
                                                        unsigned level) {
    if (level == to) {
      body(nb);
      return;
    }
    scf::ForOp::create(nb, loc, zero, extents[level], one, ValueRange{},
                       [&](OpBuilder &lb, Location, Value iv, ValueRange) {
                         mapping.map(ids[level], iv);
                         nest(lb, level + 1);
                         scf::YieldOp::create(lb, loc);
                       });
  };
  nest(b, from);
}

/// Instruments the global accesses of one launch body.
class AccessInstrumenter {
public:
  AccessInstrumenter(CounterEntries entries, func::FuncOp step)
      : entries(entries), step(step) {}

  /// `shared`: the stack buffers standing for its workgroup memory.
  LogicalResult instrument(gpu::LaunchOp launch, ArrayRef<Value> shared) {
    Block &body = launch.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    Location loc = launch.getLoc();
    gpu::KernelDim3 blockIds = launch.getBlockIds(),
                    threadIds = launch.getThreadIds();
    SmallVector<Value> ids;
    for (Value id : {blockIds.x, blockIds.y, blockIds.z, threadIds.x,
                     threadIds.y, threadIds.z})
      ids.push_back(toI64(b, loc, id));
    func::CallOp::create(b, loc, entries.thread, ids);
    SmallVector<accrue::cuda::GlobalAccess> accesses =
        accrue::cuda::globalAccesses(launch);
    // Every other memory effect on global memory would go uncounted.
    WalkResult unknown = launch.getBody().walk([&](Operation *op) {
      auto effects = dyn_cast<MemoryEffectOpInterface>(op);
      if (!effects || accrue::cuda::asGlobalAccess(op))
        return WalkResult::advance();
      SmallVector<MemoryEffects::EffectInstance> instances;
      effects.getEffects(instances);
      for (const MemoryEffects::EffectInstance &effect : instances) {
        Value value = effect.getValue();
        if (!value || !isa<MemRefType>(value.getType()) ||
            isa<MemoryEffects::Allocate, MemoryEffects::Free>(
                effect.getEffect()))
          continue;
        if (accrue::cuda::isKernelLocal(launch, value))
          continue;
        op->emitError("cannot count the accesses of this operation: the "
                      "counting emulator knows memref and vector loads and "
                      "stores");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (unknown.wasInterrupted())
      return failure();
    // Sites in the kernel report's order, which has no workgroup memory.
    int64_t site = 0;
    for (const accrue::cuda::GlobalAccess &access : accesses) {
      const Value *buffer =
          llvm::find(shared, accrue::cuda::viewRoot(access.memref));
      if (buffer == shared.end())
        instrumentAccess(access, site++, std::nullopt);
      else
        instrumentAccess(access, -1, buffer - shared.begin());
    }
    return success();
  }

private:
  /// `sharedIndex`: the workgroup buffer the access falls in, if it does.
  void instrumentAccess(const accrue::cuda::GlobalAccess &access, int64_t site,
                        std::optional<int64_t> sharedIndex) {
    Operation *op = access.op;
    Value memref = access.memref;
    ValueRange indices = access.indices;
    int64_t width = access.width;
    bool isStore = access.store;
    Location loc = op->getLoc();
    OpBuilder b(op);
    auto type = cast<MemRefType>(memref.getType());
    int64_t elementBytes =
        std::max<int64_t>(type.getElementTypeBitWidth() / 8, 1);
    Value eb = arith::ConstantIndexOp::create(b, loc, elementBytes);

    // The address, and whether every index lies inside the view.
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    Value linear = metadata.getOffset();
    Value inBounds = arith::ConstantIntOp::create(b, loc, 1, 1);
    for (auto [d, index] : llvm::enumerate(indices)) {
      Value size = metadata.getSizes()[d];
      linear = arith::AddIOp::create(
          b, loc, linear,
          arith::MulIOp::create(b, loc, index, metadata.getStrides()[d]));
      Value inside =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, index, size);
      if (width > 1 && d + 1 == indices.size()) {
        Value end = arith::AddIOp::create(
            b, loc, index, arith::ConstantIndexOp::create(b, loc, width));
        inside = arith::AndIOp::create(
            b, loc, inside,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, end,
                                  size));
      }
      inBounds = arith::AndIOp::create(b, loc, inBounds, inside);
    }
    Value pointer =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
    Value address = arith::AddIOp::create(
        b, loc, pointer, arith::MulIOp::create(b, loc, linear, eb));

    // The byte offset in the buffer it is a view of.
    Value root = accrue::cuda::viewRoot(memref);
    auto rootType = cast<MemRefType>(root.getType());
    Value rootPointer =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, root);
    Value rootOffset =
        memref::ExtractStridedMetadataOp::create(b, loc, root).getOffset();
    Value rootBytes = arith::ConstantIndexOp::create(
        b, loc, std::max<int64_t>(rootType.getElementTypeBitWidth() / 8, 1));
    Value base = arith::AddIOp::create(
        b, loc, rootPointer,
        arith::MulIOp::create(b, loc, rootOffset, rootBytes));
    Value offset = arith::SubIOp::create(b, loc, address, base);

    Value flags = arith::OrIOp::create(
        b, loc,
        constantI64(b, loc,
                    (isStore ? ACCRUE_EMU_STORE : 0) |
                        (sharedIndex ? ACCRUE_EMU_SHARED : 0) |
                        (elementBytes << ACCRUE_EMU_ELEMENT_SHIFT)),
        arith::ShLIOp::create(
            b, loc, arith::ExtUIOp::create(b, loc, b.getI64Type(), inBounds),
            constantI64(b, loc, 1)));
    func::CallOp::create(
        b, loc, entries.access,
        ValueRange{constantI64(b, loc, site),
                   constantI64(b, loc,
                               sharedIndex
                                   ? ACCRUE_EMU_ROOT_SHARED + *sharedIndex
                                   : rootId(root)),
                   toI64(b, loc, offset), toI64(b, loc, address),
                   constantI64(b, loc, elementBytes * width), flags});

    // Only accesses inside their view touch memory: one outside reads
    // element 0 of the view instead and a store there writes back what it
    // holds. (Selects, not branches: the kernel stays one basic block, so
    // LLVM contracts the same multiply-adds as without counting, and the
    // counted step computes bit for bit what the uncounted one does.)
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    SmallVector<Value> safe;
    for (Value index : indices)
      safe.push_back(arith::SelectOp::create(b, loc, inBounds, index, zero));
    // Every access takes its indices last; a store, its value first.
    if (isStore) {
      Value held =
          width > 1 ? vector::LoadOp::create(
                          b, loc, cast<VectorType>(op->getOperand(0).getType()),
                          memref, safe)
                          .getResult()
                    : memref::LoadOp::create(b, loc, memref, safe).getResult();
      op->setOperand(0, arith::SelectOp::create(b, loc, inBounds,
                                                op->getOperand(0), held));
    }
    unsigned first = op->getNumOperands() - safe.size();
    for (auto [d, index] : llvm::enumerate(safe))
      op->setOperand(first + d, index);
  }

  /// A step argument's number, or ACCRUE_EMU_ROOT_OTHER plus the order in
  /// which other buffers (globals, allocations) are first met.
  int64_t rootId(Value root) {
    if (auto arg = dyn_cast<BlockArgument>(root))
      if (arg.getOwner() == &step.getBody().front())
        return arg.getArgNumber();
    auto [it, inserted] = others.try_emplace(root, others.size());
    return ACCRUE_EMU_ROOT_OTHER + it->second;
  }

  CounterEntries entries;
  func::FuncOp step;
  DenseMap<Value, int64_t> others;
};

struct CudaEmulateKernelsPass
    : public accrue::cuda::impl::CudaEmulateKernelsBase<
          CudaEmulateKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<CounterEntries> entries;
    if (countAccesses) {
      entries = CounterEntries::declare(module);
      symbols.emplace(module);
    }
    for (auto function : module.getOps<func::FuncOp>()) {
      SmallVector<gpu::LaunchOp> launches;
      function.walk([&](gpu::LaunchOp launch) { launches.push_back(launch); });
      AccessInstrumenter instrumenter(entries ? *entries : CounterEntries(),
                                      function);
      for (auto [index, launch] : llvm::enumerate(launches)) {
        FailureOr<SmallVector<Value>> shared = placeShared(launch);
        if (failed(shared) ||
            (entries && failed(instrumenter.instrument(launch, *shared))))
          return signalPassFailure();
        if (failed(emulate(launch, index, entries)))
          return signalPassFailure();
      }
    }
  }

  std::optional<SymbolTable> symbols;

  /// Puts `launch` in an alloca scope (which frees what its emulation
  /// keeps on the stack) and gives each workgroup (shared) buffer a stack
  /// buffer there, before the launch, which each block in turn uses (the
  /// GPU leaves its contents undefined at a block's start); returns those.
  FailureOr<SmallVector<Value>> placeShared(gpu::LaunchOp launch) {
    OpBuilder b(launch);
    Location loc = launch.getLoc();
    auto scope = memref::AllocaScopeOp::create(b, loc, TypeRange{});
    b.createBlock(&scope.getBodyRegion());
    memref::AllocaScopeReturnOp::create(b, loc, ValueRange{});
    launch->moveBefore(scope.getBodyRegion().front().getTerminator());
    b.setInsertionPoint(launch);
    SmallVector<Value> shared;
    for (BlockArgument arg : launch.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(arg.getType());
      if (!type.hasStaticShape())
        return launch.emitError("cannot emulate shared memory of a dynamic "
                                "shape");
      Value buffer = memref::AllocaOp::create(
          b, loc, MemRefType::get(type.getShape(), type.getElementType()));
      arg.replaceAllUsesWith(buffer);
      shared.push_back(buffer);
    }
    return shared;
  }

  /// "<name>\0<node>\0" of kernel `index`, as a constant global.
  memref::GlobalOp kernelNameGlobal(gpu::LaunchOp launch, unsigned index) {
    ModuleOp module = getOperation();
    std::string text = accrue::cuda::kernelName(launch.getLoc(), index);
    text += '\0';
    text += accrue::cuda::kernelNode(launch);
    text += '\0';
    OpBuilder b(module.getContext());
    auto type = MemRefType::get({int64_t(text.size())}, b.getI8Type());
    SmallVector<int8_t> bytes(text.begin(), text.end());
    auto global = memref::GlobalOp::create(
        b, module.getLoc(), "__accrue_kernel_name_" + std::to_string(index),
        b.getStringAttr("private"), type,
        DenseElementsAttr::get(
            RankedTensorType::get(type.getShape(), b.getI8Type()),
            ArrayRef<int8_t>(bytes)),
        /*constant=*/true, /*alignment=*/nullptr);
    symbols->insert(global); // renamed if the name is taken
    return global;
  }

  /// Values kept past their phase: per thread of a block, the buffer and
  /// the phase that writes it.
  using Kept = llvm::MapVector<Value, std::pair<Value, unsigned>>;

  /// Blocks, then, for each phase in turn, the block's threads (z
  /// outermost). A value one phase defines and a later one uses is kept
  /// per thread of the block (constants are cloned instead), and a
  /// shuffle reads the value its partner lane kept: each lane of a warp
  /// ran the phases before it. The thread entry of the counting emulator
  /// is called again at the start of each phase, and its barrier entry
  /// once per block before a phase a barrier starts.
  LogicalResult emulatePhases(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                              ArrayRef<SmallVector<Operation *>> phases,
                              ArrayRef<Value> extents, ArrayRef<Value> ids,
                              IRMapping &mapping,
                              const std::optional<CounterEntries> &entries) {
    Block &body = launch.getBody().front();
    DenseMap<Operation *, unsigned> phaseOf;
    for (auto [k, phase] : llvm::enumerate(phases))
      for (Operation *op : phase)
        phaseOf[op] = k;
    // The kept values live on the stack, in the launch's alloca scope.
    Value blockThreads = arith::MulIOp::create(
        b, loc, arith::MulIOp::create(b, loc, extents[3], extents[4]),
        extents[5]);
    // Values used past their phase: a buffer of one per thread of a block.
    Kept kept;
    SmallVector<Operation *> constants;
    for (unsigned k = 0; k < phases.size(); ++k)
      for (Operation *op : phases[k])
        for (Value result : op->getResults()) {
          bool later = llvm::any_of(result.getUsers(), [&](Operation *user) {
            return phaseOf.lookup(body.findAncestorOpInBlock(*user)) > k;
          });
          if (!later)
            continue;
          if (op->hasTrait<OpTrait::ConstantLike>()) {
            constants.push_back(op);
            break;
          }
          if (!BaseMemRefType::isValidElementType(result.getType()))
            return op->emitError("cannot emulate a kernel that keeps this "
                                 "value across a shuffle or a barrier");
          Value buffer = memref::AllocaOp::create(
              b, loc, MemRefType::get({ShapedType::kDynamic}, result.getType()),
              ValueRange{blockThreads});
          kept[result] = {buffer, k};
        }
    func::CallOp threadCall;
    for (Operation *op : phases.front())
      if (auto call = dyn_cast<func::CallOp>(op);
          call && call.getCallee() == ACCRUE_EMU_THREAD_FUNCTION)
        threadCall = call;
    Value warp = arith::ConstantIndexOp::create(b, loc, kWarpSize);

    // Blocks, then each phase's threads.
    nestLoops(b, loc, extents, ids, 0, 3, mapping, [&](OpBuilder &nb) {
      for (unsigned k = 0; k < phases.size(); ++k) {
        if (entries && isa<gpu::BarrierOp>(phases[k].front()))
          func::CallOp::create(nb, loc, entries->barrier, ValueRange{});
        runPhase(nb, loc, k, phases[k], extents, ids, mapping, kept, constants,
                 threadCall, warp, blockThreads);
      }
    });
    return success();
  }

  /// Phase `k` of a block: its ops, for each thread of the block.
  void runPhase(OpBuilder &b, Location loc, unsigned k,
                ArrayRef<Operation *> phase, ArrayRef<Value> extents,
                ArrayRef<Value> ids, IRMapping &mapping, const Kept &kept,
                ArrayRef<Operation *> constants, func::CallOp threadCall,
                Value warp, Value blockThreads) {
    nestLoops(b, loc, extents, ids, 3, 6, mapping, [&](OpBuilder &nb) {
      // The thread's index in its block (x fastest, as warps are formed).
      Value tid = arith::AddIOp::create(
          nb, loc,
          arith::MulIOp::create(
              nb, loc,
              arith::AddIOp::create(
                  nb, loc,
                  arith::MulIOp::create(nb, loc, mapping.lookup(ids[3]),
                                        extents[4]),
                  mapping.lookup(ids[4])),
              extents[5]),
          mapping.lookup(ids[5]));
      for (Operation *constant : constants)
        nb.clone(*constant, mapping);
      for (auto &[value, entry] : kept)
        if (entry.second < k)
          mapping.map(value, memref::LoadOp::create(nb, loc, entry.first, tid));
      if (threadCall && k > 0) {
        // Its operands again (the thread's ids), then the call.
        for (Value id : threadCall.getOperands())
          if (Operation *def = id.getDefiningOp();
              def && def->getBlock() == threadCall->getBlock())
            nb.clone(*def, mapping);
        nb.clone(*threadCall, mapping);
      }
      for (Operation *op : phase) {
        if (isa<gpu::BarrierOp>(op))
          continue; // the phases are the barrier
        auto shuffle = dyn_cast<gpu::ShuffleOp>(op);
        if (!shuffle) {
          nb.clone(*op, mapping);
          continue;
        }
        emulateShuffle(nb, loc, shuffle, tid, warp, blockThreads, mapping,
                       kept);
      }
      for (auto &[value, entry] : kept)
        if (entry.second == k)
          memref::StoreOp::create(nb, loc, mapping.lookup(value), entry.first,
                                  tid);
    });
  }

  /// A shuffle of thread `tid`: the value its partner lane kept, or its
  /// own outside the width.
  void emulateShuffle(OpBuilder &b, Location loc, gpu::ShuffleOp shuffle,
                      Value tid, Value warp, Value blockThreads,
                      IRMapping &mapping, const Kept &kept) {
    auto toIndex = [&](Value v) {
      return arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                        mapping.lookupOrDefault(v))
          .getResult();
    };
    Value offset = toIndex(shuffle.getOffset());
    Value width = toIndex(shuffle.getWidth());
    Value lane = arith::RemUIOp::create(b, loc, tid, warp);
    Value base = arith::SubIOp::create(b, loc, tid, lane);
    Value partner, valid;
    switch (shuffle.getMode()) {
    case gpu::ShuffleMode::XOR:
      partner = arith::XOrIOp::create(b, loc, lane, offset);
      break;
    case gpu::ShuffleMode::IDX:
      partner = offset;
      break;
    case gpu::ShuffleMode::DOWN:
      partner = arith::AddIOp::create(b, loc, lane, offset);
      break;
    case gpu::ShuffleMode::UP:
      partner = arith::SubIOp::create(b, loc, lane, offset);
      break;
    }
    // (Unsigned: a lane below zero is above the width.)
    valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, partner,
                                  width);
    Value source = arith::AddIOp::create(b, loc, base, partner);
    valid = arith::AndIOp::create(
        b, loc, valid,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, source,
                              blockThreads));
    source = arith::SelectOp::create(b, loc, valid, source, tid);
    Value own = mapping.lookupOrDefault(shuffle.getValue());
    Value result = own;
    if (auto it = kept.find(shuffle.getValue()); it != kept.end())
      result = memref::LoadOp::create(b, loc, it->second.first, source);
    mapping.map(shuffle.getShuffleResult(), result);
    mapping.map(shuffle.getValid(), valid);
  }

  /// Blocks, then threads, z outermost; the body runs once per thread.
  LogicalResult emulate(gpu::LaunchOp launch, unsigned index,
                        const std::optional<CounterEntries> &entries) {
    if (launch.getAsyncToken())
      return launch.emitError("cannot emulate an asynchronous kernel");
    OpBuilder b(launch);
    Location loc = launch.getLoc();
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    if (entries) {
      memref::GlobalOp name = kernelNameGlobal(launch, index);
      Value text = memref::GetGlobalOp::create(b, loc, name.getType(),
                                               name.getSymName());
      SmallVector<Value> operands{
          constantI64(b, loc, index),
          toI64(b, loc,
                memref::ExtractAlignedPointerAsIndexOp::create(b, loc, text))};
      for (Value size : {grid.x, grid.y, grid.z, block.x, block.y, block.z})
        operands.push_back(toI64(b, loc, size));
      func::CallOp::create(b, loc, entries->launch, operands);
    }
    SmallVector<Value> extents{grid.z,  grid.y,  grid.x,
                               block.z, block.y, block.x};
    gpu::KernelDim3 blockIds = launch.getBlockIds();
    gpu::KernelDim3 threadIds = launch.getThreadIds();
    SmallVector<Value> ids{blockIds.z,  blockIds.y,  blockIds.x,
                           threadIds.z, threadIds.y, threadIds.x};
    IRMapping mapping;
    gpu::KernelDim3 gridArgs = launch.getGridSize();
    gpu::KernelDim3 blockArgs = launch.getBlockSize();
    for (auto [arg, value] :
         llvm::zip(SmallVector<Value>{gridArgs.x, gridArgs.y, gridArgs.z,
                                      blockArgs.x, blockArgs.y, blockArgs.z},
                   SmallVector<Value>{grid.x, grid.y, grid.z, block.x, block.y,
                                      block.z}))
      mapping.map(arg, value);
    Block &body = launch.getBody().front();
    WalkResult nested = body.walk([&](Operation *op) {
      if (!isa<gpu::ShuffleOp, gpu::BarrierOp>(op) || op->getBlock() == &body)
        return WalkResult::advance();
      op->emitError("cannot emulate a shuffle or a barrier inside a branch "
                    "or a loop: every thread of the block must reach it");
      return WalkResult::interrupt();
    });
    if (nested.wasInterrupted())
      return failure();
    // The body's phases: a shuffle or a barrier starts a phase, which runs
    // after every thread of the block has run the phases before (the
    // warp's lanes have all computed the value a shuffle exchanges).
    SmallVector<SmallVector<Operation *>> phases(1);
    for (Operation &op : body.without_terminator()) {
      if (isa<gpu::ShuffleOp, gpu::BarrierOp>(op))
        phases.emplace_back();
      phases.back().push_back(&op);
    }
    if (phases.size() == 1) {
      nestLoops(b, loc, extents, ids, 0, ids.size(), mapping,
                [&](OpBuilder &nb) {
                  for (Operation &op : body.without_terminator())
                    nb.clone(op, mapping);
                });
    } else {
      if (failed(emulatePhases(b, loc, launch, phases, extents, ids, mapping,
                               entries)))
        return failure();
    }
    if (entries)
      func::CallOp::create(b, loc, entries->launchEnd, ValueRange{});
    launch.erase();
    return success();
  }
};

} // namespace
