//===- my-opt.cpp - an opt tool of another project ------------------------===//
//
// Registers Accrue's dialects, passes and pipelines (Accrue::Registration)
// and a pass of its own, `my-tag-steps`, which marks every function that
// calls train.value_and_grad; then runs like mlir-opt.
//
//===----------------------------------------------------------------------===//

#include "accrue/Dialect/Train/IR/Train.h"
#include "accrue/InitAllDialects.h"
#include "accrue/InitAllPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace {

struct TagStepsPass
    : public mlir::PassWrapper<TagStepsPass,
                               mlir::OperationPass<mlir::func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TagStepsPass)
  llvm::StringRef getArgument() const final { return "my-tag-steps"; }
  llvm::StringRef getDescription() const final {
    return "Mark functions that take a value and gradient";
  }
  void runOnOperation() override {
    mlir::func::FuncOp fn = getOperation();
    bool step = false;
    fn.walk([&](accrue::train::ValueAndGradOp) { step = true; });
    if (step)
      fn->setAttr("my.step", mlir::UnitAttr::get(&getContext()));
  }
};

} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  accrue::registerAllDialects(registry);
  accrue::registerAllPasses();
  mlir::PassRegistration<TagStepsPass>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "my-opt\n", registry));
}
