//===- LoweringUtils.cpp - helpers for lowering nn to linalg ----*- C++ -*-===//

#include "LoweringUtils.h"

using namespace mlir;
using namespace accrue::nn;

Value lowering::emptyTensor(OpBuilder &b, Location loc, RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

Value lowering::scalarConstant(OpBuilder &b, Location loc, Type type,
                               double value) {
  if (auto f = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(f, value));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value lowering::filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                             double value) {
  Value init = emptyTensor(b, loc, type);
  Value scalar = scalarConstant(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, scalar, init).getResult(0);
}

Value lowering::normalizeIndex(OpBuilder &b, Location loc, Value index,
                               int64_t extent) {
  Type type = index.getType();
  Value zero = arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, 0));
  Value size =
      arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, extent));
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, index, zero);
  Value wrapped = arith::SelectOp::create(
      b, loc, negative, arith::AddIOp::create(b, loc, index, size), index);
  // Out-of-range indices read element 0 instead of outside the buffer.
  Value inRange = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, wrapped, zero),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, wrapped, size));
  Value safe = arith::SelectOp::create(b, loc, inRange, wrapped, zero);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), safe);
}

AffineMap lowering::broadcastMap(RankedTensorType operandType,
                                 RankedTensorType resultType) {
  MLIRContext *ctx = resultType.getContext();
  int64_t rank = resultType.getRank();
  int64_t lead = rank - operandType.getRank();
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < operandType.getRank(); ++d) {
    bool stretched =
        operandType.getDimSize(d) == 1 && resultType.getDimSize(d + lead) != 1;
    exprs.push_back(stretched ? getAffineConstantExpr(0, ctx)
                              : getAffineDimExpr(d + lead, ctx));
  }
  return AffineMap::get(rank, 0, exprs, ctx);
}

Value lowering::buildElementwise(OpBuilder &b, Location loc,
                                 RankedTensorType resultType,
                                 ValueRange operands, BodyBuilder body) {
  SmallVector<AffineMap> maps;
  for (Value operand : operands)
    maps.push_back(
        broadcastMap(cast<RankedTensorType>(operand.getType()), resultType));
  maps.push_back(b.getMultiDimIdentityMap(resultType.getRank()));
  SmallVector<utils::IteratorType> iterators(resultType.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, operands, emptyTensor(b, loc, resultType), maps,
      iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl, body(nb, nl, args));
      });
  return generic.getResult(0);
}

Value lowering::reshapeTensor(OpBuilder &b, Location loc, Value value,
                              RankedTensorType target) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type == target)
    return value;
  // Through a 1-D tensor: always expressible, and both steps are views.
  Value flat = value;
  int64_t n = type.getNumElements();
  auto flatType = RankedTensorType::get({n}, type.getElementType());
  if (type.getRank() == 0) {
    flat = tensor::ExpandShapeOp::create(b, loc, flatType, value,
                                         ArrayRef<ReassociationIndices>{});
  } else if (type.getRank() > 1) {
    ReassociationIndices all =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    flat = tensor::CollapseShapeOp::create(b, loc, flatType, value,
                                           ArrayRef<ReassociationIndices>{all});
  }
  if (target.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, target, flat,
                                           ArrayRef<ReassociationIndices>{});
  if (target.getRank() == 1)
    return flat;
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, target.getRank()));
  return tensor::ExpandShapeOp::create(b, loc, target, flat,
                                       ArrayRef<ReassociationIndices>{all});
}

arith::FastMathFlagsAttr lowering::reassocFlags(OpBuilder &b) {
  return arith::FastMathFlagsAttr::get(b.getContext(),
                                       arith::FastMathFlags::reassoc |
                                           arith::FastMathFlags::contract);
}
