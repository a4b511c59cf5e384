//===- FoldWidening.cpp - contractions reading narrow operands -*- C++ -*-===//
//
// nn-to-linalg runs a bf16 or f16 product on its operands widened to f32
// and rounds its f32 result once. A target whose contractions read narrow
// operands and accumulate in f32 (cuBLASLt; AVX512-BF16's vdpbf16ps)
// reads the narrow tensors instead: the widening kernels and their f32
// copies go, and data movement between a widening and its contractions
// moves narrow values (half the bytes).
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/Common/Contractions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace accrue::codegen;

linalg::GenericOp accrue::codegen::withInputs(
    PatternRewriter &rewriter, linalg::GenericOp op, ValueRange inputs,
    function_ref<Value(OpBuilder &, Location, unsigned, Value)> argument,
    function_ref<Value(Operation &, ValueRange)> skip) {
  auto rebuilt = linalg::GenericOp::create(
      rewriter, op.getLoc(), op.getResultTypes(), inputs, op.getDpsInits(),
      op.getIndexingMapsArray(), op.getIteratorTypesArray(),
      [&](OpBuilder &bb, Location loc, ValueRange args) {
        Block &old = op.getRegion().front();
        IRMapping mapping;
        for (auto [k, arg] : llvm::enumerate(args))
          mapping.map(old.getArgument(k), argument(bb, loc, k, arg));
        for (Operation &bodyOp : old) {
          if (Value stands = skip ? skip(bodyOp, args) : Value()) {
            mapping.map(bodyOp.getResult(0), stands);
            continue;
          }
          bb.clone(bodyOp, mapping);
        }
      });
  rebuilt->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  return rebuilt;
}

Value accrue::codegen::widenToF32(PatternRewriter &rewriter, Location loc,
                                  Value narrow) {
  auto type = cast<RankedTensorType>(narrow.getType());
  auto wide = type.clone(rewriter.getF32Type());
  Value empty = tensor::EmptyOp::create(rewriter, loc, wide.getShape(),
                                        wide.getElementType());
  AffineMap identity = rewriter.getMultiDimIdentityMap(type.getRank());
  return linalg::GenericOp::create(
             rewriter, loc, TypeRange{wide}, ValueRange{narrow},
             ValueRange{empty}, ArrayRef<AffineMap>{identity, identity},
             SmallVector<utils::IteratorType>(type.getRank(),
                                              utils::IteratorType::parallel),
             [](OpBuilder &b, Location l, ValueRange args) {
               linalg::YieldOp::create(
                   b, l,
                   arith::ExtFOp::create(b, l, b.getF32Type(), args[0])
                       .getResult());
             })
      .getResult(0);
}

namespace {

/// contraction(widen(a), widen(b)) -> contraction(a, b) widening in its
/// body (matchContraction's widened factors), where the target's
/// `control` takes it: the GEMM (or vdpbf16ps) reads a and b in their own
/// type. Both or neither: the kernels' A and B share a type.
struct FoldWidenedInputs : OpRewritePattern<linalg::GenericOp> {
  FoldWidenedInputs(MLIRContext *context, WideningControl control)
      : OpRewritePattern(context), control(std::move(control)) {}
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<Contraction> c = matchContraction(op);
    if (!op.hasPureTensorSemantics() || !c)
      return failure();
    Value a = widenedFrom(op.getDpsInputs()[c->lhs]),
          b = widenedFrom(op.getDpsInputs()[c->rhs]);
    if (!a || !b)
      return failure();
    Type narrow = getElementTypeOrSelf(a.getType());
    if (narrow != getElementTypeOrSelf(b.getType()) ||
        (control && !control(op, narrow)))
      return failure();
    SmallVector<Value> inputs(op.getDpsInputs());
    inputs[c->lhs] = a;
    inputs[c->rhs] = b;
    rewriter.replaceOp(op, withInputs(rewriter, op, inputs,
                                      [&](OpBuilder &bb, Location loc,
                                          unsigned k, Value arg) -> Value {
                                        if (k != c->lhs && k != c->rhs)
                                          return arg;
                                        return arith::ExtFOp::create(
                                            bb, loc, bb.getF32Type(), arg);
                                      })
                               .getResults());
    return success();
  }
  WideningControl control;
};

/// Whether `op` only copies its one input (through any maps): its body
/// yields the input's element.
bool isCopy(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  return op.getNumDpsInputs() == 1 && op.getNumDpsInits() == 1 &&
         op.getNumReductionLoops() == 0 && llvm::hasSingleElement(body) &&
         body.getTerminator()->getOperand(0) == body.getArgument(0) &&
         op.getIndexingMapsArray().back().isPermutation();
}

/// Whether SinkWidening may move a widening past `use`'s owner: a pad of
/// it, a reshape of it or a copy reading it (not into it), with a static
/// result.
bool movesWidened(OpOperand &use) {
  Operation *user = use.getOwner();
  auto copy = dyn_cast<linalg::GenericOp>(user);
  bool moves =
      isa<tensor::PadOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
          user) ||
      (copy && isCopy(copy) && copy.isDpsInput(&use));
  return moves && user->getNumResults() == 1 &&
         cast<RankedTensorType>(user->getResult(0).getType()).hasStaticShape();
}

/// Whether every use of `value`, through data movement that
/// SinkWidening moves (and its results' uses), is an input of a
/// contraction: widening after the movement then leaves no widening
/// kernel behind once the contractions read the narrow values.
bool feedsContractions(Value value) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (auto generic = dyn_cast<linalg::GenericOp>(user)) {
      std::optional<Contraction> c = matchContraction(generic);
      if (c && (use.getOperandNumber() == c->lhs ||
                use.getOperandNumber() == c->rhs))
        continue;
    }
    if (!movesWidened(use) || !feedsContractions(user->getResult(0)))
      return false;
  }
  return true;
}

/// Data movement of widened values, movement(widen(x)) -> widen(movement
/// (x)), where what the movement feeds is only contractions: a
/// convolution's padding and columns (im2col) of a bf16 input, a reshaped
/// bf16 weight. The movement then moves bf16 values (half the bytes), and
/// the widening reaches the contractions, where FoldWidenedInputs folds it
/// into their bodies (the GEMM reads bf16). Moves by a tensor.pad with a
/// constant exact in the narrow type, a reshape, or a generic whose body
/// only yields its one input (any maps).
struct SinkWidening : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp widening,
                                PatternRewriter &rewriter) const override {
    if (widening.getNumResults() != 1 || !widening.hasPureTensorSemantics())
      return failure();
    Value narrow = widenedFrom(widening.getResult(0));
    if (!narrow || widening.getResult(0).use_empty() ||
        !feedsContractions(widening.getResult(0)))
      return failure();
    Type element = getElementTypeOrSelf(narrow.getType());
    bool moved = false;
    for (OpOperand &use :
         llvm::make_early_inc_range(widening.getResult(0).getUses())) {
      Operation *user = use.getOwner();
      rewriter.setInsertionPoint(user);
      Location loc = user->getLoc();
      Value result;
      if (!movesWidened(use))
        continue; // a contraction reading it
      if (auto pad = dyn_cast<tensor::PadOp>(user)) {
        Value given = pad.getConstantPaddingValue();
        auto value =
            given ? given.getDefiningOp<arith::ConstantFloatOp>() : nullptr;
        if (!value)
          continue;
        APFloat padding = value.value();
        bool inexact = false;
        padding.convert(cast<FloatType>(element).getFloatSemantics(),
                        APFloat::rmNearestTiesToEven, &inexact);
        if (inexact)
          continue;
        Value constant = arith::ConstantFloatOp::create(
            rewriter, loc, cast<FloatType>(element), padding);
        result = tensor::PadOp::create(
            rewriter, loc, pad.getResultType().clone(element), narrow,
            pad.getMixedLowPad(), pad.getMixedHighPad(), constant,
            pad.getNofold());
      } else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(user)) {
        result = tensor::CollapseShapeOp::create(
            rewriter, loc, narrow, collapse.getReassociationIndices());
      } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(user)) {
        result = tensor::ExpandShapeOp::create(
            rewriter, loc, expand.getResultType().clone(element), narrow,
            expand.getReassociationIndices(), expand.getMixedOutputShape());
      } else if (auto copy = dyn_cast<linalg::GenericOp>(user)) {
        auto type = cast<RankedTensorType>(copy.getResult(0).getType());
        Value empty =
            tensor::EmptyOp::create(rewriter, loc, type.getShape(), element);
        result = linalg::GenericOp::create(
                     rewriter, loc, TypeRange{type.clone(element)},
                     ValueRange{narrow}, ValueRange{empty},
                     copy.getIndexingMapsArray(), copy.getIteratorTypesArray(),
                     [](OpBuilder &b, Location l, ValueRange args) {
                       linalg::YieldOp::create(b, l, args[0]);
                     })
                     .getResult(0);
      } else {
        continue;
      }
      rewriter.replaceOp(user, widenToF32(rewriter, loc, result));
      moved = true;
    }
    return success(moved);
  }
};

/// contraction(a, b) widening bf16 (or f16) a in its body while b is f32
/// (elementwise fusion recomputed a widening there) -> contraction(widen
/// (a), b): a GEMM's A and B share a type, so the f32 GEMM reads a's
/// widened copy, as before the fusion.
struct UnfoldMixedWidening : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<Contraction> c = matchContraction(op);
    if (!op.hasPureTensorSemantics() || !c || c->lhsElement == c->rhsElement ||
        !(c->lhsElement.isF32() || c->rhsElement.isF32()))
      return failure();
    unsigned narrow = c->lhsElement.isF32() ? c->rhs : c->lhs;
    SmallVector<Value> inputs(op.getDpsInputs());
    if (!cast<RankedTensorType>(inputs[narrow].getType()).hasStaticShape())
      return failure();
    inputs[narrow] = widenToF32(rewriter, op.getLoc(), inputs[narrow]);
    // The body's widening of the input is the (widened) input itself now.
    BlockArgument narrowArg = op.getRegion().front().getArgument(narrow);
    rewriter.replaceOp(
        op, withInputs(
                rewriter, op, inputs,
                [](OpBuilder &, Location, unsigned, Value arg) { return arg; },
                [&](Operation &bodyOp, ValueRange args) -> Value {
                  auto ext = dyn_cast<arith::ExtFOp>(bodyOp);
                  return ext && ext.getIn() == narrowArg ? args[narrow]
                                                         : Value();
                })
                .getResults());
    return success();
  }
};

} // namespace

void accrue::codegen::populateFoldWideningPatterns(RewritePatternSet &patterns,
                                                   WideningControl control) {
  patterns.add<FoldWidenedInputs>(patterns.getContext(), std::move(control));
  patterns.add<SinkWidening, UnfoldMixedWidening>(patterns.getContext());
}
