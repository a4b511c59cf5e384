//===- SampleMask.cpp - which samples a value's rows hold -------*- C++ -*-===//

#include "SampleMask.h"

#include "accrue/Dialect/NN/IR/NN.h"

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

SampleMask::SampleMask(func::FuncOp function, ArrayRef<unsigned> batchArgs,
                       int64_t microBatch, Value valid)
    : microBatch(microBatch), valid(valid) {
  for (unsigned i : batchArgs)
    deps[function.getArgument(i)] = SampleDep::Rows;
  function.walk([&](Operation *op) {
    for (Value result : op->getResults())
      deps[result] = classify(op, result);
  });
}

/// `x` with the elements of padded samples set to 0, or null when the
/// samples of `x`'s elements are unknown.
Value SampleMask::maskValues(OpBuilder &b, Location loc, Value x) {
  if (dep(x) == SampleDep::Free || !byRows(x))
    return {};
  auto type = cast<RankedTensorType>(x.getType());
  Value keep = keepRows(b, loc, type);
  Value factor = nn::CastOp::create(
      b, loc,
      RankedTensorType::get(cast<RankedTensorType>(keep.getType()).getShape(),
                            type.getElementType()),
      keep);
  return nn::NNBuilder(b, loc).mul(x, factor);
}

/// `labels` with the labels of padded samples replaced by `ignore`, or
/// null when the samples of the labels are unknown.
Value SampleMask::maskLabels(OpBuilder &b, Location loc, Value labels,
                             int64_t ignore) {
  if (!byRows(labels))
    return {};
  auto type = cast<RankedTensorType>(labels.getType());
  Value keep = keepRows(b, loc, type);
  Value ignored = nn::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                             b.getIntegerAttr(type.getElementType(), ignore)));
  return nn::WhereOp::create(b, loc, type, keep, labels, ignored);
}

/// The number of valid samples, as a 0-d f32 tensor.
Value SampleMask::validCount(OpBuilder &b, Location loc) {
  return nn::CastOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()),
                            valid);
}

SampleDep SampleMask::dep(Value v) const {
  auto it = deps.find(v);
  return it == deps.end() ? SampleDep::Free : it->second;
}

int64_t SampleMask::dim0(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() > 0 ? type.getDimSize(0) : -1;
}

/// Whether the result keeps its operands' rows: every operand that
/// depends on the batch is grouped by rows, of the result's rank and
/// dimension 0 (broadcasting elsewhere).
bool SampleMask::rowsAligned(Operation *op, Value result) {
  auto type = cast<RankedTensorType>(result.getType());
  if (type.getRank() == 0 || type.getDimSize(0) % microBatch != 0)
    return false;
  for (Value operand : op->getOperands()) {
    SampleDep d = dep(operand);
    if (d == SampleDep::Free)
      continue;
    auto t = cast<RankedTensorType>(operand.getType());
    if (d != SampleDep::Rows || t.getRank() != type.getRank() ||
        t.getDimSize(0) != type.getDimSize(0))
      return false;
  }
  return true;
}

SampleDep SampleMask::classify(Operation *op, Value result) {
  bool free = llvm::all_of(op->getOperands(),
                           [&](Value v) { return dep(v) == SampleDep::Free; });
  if (free)
    return SampleDep::Free;
  auto rowsIf = [](bool c) { return c ? SampleDep::Rows : SampleDep::Other; };
  auto resultType = dyn_cast<RankedTensorType>(result.getType());
  if (!resultType)
    return SampleDep::Other;
  Value in = op->getNumOperands() ? op->getOperand(0) : Value();
  auto keepsDim0 = [&](ArrayRef<int64_t> axes) {
    return !llvm::is_contained(axes, 0) && byRows(in) &&
           dim0(result) == dim0(in);
  };
  if (isa<nn::NegOp, nn::AbsOp, nn::ExpOp, nn::LogOp, nn::SqrtOp, nn::ReluOp,
          nn::SigmoidOp, nn::TanhOp, nn::ErfOp, nn::SinOp, nn::CosOp,
          nn::SignOp, nn::FloorOp, nn::CeilOp, nn::RoundOp, nn::ClipOp,
          nn::CastOp, nn::IdentityOp, nn::NotOp, nn::AddOp, nn::SubOp,
          nn::MulOp, nn::DivOp, nn::MaxOp, nn::MinOp, nn::PowOp, nn::GreaterOp,
          nn::LessOp, nn::EqualOp, nn::AndOp, nn::WhereOp, nn::TriluOp,
          nn::ExpandOp, nn::DropoutOp, nn::ConvOp, nn::ConvGradInputOp,
          nn::MaxPoolOp, nn::AveragePoolOp>(op))
    return rowsIf(rowsAligned(op, result));
  if (isa<nn::ReshapeOp, nn::FlattenOp>(op))
    return rowsIf(byRows(in) && resultType.getRank() > 0 &&
                  resultType.getDimSize(0) % microBatch == 0);
  if (auto t = dyn_cast<nn::TransposeOp>(op))
    return rowsIf(t.getPerm()[0] == 0 && byRows(in));
  if (auto m = dyn_cast<nn::MatMulOp>(op)) {
    if (resultType.getRank() >= 3)
      return rowsIf(rowsAligned(op, result));
    return rowsIf(byRows(m.getLhs()) && dep(m.getRhs()) == SampleDep::Free);
  }
  if (auto g = dyn_cast<nn::GemmOp>(op))
    return rowsIf(!g.getTransA() && byRows(g.getA()) &&
                  dep(g.getB()) == SampleDep::Free &&
                  (!g.getC() || dep(g.getC()) == SampleDep::Free));
  if (auto r = dyn_cast<nn::ReduceSumOp>(op))
    return rowsIf(keepsDim0(r.getAxes()));
  if (auto r = dyn_cast<nn::ReduceMeanOp>(op))
    return rowsIf(keepsDim0(r.getAxes()));
  if (auto r = dyn_cast<nn::ReduceMaxOp>(op))
    return rowsIf(keepsDim0(r.getAxes()));
  if (auto r = dyn_cast<nn::ReduceMinOp>(op))
    return rowsIf(keepsDim0(r.getAxes()));
  if (auto a = dyn_cast<nn::ArgMaxOp>(op))
    return rowsIf(a.getAxis() != 0 && byRows(in) && dim0(result) == dim0(in));
  if (auto a = dyn_cast<nn::ArgMinOp>(op))
    return rowsIf(a.getAxis() != 0 && byRows(in) && dim0(result) == dim0(in));
  if (auto sm = dyn_cast<nn::SoftmaxOp>(op))
    return rowsIf(sm.getAxis() != 0 && byRows(in));
  if (auto sm = dyn_cast<nn::LogSoftmaxOp>(op))
    return rowsIf(sm.getAxis() != 0 && byRows(in));
  if (auto c = dyn_cast<nn::ConcatOp>(op))
    return rowsIf(c.getAxis() != 0 && rowsAligned(op, result));
  if (auto sl = dyn_cast<nn::SliceOp>(op))
    return rowsIf(sl.getStarts()[0] == 0 && sl.getSteps()[0] == 1 &&
                  byRows(in) && dim0(result) == dim0(in));
  // Per-element gathers away from the batch axis keep the rows.
  if (auto g = dyn_cast<nn::GatherElementsOp>(op))
    return rowsIf(g.getAxis() != 0 && rowsAligned(op, result));
  if (auto g = dyn_cast<nn::GatherElementsGradOp>(op))
    return rowsIf(g.getAxis() != 0 && rowsAligned(op, result));
  if (auto g = dyn_cast<nn::GatherOp>(op)) {
    if (g.getAxis() == 0)
      return rowsIf(dep(g.getData()) == SampleDep::Free &&
                    byRows(g.getIndices()) && resultType.getRank() > 0 &&
                    dim0(result) == dim0(g.getIndices()));
    return rowsIf(byRows(g.getData()) &&
                  dep(g.getIndices()) == SampleDep::Free &&
                  dim0(result) == dim0(g.getData()));
  }
  // A scan treats samples independently along dimension 0 (its
  // contract): its results keep the rows of its batch-dependent inputs.
  if (isa<nn::ScanOp>(op))
    return rowsIf(dim0(result) % microBatch == 0 &&
                  llvm::all_of(op->getOperands(), [&](Value v) {
                    return dep(v) == SampleDep::Free ||
                           (byRows(v) && dim0(v) == dim0(result));
                  }));
  // Per-item classification losses keep the items' rows: scores [n, C,
  // ...] and labels [n, ...] give losses [n, ...].
  auto perItem = [&](Operation *loss) {
    for (Value operand : loss->getOperands()) {
      SampleDep d = dep(operand);
      if (d != SampleDep::Free &&
          (d != SampleDep::Rows || dim0(operand) != dim0(result)))
        return false;
    }
    return resultType.getRank() > 0 && dim0(result) % microBatch == 0;
  };
  if (auto l = dyn_cast<nn::SoftmaxCrossEntropyLossOp>(op))
    return rowsIf(l.getReduction() == nn::LossReduction::None && perItem(op));
  if (auto l = dyn_cast<nn::NegativeLogLikelihoodLossOp>(op))
    return rowsIf(l.getReduction() == nn::LossReduction::None && perItem(op));
  return SampleDep::Other;
}

/// An i1 tensor broadcastable to `type`: true on the rows of valid samples.
Value SampleMask::keepRows(OpBuilder &b, Location loc, RankedTensorType type) {
  int64_t rows = type.getDimSize(0), perSample = rows / microBatch;
  SmallVector<int64_t> sample;
  for (int64_t r = 0; r < rows; ++r)
    sample.push_back(r / perSample);
  auto indexType = RankedTensorType::get({rows}, b.getI64Type());
  Value index = nn::ConstantOp::create(
      b, loc, DenseElementsAttr::get(indexType, ArrayRef<int64_t>(sample)));
  Value keep = nn::LessOp::create(
      b, loc, RankedTensorType::get({rows}, b.getI1Type()), index, valid);
  SmallVector<int64_t> shape(type.getRank(), 1);
  shape[0] = rows;
  return nn::NNBuilder(b, loc).reshape(
      keep, RankedTensorType::get(shape, b.getI1Type()));
}
