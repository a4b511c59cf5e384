//===- ContractionVJP.cpp - VJP rules of Gemm and MatMul --------*- C++ -*-===//

#include "accrue/Dialect/NN/IR/NN.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace accrue::nn;

LogicalResult GemmOp::buildVJP(OpBuilder &b, ValueRange dys,
                               SmallVectorImpl<Value> &dxs) {
  // Y = alpha * A' B' + beta * C with A' = op(A), B' = op(B).
  // dA' = alpha * dY B'^T and dB' = alpha * A'^T dY, written as Gemms on the
  // stored A and B so that no transpose is materialized.
  Location loc = getLoc();
  NNBuilder nn(b, loc);
  Value dy = dys[0];
  FloatAttr alpha = getAlphaAttr();
  FloatAttr one = b.getF32FloatAttr(1.0f);
  BoolAttr t = b.getBoolAttr(true), f = b.getBoolAttr(false);
  bool transA = getTransA(), transB = getTransB();
  auto gemm = [&](Value x, Value y, bool tx, bool ty) -> Value {
    return GemmOp::create(b, loc, x, y, /*c=*/Value(), alpha, one, tx ? t : f,
                          ty ? t : f);
  };
  // dA = dY B'^T, or its transpose B' dY^T when A is stored transposed.
  dxs.push_back(transA ? gemm(getB(), dy, transB, true)
                       : gemm(dy, getB(), false, !transB));
  // dB = A'^T dY, or its transpose dY^T A' when B is stored transposed.
  dxs.push_back(transB ? gemm(dy, getA(), true, transA)
                       : gemm(getA(), dy, !transA, false));
  if (Value c = getC()) {
    auto cType = cast<RankedTensorType>(c.getType());
    Value dc = nn.sumToShape(dy, cType);
    if (getBeta().convertToDouble() != 1.0)
      dc = nn.mul(
          dc, nn.scalar(cType.getElementType(), getBeta().convertToDouble()));
    dxs.push_back(dc);
  }
  return success();
}

/// Swaps the last two dimensions of `value`.
static Value transposeLast2(OpBuilder &b, Location loc, Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return TransposeOp::create(b, loc, value, perm);
}

LogicalResult MatMulOp::buildVJP(OpBuilder &b, ValueRange dys,
                                 SmallVectorImpl<Value> &dxs) {
  // dA = dY B^T and dB = A^T dY, summed over broadcast batch dimensions.
  Location loc = getLoc();
  NNBuilder nn(b, loc);
  Value dy = dys[0];
  auto lhsType = cast<RankedTensorType>(getLhs().getType());
  auto rhsType = cast<RankedTensorType>(getRhs().getType());
  auto dyType = cast<RankedTensorType>(dy.getType());
  if (rhsType.getRank() == 2 && lhsType.getRank() > 2 &&
      lhsType.hasStaticShape() && dyType.hasStaticShape()) {
    // A weight shared by every row of a batch (x @ W): the batch dimensions
    // are rows of one 2-D product, and dB = A^T dY sums over all of them in
    // one contraction instead of a product per batch element added up
    // afterwards. (dA keeps the transposed copy of B: the CPU's outer-
    // product kernel on it beats dot products along B's rows.)
    dxs.push_back(
        MatMulOp::create(b, loc, dy, transposeLast2(b, loc, getRhs())));
    dxs.push_back(nn.rowsProduct(getLhs(), dy));
    return success();
  }
  Value da = MatMulOp::create(b, loc, dy, transposeLast2(b, loc, getRhs()));
  dxs.push_back(nn.sumToShape(da, cast<RankedTensorType>(getLhs().getType())));
  Value db = MatMulOp::create(b, loc, transposeLast2(b, loc, getLhs()), dy);
  dxs.push_back(nn.sumToShape(db, cast<RankedTensorType>(getRhs().getType())));
  return success();
}
