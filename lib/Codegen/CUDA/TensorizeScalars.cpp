//===- TensorizeScalars.cpp - scalars from tensor data stay on device -----===//
//
// On the CPU the glue between kernels (the loss sum and count carried by the
// micro-batch loop, the normalization factor, the clipping coefficient, the
// metrics) is plain scalar code that reads tensor data. On a device that code
// would read device memory from the host and synchronize every step. This
// pass finds every scalar computed from tensor data ("device scalars") and
// keeps it in a rank-0 tensor, so that after bufferization it is a device
// buffer written and read by kernels only.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDATENSORIZESCALARS
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;

namespace {

bool isScalar(Type type) { return type.isIntOrIndexOrFloat(); }

/// Whether `loop` is element-wise work on tensors written as a loop (the
/// scatter-add of an embedding's gradient): tensors in and out, no linalg
/// op or call inside. It becomes one kernel as a whole.
bool isDataLoop(scf::ForOp loop) {
  if (loop.getNumRegionIterArgs() == 0 ||
      !llvm::all_of(loop.getResultTypes(),
                    [](Type t) { return isa<RankedTensorType>(t); }))
    return false;
  WalkResult found = loop.getBody()->walk([](Operation *op) {
    return isa<linalg::LinalgOp, CallOpInterface>(op) ||
                   op->getDialect()->getNamespace() == "train"
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  return !found.wasInterrupted();
}

/// Whether `op` lies in device code already: the body of a linalg op or
/// of a data loop.
bool inLinalgBody(Operation *op) {
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp()) {
    if (isa<linalg::LinalgOp>(parent))
      return true;
    if (auto loop = dyn_cast<scf::ForOp>(parent); loop && isDataLoop(loop))
      return true;
  }
  return false;
}

class Tensorizer {
public:
  explicit Tensorizer(func::FuncOp func) : func(func) {}

  LogicalResult run() {
    analyze();
    if (device.empty())
      return success();
    if (failed(rewriteRegion(func.getBody())))
      return failure();
    // The scalar ops are replaced; erase them users first.
    for (Operation *op : llvm::reverse(dead)) {
      op->dropAllUses();
      op->erase();
    }
    return success();
  }

private:
  /// Marks `value` a device scalar; returns whether it was new.
  bool mark(Value value, SmallVectorImpl<Value> &worklist) {
    if (!isScalar(value.getType()) || !device.insert(value).second)
      return false;
    worklist.push_back(value);
    return true;
  }

  /// Finds the device scalars: tensor.extract outside linalg bodies, and
  /// everything computed from them, through loop-carried values.
  void analyze() {
    SmallVector<Value> worklist;
    func.walk([&](tensor::ExtractOp extract) {
      if (!inLinalgBody(extract))
        mark(extract.getResult(), worklist);
    });
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        if (inLinalgBody(user) || isa<linalg::LinalgOp>(user))
          continue;
        if (auto yield = dyn_cast<scf::YieldOp>(user)) {
          if (auto loop = dyn_cast<scf::ForOp>(yield->getParentOp())) {
            unsigned i = use.getOperandNumber();
            mark(loop.getRegionIterArg(i), worklist);
            mark(loop.getResult(i), worklist);
          }
          continue;
        }
        if (auto loop = dyn_cast<scf::ForOp>(user)) {
          if (use.getOperandNumber() >= loop.getNumControlOperands()) {
            unsigned i = use.getOperandNumber() - loop.getNumControlOperands();
            mark(loop.getRegionIterArg(i), worklist);
            mark(loop.getResult(i), worklist);
          }
          continue;
        }
        if (user->getNumRegions() != 0)
          continue; // reported when rewritten
        for (Value result : user->getResults())
          mark(result, worklist);
      }
    }
  }

  /// The rank-0 tensor type of a scalar.
  static RankedTensorType tensorOf(Type scalar) {
    return RankedTensorType::get({}, scalar);
  }

  /// A rank-0 tensor holding the host scalar `value` (a device-side fill).
  Value filled(OpBuilder &b, Location loc, Value value) {
    Value empty =
        tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, value.getType());
    return linalg::FillOp::create(b, loc, value, empty).getResult(0);
  }

  /// The rank-0 tensor standing for scalar `value`: its device tensor, or
  /// a fill of a host value.
  Value asTensor(OpBuilder &b, Location loc, Value value) {
    if (device.contains(value))
      return tensors.lookup(value);
    return filled(b, loc, value);
  }

  LogicalResult rewriteRegion(Region &region) {
    for (Block &block : region)
      for (Operation &op : llvm::make_early_inc_range(block))
        if (failed(rewriteOp(&op)))
          return failure();
    return success();
  }

  bool hasDeviceOperand(Operation *op) {
    return llvm::any_of(op->getOperands(),
                        [&](Value v) { return device.contains(v); });
  }

  LogicalResult rewriteOp(Operation *op) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
      return rewriteLinalg(linalgOp);
    if (auto loop = dyn_cast<scf::ForOp>(op))
      return isDataLoop(loop) ? rewriteDataLoop(loop) : rewriteFor(loop);
    if (auto reduce = dyn_cast<train::AllReduceOp>(op))
      return rewriteAllReduce(reduce);
    // A loop's yield is rewritten with its loop.
    if (isa<scf::YieldOp>(op) && isa<scf::ForOp>(op->getParentOp()))
      return success();
    bool producesDevice = llvm::any_of(
        op->getResults(), [&](Value v) { return device.contains(v); });
    if (producesDevice)
      return rewriteScalarOp(op);
    if (hasDeviceOperand(op)) {
      if (auto store = dyn_cast<memref::StoreOp>(op))
        return rewriteStore(store);
      if (auto elements = dyn_cast<tensor::FromElementsOp>(op))
        return rewriteFromElements(elements);
      return op->emitError("host code needs '")
             << op->getName()
             << "' of a value computed on the device (from tensor data); "
                "running it would synchronize the device every step";
    }
    for (Region &region : op->getRegions())
      if (failed(rewriteRegion(region)))
        return failure();
    return success();
  }

  /// A scalar op on device scalars becomes a rank-0 linalg.generic.
  LogicalResult rewriteScalarOp(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      Value source = extract.getTensor();
      if (llvm::any_of(extract.getIndices(),
                       [&](Value v) { return device.contains(v); }))
        return op->emitError("an index computed on the device would be read "
                             "by host code");
      Value tensor = source;
      auto type = cast<RankedTensorType>(source.getType());
      if (type.getRank() != 0) {
        int64_t rank = type.getRank();
        SmallVector<OpFoldResult> offsets(extract.getIndices());
        SmallVector<OpFoldResult> ones(rank, b.getIndexAttr(1));
        tensor = tensor::ExtractSliceOp::create(b, loc,
                                                tensorOf(type.getElementType()),
                                                source, offsets, ones, ones);
      }
      tensors.map(extract.getResult(), tensor);
      dead.push_back(op);
      return success();
    }
    if (op->getNumRegions() != 0 ||
        !llvm::all_of(op->getResultTypes(), isScalar))
      return op->emitError("'")
             << op->getName()
             << "' on values computed on the device cannot move to the "
                "device";
    // Update a device operand of the result's type in place (destination
    // passing): a loop-carried sum then stays in one buffer, and
    // bufferization copies only where the operand is still needed.
    std::optional<unsigned> inPlace;
    if (op->getNumResults() == 1)
      for (auto [i, operand] : llvm::enumerate(op->getOperands()))
        if (device.contains(operand) &&
            getElementTypeOrSelf(operand.getType()) ==
                op->getResult(0).getType()) {
          inPlace = i;
          break;
        }
    SmallVector<Value> inputs;
    SmallVector<unsigned> inputPositions;
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (device.contains(operand) && inPlace != i) {
        inputs.push_back(tensors.lookup(operand));
        inputPositions.push_back(i);
      }
    SmallVector<Value> outputs;
    if (inPlace)
      outputs.push_back(tensors.lookup(op->getOperand(*inPlace)));
    else
      for (Type type : op->getResultTypes())
        outputs.push_back(
            tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, type));
    SmallVector<AffineMap> maps(inputs.size() + outputs.size(),
                                AffineMap::get(b.getContext()));
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange(ValueRange(outputs)), inputs, outputs, maps,
        ArrayRef<utils::IteratorType>{},
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          IRMapping mapping;
          for (auto [k, position] : llvm::enumerate(inputPositions))
            mapping.map(op->getOperand(position), args[k]);
          if (inPlace)
            mapping.map(op->getOperand(*inPlace), args.back());
          Operation *clone = nb.clone(*op, mapping);
          linalg::YieldOp::create(nb, nloc, clone->getResults());
        });
    for (auto [result, value] :
         llvm::zip(op->getResults(), generic.getResults()))
      tensors.map(result, value);
    dead.push_back(op);
    return success();
  }

  /// The data-parallel all-reduce carries the loss sum and count in the
  /// accumulator's free tail: put them there and read them back with
  /// device copies, and sum the arena alone (or reduce-scatter it).
  LogicalResult rewriteAllReduce(train::AllReduceOp reduce) {
    OpBuilder b(reduce);
    Location loc = reduce.getLoc();
    int64_t at = reduce.getScalarsAt();
    auto one = RankedTensorType::get({1}, b.getF32Type());
    auto slot = [&](int64_t k) -> SmallVector<OpFoldResult> {
      return {b.getIndexAttr(at + k)};
    };
    SmallVector<OpFoldResult> unit{b.getIndexAttr(1)};
    Value arena = reduce.getAccumulator();
    SmallVector<Value> scalars{reduce.getLossSum(), reduce.getCount()};
    for (auto [k, scalar] : llvm::enumerate(scalars)) {
      Value element =
          tensor::ExpandShapeOp::create(b, loc, one, asTensor(b, loc, scalar),
                                        ArrayRef<ReassociationIndices>{});
      arena = tensor::InsertSliceOp::create(b, loc, element, arena, slot(k),
                                            unit, unit);
    }
    // (ZeRO: a reduce-scatter whose data ends after the two scalars.)
    auto summed = train::AllReduceArenaOp::create(b, loc, arena);
    if (reduce.getScatter())
      summed.setScatterUsed(at + 2);
    SmallVector<Value> results{reduce.getNewLossSum(), reduce.getNewCount()};
    for (auto [k, result] : llvm::enumerate(results))
      tensors.map(result, tensor::ExtractSliceOp::create(
                              b, loc, tensorOf(b.getF32Type()), summed, slot(k),
                              unit, unit));
    // Nothing else sees the slots: they are zero again.
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    Value empty =
        tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{2}, b.getF32Type());
    Value zeros = linalg::FillOp::create(b, loc, zero, empty).getResult(0);
    SmallVector<OpFoldResult> size2{b.getIndexAttr(2)};
    Value cleared = tensor::InsertSliceOp::create(b, loc, zeros, summed,
                                                  slot(0), size2, unit);
    reduce.getResult().replaceAllUsesWith(cleared);
    dead.push_back(reduce);
    return success();
  }

  /// A loop carrying device scalars carries rank-0 tensors instead.
  LogicalResult rewriteFor(scf::ForOp loop) {
    if (llvm::any_of(
            loop.getOperands().take_front(loop.getNumControlOperands()),
            [&](Value v) { return device.contains(v); }))
      return loop.emitError("host code needs 'scf.for' of a value computed "
                            "on the device (from tensor data) as a bound; "
                            "running it would synchronize the device every "
                            "step");
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    SmallVector<unsigned> carried;
    for (unsigned i = 0; i < loop.getNumRegionIterArgs(); ++i)
      if (device.contains(loop.getRegionIterArg(i)))
        carried.push_back(i);
    for (unsigned i : carried) {
      Value init = loop.getInitArgs()[i];
      Value tensor = asTensor(b, loc, init);
      loop.getInitArgsMutable()[i].set(tensor);
      BlockArgument iterArg = loop.getRegionIterArg(i);
      iterArg.setType(tensor.getType());
      tensors.map(iterArg, iterArg);
    }
    if (failed(rewriteRegion(loop.getRegion())))
      return failure();
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    OpBuilder yb(yield);
    for (unsigned i : carried) {
      // Written back into the loop-carried tensor, so that the loop keeps
      // one buffer (one-shot bufferization wants the yield equivalent to
      // the iteration argument; fusion folds the copy into its producer).
      Value yielded = asTensor(yb, yield.getLoc(), yield.getOperand(i));
      Value iterArg = loop.getRegionIterArg(i);
      auto producer = yielded.getDefiningOp<DestinationStyleOpInterface>();
      bool inPlace =
          yielded == iterArg ||
          (producer &&
           producer.getTiedOpOperand(cast<OpResult>(yielded))->get() ==
               iterArg);
      if (!inPlace)
        yielded = linalg::CopyOp::create(yb, yield.getLoc(), yielded, iterArg)
                      .getResult(0);
      yield.setOperand(i, yielded);
      Value result = loop.getResult(i);
      result.setType(loop.getRegionIterArg(i).getType());
      tensors.map(result, result);
    }
    return success();
  }

  /// A data loop runs as a kernel: device scalars it captures are read
  /// from their rank-0 tensors inside it.
  LogicalResult rewriteDataLoop(scf::ForOp loop) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(loop.getRegion(), captured);
    OpBuilder b = OpBuilder::atBlockBegin(loop.getBody());
    for (Value v : captured)
      if (device.contains(v)) {
        Value inside = tensor::ExtractOp::create(
            b, loop.getLoc(), tensors.lookup(v), ValueRange{});
        replaceAllUsesInRegionWith(v, inside, loop.getRegion());
      }
    if (llvm::any_of(loop.getInitArgs(),
                     [&](Value v) { return device.contains(v); }))
      return loop.emitError("a loop over tensor data starts from a scalar "
                            "computed on the device");
    return success();
  }

  /// Device scalars a linalg op reads (as scalar operands or captured by
  /// its body) become rank-0 tensor inputs.
  LogicalResult rewriteLinalg(linalg::LinalgOp op) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegion(0), captured);
    SmallVector<Value> deviceCaptured;
    for (Value v : captured)
      if (device.contains(v))
        deviceCaptured.push_back(v);
    if (deviceCaptured.empty() && !hasDeviceOperand(op))
      return success();
    IRRewriter rewriter(op->getContext());
    linalg::GenericOp generic = dyn_cast<linalg::GenericOp>(op.getOperation());
    if (!generic) {
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::GenericOp> generalized =
          linalg::generalizeNamedOp(rewriter, op);
      if (failed(generalized))
        return op->emitError("cannot read a device scalar in this op");
      generic = *generalized;
    }
    // Scalar inputs read through a `() -> ()` map work as rank-0 tensors.
    for (OpOperand *input : generic.getDpsInputOperands())
      if (device.contains(input->get()))
        input->set(tensors.lookup(input->get()));
    if (deviceCaptured.empty())
      return success();

    unsigned numLoops = generic.getNumLoops();
    SmallVector<Value> inputs(generic.getDpsInputs());
    SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
    unsigned firstNew = inputs.size();
    for (Value v : deviceCaptured) {
      inputs.push_back(tensors.lookup(v));
      maps.insert(maps.begin() + inputs.size() - 1,
                  AffineMap::get(numLoops, 0, op->getContext()));
    }
    rewriter.setInsertionPoint(generic);
    auto rebuilt = linalg::GenericOp::create(
        rewriter, generic.getLoc(), generic->getResultTypes(), inputs,
        generic.getDpsInits(), maps, generic.getIteratorTypesArray());
    rebuilt.getRegion().takeBody(generic.getRegion());
    Block &body = rebuilt.getRegion().front();
    for (auto [k, v] : llvm::enumerate(deviceCaptured)) {
      BlockArgument arg =
          body.insertArgument(firstNew + k, v.getType(), v.getLoc());
      replaceAllUsesInRegionWith(v, arg, rebuilt.getRegion());
    }
    rewriter.replaceOp(generic, rebuilt.getResults());
    return success();
  }

  /// A store of a device scalar (a metric) becomes a copy into the element.
  LogicalResult rewriteStore(memref::StoreOp store) {
    if (!device.contains(store.getValueToStore()) ||
        llvm::any_of(store.getIndices(),
                     [&](Value v) { return device.contains(v); }))
      return store.emitError("an index computed on the device would be "
                             "read by host code");
    OpBuilder b(store);
    Location loc = store.getLoc();
    auto type = cast<MemRefType>(store.getMemRef().getType());
    int64_t rank = type.getRank();
    SmallVector<OpFoldResult> offsets(store.getIndices());
    SmallVector<OpFoldResult> ones(rank, b.getIndexAttr(1));
    Value element = store.getMemRef();
    if (rank != 0) {
      auto elementType = memref::SubViewOp::inferRankReducedResultType(
          {}, type, offsets, ones, ones);
      element = memref::SubViewOp::create(b, loc, elementType, element, offsets,
                                          ones, ones);
    }
    bufferization::MaterializeInDestinationOp::create(
        b, loc, TypeRange{}, tensors.lookup(store.getValueToStore()), element,
        /*restrict=*/true, /*writable=*/true);
    dead.push_back(store);
    return success();
  }

  LogicalResult rewriteFromElements(tensor::FromElementsOp elements) {
    auto type = cast<RankedTensorType>(elements.getType());
    if (type.getNumElements() != 1)
      return elements.emitError(
          "a tensor built from several values computed on the device");
    Value tensor = tensors.lookup(elements.getElements()[0]);
    if (type.getRank() != 0) {
      OpBuilder b(elements);
      tensor = tensor::ExpandShapeOp::create(b, elements.getLoc(), type, tensor,
                                             ArrayRef<ReassociationIndices>{});
    }
    elements.replaceAllUsesWith(tensor);
    dead.push_back(elements);
    return success();
  }

  func::FuncOp func;
  DenseSet<Value> device;
  IRMapping tensors;
  SmallVector<Operation *> dead;
};

struct CudaTensorizeScalarsPass
    : public accrue::cuda::impl::CudaTensorizeScalarsBase<
          CudaTensorizeScalarsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (getOperation().isExternal())
      return;
    if (failed(Tensorizer(getOperation()).run()))
      signalPassFailure();
  }
};

} // namespace
