//===- NNBase.td - nn dialect definition -------------------*- tablegen -*-===//
//
// The `nn` dialect: tensor ops with ONNX semantics.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_NN_IR_NNBASE_TD
#define ACCRUE_DIALECT_NN_IR_NNBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::accrue::nn";
  let summary = "Tensor operations with ONNX semantics";
  let description = [{
    The `nn` dialect holds one op per ONNX operator that Accrue imports. Ops
    work on statically shaped ranked tensors (f32, f16, bf16, f64, i64, i32,
    i1) with numpy-style broadcasting where ONNX broadcasts. Each op verifies
    its operands, infers its result type, knows its vector-Jacobian product
    (`DifferentiableOpInterface`) where it is differentiable, and lowers to
    linalg/tensor/arith/math.

    Values that ONNX passes as constant inputs (Reshape's shape, ReduceSum's
    axes, Pow's exponent when constant) are folded into attributes or static
    result types by the importer, so every shape is known at compile time.

    A few ops have no ONNX counterpart. They are what VJP rules and the
    training passes emit (`nn.softmax_cross_entropy_grad`,
    `nn.class_weight_sum`) and say so in their descriptions.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, traits>;

// Element types the dialect accepts.
def NN_FloatElement : AnyTypeOf<[F32, F16, BF16, F64]>;
def NN_Element : AnyTypeOf<[F32, F16, BF16, F64, I64, I32, I1]>;

def NN_Tensor : RankedTensorOf<[F32, F16, BF16, F64, I64, I32, I1]>;
def NN_FloatTensor : RankedTensorOf<[F32, F16, BF16, F64]>;
def NN_IndexTensor : RankedTensorOf<[I64, I32]>;
def NN_BoolTensor : RankedTensorOf<[I1]>;

#endif // ACCRUE_DIALECT_NN_IR_NNBASE_TD
