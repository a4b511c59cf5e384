//===- DeviceLossScale.cpp - loss-scaling state on the device ---*- C++ -*-===//
//
// GradScaler's rule, appended to a CUDA step: the step writes the next
// loss scale, step number and finite streak into the buffers it read them
// from, so a step can be launched before the previous one's outcome reached
// the host. The host repeats the rule on each step's metrics (a step late)
// for its logs and checkpoints; both use f32 arithmetic for the scale.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/Train/IR/Train.h"

#include "mlir/IR/Matchers.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDADEVICELOSSSCALE
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;

namespace {

/// The argument of `step` with `role`, if any.
std::optional<BlockArgument> argWithRole(func::FuncOp step,
                                         AccrueArgRole role) {
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (train::getArgRole(step, i) == role)
      return step.getArgument(i);
  return std::nullopt;
}

struct CudaDeviceLossScalePass
    : public accrue::cuda::impl::CudaDeviceLossScaleBase<
          CudaDeviceLossScalePass> {
  void runOnOperation() override {
    func::FuncOp step = getOperation();
    auto abi = step->getAttrOfType<ArrayAttr>(train::StepAttrs::kABI);
    if (!abi || step.isExternal())
      return;
    std::optional<BlockArgument> scaleArg =
        argWithRole(step, ACCRUE_ROLE_LOSS_SCALE);
    std::optional<BlockArgument> stepArg = argWithRole(step, ACCRUE_ROLE_STEP);
    std::optional<BlockArgument> metrics =
        argWithRole(step, ACCRUE_ROLE_METRICS);
    if (!scaleArg)
      return;
    auto rule =
        step->getAttrOfType<DictionaryAttr>(train::StepAttrs::kLossScaleRule);
    auto growthAttr = rule ? rule.getAs<FloatAttr>("growth") : FloatAttr();
    auto backoffAttr = rule ? rule.getAs<FloatAttr>("backoff") : FloatAttr();
    auto intervalAttr =
        rule ? rule.getAs<IntegerAttr>("interval") : IntegerAttr();
    auto fail = [&](const Twine &why) {
      step.emitError("cuda-device-loss-scale: ") << why;
      signalPassFailure();
    };
    if (!growthAttr || !backoffAttr || !intervalAttr)
      return fail("a step with a loss_scale argument needs a "
                  "train.loss_scale_rule {growth, backoff, interval}");
    double growth = growthAttr.getValueAsDouble();
    double backoff = backoffAttr.getValueAsDouble();
    int64_t interval = intervalAttr.getInt();
    if (!stepArg || !metrics || !isa<MemRefType>(scaleArg->getType()) ||
        !isa<MemRefType>(stepArg->getType()))
      return fail("expected buffer arguments for the loss scale and the step "
                  "number (run cuda-device-scalars first) and a metrics "
                  "argument");
    // The global norm the step stores into its metrics.
    auto fields = cast<DictionaryAttr>(abi[metrics->getArgNumber()])
                      .getAs<ArrayAttr>(train::StepAttrs::kFields);
    std::optional<int64_t> normField;
    for (auto [i, field] : llvm::enumerate(fields ? fields.getValue()
                                                  : ArrayRef<Attribute>()))
      if (cast<StringAttr>(field).getValue() ==
          accrueMetricName(ACCRUE_METRIC_GRAD_NORM))
        normField = i;
    Value norm;
    for (Operation *user : metrics->getUsers()) {
      auto store = dyn_cast<memref::StoreOp>(user);
      APInt index;
      if (store && store.getIndices().size() == 1 &&
          matchPattern(store.getIndices()[0], m_ConstantInt(&index)) &&
          normField && index.getSExtValue() == *normField)
        norm = store.getValueToStore();
    }
    if (!norm)
      return fail("the step stores no global norm into its metrics");

    // The streak: a new buffer argument.
    Block &entry = step.getBody().front();
    auto streakType = MemRefType::get({}, IntegerType::get(&getContext(), 64));
    SmallVector<Type> inputs(step.getArgumentTypes());
    inputs.push_back(streakType);
    BlockArgument streakArg = entry.addArgument(streakType, step.getLoc());
    step.setType(FunctionType::get(&getContext(), inputs,
                                   step.getFunctionType().getResults()));
    SmallVector<Attribute> entries(abi.getValue());
    entries.push_back(train::getArgRoleAttrs(
        &getContext(), ACCRUE_ROLE_LOSS_SCALE_STREAK, "loss_scale_streak"));
    step->setAttr(train::StepAttrs::kABI,
                  ArrayAttr::get(&getContext(), entries));

    // At the end: the rule.
    Operation *terminator = entry.getTerminator();
    OpBuilder b(terminator);
    Location loc = step.getLoc();
    auto read = [&](Value buffer) -> Value {
      auto type = cast<MemRefType>(buffer.getType());
      Value tensor = bufferization::ToTensorOp::create(
          b, loc, RankedTensorType::get({}, type.getElementType()), buffer,
          /*restrict=*/true, /*writable=*/false);
      return tensor::ExtractOp::create(b, loc, tensor, ValueRange{});
    };
    Value scale = read(*scaleArg), number = read(*stepArg),
          streak = read(streakArg);
    auto f32 = [&](double v) -> Value {
      return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                            APFloat(static_cast<float>(v)));
    };
    auto i64 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
    };
    // Finite: |norm| < inf (false for NaN).
    Value finite = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::OLT, math::AbsFOp::create(b, loc, norm),
        f32(std::numeric_limits<double>::infinity()));
    Value next = arith::AddIOp::create(b, loc, streak, i64(1));
    Value grow = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, next,
                                       i64(interval));
    Value grown = arith::SelectOp::create(
        b, loc, grow, arith::MulFOp::create(b, loc, scale, f32(growth)), scale);
    Value newScale = arith::SelectOp::create(
        b, loc, finite, grown,
        arith::MulFOp::create(b, loc, scale, f32(backoff)));
    Value newStreak = arith::SelectOp::create(
        b, loc, finite, arith::SelectOp::create(b, loc, grow, i64(0), next),
        i64(0));
    Value newNumber = arith::SelectOp::create(
        b, loc, finite, arith::AddIOp::create(b, loc, number, i64(1)), number);
    memref::StoreOp::create(b, loc, newScale, *scaleArg, ValueRange{});
    memref::StoreOp::create(b, loc, newNumber, *stepArg, ValueRange{});
    memref::StoreOp::create(b, loc, newStreak, streakArg, ValueRange{});
  }
};

} // namespace
