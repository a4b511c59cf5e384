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

def NN_SampleRowsOpInterface : OpInterface<"SampleRowsOpInterface"> {
  let cppNamespace = "::accrue::nn";
  let description = [{
    An op that says how its results hold the micro-batch's samples. A
    partial accumulation window pads its last micro-batches with dead
    samples and masks them out of the loss (`train-microbatch`); that needs
    to know, for each value between the batch inputs and the loss, whether
    dimension 0 holds the samples' rows, grouped by sample and in order.
    The training passes follow the batch inputs through the ops that say
    so. An op that implements neither this interface nor the `Elementwise`
    trait is taken to mix samples, and the compile says which op it was.

    Asked only when some operand depends on the batch. The default is the
    rule of ops that map each row to the same row of their result
    (convolutions, pooling, dropout, ...): `SampleRowQuery::aligned`.
  }];

  let methods = [
    InterfaceMethod<[{
        How `result`'s elements belong to samples, given how the operands'
        do (`query`).
      }],
      "::accrue::nn::SampleRows", "getSampleRows",
      (ins "::mlir::OpResult":$result,
           "const ::accrue::nn::SampleRowQuery &":$query),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return query.aligned($_op.getOperation(), result);
      }]>,
  ];
}

// Applies one scalar function to each element of its operands, broadcast
// together (numpy rules) to the result's shape (the ops' own type inference
// and verifiers enforce the shapes). Element i of the
// result depends only on element i of each (broadcast) operand, so such an
// op keeps the micro-batch's rows where its operands do.
def NN_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::accrue::nn::trait";
}

#endif // ACCRUE_DIALECT_NN_IR_NNINTERFACES_TD
