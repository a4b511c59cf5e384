//===- LossSplitting.cpp - a loss as a sum and a count ---------*- C++ -*-===//
//
// Exact loss normalization needs each micro-batch's loss as a sum N and a
// count D: a mean-reduced loss L = N / D is recognized (ReduceMean, the
// classification losses with class weights and ignore_index, sums divided
// by data-dependent counts, ...) and rebuilt as N and D; a linear
// combination of such terms gets each term's count from a counting pass.
//
// With a count of valid samples (a partial last window padded to whole
// micro-batches), padded samples are masked out of N and D, where
// SampleMask (SampleMask.h) knows which samples the loss's operand holds.
// When it cannot, the step takes full windows only.
//
//===----------------------------------------------------------------------===//

#include "LossSplitting.h"
#include "SampleMask.h"

#include "accrue/Dialect/NN/IR/NN.h"
#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/Dialect/Train/Utils/LossDivisor.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

/// The constant division of the loss of a function being split whose
/// divisor the step classified (the value_and_grad's loss_divisor).
struct KnownDivision {
  nn::DivOp div;
  LossDivisorAttr divisor;

  /// The loss returned by a clone of the forward.
  static KnownDivision of(Value loss, LossDivisorAttr divisor) {
    std::optional<std::pair<nn::DivOp, double>> found =
        divisor ? getConstantDivision(loss) : std::nullopt;
    return found ? KnownDivision{found->first, divisor} : KnownDivision{};
  }
  /// How the divisor of `op` scales, if `op` is the classified division.
  LossDivisorAttr lookup(nn::DivOp op) const {
    return op && op == div ? divisor : LossDivisorAttr();
  }
};

Value lookThroughIdentity(Value v) {
  while (auto id = v.getDefiningOp<nn::IdentityOp>())
    v = id.getInput();
  return v;
}

bool reducesAllAxes(ArrayRef<int64_t> axes, Value input) {
  return static_cast<int64_t>(axes.size()) ==
         cast<RankedTensorType>(input.getType()).getRank();
}

/// A classification loss (SoftmaxCrossEntropyLoss or
/// NegativeLogLikelihoodLoss) rebuilt as a sum at `builder`, with its count
/// (the weight sum of the non-ignored targets). With `mask`, padded samples'
/// labels are ignored; nothing when their labels cannot be told apart.
template <typename LossOp>
std::optional<std::pair<Value, Value>>
splitClassificationLoss(OpBuilder &builder, LossOp op, SampleMask *mask) {
  Location loc = op.getLoc();
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  builder.setInsertionPointAfter(op);
  Value labels = op->getOperand(1);
  IntegerAttr ignore = op.getIgnoreIndexAttr();
  if (mask) {
    auto labelType = cast<RankedTensorType>(labels.getType());
    // Without an ignore_index, padding gets a label no class can have.
    int64_t ignoreValue = ignore ? ignore.getInt()
                                 : (labelType.getElementType().isInteger(32)
                                        ? std::numeric_limits<int32_t>::min()
                                        : std::numeric_limits<int64_t>::min());
    labels = mask->maskLabels(builder, loc, labels, ignoreValue);
    if (!labels)
      return std::nullopt;
    ignore = builder.getI64IntegerAttr(ignoreValue);
  }
  auto sum = LossOp::create(builder, loc, op->getOperand(0), labels,
                            op.getWeights(), nn::LossReduction::Sum, ignore);
  Value count = nn::ClassWeightSumOp::create(builder, loc, scalarType, labels,
                                             op.getWeights(), ignore);
  return std::make_pair(Value(sum), count);
}

/// Whether `v` is a sum over every sample: a ReduceSum over all axes or a
/// sum-reduced classification loss.
bool isSumOverSamples(Value v) {
  v = lookThroughIdentity(v);
  if (auto sum = v.getDefiningOp<nn::ReduceSumOp>())
    return reducesAllAxes(sum.getAxes(), sum.getInput());
  if (auto sce = v.getDefiningOp<nn::SoftmaxCrossEntropyLossOp>())
    return sce.getReduction() == nn::LossReduction::Sum;
  if (auto nll = v.getDefiningOp<nn::NegativeLogLikelihoodLossOp>())
    return nll.getReduction() == nn::LossReduction::Sum;
  return false;
}

/// A count computed from the data: a ReduceSum over all axes, possibly cast
/// (`mask.sum()`) and clamped from below (`.clamp(min=1)`, whose floor is
/// returned in `floor`), in any order. Returns the unclamped sum.
Value dataDependentCount(Value v, std::optional<double> &floor) {
  while (true) {
    v = lookThroughIdentity(v);
    if (auto cast = v.getDefiningOp<nn::CastOp>()) {
      v = cast.getInput();
      continue;
    }
    if (auto clip = v.getDefiningOp<nn::ClipOp>()) {
      if (clip.getMax() || !clip.getMin() || floor)
        return {};
      floor = clip.getMin()->convertToDouble();
      v = clip.getInput();
      continue;
    }
    break;
  }
  auto reduce = v.getDefiningOp<nn::ReduceSumOp>();
  if (!reduce || !reducesAllAxes(reduce.getAxes(), reduce.getInput()))
    return {};
  return reduce;
}

/// The sum over samples `v` (see isSumOverSamples) rebuilt at `builder`
/// with padded samples masked out, or null when they cannot be.
Value maskedSum(OpBuilder &builder, Value v, SampleMask &mask) {
  v = lookThroughIdentity(v);
  if (auto sum = v.getDefiningOp<nn::ReduceSumOp>()) {
    builder.setInsertionPointAfter(sum);
    Value x = mask.maskValues(builder, sum.getLoc(), sum.getInput());
    if (!x)
      return {};
    return nn::ReduceSumOp::create(builder, sum.getLoc(), x, sum.getAxes(),
                                   sum.getKeepdims());
  }
  std::optional<std::pair<Value, Value>> split;
  if (auto sce = v.getDefiningOp<nn::SoftmaxCrossEntropyLossOp>())
    split = splitClassificationLoss(builder, sce, &mask);
  else if (auto nll = v.getDefiningOp<nn::NegativeLogLikelihoodLossOp>())
    split = splitClassificationLoss(builder, nll, &mask);
  return split ? split->first : Value();
}

/// Returns N and D for the loss `loss` (built at `builder`), or nothing if
/// the form is not recognized, or, with `mask`, if padded samples cannot be
/// masked out of it. Sets `kind` (and `floor` for a clamped count).
std::optional<std::pair<Value, Value>>
splitLossValue(OpBuilder &builder, Value loss, int64_t microBatch,
               const KnownDivision &known, LossKind &kind,
               std::optional<double> &floor, double &fullCount,
               SampleMask *mask) {
  nn::NNBuilder nnb(builder, loss.getLoc());
  Value root = lookThroughIdentity(loss);
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  auto toScalar = [&](Value v) { return nnb.reshape(v, scalarType); };
  auto f32 = [&](Value v) -> Value {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType().isF32())
      return v;
    return nn::CastOp::create(
        builder, v.getLoc(),
        RankedTensorType::get(type.getShape(), builder.getF32Type()), v);
  };

  if (auto mean = root.getDefiningOp<nn::ReduceMeanOp>();
      mean && reducesAllAxes(mean.getAxes(), mean.getInput())) {
    builder.setInsertionPointAfter(mean);
    nnb.loc = mean.getLoc();
    auto inType = cast<RankedTensorType>(mean.getInput().getType());
    Value input = mean.getInput();
    Value count;
    if (!mask) {
      count = nnb.scalar(builder.getF32Type(),
                         static_cast<double>(inType.getNumElements()));
    } else {
      input = mask->maskValues(builder, mean.getLoc(), input);
      if (!input)
        return std::nullopt;
      // Each valid sample holds numel / b of the elements.
      count = nnb.mul(mask->validCount(builder, mean.getLoc()),
                      nnb.scalar(builder.getF32Type(),
                                 static_cast<double>(inType.getNumElements()) /
                                     mask->microBatchSize()));
    }
    Value sum =
        nn::ReduceSumOp::create(builder, mean.getLoc(), input, mean.getAxes(),
                                /*keepdims=*/false);
    kind = LossKind::Mean;
    fullCount = static_cast<double>(inType.getNumElements());
    return std::make_pair(toScalar(sum), count);
  }
  auto labelCount = [](Operation *op) {
    return static_cast<double>(
        cast<RankedTensorType>(op->getOperand(1).getType()).getNumElements());
  };
  if (auto sce = root.getDefiningOp<nn::SoftmaxCrossEntropyLossOp>();
      sce && sce.getReduction() == nn::LossReduction::Mean) {
    kind = LossKind::Mean;
    fullCount = labelCount(sce);
    return splitClassificationLoss(builder, sce, mask);
  }
  if (auto nll = root.getDefiningOp<nn::NegativeLogLikelihoodLossOp>();
      nll && nll.getReduction() == nn::LossReduction::Mean) {
    kind = LossKind::Mean;
    fullCount = labelCount(nll);
    return splitClassificationLoss(builder, nll, mask);
  }
  // sum(x) / c with a constant c the step classified: a count of d per
  // sample (x.sum() / x.shape[0]) or a fixed scale.
  if (auto div = root.getDefiningOp<nn::DivOp>();
      div && isSumOverSamples(div.getLhs()) && known.lookup(div)) {
    LossDivisorAttr divisor = known.lookup(div);
    Value sum = div.getLhs();
    if (mask && !(sum = maskedSum(builder, sum, *mask)))
      return std::nullopt;
    builder.setInsertionPointAfter(div);
    nnb.loc = div.getLoc();
    if (divisor.isFixed()) {
      kind = LossKind::Sum;
      return std::make_pair(toScalar(nnb.div(sum, div.getRhs())),
                            nnb.scalar(builder.getF32Type(), 1.0));
    }
    kind = LossKind::Mean;
    Value count = div.getRhs();
    double perSample = divisor.getPerSample().convertToDouble();
    fullCount = perSample * static_cast<double>(microBatch);
    if (mask)
      count = nnb.mul(mask->validCount(builder, div.getLoc()),
                      nnb.scalar(builder.getF32Type(), perSample));
    return std::make_pair(toScalar(sum), toScalar(f32(count)));
  }
  // sum(x) / count(data), e.g. a masked token loss divided by the number of
  // real tokens: both are sums over samples.
  if (auto div = root.getDefiningOp<nn::DivOp>();
      div && cast<RankedTensorType>(div.getType()).getNumElements() == 1 &&
      isSumOverSamples(div.getLhs())) {
    std::optional<double> clampFloor;
    if (Value count = dataDependentCount(div.getRhs(), clampFloor)) {
      fullCount = static_cast<double>(
          cast<RankedTensorType>(
              count.getDefiningOp<nn::ReduceSumOp>().getInput().getType())
              .getNumElements());
      Value sum = div.getLhs();
      if (mask) {
        sum = maskedSum(builder, sum, *mask);
        count = sum ? maskedSum(builder, count, *mask) : Value();
        if (!sum || !count)
          return std::nullopt;
      }
      builder.setInsertionPointAfter(div);
      nnb.loc = div.getLoc();
      kind = LossKind::Mean;
      floor = clampFloor;
      return std::make_pair(toScalar(sum), toScalar(f32(count)));
    }
  }
  if (isSumOverSamples(root)) {
    Value sum = root;
    if (mask && !(sum = maskedSum(builder, sum, *mask)))
      return std::nullopt;
    builder.setInsertionPointAfterValue(sum);
    nnb.loc = sum.getLoc();
    kind = LossKind::Sum;
    return std::make_pair(toScalar(sum), nnb.scalar(builder.getF32Type(), 1.0));
  }
  return std::nullopt;
}

/// Whether `v` is one of the forms splitLossValue recognizes (without
/// building anything).
bool isLossTerm(Value v, const KnownDivision &known) {
  Value root = lookThroughIdentity(v);
  if (auto mean = root.getDefiningOp<nn::ReduceMeanOp>())
    return reducesAllAxes(mean.getAxes(), mean.getInput());
  if (auto sce = root.getDefiningOp<nn::SoftmaxCrossEntropyLossOp>())
    return sce.getReduction() == nn::LossReduction::Mean;
  if (auto nll = root.getDefiningOp<nn::NegativeLogLikelihoodLossOp>())
    return nll.getReduction() == nn::LossReduction::Mean;
  if (auto div = root.getDefiningOp<nn::DivOp>();
      div && isSumOverSamples(div.getLhs())) {
    if (known.lookup(div))
      return true;
    std::optional<double> floor;
    if (cast<RankedTensorType>(div.getType()).getNumElements() == 1 &&
        dataDependentCount(div.getRhs(), floor))
      return true;
  }
  return isSumOverSamples(root);
}

/// A scalar constant's value.
std::optional<double> scalarConstant(Value v) {
  auto constant = lookThroughIdentity(v).getDefiningOp<nn::ConstantOp>();
  auto attr = constant ? dyn_cast<DenseElementsAttr>(constant.getValue())
                       : DenseElementsAttr();
  if (!attr || !attr.isSplat() || !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// Decomposes `loss` into sum_i coefficient_i * term_i with recognized terms
/// (isLossTerm) through Add, Sub, Neg and products and quotients by
/// constants. On failure, `unrecognized` is the first part that is neither.
bool collectLossTerms(Value loss, double coefficient,
                      const KnownDivision &known,
                      SmallVectorImpl<std::pair<double, Value>> &terms,
                      Value &unrecognized) {
  Value v = lookThroughIdentity(loss);
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getNumElements() != 1) {
    unrecognized = v;
    return false;
  }
  if (isLossTerm(v, known)) {
    terms.push_back({coefficient, v});
    return true;
  }
  Operation *def = v.getDefiningOp();
  if (auto add = dyn_cast_or_null<nn::AddOp>(def))
    return collectLossTerms(add.getLhs(), coefficient, known, terms,
                            unrecognized) &&
           collectLossTerms(add.getRhs(), coefficient, known, terms,
                            unrecognized);
  if (auto sub = dyn_cast_or_null<nn::SubOp>(def))
    return collectLossTerms(sub.getLhs(), coefficient, known, terms,
                            unrecognized) &&
           collectLossTerms(sub.getRhs(), -coefficient, known, terms,
                            unrecognized);
  if (auto neg = dyn_cast_or_null<nn::NegOp>(def))
    return collectLossTerms(neg.getInput(), -coefficient, known, terms,
                            unrecognized);
  if (auto mul = dyn_cast_or_null<nn::MulOp>(def)) {
    if (std::optional<double> c = scalarConstant(mul.getRhs()))
      return collectLossTerms(mul.getLhs(), coefficient * *c, known, terms,
                              unrecognized);
    if (std::optional<double> c = scalarConstant(mul.getLhs()))
      return collectLossTerms(mul.getRhs(), coefficient * *c, known, terms,
                              unrecognized);
  }
  if (auto div = dyn_cast_or_null<nn::DivOp>(def)) {
    if (std::optional<double> c = scalarConstant(div.getRhs()); c && *c != 0)
      return collectLossTerms(div.getLhs(), coefficient / *c, known, terms,
                              unrecognized);
    // (a S1 + b S2) / count(data), sums over samples S: each sum over the
    // count is a term (built next to the quotient; this runs on clones).
    std::optional<double> floor;
    SmallVector<std::pair<double, Value>> numerator;
    if (dataDependentCount(div.getRhs(), floor) &&
        collectLossTerms(div.getLhs(), 1.0, known, numerator, unrecognized) &&
        llvm::all_of(numerator, [](const std::pair<double, Value> &t) {
          return isSumOverSamples(t.second);
        })) {
      OpBuilder b(div);
      b.setInsertionPointAfter(div);
      nn::NNBuilder nnb(b, div.getLoc());
      for (auto [c, sum] : numerator)
        terms.push_back({coefficient * c, nnb.div(sum, div.getRhs())});
      return true;
    }
  }
  unrecognized = v;
  return false;
}

/// The terms of a combined loss (see collectLossTerms) split into (N_i,
/// D_i) in a clone's body, or nothing when a term cannot be (masked).
struct SplitTerm {
  double coefficient;
  Value sum, count;
  LossKind kind;
  std::optional<double> floor;
};
std::optional<SmallVector<SplitTerm>>
splitLossTerms(OpBuilder &builder, Value loss, int64_t microBatch,
               LossDivisorAttr divisor, SampleMask *mask) {
  KnownDivision known = KnownDivision::of(loss, divisor);
  SmallVector<std::pair<double, Value>> terms;
  Value unrecognized;
  if (!collectLossTerms(loss, 1.0, known, terms, unrecognized))
    return std::nullopt;
  SmallVector<SplitTerm> split;
  for (auto [coefficient, term] : terms) {
    LossKind kind = LossKind::MeanOfMeans;
    std::optional<double> floor;
    double fullCount = 1;
    std::optional<std::pair<Value, Value>> nd = splitLossValue(
        builder, term, microBatch, known, kind, floor, fullCount, mask);
    if (!nd)
      return std::nullopt;
    split.push_back({coefficient, nd->first, nd->second, kind, floor});
  }
  return split;
}

/// Splits a loss that is a linear combination of mean-reduced terms (see
/// SplitLoss::counts): each term is normalized by its own count over the
/// whole window, which a counting pass computes before the micro-batch
/// loop. Nothing (and no functions left) when the loss is not such a
/// combination.
std::optional<SplitLoss> splitCombinedLoss(func::FuncOp forward, bool mask,
                                           ArrayRef<unsigned> batchArgs,
                                           int64_t microBatch,
                                           LossDivisorAttr divisor,
                                           SymbolTable &symbols) {
  OpBuilder builder(forward);
  auto type = forward.getFunctionType();
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  auto i64Scalar = RankedTensorType::get({}, builder.getI64Type());
  std::string suffix = mask ? "_masked" : "";

  // The counting function: the mean terms' counts.
  SmallVector<Type> countInputs(type.getInputs());
  if (mask)
    countInputs.push_back(i64Scalar);
  auto counts =
      func::FuncOp::create(builder, forward.getLoc(),
                           (forward.getSymName() + "_counts" + suffix).str(),
                           builder.getFunctionType(countInputs, {}));
  counts.setPrivate();
  IRMapping countMapping;
  forward.getBody().cloneInto(&counts.getBody(), countMapping);
  Block &countEntry = counts.getBody().front();
  std::optional<SampleMask> countMask;
  if (mask)
    countMask.emplace(counts, batchArgs, microBatch,
                      countEntry.addArgument(i64Scalar, forward.getLoc()));
  auto countReturn = cast<func::ReturnOp>(countEntry.getTerminator());
  std::optional<SmallVector<SplitTerm>> countTerms =
      splitLossTerms(builder, countReturn.getOperand(0), microBatch, divisor,
                     countMask ? &*countMask : nullptr);
  if (!countTerms || llvm::none_of(*countTerms, [](const SplitTerm &t) {
        return t.kind == LossKind::Mean;
      })) {
    counts.erase();
    return std::nullopt;
  }
  SmallVector<Value> countValues;
  SmallVector<std::optional<double>> floors;
  for (const SplitTerm &t : *countTerms)
    if (t.kind == LossKind::Mean) {
      countValues.push_back(t.count);
      floors.push_back(t.floor);
    }
  builder.setInsertionPoint(countReturn);
  SmallVector<Value> countResults;
  for (Value c : countValues)
    countResults.push_back(
        nn::NNBuilder(builder, countReturn.getLoc()).reshape(c, scalarType));
  func::ReturnOp::create(builder, countReturn.getLoc(), countResults);
  countReturn.erase();
  counts.setFunctionType(builder.getFunctionType(
      countInputs, SmallVector<Type>(countResults.size(), scalarType)));

  // The loss function: sum_i c_i N_i / total_i (mean terms) or c_i N_i.
  SmallVector<Type> inputs(type.getInputs());
  inputs.append(countResults.size(), scalarType);
  if (mask)
    inputs.push_back(i64Scalar);
  builder.setInsertionPoint(forward);
  auto split = func::FuncOp::create(
      builder, forward.getLoc(),
      (forward.getSymName() + "_split_combined" + suffix).str(),
      builder.getFunctionType(inputs, {scalarType, scalarType}));
  split.setPrivate();
  IRMapping mapping;
  forward.getBody().cloneInto(&split.getBody(), mapping);
  Block &entry = split.getBody().front();
  SmallVector<Value> totals;
  for (size_t i = 0; i < countResults.size(); ++i)
    totals.push_back(entry.addArgument(scalarType, forward.getLoc()));
  std::optional<SampleMask> sampleMask;
  if (mask)
    sampleMask.emplace(split, batchArgs, microBatch,
                       entry.addArgument(i64Scalar, forward.getLoc()));
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  std::optional<SmallVector<SplitTerm>> terms =
      splitLossTerms(builder, ret.getOperand(0), microBatch, divisor,
                     sampleMask ? &*sampleMask : nullptr);
  if (!terms) {
    counts.erase();
    split.erase();
    return std::nullopt;
  }
  builder.setInsertionPoint(ret);
  nn::NNBuilder nnb(builder, ret.getLoc());
  Value loss;
  size_t next = 0;
  for (const SplitTerm &t : *terms) {
    Value part = nnb.reshape(t.sum, scalarType);
    if (t.kind == LossKind::Mean)
      part = nnb.div(part, totals[next++]);
    part = nnb.mul(part, nnb.scalar(builder.getF32Type(), t.coefficient));
    loss = loss ? nnb.add(loss, part) : part;
  }
  SmallVector<Value> returned{loss, nnb.scalar(builder.getF32Type(), 1.0)};
  llvm::append_range(returned, ret.getOperands().drop_front());
  func::ReturnOp::create(builder, ret.getLoc(), returned);
  ret.erase();
  split.setType(
      builder.getFunctionType(inputs, ValueRange(returned).getTypes()));
  symbols.insert(counts);
  symbols.insert(split);
  SplitLoss result{split, LossKind::Sum, /*countFloor=*/std::nullopt, mask,
                   /*fullCount=*/1.0};
  result.counts = counts;
  result.countFloors = floors;
  return result;
}

} // namespace

/// Clones `forward` into a function returning (N, D). With `mask`, the
/// clone takes the number of valid samples of its micro-batch as a trailing
/// tensor<i64> and masks the others out; returns nothing (and leaves no
/// function) when it cannot.
std::optional<SplitLoss>
train::splitLoss(func::FuncOp forward, bool exact, bool mask,
                 ArrayRef<unsigned> batchArgs, int64_t microBatch,
                 LossDivisorAttr divisor, SymbolTable &symbols) {
  OpBuilder builder(forward);
  auto type = forward.getFunctionType();
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  SmallVector<Type> inputs(type.getInputs());
  if (mask)
    inputs.push_back(RankedTensorType::get({}, builder.getI64Type()));
  auto split = func::FuncOp::create(
      builder, forward.getLoc(),
      (forward.getSymName() + (mask ? "_split_masked" : "_split")).str(),
      builder.getFunctionType(inputs, {scalarType, scalarType}));
  split.setPrivate();
  IRMapping mapping;
  forward.getBody().cloneInto(&split.getBody(), mapping);
  Block &entry = split.getBody().front();
  std::optional<SampleMask> sampleMask;
  if (mask) {
    Value valid = entry.addArgument(inputs.back(), forward.getLoc());
    sampleMask.emplace(split, batchArgs, microBatch, valid);
  }
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  Value loss = ret.getOperand(0);
  KnownDivision known = KnownDivision::of(loss, divisor);

  LossKind kind = LossKind::MeanOfMeans;
  std::optional<double> floor;
  double fullCount = 1;
  std::optional<std::pair<Value, Value>> nd;
  if (exact)
    nd = splitLossValue(builder, loss, microBatch, known, kind, floor,
                        fullCount, sampleMask ? &*sampleMask : nullptr);
  if (!nd && exact) {
    // A linear combination of recognized terms.
    SmallVector<std::pair<double, Value>> terms;
    Value unrecognized;
    bool linear = collectLossTerms(loss, 1.0, known, terms, unrecognized);
    if (linear) {
      std::optional<SplitLoss> result = splitCombinedLoss(
          forward, mask, batchArgs, microBatch, divisor, symbols);
      if (result) {
        split.erase();
        return result;
      }
    }
    if (!mask) {
      // Say why the loss is averaged over micro-batches.
      Operation *def = unrecognized ? unrecognized.getDefiningOp() : nullptr;
      InFlightDiagnostic diag =
          emitWarning(def ? def->getLoc() : forward.getLoc());
      if (linear)
        diag << "the loss combines mean-reduced terms, but one of them cannot "
                "be normalized on its own";
      else
        diag << "loss is not a recognized mean- or sum-reduced form, nor a "
                "linear combination of such terms"
             << (def ? " ('" + def->getName().getStringRef().str() +
                           "' is neither)"
                     : std::string());
      diag << "; averaging it over micro-batches (mean of means), which "
              "differs from the whole-batch loss when micro-batch counts "
              "differ";
      exact = false;
    }
  }
  if (!nd && mask) {
    split.erase();
    return std::nullopt;
  }
  if (!nd) {
    kind = LossKind::MeanOfMeans;
    fullCount = 1;
    builder.setInsertionPoint(ret);
    nn::NNBuilder nnb(builder, ret.getLoc());
    nd = std::make_pair(loss, nnb.scalar(builder.getF32Type(), 1.0));
  }
  builder.setInsertionPoint(ret);
  // The forward's other results (buffers' new values) follow N and D.
  SmallVector<Value> returned{nd->first, nd->second};
  llvm::append_range(returned, ret.getOperands().drop_front());
  func::ReturnOp::create(builder, ret.getLoc(), returned);
  ret.erase();
  split.setType(
      builder.getFunctionType(inputs, ValueRange(returned).getTypes()));
  symbols.insert(split);
  return SplitLoss{split, kind, floor, mask, std::max(fullCount, 1.0)};
}
