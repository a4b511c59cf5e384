//===- MixedPrecision.cpp - autocast for nn functions -----------*- C++ -*-===//
//
// One forward walk over each differentiated function. Every value has a
// precision (its element type); an op's precision is decided by its class
// (low, fp32 or "widest of its operands", as torch.autocast's lists), its
// float operands are cast to it (one cast per value and type), and its
// float results take it. nn ops infer result element types from operands,
// so changing types in place keeps them valid; the function is verified
// afterwards.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"

namespace accrue::train {
#define GEN_PASS_DEF_TRAINMIXEDPRECISION
#include "accrue/Dialect/Train/Transforms/Passes.h.inc"
} // namespace accrue::train

using namespace mlir;
using namespace accrue;
using namespace accrue::train;

namespace {

enum class Precision { Low, FP32, Widest, Keep };

/// Whether `op` is the bias add of a Linear as the exporters spell it over
/// inputs of rank 3 and more: an add of a matmul's result (its only use)
/// and a vector along its last dimension.
bool isLinearBias(Operation *op) {
  if (!isa<nn::AddOp>(op))
    return false;
  for (int64_t i : {0, 1}) {
    Value product = op->getOperand(i), bias = op->getOperand(1 - i);
    auto matmul = product.getDefiningOp<nn::MatMulOp>();
    auto biasType = dyn_cast<RankedTensorType>(bias.getType());
    auto productType = dyn_cast<RankedTensorType>(product.getType());
    if (matmul && product.hasOneUse() && biasType && productType &&
        biasType.getRank() == 1 && productType.getRank() >= 1 &&
        biasType.getDimSize(0) == productType.getShape().back())
      return true;
  }
  return false;
}

/// torch.autocast's classes, for nn ops.
Precision classify(Operation *op) {
  if (isa<nn::MatMulOp, nn::GemmOp, nn::ConvOp>(op))
    return Precision::Low;
  if (isa<nn::ExpOp, nn::LogOp, nn::PowOp, nn::SoftmaxOp, nn::LogSoftmaxOp,
          nn::ReduceSumOp, nn::ReduceMeanOp, nn::SoftmaxCrossEntropyLossOp,
          nn::NegativeLogLikelihoodLossOp>(op))
    return Precision::FP32;
  // Explicit casts and constants keep the model's types.
  if (isa<nn::CastOp, nn::ConstantOp>(op))
    return Precision::Keep;
  return Precision::Widest;
}

Type withElement(Type type, Type element) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), element);
}

LogicalResult autocast(func::FuncOp function, FloatType low) {
  OpBuilder b(function.getContext());
  Type f32 = b.getF32Type();
  DenseMap<std::pair<Value, Type>, Value> casts;
  auto castTo = [&](Value v, Type element) -> Value {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType() == element)
      return v;
    Value &cached = casts[{v, element}];
    if (!cached) {
      b.setInsertionPointAfterValue(v);
      cached = nn::CastOp::create(b, v.getLoc(), withElement(type, element), v);
    }
    return cached;
  };

  for (Operation &op : function.front().without_terminator()) {
    if (op.getDialect() != function.getContext()->getLoadedDialect("nn"))
      continue;
    // A recurrence keeps the model's types: its body is typed for them, and
    // rounding the carried state at every step would compound. Its operands
    // come back to those types.
    if (auto scan = dyn_cast<nn::ScanOp>(op)) {
      for (OpOperand &operand : scan->getOpOperands())
        if (nn::isFloatTensor(operand.get()))
          operand.set(
              castTo(operand.get(),
                     getElementTypeOrSelf(scan.getBodyBlock().getArgument(
                         operand.getOperandNumber()))));
      continue;
    }
    Precision precision = classify(&op);
    if (precision == Precision::Keep)
      continue;
    // Before its operands are cast.
    bool linearBias = isLinearBias(&op);
    Type element;
    if (precision == Precision::Low) {
      element = low;
    } else if (precision == Precision::FP32) {
      element = f32;
    } else {
      // The widest float operand; ops without float operands keep theirs.
      // As in PyTorch's type promotion, a scalar (a tensor of rank 0) does
      // not widen a tensor of higher rank: bf16 scores times an f32 scale
      // stay bf16.
      bool tensorOperand = llvm::any_of(op.getOperands(), [](Value v) {
        return nn::isFloatTensor(v) &&
               cast<RankedTensorType>(v.getType()).getRank() > 0;
      });
      for (Value operand : op.getOperands())
        if (nn::isFloatTensor(operand)) {
          auto type = cast<RankedTensorType>(operand.getType());
          if (tensorOperand && type.getRank() == 0)
            continue;
          Type e = type.getElementType();
          if (!element ||
              e.getIntOrFloatBitWidth() > element.getIntOrFloatBitWidth())
            element = e;
        }
      if (!element)
        continue;
    }
    for (OpOperand &operand : op.getOpOperands())
      if (nn::isFloatTensor(operand.get()) &&
          cast<RankedTensorType>(operand.get().getType()).getElementType() !=
              element)
        operand.set(castTo(operand.get(), element));
    for (Value result : op.getResults())
      if (nn::isFloatTensor(result))
        result.setType(withElement(result.getType(), element));
    // torch.nn.Linear's result is in the low precision, its bias added in
    // fp32 before the rounding (a GEMM's bias epilogue): the add runs at
    // the widest precision of the low-precision product and the fp32 bias,
    // and its result is rounded. What follows (a GELU, attention's heads)
    // then runs in the low precision, and the bias's gradient is summed in
    // fp32.
    if (linearBias && element != low) {
      Value result = op.getResult(0);
      b.setInsertionPointAfter(&op);
      auto rounded = nn::CastOp::create(
          b, op.getLoc(), withElement(result.getType(), low), result);
      result.replaceAllUsesExcept(rounded, rounded);
    }
  }

  // The loss, and any other result, keeps its declared type.
  auto ret = cast<func::ReturnOp>(function.front().getTerminator());
  FunctionType type = function.getFunctionType();
  for (OpOperand &operand : ret->getOpOperands()) {
    Type declared = type.getResult(operand.getOperandNumber());
    if (operand.get().getType() != declared) {
      b.setInsertionPoint(ret);
      operand.set(nn::CastOp::create(b, ret.getLoc(), declared, operand.get()));
    }
  }
  return verify(function);
}

struct TrainMixedPrecisionPass
    : train::impl::TrainMixedPrecisionBase<TrainMixedPrecisionPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FloatType low;
    if (precision == ACCRUE_PRECISION_BF16) {
      low = BFloat16Type::get(&getContext());
    } else if (precision == ACCRUE_PRECISION_FP16) {
      low = Float16Type::get(&getContext());
    } else {
      module.emitError("train-mixed-precision: precision must be bf16 or "
                       "fp16, not '")
          << accruePrecisionName(precision) << "'";
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    llvm::DenseSet<Operation *> done;
    WalkResult result = module.walk([&](ValueAndGradOp op) {
      auto callee = symbols.lookup<func::FuncOp>(op.getCallee());
      if (!callee || !done.insert(callee).second)
        return WalkResult::advance();
      return failed(autocast(callee, low)) ? WalkResult::interrupt()
                                           : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
