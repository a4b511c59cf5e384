//===- NNInterfaces.td - nn interfaces ---------------------*- tablegen -*-===//

#ifndef ACCRUE_DIALECT_NN_IR_NNINTERFACES_TD
#define ACCRUE_DIALECT_NN_IR_NNINTERFACES_TD

include "mlir/IR/OpBase.td"

def NN_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::accrue::nn";
  let description = [{
    An op that knows its vector-Jacobian product. Reverse-mode autodiff
    (`train-autodiff`) visits ops in reverse order and asks each one to emit
    the adjoints of its operands from the adjoints of its results. Forward
    values the rule needs (operands or results of the op) are plain SSA uses.
  }];

  let methods = [
    InterfaceMethod<[{
        Emits, at the builder's insertion point, ops that compute the adjoint
        of each operand from `resultAdjoints` (one per result, same type as
        the result; null for a result that does not reach the differentiated
        value). Appends one value per operand to `operandAdjoints`, null
        where the operand has no adjoint (integer operands, or operands the
        op is constant in). Fails only with a diagnostic on the op.
      }],
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultAdjoints,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandAdjoints)>,
  ];
}

#endif // ACCRUE_DIALECT_NN_IR_NNINTERFACES_TD
