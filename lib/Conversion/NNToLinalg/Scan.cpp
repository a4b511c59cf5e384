//===- Scan.cpp - nn.scan as a loop, or unrolled ----------------*- C++ -*-===//
//
// The CPU lowering turns a scan into an scf.for over the steps whose
// iteration arguments are the carries and the stacked outputs: each step
// reads its slice of the scanned inputs (tensor.extract_slice, a view after
// bufferization) and writes its outputs into their slices
// (tensor.insert_slice, in place). `unroll-scans` instead copies the body
// once per step, as straight-line nn ops.
//
//===----------------------------------------------------------------------===//

#include "accrue/Conversion/Passes.h"

#include "LoweringUtils.h"

#include "mlir/IR/IRMapping.h"

namespace accrue {
#define GEN_PASS_DEF_UNROLLSCANS
#include "accrue/Conversion/Passes.h.inc"
} // namespace accrue

using namespace mlir;
using namespace accrue;
using namespace accrue::nn;

namespace {

/// Offsets, sizes and strides of step `t` of a stacked `[N, T, ...]` type.
struct StepSlice {
  StepSlice(OpBuilder &b, RankedTensorType stacked, OpFoldResult t) {
    for (auto [i, size] : llvm::enumerate(stacked.getShape())) {
      offsets.push_back(i == 1 ? t : OpFoldResult(b.getIndexAttr(0)));
      sizes.push_back(b.getIndexAttr(i == 1 ? 1 : size));
      strides.push_back(b.getIndexAttr(1));
    }
  }
  SmallVector<OpFoldResult> offsets, sizes, strides;
};

struct LowerScan : public OpConversionPattern<ScanOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScanOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t carries = op.getNumCarries(), scanned = op.getNumScanned(),
            outputs = op.getNumOutputs(), steps = op.getNumSteps();
    ValueRange inputs = adaptor.getInputs();
    SmallVector<Value> init(inputs.take_front(carries));
    for (Value result : op.getResults().drop_front(carries))
      init.push_back(lowering::emptyTensor(
          rewriter, loc, cast<RankedTensorType>(result.getType())));
    Value lower = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value upper = arith::ConstantIndexOp::create(rewriter, loc, steps);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value last = arith::ConstantIndexOp::create(rewriter, loc, steps - 1);
    auto loop = scf::ForOp::create(rewriter, loc, lower, upper, one, init);
    Block *loopBody = loop.getBody();
    rewriter.setInsertionPointToStart(loopBody);
    Value t = loop.getInductionVar();
    if (op.getReverse())
      t = arith::SubIOp::create(rewriter, loc, last, t);
    ValueRange iter = loop.getRegionIterArgs();

    SmallVector<Value> args(iter.take_front(carries));
    for (Value x : inputs.slice(carries, scanned)) {
      auto type = cast<RankedTensorType>(x.getType());
      StepSlice slice(rewriter, type, t);
      args.push_back(tensor::ExtractSliceOp::create(
          rewriter, loc, ScanOp::stepType(type), x, slice.offsets, slice.sizes,
          slice.strides));
    }
    llvm::append_range(args, inputs.drop_front(carries + scanned));
    auto insertStep = [&](Value step, Value stacked) -> Value {
      StepSlice slice(rewriter, cast<RankedTensorType>(stacked.getType()), t);
      return tensor::InsertSliceOp::create(rewriter, loc, step, stacked,
                                           slice.offsets, slice.sizes,
                                           slice.strides);
    };
    SmallVector<Value> saved;
    for (int64_t i = 0, e = op.getSavedCarries().size(); i < e; ++i)
      saved.push_back(insertStep(iter[i], iter[carries + outputs + i]));

    auto yield = cast<YieldOp>(op.getBodyBlock().getTerminator());
    rewriter.inlineBlockBefore(&op.getBodyBlock(), loopBody, loopBody->end(),
                               args);
    rewriter.setInsertionPoint(yield);
    SmallVector<Value> next(yield.getValues().take_front(carries));
    for (int64_t i = 0; i < outputs; ++i)
      next.push_back(
          insertStep(yield.getValues()[carries + i], iter[carries + i]));
    llvm::append_range(next, saved);
    scf::YieldOp::create(rewriter, loc, next);
    rewriter.eraseOp(yield);
    rewriter.replaceOp(op, loop.getResults());
    return success();
  }
};

/// `v` [N, ...] as [N, 1, ...].
Value withTimeAxis(OpBuilder &b, Location loc, Value v) {
  return NNBuilder(b, loc).reshape(v, ScanOp::stackedType(v.getType(), 1));
}

void unroll(ScanOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t carries = op.getNumCarries(), outputs = op.getNumOutputs(),
          steps = op.getNumSteps();
  SmallVector<Value> state(op.getCarryInits());
  // Per result after the carries: its steps, in time order.
  SmallVector<SmallVector<Value>> stacked(op.getNumResults() - carries,
                                          SmallVector<Value>(steps));
  Block &body = op.getBodyBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  for (int64_t s = 0; s < steps; ++s) {
    int64_t t = op.getReverse() ? steps - 1 - s : s;
    IRMapping mapping;
    for (int64_t i = 0; i < carries; ++i) {
      mapping.map(body.getArgument(i), state[i]);
      if (op.getSavesCarries())
        stacked[outputs + i][t] = withTimeAxis(b, loc, state[i]);
    }
    for (auto [i, x] : llvm::enumerate(op.getScanned())) {
      auto type = cast<RankedTensorType>(x.getType());
      SmallVector<int64_t> starts(type.getRank(), 0), unit(type.getRank(), 1);
      starts[1] = t;
      Value slice = SliceOp::create(
          b, loc, ScanOp::stackedType(ScanOp::stepType(type), 1), x,
          b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(unit));
      mapping.map(body.getArgument(carries + i),
                  NNBuilder(b, loc).reshape(slice, ScanOp::stepType(type)));
    }
    for (auto [i, inv] : llvm::enumerate(op.getInvariants()))
      mapping.map(body.getArgument(carries + op.getNumScanned() + i), inv);
    for (Operation &inner : body.without_terminator())
      b.clone(inner, mapping);
    for (int64_t i = 0; i < carries; ++i)
      state[i] = mapping.lookupOrDefault(yield.getValues()[i]);
    for (int64_t i = 0; i < outputs; ++i)
      stacked[i][t] = withTimeAxis(
          b, loc, mapping.lookupOrDefault(yield.getValues()[carries + i]));
  }
  SmallVector<Value> results(state);
  for (ArrayRef<Value> parts : stacked)
    results.push_back(
        parts.size() == 1
            ? parts.front()
            : ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(1))
                  .getResult());
  op->replaceAllUsesWith(results);
  op.erase();
}

struct UnrollScansPass : public accrue::impl::UnrollScansBase<UnrollScansPass> {
  void runOnOperation() override {
    // Innermost first: a body's scans are unrolled before it is copied.
    SmallVector<ScanOp> scans;
    getOperation()->walk<WalkOrder::PostOrder>(
        [&](ScanOp op) { scans.push_back(op); });
    for (ScanOp op : scans)
      unroll(op);
  }
};

} // namespace

void accrue::nn::lowering::populateScanLowering(RewritePatternSet &patterns) {
  patterns.add<LowerScan>(patterns.getContext());
}
