//===- LossDivisor.cpp - how a loss's constant divisor scales ---*- C++ -*-===//

#include "accrue/Dialect/Train/Utils/LossDivisor.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace accrue;

std::optional<std::pair<nn::DivOp, double>>
train::getConstantDivision(Value loss) {
  while (auto id = loss.getDefiningOp<nn::IdentityOp>())
    loss = id.getInput();
  auto div = loss.getDefiningOp<nn::DivOp>();
  DenseElementsAttr value;
  if (!div || !matchPattern(div.getRhs(), m_Constant(&value)) ||
      value.getNumElements() != 1 || !isa<FloatType>(value.getElementType()))
    return std::nullopt;
  return std::make_pair(
      div, (*value.getValues<APFloat>().begin()).convertToDouble());
}

train::LossDivisorAttr train::classifyLossDivisor(func::FuncOp forward,
                                                  func::FuncOp forwardAtNext,
                                                  int64_t b) {
  auto divisorOf = [](func::FuncOp f) {
    return getConstantDivision(f.front().getTerminator()->getOperand(0));
  };
  auto atB = divisorOf(forward), atNext = divisorOf(forwardAtNext);
  if (!atB || !atNext)
    return {};
  double c = atB->second, perSample = atNext->second - c;
  if (perSample != 0.0 && c != perSample * static_cast<double>(b))
    return {};
  return LossDivisorAttr::get(forward.getContext(), llvm::APFloat(perSample));
}
