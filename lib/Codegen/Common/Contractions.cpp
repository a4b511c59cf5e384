//===- Contractions.cpp - recognizing contractions ---------------*- C++
//-*-===//

#include "accrue/Codegen/Common/Contractions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace accrue::codegen {

std::optional<SmallVector<int64_t>> loopsOf(AffineMap map) {
  SmallVector<int64_t> loops;
  for (AffineExpr expr : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
      loops.push_back(dim.getPosition());
      continue;
    }
    auto constant = dyn_cast<AffineConstantExpr>(expr);
    if (!constant || constant.getValue() != 0)
      return std::nullopt;
    loops.push_back(-1);
  }
  return loops;
}

std::optional<Contraction> matchContraction(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumResults() > 1)
    return std::nullopt;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!loopsOf(map))
      return std::nullopt;
  Block &body = op.getRegion().front();
  BlockArgument out = body.getArgument(2);
  if (!out.getType().isF32() || !out.hasOneUse())
    return std::nullopt;
  // yield out + x * y, or x * y + out.
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  Value product = add.getLhs() == out   ? add.getRhs()
                  : add.getRhs() == out ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul || !mul->hasOneUse())
    return std::nullopt;
  // Each factor is an input, possibly widened.
  auto inputOf = [&](Value factor) -> std::optional<unsigned> {
    if (auto ext = factor.getDefiningOp<arith::ExtFOp>())
      factor = ext.getIn();
    auto arg = dyn_cast<BlockArgument>(factor);
    if (!arg || arg.getOwner() != &body || arg.getArgNumber() > 1)
      return std::nullopt;
    return arg.getArgNumber();
  };
  std::optional<unsigned> x = inputOf(mul.getLhs()), y = inputOf(mul.getRhs());
  if (!x || !y || *x == *y)
    return std::nullopt;
  // Nothing else in the body (no linalg.index, no masks).
  for (Operation &bodyOp : body.without_terminator())
    if (&bodyOp != add && &bodyOp != mul && !isa<arith::ExtFOp>(bodyOp))
      return std::nullopt;
  Contraction c;
  c.lhs = *x;
  c.rhs = *y;
  c.lhsElement = body.getArgument(*x).getType();
  c.rhsElement = body.getArgument(*y).getType();
  return c;
}

bool isZeroFill(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

bool isPointwise(linalg::GenericOp op) {
  return op.getNumReductionLoops() == 0 &&
         llvm::all_of(op.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); });
}

Operation *onlyOpOf(linalg::GenericOp op) {
  if (!op || op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      !isPointwise(op))
    return nullptr;
  Block &body = op.getRegion().front();
  Value yielded = body.getTerminator()->getOperand(0);
  Operation *only = yielded.getDefiningOp();
  if (!only || &body.front() != only || only->getNumOperands() != 1 ||
      only->getOperand(0) != body.getArgument(0))
    return nullptr;
  return only;
}

bool isNarrowFloat(Type type) { return type.isBF16() || type.isF16(); }

Value widenedFrom(Value value) {
  auto op = value.getDefiningOp<linalg::GenericOp>();
  auto ext = dyn_cast_or_null<arith::ExtFOp>(onlyOpOf(op));
  if (!ext || !ext.getType().isF32() || !isNarrowFloat(ext.getIn().getType()))
    return nullptr;
  return op.getDpsInputs()[0];
}

std::optional<AffineMap> outputToInputMap(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  if (!linalgOp || linalgOp.getNumDpsInputs() != 1 ||
      linalgOp.getNumDpsInits() != 1 ||
      linalgOp.getNumLoops() != linalgOp.getNumParallelLoops())
    return std::nullopt;
  if (!isa<linalg::TransposeOp>(op)) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic)
      return std::nullopt;
    Block &body = generic.getRegion().front();
    if (body.getTerminator()->getOperand(0) != body.getArgument(0))
      return std::nullopt;
  }
  AffineMap input = linalgOp.getIndexingMapsArray()[0];
  AffineMap output = linalgOp.getIndexingMapsArray()[1];
  if (!output.isPermutation() || !loopsOf(input))
    return std::nullopt;
  return input.compose(inversePermutation(output));
}

} // namespace accrue::codegen
