//===- TrainInterfaces.td - train interfaces ---------------*- tablegen -*-===//

#ifndef ACCRUE_DIALECT_TRAIN_IR_TRAININTERFACES_TD
#define ACCRUE_DIALECT_TRAIN_IR_TRAININTERFACES_TD

include "mlir/IR/OpBase.td"

def Train_OptimizerAttrInterface : AttrInterface<"OptimizerAttrInterface"> {
  let cppNamespace = "::accrue::train";
  let description = [{
    An optimizer: how many per-parameter state buffers it keeps and the
    scalar update rule for one parameter element. Both the unfused lowering
    of `train.update` and the fused `train.fused_update` emit this rule in
    the body of an elementwise loop, so each formula is written once.
  }];
  let methods = [
    InterfaceMethod<"Number of per-parameter state buffers.",
      "unsigned", "getNumStates">,
    InterfaceMethod<"Name of state buffer `index`, as PyTorch names it.",
      "::llvm::StringRef", "getStateName", (ins "unsigned":$index)>,
    InterfaceMethod<[{
        Emits the update of one element: from parameter `param`, final
        gradient `grad` (already normalized, unscaled and clipped), states
        `states`, learning rate `lr` (f32) and the 1-based optimizer step
        `step` (i64), appends the new parameter and then the new states to
        `results`. All values are f32 scalars except `step`.
      }],
      "void", "buildElementUpdate",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::Value":$param, "::mlir::Value":$grad,
           "::mlir::ValueRange":$states, "::mlir::Value":$lr,
           "::mlir::Value":$step,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$results)>,
  ];
}

#endif // ACCRUE_DIALECT_TRAIN_IR_TRAININTERFACES_TD
