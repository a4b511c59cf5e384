//===- TrainOps.cpp - train op verifiers and type inference -----*- C++ -*-===//

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace accrue::train;

/// train.fused_update's accumulator type: the parameters' unless spelled
/// `accumulator <type>` (a ZeRO stage-2 shard).
static ParseResult parseAccumulatorType(OpAsmParser &parser, Type params,
                                        Type &accumulator) {
  accumulator = params;
  if (succeeded(parser.parseOptionalKeyword("accumulator")))
    return parser.parseType(accumulator);
  return success();
}

static void printAccumulatorType(OpAsmPrinter &printer, Operation *,
                                 Type params, Type accumulator) {
  if (accumulator != params)
    printer << " accumulator " << accumulator;
}

#define GET_OP_CLASSES
#include "accrue/Dialect/Train/IR/TrainOps.cpp.inc"

//===----------------------------------------------------------------------===//
// ValueAndGradOp
//===----------------------------------------------------------------------===//

LogicalResult ValueAndGradOp::verify() {
  ArrayRef<int64_t> wrt = getWrt();
  for (size_t i = 0; i < wrt.size(); ++i) {
    if (wrt[i] < 0 || wrt[i] >= static_cast<int64_t>(getArgs().size()))
      return emitOpError("wrt index ") << wrt[i] << " is out of range";
    if (i > 0 && wrt[i] <= wrt[i - 1])
      return emitOpError("wrt indices must be sorted and unique");
  }
  if (getNumResults() < wrt.size() + 1)
    return emitOpError("needs the callee's results and one gradient per "
                       "wrt operand");
  if (std::optional<int64_t> mb = getMicroBatch(); mb && *mb <= 0)
    return emitOpError("micro_batch must be positive");
  if (getValid() && !getMicroBatch())
    return emitOpError("a valid-sample count needs micro_batch");
  if (getLossDivisorAttr() && !getMicroBatch())
    return emitOpError("a loss_divisor needs micro_batch");
  return success();
}

LogicalResult NextLossScaleOp::verify() {
  double growth = getGrowth().convertToDouble();
  double backoff = getBackoff().convertToDouble();
  if (!(growth >= 1) || !std::isfinite(growth))
    return emitOpError("growth must be a finite number >= 1");
  if (!(backoff > 0 && backoff <= 1))
    return emitOpError("backoff must be in (0, 1]");
  if (getInterval() < 0)
    return emitOpError("interval must be >= 0");
  return success();
}

LogicalResult
LossDivisorAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        llvm::APFloat perSample) {
  if (!perSample.isFinite())
    return emitError() << "per_sample must be finite";
  return success();
}

/// Whether `operand` can stand for a whole effective batch of `arg`, the
/// callee's per-micro-batch argument type.
static bool isWholeBatchOf(Type operand, Type arg, int64_t microBatch) {
  auto o = dyn_cast<RankedTensorType>(operand);
  auto a = dyn_cast<RankedTensorType>(arg);
  if (!o || !a || o.getRank() != a.getRank() || o.getRank() == 0 ||
      o.getElementType() != a.getElementType() ||
      o.getShape().drop_front() != a.getShape().drop_front() ||
      a.getDimSize(0) != microBatch)
    return false;
  return o.isDynamicDim(0) || o.getDimSize(0) % microBatch == 0;
}

LogicalResult
ValueAndGradOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto callee =
      symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getCalleeAttr());
  if (!callee)
    return emitOpError("'") << getCallee() << "' does not name a function";
  FunctionType type = callee.getFunctionType();
  if (type.getNumInputs() != getArgs().size())
    return emitOpError("has ")
           << getArgs().size() << " operands but '" << getCallee() << "' takes "
           << type.getNumInputs();
  if (type.getNumResults() != getNumCalleeResults())
    return emitOpError("has ")
           << getNumCalleeResults() << " value results but '" << getCallee()
           << "' returns " << type.getNumResults();
  auto loss = dyn_cast<RankedTensorType>(type.getResult(0));
  if (!loss || loss.getRank() != 0 || !loss.getElementType().isF32())
    return emitOpError("differentiates the first result of '")
           << getCallee() << "', which must be tensor<f32>, not "
           << type.getResult(0);
  std::optional<int64_t> microBatch = getMicroBatch();
  for (auto [i, operand, arg] :
       llvm::enumerate(getArgs().getTypes(), type.getInputs())) {
    if (operand == arg)
      continue;
    bool isWrt = llvm::is_contained(getWrt(), static_cast<int64_t>(i));
    if (!microBatch || isWrt || !isWholeBatchOf(operand, arg, *microBatch))
      return emitOpError("operand #")
             << i << " has type " << operand << " but '" << getCallee()
             << "' takes " << arg
             << (microBatch ? " (a batch operand may differ only in a "
                              "leading dimension that is a multiple of "
                              "micro_batch)"
                            : "");
  }
  for (auto [i, result] : llvm::enumerate(
           getResults().take_front(getNumCalleeResults()).getTypes())) {
    if (result != type.getResult(i))
      return emitOpError("result #")
             << i << " has type " << result << " but '" << getCallee()
             << "' returns " << type.getResult(i);
  }
  for (auto [index, grad] : llvm::zip(getWrt(), getGradients().getTypes())) {
    Type arg = type.getInput(index);
    if (!isa<FloatType>(getElementTypeOrSelf(arg)))
      return emitOpError("cannot differentiate with respect to operand #")
             << index << " of non-float type " << arg;
    if (grad != arg)
      return emitOpError("gradient of operand #")
             << index << " has type " << grad << ", expected " << arg;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Arena ops
//===----------------------------------------------------------------------===//

/// Checks that each of `types`, placed at `offsets`, fits in the arena
/// without overlapping the others.
static LogicalResult verifyArenaLayout(Operation *op, Type arena,
                                       ArrayRef<int64_t> offsets,
                                       TypeRange types) {
  if (offsets.size() != types.size())
    return op->emitOpError("has ")
           << offsets.size() << " offsets for " << types.size() << " tensors";
  int64_t size = getNumElements(arena);
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  for (auto [offset, type] : llvm::zip(offsets, types)) {
    auto shaped = cast<RankedTensorType>(type);
    if (!shaped.hasStaticShape())
      return op->emitOpError("needs statically shaped tensors, got ") << type;
    int64_t end = offset + shaped.getNumElements();
    if (offset < 0 || end > size)
      return op->emitOpError("slice [")
             << offset << ", " << end << ") is outside the arena of " << size
             << " elements";
    ranges.push_back({offset, end});
  }
  llvm::sort(ranges);
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return op->emitOpError("slices overlap at offset ") << ranges[i].first;
  return success();
}

LogicalResult UnpackOp::verify() {
  return verifyArenaLayout(*this, getArena().getType(), getOffsets(),
                           getViews().getTypes());
}

LogicalResult AccumulateOp::verify() {
  return verifyArenaLayout(*this, getAccumulator().getType(), getOffsets(),
                           getGradients().getTypes());
}

LogicalResult StoreOp::verify() {
  return verifyArenaLayout(*this, getArena().getType(), getOffsets(),
                           getValues().getTypes());
}

LogicalResult AllReduceOp::verify() {
  int64_t size = getAccumulator().getType().getDimSize(0);
  auto at = static_cast<int64_t>(getScalarsAt());
  if (at < 0 || (!ShapedType::isDynamic(size) && at + 2 > size))
    return emitOpError("scalars_at ")
           << at << " leaves no room for two scalars in an arena of " << size
           << " elements";
  return success();
}

LogicalResult ReduceScatterAddOp::verify() {
  auto type = getGradient().getType();
  int64_t offset = getOffset(), arena = getArenaSize();
  if (!type.hasStaticShape())
    return emitOpError("gradient of type ") << type << " has no static shape";
  if (offset < 0 || arena < 1 || offset + type.getNumElements() > arena)
    return emitOpError("the gradient's ")
           << type.getNumElements() << " elements at offset " << offset
           << " lie outside an arena of " << arena;
  return success();
}

namespace {
/// `accumulate(%acc, accumulate(zeros, %g...) at 0)` adds `%g...` to `%acc`
/// directly, without the temporary arena.
struct AccumulateThroughZeros : OpRewritePattern<AccumulateOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AccumulateOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getGradients().size() != 1 || op.getOffsets()[0] != 0)
      return failure();
    auto inner = op.getGradients()[0].getDefiningOp<AccumulateOp>();
    if (!inner || inner.getType() != op.getType() ||
        !inner.getResult().hasOneUse())
      return failure();
    auto fill = inner.getAccumulator().getDefiningOp<linalg::FillOp>();
    if (!fill || !matchPattern(fill.value(), m_AnyZeroFloat()))
      return failure();
    rewriter.replaceOpWithNewOp<AccumulateOp>(
        op, op.getAccumulator(), inner.getGradients(), inner.getOffsets());
    return success();
  }
};
} // namespace

void AccumulateOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<AccumulateThroughZeros>(context);
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

static LogicalResult verifyOptimizerOperands(Operation *op,
                                             OptimizerAttrInterface optimizer,
                                             Type params, ValueRange arenas) {
  if (arenas.size() != optimizer.getNumStates() + 1)
    return op->emitOpError("optimizer ")
           << optimizer << " needs " << optimizer.getNumStates()
           << " state arenas, got " << arenas.size() - 1;
  for (Value arena : arenas)
    if (arena.getType() != params)
      return op->emitOpError("arena of type ")
             << arena.getType() << " differs from the parameters' " << params;
  return success();
}

LogicalResult UpdateOp::verify() {
  SmallVector<Value> arenas{getGrads()};
  llvm::append_range(arenas, getStates());
  return verifyOptimizerOperands(*this, getOptimizer(), getParams().getType(),
                                 arenas);
}

LogicalResult UpdateOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getParams().getType());
  llvm::append_range(types, adaptor.getStates().getTypes());
  return success();
}

LogicalResult FusedUpdateOp::verify() {
  if (std::optional<APFloat> maxNorm = getMaxNorm();
      maxNorm && !(maxNorm->convertToDouble() > 0.0))
    return emitOpError("max_norm must be positive");
  SmallVector<Value> arenas{getAccumulator()};
  if (!getSharded()) {
    llvm::append_range(arenas, getStates());
    return verifyOptimizerOperands(*this, getOptimizer(), getParams().getType(),
                                   arenas);
  }
  // A sharded update's states hold the rank's shard only, of a size the
  // host decides.
  if (!getParams().getType().hasStaticShape())
    return emitOpError("a sharded update needs arenas of a static size");
  if (getStates().size() != getOptimizer().getNumStates())
    return emitOpError("optimizer ")
           << getOptimizer() << " needs " << getOptimizer().getNumStates()
           << " state arenas, got " << getStates().size();
  auto shard = RankedTensorType::get({ShapedType::kDynamic},
                                     Float32Type::get(getContext()));
  for (Value state : getStates())
    if (state.getType() != shard)
      return emitOpError("sharded state arena of type ")
             << state.getType() << " is not " << shard;
  // Stage 1 reads its shard of the whole accumulator, stage 2 holds the
  // shard alone.
  if (getAccumulator().getType() != getParams().getType() &&
      getAccumulator().getType() != shard)
    return emitOpError("accumulator of type ")
           << getAccumulator().getType() << " is neither the parameters' "
           << getParams().getType() << " nor a shard " << shard;
  return success();
}

LogicalResult FusedUpdateOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location>,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getParams().getType());
  types.push_back(adaptor.getAccumulator().getType());
  llvm::append_range(types, adaptor.getStates().getTypes());
  types.push_back(Float32Type::get(context));
  return success();
}
