//===- Elementwise.cpp - lower elementwise nn ops ---------------*- C++ -*-===//
//
// Every elementwise op becomes one broadcasting linalg.generic whose body is
// the scalar form of the op; linalg's elementwise fusion merges chains later.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

using namespace mlir;
using namespace accrue::nn;
using namespace accrue::nn::lowering;

namespace {

bool isFloat(Value v) { return isa<FloatType>(v.getType()); }

// Scalar bodies, one per op. `args` are the operand elements.
Value scalarBody(NegOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::NegFOp::create(b, l, args[0]);
  return arith::SubIOp::create(
      b, l, scalarConstant(b, l, args[0].getType(), 0.0), args[0]);
}
Value scalarBody(ExpOp, OpBuilder &b, Location l, ValueRange args) {
  return math::ExpOp::create(b, l, args[0]);
}
Value scalarBody(LogOp, OpBuilder &b, Location l, ValueRange args) {
  return math::LogOp::create(b, l, args[0]);
}
Value scalarBody(SqrtOp, OpBuilder &b, Location l, ValueRange args) {
  return math::SqrtOp::create(b, l, args[0]);
}
Value scalarBody(ReluOp, OpBuilder &b, Location l, ValueRange args) {
  // maximumf propagates NaN, like torch.relu.
  Value zero = scalarConstant(b, l, args[0].getType(), 0.0);
  return arith::MaximumFOp::create(b, l, args[0], zero);
}
Value scalarBody(SigmoidOp, OpBuilder &b, Location l, ValueRange args) {
  Value one = scalarConstant(b, l, args[0].getType(), 1.0);
  Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, args[0]));
  return arith::DivFOp::create(b, l, one, arith::AddFOp::create(b, l, one, e));
}
Value scalarBody(TanhOp, OpBuilder &b, Location l, ValueRange args) {
  return math::TanhOp::create(b, l, args[0]);
}
Value scalarBody(SinOp, OpBuilder &b, Location l, ValueRange args) {
  return math::SinOp::create(b, l, args[0]);
}
Value scalarBody(CosOp, OpBuilder &b, Location l, ValueRange args) {
  return math::CosOp::create(b, l, args[0]);
}
Value scalarBody(SignOp, OpBuilder &b, Location l, ValueRange args) {
  // (x > 0) - (x < 0), selected so NaN stays NaN and -0 gives 0.
  Type t = args[0].getType();
  Value zero = scalarConstant(b, l, t, 0.0);
  Value one = scalarConstant(b, l, t, 1.0);
  Value minusOne = scalarConstant(b, l, t, -1.0);
  Value positive =
      arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, args[0], zero);
  Value negative =
      arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, args[0], zero);
  Value isZero =
      arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, args[0], zero);
  Value result = arith::SelectOp::create(b, l, positive, one, args[0]);
  result = arith::SelectOp::create(b, l, negative, minusOne, result);
  return arith::SelectOp::create(b, l, isZero, zero, result);
}
Value scalarBody(FloorOp, OpBuilder &b, Location l, ValueRange args) {
  return math::FloorOp::create(b, l, args[0]);
}
Value scalarBody(CeilOp, OpBuilder &b, Location l, ValueRange args) {
  return math::CeilOp::create(b, l, args[0]);
}
Value scalarBody(RoundOp, OpBuilder &b, Location l, ValueRange args) {
  return math::RoundEvenOp::create(b, l, args[0]);
}
Value scalarBody(AddOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::AddFOp::create(b, l, args[0], args[1]);
  return arith::AddIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(SubOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::SubFOp::create(b, l, args[0], args[1]);
  return arith::SubIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(MulOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::MulFOp::create(b, l, args[0], args[1]);
  return arith::MulIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(DivOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::DivFOp::create(b, l, args[0], args[1]);
  return arith::DivSIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(ModOp op, OpBuilder &b, Location l, ValueRange args) {
  Value lhs = args[0], rhs = args[1];
  Type type = lhs.getType();
  Value zero = scalarConstant(b, l, type, 0.0);
  Value remainder, isZero, rhsNegative;
  if (isFloat(lhs)) {
    remainder = arith::RemFOp::create(b, l, lhs, rhs);
    isZero =
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, remainder, zero);
    rhsNegative =
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, rhs, zero);
  } else {
    // remsi by 0 is undefined and by -1 can overflow: both remainders are 0,
    // so divide by 1 there.
    Value one = scalarConstant(b, l, type, 1.0);
    Value minusOne = scalarConstant(b, l, type, -1.0);
    Value trivial = arith::OrIOp::create(
        b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, rhs, zero),
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, rhs, minusOne));
    Value divisor = arith::SelectOp::create(b, l, trivial, one, rhs);
    remainder = arith::RemSIOp::create(b, l, lhs, divisor);
    isZero =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, remainder, zero);
    rhsNegative =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, rhs, zero);
  }
  if (op.getFmod())
    return remainder;
  // Python's %: a nonzero remainder takes the divisor's sign.
  Value remainderNegative =
      isFloat(lhs)
          ? Value(arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT,
                                        remainder, zero))
          : Value(arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt,
                                        remainder, zero));
  Value signsDiffer =
      arith::XOrIOp::create(b, l, remainderNegative, rhsNegative);
  Value shift = arith::AndIOp::create(
      b, l, signsDiffer,
      arith::XOrIOp::create(
          b, l, isZero, arith::ConstantOp::create(b, l, b.getBoolAttr(true))));
  if (!isFloat(lhs))
    return arith::SelectOp::create(
        b, l, shift, arith::AddIOp::create(b, l, remainder, rhs), remainder);
  // A zero remainder takes the divisor's sign too (opset 28's floats).
  Value result = arith::SelectOp::create(
      b, l, shift, arith::AddFOp::create(b, l, remainder, rhs), remainder);
  return arith::SelectOp::create(
      b, l, isZero, math::CopySignOp::create(b, l, remainder, rhs), result);
}
Value scalarBody(PowOp, OpBuilder &b, Location l, ValueRange args) {
  return math::PowFOp::create(b, l, args[0], args[1]);
}
Value scalarBody(GreaterOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, args[0],
                                 args[1]);
  return arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, args[0],
                               args[1]);
}
Value scalarBody(WhereOp, OpBuilder &b, Location l, ValueRange args) {
  return arith::SelectOp::create(b, l, args[0], args[1], args[2]);
}

Value scalarBody(AbsOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return math::AbsFOp::create(b, l, args[0]);
  return math::AbsIOp::create(b, l, args[0]);
}
Value scalarBody(ErfOp, OpBuilder &b, Location l, ValueRange args) {
  return math::ErfOp::create(b, l, args[0]);
}
Value scalarBody(MaxOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::MaximumFOp::create(b, l, args[0], args[1]);
  return arith::MaxSIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(MinOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::MinimumFOp::create(b, l, args[0], args[1]);
  return arith::MinSIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(LessOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT, args[0],
                                 args[1]);
  return arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, args[0],
                               args[1]);
}
Value scalarBody(EqualOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, args[0],
                                 args[1]);
  return arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, args[0],
                               args[1]);
}
Value scalarBody(LessOrEqualOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLE, args[0],
                                 args[1]);
  return arith::CmpIOp::create(b, l, arith::CmpIPredicate::sle, args[0],
                               args[1]);
}
Value scalarBody(GreaterOrEqualOp, OpBuilder &b, Location l, ValueRange args) {
  if (isFloat(args[0]))
    return arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGE, args[0],
                                 args[1]);
  return arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, args[0],
                               args[1]);
}
Value scalarBody(AndOp, OpBuilder &b, Location l, ValueRange args) {
  return arith::AndIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(OrOp, OpBuilder &b, Location l, ValueRange args) {
  return arith::OrIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(XorOp, OpBuilder &b, Location l, ValueRange args) {
  return arith::XOrIOp::create(b, l, args[0], args[1]);
}
Value scalarBody(NotOp, OpBuilder &b, Location l, ValueRange args) {
  Value one = arith::ConstantOp::create(b, l, b.getBoolAttr(true));
  return arith::XOrIOp::create(b, l, args[0], one);
}
Value scalarBody(ClipOp op, OpBuilder &b, Location l, ValueRange args) {
  Value x = args[0];
  Type type = x.getType();
  if (std::optional<APFloat> min = op.getMin()) {
    Value m = scalarConstant(b, l, type, min->convertToDouble());
    x = isFloat(x) ? Value(arith::MaximumFOp::create(b, l, x, m))
                   : Value(arith::MaxSIOp::create(b, l, x, m));
  }
  if (std::optional<APFloat> max = op.getMax()) {
    Value m = scalarConstant(b, l, type, max->convertToDouble());
    x = isFloat(x) ? Value(arith::MinimumFOp::create(b, l, x, m))
                   : Value(arith::MinSIOp::create(b, l, x, m));
  }
  return x;
}
Value scalarBody(CastOp op, OpBuilder &b, Location l, ValueRange args) {
  Value x = args[0];
  Type from = x.getType();
  Type to = getElementTypeOrSelf(op.getType());
  if (from == to)
    return x;
  if (to.isInteger(1)) {
    if (isFloat(x))
      return arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNE, x,
                                   scalarConstant(b, l, from, 0.0));
    return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, x,
                                 scalarConstant(b, l, from, 0.0));
  }
  bool fromFloat = isa<FloatType>(from), toFloat = isa<FloatType>(to);
  if (fromFloat && toFloat) {
    if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, l, to, x);
    if (from.getIntOrFloatBitWidth() > to.getIntOrFloatBitWidth())
      return arith::TruncFOp::create(b, l, to, x);
    // f16 <-> bf16: through f32.
    Value wide = arith::ExtFOp::create(b, l, b.getF32Type(), x);
    return arith::TruncFOp::create(b, l, to, wide);
  }
  if (fromFloat)
    return arith::FPToSIOp::create(b, l, to, x);
  if (toFloat)
    return from.isInteger(1) ? Value(arith::UIToFPOp::create(b, l, to, x))
                             : Value(arith::SIToFPOp::create(b, l, to, x));
  if (from.isInteger(1))
    return arith::ExtUIOp::create(b, l, to, x);
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(b, l, to, x);
  return arith::TruncIOp::create(b, l, to, x);
}

template <typename OpTy>
struct ElementwiseLowering : public OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    Value result = buildElementwise(
        rewriter, op.getLoc(), resultType, adaptor.getOperands(),
        [&](OpBuilder &b, Location l, ValueRange args) {
          return scalarBody(op, b, l, args.drop_back());
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct IdentityLowering : public OpConversionPattern<IdentityOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(IdentityOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getInput());
    return success();
  }
};

} // namespace

void lowering::populateElementwiseLowering(RewritePatternSet &patterns) {
  patterns
      .add<ElementwiseLowering<NegOp>, ElementwiseLowering<ExpOp>,
           ElementwiseLowering<LogOp>, ElementwiseLowering<SqrtOp>,
           ElementwiseLowering<ReluOp>, ElementwiseLowering<SigmoidOp>,
           ElementwiseLowering<TanhOp>, ElementwiseLowering<AddOp>,
           ElementwiseLowering<SubOp>, ElementwiseLowering<MulOp>,
           ElementwiseLowering<DivOp>, ElementwiseLowering<ModOp>,
           ElementwiseLowering<PowOp>, ElementwiseLowering<GreaterOp>,
           ElementwiseLowering<WhereOp>, ElementwiseLowering<AbsOp>,
           ElementwiseLowering<ErfOp>, ElementwiseLowering<MaxOp>,
           ElementwiseLowering<MinOp>, ElementwiseLowering<LessOp>,
           ElementwiseLowering<EqualOp>, ElementwiseLowering<AndOp>,
           ElementwiseLowering<NotOp>, ElementwiseLowering<OrOp>,
           ElementwiseLowering<XorOp>, ElementwiseLowering<LessOrEqualOp>,
           ElementwiseLowering<GreaterOrEqualOp>, ElementwiseLowering<ClipOp>,
           ElementwiseLowering<CastOp>, ElementwiseLowering<SinOp>,
           ElementwiseLowering<CosOp>, ElementwiseLowering<SignOp>,
           ElementwiseLowering<FloorOp>, ElementwiseLowering<CeilOp>,
           ElementwiseLowering<RoundOp>, IdentityLowering>(
          patterns.getContext());
}
