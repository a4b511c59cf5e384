//===- BufferizableOpInterfaceImpl.cpp - train ops on buffers ---*- C++ -*-===//
//
// `train.accumulate` bufferizes as one op: the accumulator operand and the
// result are the same buffer, and each gradient is added into a subview of
// it. Lowering it before bufferization instead gives a chain of
// extract_slice / add / insert_slice per parameter on one tensor, and
// one-shot bufferization's conflict analysis walks that chain from every
// read in it: cubic in the number of parameters (a 12-layer GPT, 150
// parameters: 39 s of a 53 s compile).
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/Transforms/BufferizableOpInterfaceImpl.h"

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace accrue::train;

namespace {

/// The `numElements` elements of `arena` from `offset` on, shaped like
/// `shape`.
Value arenaView(OpBuilder &b, Location loc, Value arena, int64_t offset,
                ArrayRef<int64_t> shape) {
  int64_t numElements = 1;
  for (int64_t d : shape)
    numElements *= d;
  Value view = memref::SubViewOp::create(
      b, loc, arena, ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(numElements)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  if (shape.empty())
    return memref::CollapseShapeOp::create(b, loc, view,
                                           ArrayRef<ReassociationIndices>{});
  if (shape.size() == 1)
    return view;
  SmallVector<ReassociationIndices> reassociation{
      llvm::to_vector(llvm::seq<int64_t>(0, shape.size()))};
  FailureOr<MemRefType> type = memref::ExpandShapeOp::computeExpandedType(
      cast<MemRefType>(view.getType()), shape, reassociation);
  assert(succeeded(type) && "a contiguous slice always expands");
  return memref::ExpandShapeOp::create(b, loc, *type, view, reassociation);
}

/// Bufferizes `op`, which writes each of `values` into the slice of `arena`
/// at its offset (the layout of a train.unpack), in place: `write(value,
/// view)` emits the write of one value's buffer into its arena view.
LogicalResult bufferizeSliceWrites(
    RewriterBase &rewriter, Operation *op, Value arenaTensor, ValueRange values,
    ArrayRef<int64_t> offsets, const BufferizationOptions &options,
    BufferizationState &state,
    llvm::function_ref<void(OpBuilder &, Location, Value, Value)> write) {
  Location loc = op->getLoc();
  FailureOr<Value> arena = getBuffer(rewriter, arenaTensor, options, state);
  if (failed(arena))
    return failure();
  for (auto [offset, value] : llvm::zip(offsets, values)) {
    FailureOr<Value> buffer = getBuffer(rewriter, value, options, state);
    if (failed(buffer))
      return failure();
    auto type = cast<MemRefType>(buffer->getType());
    write(rewriter, loc, *buffer,
          arenaView(rewriter, loc, *arena, offset, type.getShape()));
  }
  replaceOpWithBufferizedValues(rewriter, op, *arena);
  return success();
}

/// The analysis of an op that reads all its operands and updates its first
/// (an arena) in place, as its first result.
template <typename Concrete, typename Op>
struct UpdatesFirstOperandInPlace
    : public BufferizableOpInterface::ExternalModel<Concrete, Op> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }

  bool bufferizesToMemoryWrite(Operation *, OpOperand &operand,
                               const AnalysisState &) const {
    return operand.getOperandNumber() == 0;
  }

  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    if (operand.getOperandNumber() != 0)
      return {};
    return {{op->getResult(0), BufferRelation::Equivalent}};
  }
};

struct AccumulateOpInterface
    : public UpdatesFirstOperandInPlace<AccumulateOpInterface, AccumulateOp> {

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto accumulate = cast<AccumulateOp>(op);
    return bufferizeSliceWrites(
        rewriter, op, accumulate.getAccumulator(), accumulate.getGradients(),
        accumulate.getOffsets(), options, state,
        [](OpBuilder &b, Location loc, Value grad, Value view) {
          auto type = cast<MemRefType>(grad.getType());
          AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
          linalg::GenericOp::create(
              b, loc, ValueRange{grad}, ValueRange{view},
              ArrayRef<AffineMap>{identity, identity},
              SmallVector<utils::IteratorType>(type.getRank(),
                                               utils::IteratorType::parallel),
              [](OpBuilder &nb, Location l, ValueRange args) {
                Value sum = arith::AddFOp::create(nb, l, args[1], args[0]);
                linalg::YieldOp::create(nb, l, sum);
              });
        });
  }
};

struct StoreOpInterface
    : public UpdatesFirstOperandInPlace<StoreOpInterface, StoreOp> {

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto store = cast<StoreOp>(op);
    return bufferizeSliceWrites(
        rewriter, op, store.getArena(), store.getValues(), store.getOffsets(),
        options, state,
        [](OpBuilder &b, Location loc, Value value, Value view) {
          linalg::CopyOp::create(b, loc, value, view);
        });
  }
};

/// The rank-1 f32 memref type the collective hooks take.
MemRefType hookBufferType(MLIRContext *ctx) {
  return MemRefType::get({ShapedType::kDynamic}, Float32Type::get(ctx),
                         StridedLayoutAttr::get(ctx, ShapedType::kDynamic,
                                                {ShapedType::kDynamic}));
}

/// A collective hook of the host (the step contract's) taking `inputs`,
/// declared once per module and called through MLIR's C interface.
func::FuncOp hookFunction(RewriterBase &rewriter, Operation *from,
                          StringRef name, TypeRange inputs) {
  auto module = from->getParentOfType<ModuleOp>();
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(module.getBody());
  auto fn = func::FuncOp::create(rewriter, module.getLoc(), name,
                                 rewriter.getFunctionType(inputs, {}));
  fn.setPrivate();
  fn->setAttr("llvm.emit_c_interface", rewriter.getUnitAttr());
  return fn;
}

/// Calls the host's collective `name` on `buffer` (a rank-1 f32 buffer)
/// and, for the reduce-scatter, `count`, the number of elements used.
void callCollective(RewriterBase &rewriter, Operation *op, StringRef name,
                    Value buffer, std::optional<int64_t> count = {}) {
  SmallVector<Type> inputs{hookBufferType(rewriter.getContext())};
  if (count)
    inputs.push_back(rewriter.getI64Type());
  func::FuncOp callee = hookFunction(rewriter, op, name, inputs);
  Location loc = op->getLoc();
  SmallVector<Value> args{
      memref::CastOp::create(rewriter, loc, inputs[0], buffer)};
  if (count)
    args.push_back(arith::ConstantIntOp::create(rewriter, loc,
                                                rewriter.getI64Type(), *count));
  func::CallOp::create(rewriter, loc, callee, args);
}

/// Calls the host's all-reduce on `buffer`.
void callAllReduce(RewriterBase &rewriter, Operation *op, Value buffer) {
  callCollective(rewriter, op, ACCRUE_ALL_REDUCE_FUNCTION, buffer);
}

/// The host collective an arena op calls, and the count of elements used
/// where it takes one.
std::pair<StringRef, std::optional<int64_t>> hookOf(AllReduceArenaOp op) {
  // A scattering all_reduce_arena (ZeRO on a device) reduce-scatters.
  if (std::optional<uint64_t> used = op.getScatterUsed())
    return {ACCRUE_REDUCE_SCATTER_FUNCTION, static_cast<int64_t>(*used)};
  return {ACCRUE_ALL_REDUCE_FUNCTION, std::nullopt};
}
std::pair<StringRef, std::optional<int64_t>> hookOf(AllGatherArenaOp) {
  return {ACCRUE_ALL_GATHER_FUNCTION, std::nullopt};
}

/// An op that hands its one arena operand to a host collective (hookOf),
/// in place (train.all_reduce_arena, train.all_gather_arena).
template <typename Op>
struct ArenaHookOpInterface
    : public UpdatesFirstOperandInPlace<ArenaHookOpInterface<Op>, Op> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    FailureOr<Value> arena =
        getBuffer(rewriter, op->getOperand(0), options, state);
    if (failed(arena))
      return failure();
    auto [hook, used] = hookOf(cast<Op>(op));
    callCollective(rewriter, op, hook, *arena, used);
    replaceOpWithBufferizedValues(rewriter, op, {*arena});
    return success();
  }
};

struct AllReduceOpInterface
    : public UpdatesFirstOperandInPlace<AllReduceOpInterface, AllReduceOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto reduce = cast<AllReduceOp>(op);
    Location loc = op->getLoc();
    FailureOr<Value> arena =
        getBuffer(rewriter, reduce.getAccumulator(), options, state);
    if (failed(arena))
      return failure();
    // The scalars ride in the two free elements at scalars_at, so that the
    // gradients and the scalars are one buffer, summed in place.
    int64_t at = reduce.getScalarsAt();
    Value sumAt = arith::ConstantIndexOp::create(rewriter, loc, at);
    Value countAt = arith::ConstantIndexOp::create(rewriter, loc, at + 1);
    memref::StoreOp::create(rewriter, loc, reduce.getLossSum(), *arena,
                            ValueRange{sumAt});
    memref::StoreOp::create(rewriter, loc, reduce.getCount(), *arena,
                            ValueRange{countAt});
    if (reduce.getScatter()) {
      // The shards are the whole arena's; the data ends after the scalars.
      callCollective(rewriter, op, ACCRUE_REDUCE_SCATTER_FUNCTION, *arena,
                     at + 2);
    } else {
      Value prefix = memref::SubViewOp::create(
          rewriter, loc, *arena,
          ArrayRef<OpFoldResult>{rewriter.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{rewriter.getIndexAttr(at + 2)},
          ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
      callAllReduce(rewriter, op, prefix);
    }
    Value sum =
        memref::LoadOp::create(rewriter, loc, *arena, ValueRange{sumAt});
    Value count =
        memref::LoadOp::create(rewriter, loc, *arena, ValueRange{countAt});
    // Nothing else sees them: the slots are zero again.
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(0));
    memref::StoreOp::create(rewriter, loc, zero, *arena, ValueRange{sumAt});
    memref::StoreOp::create(rewriter, loc, zero, *arena, ValueRange{countAt});
    replaceOpWithBufferizedValues(rewriter, op, {*arena, sum, count});
    return success();
  }
};

/// Stage 2's reduce-scatter of one gradient into the accumulator's shard:
/// the shard is updated in place and the gradient's buffer is the hook's
/// to overwrite (the engines reduce in place), so a gradient read later is
/// copied first by the analysis.
struct ReduceScatterAddOpInterface
    : public UpdatesFirstOperandInPlace<ReduceScatterAddOpInterface,
                                        ReduceScatterAddOp> {
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return true;
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto scatter = cast<ReduceScatterAddOp>(op);
    Location loc = op->getLoc();
    FailureOr<Value> shard =
        getBuffer(rewriter, scatter.getShard(), options, state);
    FailureOr<Value> gradient =
        getBuffer(rewriter, scatter.getGradient(), options, state);
    if (failed(shard) || failed(gradient))
      return failure();
    // The hook takes the gradient flat: a contiguous buffer is collapsed
    // (a scalar expanded), anything else copied.
    auto type = cast<MemRefType>(gradient->getType());
    Value flat = *gradient, copy;
    if (!type.getLayout().isIdentity()) {
      copy = memref::AllocOp::create(
          rewriter, loc,
          MemRefType::get(type.getShape(), type.getElementType()));
      memref::CopyOp::create(rewriter, loc, *gradient, copy);
      flat = copy;
    }
    if (type.getRank() == 0) {
      flat = memref::ExpandShapeOp::create(
          rewriter, loc, MemRefType::get({1}, type.getElementType()), flat,
          ArrayRef<ReassociationIndices>{});
    } else if (type.getRank() > 1) {
      SmallVector<ReassociationIndices> all{
          llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))};
      flat = memref::CollapseShapeOp::create(rewriter, loc, flat, all);
    }
    MemRefType buffer = hookBufferType(rewriter.getContext());
    Type i64 = rewriter.getI64Type();
    func::FuncOp callee =
        hookFunction(rewriter, op, ACCRUE_REDUCE_SCATTER_ADD_FUNCTION,
                     {buffer, buffer, i64, i64});
    func::CallOp::create(
        rewriter, loc, callee,
        ValueRange{memref::CastOp::create(rewriter, loc, buffer, flat),
                   memref::CastOp::create(rewriter, loc, buffer, *shard),
                   arith::ConstantIntOp::create(rewriter, loc, i64,
                                                scatter.getOffset()),
                   arith::ConstantIntOp::create(rewriter, loc, i64,
                                                scatter.getArenaSize())});
    if (copy)
      memref::DeallocOp::create(rewriter, loc, copy);
    replaceOpWithBufferizedValues(rewriter, op, {*shard});
    return success();
  }
};

} // namespace

void accrue::train::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, TrainDialect *) {
    AccumulateOp::attachInterface<AccumulateOpInterface>(*ctx);
    StoreOp::attachInterface<StoreOpInterface>(*ctx);
    AllReduceOp::attachInterface<AllReduceOpInterface>(*ctx);
    AllReduceArenaOp::attachInterface<ArenaHookOpInterface<AllReduceArenaOp>>(
        *ctx);
    AllGatherArenaOp::attachInterface<ArenaHookOpInterface<AllGatherArenaOp>>(
        *ctx);
    ReduceScatterAddOp::attachInterface<ReduceScatterAddOpInterface>(*ctx);
  });
}
