//===- Scan.cpp - nn.scan as a loop -----------------------------*- C++ -*-===//
//
// The CPU lowering turns a scan into an scf.for over the steps whose
// iteration arguments are the carries and the stacked outputs: each step
// reads its slice of the scanned inputs (tensor.extract_slice, a view after
// bufferization) and writes its outputs into their slices
// (tensor.insert_slice, in place). The CUDA pipeline unrolls scans first
// instead (`unroll-scans`, lib/Dialect/NN/Transforms).
//
// The stack of an output that ScanOp::getInPlaceSources places in a
// scanned input's stead starts as that input, and each step adds into its
// own slice there (fold-into-contractions makes the product accumulate into
// it).
//
//===----------------------------------------------------------------------===//

#include "accrue/Conversion/Passes.h"

#include "LoweringUtils.h"

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
    SmallVector<int64_t> sources = op.getInPlaceSources();
    SmallVector<Value> init(inputs.take_front(carries));
    for (auto [i, result] :
         llvm::enumerate(op.getResults().drop_front(carries))) {
      if (i < sources.size() && sources[i] >= 0)
        init.push_back(inputs[carries + sources[i]]);
      else
        init.push_back(lowering::emptyTensor(
            rewriter, loc, cast<RankedTensorType>(result.getType())));
    }
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
    for (auto [j, x] : llvm::enumerate(inputs.slice(carries, scanned))) {
      // An output stacked in this input's place reads it from the loop's
      // stack, which holds it until the step overwrites it.
      const auto *source = llvm::find(sources, static_cast<int64_t>(j));
      if (source != sources.end())
        x = iter[carries + (source - sources.begin())];
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

} // namespace

void accrue::nn::lowering::populateScanLowering(RewritePatternSet &patterns) {
  patterns.add<LowerScan>(patterns.getContext());
}
