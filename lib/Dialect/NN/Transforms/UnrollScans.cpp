//===- UnrollScans.cpp - nn.scan as straight-line nn ops --------*- C++ -*-===//
//
// `unroll-scans` copies a scan's body once per step: slices of the scanned
// inputs in, the step outputs (and saved carries) concatenated along the
// time axis out. The CUDA pipeline runs it before lowering, since it forms
// kernels over straight-line code.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/NN/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace accrue::nn {
#define GEN_PASS_DEF_UNROLLSCANS
#include "accrue/Dialect/NN/Transforms/Passes.h.inc"
} // namespace accrue::nn

using namespace mlir;
using namespace accrue;
using namespace accrue::nn;

namespace {

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

struct UnrollScansPass
    : public accrue::nn::impl::UnrollScansBase<UnrollScansPass> {
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
