//===- DeviceLossScale.cpp - loss-scaling state on the device ---*- C++ -*-===//
//
// A CUDA step keeps its loss-scaling state on the device: it writes the
// next loss scale and finite streak (its train.next_loss_scale, GradScaler's
// rule, which every target lowers the same way) and the next step number
// into the buffers it read them from, so a step can be launched before the
// previous one's outcome reached the host. The host takes the same values
// from each step's metrics (a step late) for its logs and checkpoints.
//
//===----------------------------------------------------------------------===//

#include "accrue/Codegen/CUDA/Passes.h"

#include "accrue/Dialect/Train/IR/Train.h"

namespace accrue::cuda {
#define GEN_PASS_DEF_CUDADEVICELOSSSCALE
#include "accrue/Codegen/CUDA/Passes.h.inc"
} // namespace accrue::cuda

using namespace mlir;
using namespace accrue;

namespace {

struct CudaDeviceLossScalePass
    : public accrue::cuda::impl::CudaDeviceLossScaleBase<
          CudaDeviceLossScalePass> {
  void runOnOperation() override {
    func::FuncOp step = getOperation();
    auto abi = step->getAttrOfType<ArrayAttr>(train::StepAttrs::kABI);
    if (!abi || step.isExternal())
      return;
    std::optional<BlockArgument> scaleArg =
        train::getArgWithRole(step, ACCRUE_ROLE_LOSS_SCALE);
    if (!scaleArg)
      return;
    std::optional<BlockArgument> stepArg =
        train::getArgWithRole(step, ACCRUE_ROLE_STEP);
    std::optional<BlockArgument> streakArg =
        train::getArgWithRole(step, ACCRUE_ROLE_LOSS_SCALE_STREAK);
    auto fail = [&](const Twine &why) {
      step.emitError("cuda-device-loss-scale: ") << why;
      signalPassFailure();
    };
    auto isBuffer = [](std::optional<BlockArgument> arg) {
      return arg && isa<MemRefType>(arg->getType());
    };
    if (!isBuffer(scaleArg) || !isBuffer(stepArg) || !isBuffer(streakArg))
      return fail("expected buffer arguments for the loss scale, the step "
                  "number and the streak (run cuda-device-scalars first)");
    SmallVector<train::NextLossScaleOp> rules;
    step.walk([&](train::NextLossScaleOp op) { rules.push_back(op); });
    if (rules.size() != 1)
      return fail("a step with a loss_scale argument needs exactly one "
                  "train.next_loss_scale");
    train::NextLossScaleOp rule = rules.front();

    // At the end: the next step's state, where the next step reads it.
    Block &entry = step.getBody().front();
    OpBuilder b(entry.getTerminator());
    Location loc = rule.getLoc();
    Value number = tensor::ExtractOp::create(
        b, loc,
        bufferization::ToTensorOp::create(
            b, loc, RankedTensorType::get({}, b.getI64Type()), *stepArg,
            /*restrict=*/true, /*writable=*/false),
        ValueRange{});
    Value one = arith::ConstantIntOp::create(b, loc, b.getI64Type(), 1);
    Value nextNumber = arith::SelectOp::create(
        b, loc, rule.getFinite(), arith::AddIOp::create(b, loc, number, one),
        number);
    memref::StoreOp::create(b, loc, rule.getNextScale(), *scaleArg,
                            ValueRange{});
    memref::StoreOp::create(b, loc, nextNumber, *stepArg, ValueRange{});
    memref::StoreOp::create(b, loc, rule.getNextStreak(), *streakArg,
                            ValueRange{});
  }
};

} // namespace
