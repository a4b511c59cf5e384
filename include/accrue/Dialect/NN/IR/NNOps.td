//===- NNOps.td - nn dialect ops ---------------------------*- tablegen -*-===//
//
// One op per ONNX operator the importer supports, plus the few internal ops
// that VJP rules and the training passes emit. Families share an ODS class:
// elementwise unary, broadcasting binary, comparisons, reductions.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_NN_IR_NNOPS_TD
#define ACCRUE_DIALECT_NN_IR_NNOPS_TD

include "accrue/Dialect/NN/IR/NNBase.td"
include "accrue/Dialect/NN/IR/NNInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def NN_LossReduction : I32EnumAttr<"LossReduction",
    "reduction of a per-item loss (ONNX `reduction` attribute)", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Sum", 1, "sum">,
      I32EnumAttrCase<"Mean", 2, "mean">
    ]> {
  let cppNamespace = "::accrue::nn";
  let genSpecializedAttr = 0;
}
def NN_LossReductionAttr : EnumAttr<NN_Dialect, NN_LossReduction, "reduction">;

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

class NN_UnaryOp<string mnemonic, string onnxName, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
        NN_Elementwise,
        DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>])> {
  let summary = "elementwise " # onnxName;
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html), opsets 6 and later: applied to each element.
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_NegOp : NN_UnaryOp<"neg", "Neg"> {
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let hasFolder = 1;
}
def NN_ExpOp : NN_UnaryOp<"exp", "Exp">;
def NN_LogOp : NN_UnaryOp<"log", "Log">;
def NN_SqrtOp : NN_UnaryOp<"sqrt", "Sqrt">;
def NN_ReluOp : NN_UnaryOp<"relu", "Relu">;
def NN_SigmoidOp : NN_UnaryOp<"sigmoid", "Sigmoid">;
def NN_TanhOp : NN_UnaryOp<"tanh", "Tanh">;
def NN_AbsOp : NN_UnaryOp<"abs", "Abs"> {
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let hasFolder = 1;
  let description = [{
    ONNX [Abs](https://onnx.ai/onnx/operators/onnx__Abs.html), opsets 6 and
    later. The gradient at 0 is 0, as in PyTorch.
  }];
}
def NN_ErfOp : NN_UnaryOp<"erf", "Erf">;
def NN_SinOp : NN_UnaryOp<"sin", "Sin"> {
  let description = [{
    ONNX [Sin](https://onnx.ai/onnx/operators/onnx__Sin.html), opsets 7 and
    later (rotary position embeddings); its adjoint is dy * cos(x).
  }];
}
def NN_CosOp : NN_UnaryOp<"cos", "Cos"> {
  let description = [{
    ONNX [Cos](https://onnx.ai/onnx/operators/onnx__Cos.html), opsets 7 and
    later; its adjoint is -dy * sin(x).
  }];
}

class NN_PiecewiseConstantOp<string mnemonic, string onnxName, string rule>
    : NN_UnaryOp<mnemonic, onnxName> {
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html): }] # rule # [{ Piecewise constant, so its
    gradient is 0 everywhere, as in PyTorch.
  }];
}
def NN_SignOp : NN_PiecewiseConstantOp<"sign", "Sign",
    "-1, 0 or 1 by the sign of each element (NaN stays NaN).">;
def NN_FloorOp : NN_PiecewiseConstantOp<"floor", "Floor",
    "the largest integer not above each element.">;
def NN_CeilOp : NN_PiecewiseConstantOp<"ceil", "Ceil",
    "the smallest integer not below each element.">;
def NN_RoundOp : NN_PiecewiseConstantOp<"round", "Round",
    "the nearest integer, halves to even (as ONNX and torch.round).">;

def NN_ClipOp : NN_Op<"clip", [Pure, SameOperandsAndResultType, NN_Elementwise,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "clamp to [min, max]";
  let description = [{
    ONNX [Clip](https://onnx.ai/onnx/operators/onnx__Clip.html), opsets 6
    and later; the importer turns constant min/max inputs (opset 11+) into
    attributes. The gradient passes where `min <= x <= max`, as
    torch.clamp's does.
  }];
  let arguments = (ins NN_Tensor:$input, OptionalAttr<F64Attr>:$min,
                   OptionalAttr<F64Attr>:$max);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_CastOp : NN_Op<"cast", [Pure, NN_Elementwise,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "convert the element type";
  let description = [{
    ONNX [Cast](https://onnx.ai/onnx/operators/onnx__Cast.html), opsets 6
    and later, between f32, f16, bf16, f64, i64, i32 and i1. Floats convert
    to integers by truncation toward zero; anything converts to i1 as
    `x != 0`. Float-to-float casts pass gradients (cast back).
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_IdentityOp : NN_Op<"identity", [Pure, SameOperandsAndResultType,
    NN_Elementwise,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let summary = "ONNX Identity";
  let description = [{
    [Identity](https://onnx.ai/onnx/operators/onnx__Identity.html), opsets 1
    and later, for tensors. Folds to its operand.
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops
//===----------------------------------------------------------------------===//

class NN_BroadcastOp<string mnemonic, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
        NN_Elementwise])> {
  // Result shape: numpy broadcasting of the operand shapes.
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferElementwiseResultType(location, adaptor.getOperands(),
                                        resultElementType(context, adaptor),
                                        types);
    }
  }];
}

class NN_BinaryOp<string mnemonic, string onnxName, list<Trait> traits = []>
    : NN_BroadcastOp<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>])> {
  let summary = "elementwise " # onnxName # " with broadcasting";
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html), opsets 7 and later (multidirectional numpy
    broadcasting). Both operands have the same element type.
  }];
  let arguments = (ins NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *,
                                          Adaptor adaptor) {
      return ::mlir::getElementTypeOrSelf(adaptor.getLhs().getType());
    }
  }];
}

def NN_AddOp : NN_BinaryOp<"add", "Add", [Commutative]> {
  // Sums of disjoint placed slices (nn.slice_grad) become one nn.concat.
  let hasCanonicalizer = 1;
}
def NN_SubOp : NN_BinaryOp<"sub", "Sub">;
def NN_MulOp : NN_BinaryOp<"mul", "Mul", [Commutative]>;
def NN_DivOp : NN_BinaryOp<"div", "Div">;
def NN_MaxOp : NN_BinaryOp<"max", "Max", [Commutative]> {
  let description = [{
    ONNX [Max](https://onnx.ai/onnx/operators/onnx__Max.html), opsets 8 and
    later, for two operands (the importer chains more). The adjoint goes to
    the larger operand; ties split it in half, as torch.maximum does.
  }];
}
def NN_MinOp : NN_BinaryOp<"min", "Min", [Commutative]> {
  let description = [{
    ONNX [Min](https://onnx.ai/onnx/operators/onnx__Min.html), opsets 8 and
    later, for two operands (the importer chains more). The adjoint goes to
    the smaller operand; ties split it in half, as torch.minimum does.
  }];
}
def NN_PowOp : NN_BinaryOp<"pow", "Pow"> {
  let description = [{
    ONNX [Pow](https://onnx.ai/onnx/operators/onnx__Pow.html), opsets 7 and
    later, for floating-point base and exponent of the same type. The
    importer accepts only a constant exponent, so the VJP never needs the
    gradient with respect to the exponent.
  }];
}

def NN_ModOp : NN_BroadcastOp<"mod"> {
  let summary = "elementwise remainder with broadcasting";
  let description = [{
    ONNX [Mod](https://onnx.ai/onnx/operators/onnx__Mod.html), opsets 10 and
    later. With `fmod` the remainder has the dividend's sign (C's fmod, the
    only form ONNX allows for floating-point operands); without it, the
    divisor's (Python's %). Both operands have the same element type; an
    integer remainder by zero is 0 here (undefined in ONNX). No gradient.
  }];
  let arguments = (ins NN_Tensor:$lhs, NN_Tensor:$rhs, BoolAttr:$fmod);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *,
                                          Adaptor adaptor) {
      return ::mlir::getElementTypeOrSelf(adaptor.getLhs().getType());
    }
  }];
}

class NN_CompareOp<string mnemonic, string onnxName, string since = "7">
    : NN_BroadcastOp<mnemonic> {
  let summary = "elementwise " # onnxName # " comparison with broadcasting";
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html), opsets }] # since # [{ and later. Result is i1
    (false where an operand is NaN); no gradient.
  }];
  let arguments = (ins NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_BoolTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *context,
                                          Adaptor) {
      return ::mlir::IntegerType::get(context, 1);
    }
  }];
}

def NN_GreaterOp : NN_CompareOp<"greater", "Greater">;
def NN_LessOp : NN_CompareOp<"less", "Less">;
def NN_EqualOp : NN_CompareOp<"equal", "Equal">;
def NN_LessOrEqualOp : NN_CompareOp<"less_or_equal", "LessOrEqual", "12">;
def NN_GreaterOrEqualOp
    : NN_CompareOp<"greater_or_equal", "GreaterOrEqual", "12">;

class NN_LogicalOp<string mnemonic, string onnxName>
    : NN_BroadcastOp<mnemonic, [Commutative]> {
  let summary = "elementwise logical " # onnxName # " with broadcasting";
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html), opsets 7 and later, on i1 tensors.
  }];
  let arguments = (ins NN_BoolTensor:$lhs, NN_BoolTensor:$rhs);
  let results = (outs NN_BoolTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *context,
                                          Adaptor) {
      return ::mlir::IntegerType::get(context, 1);
    }
  }];
}

def NN_AndOp : NN_LogicalOp<"and", "And">;
def NN_OrOp : NN_LogicalOp<"or", "Or">;
def NN_XorOp : NN_LogicalOp<"xor", "Xor">;

def NN_NotOp : NN_Op<"not", [Pure, SameOperandsAndResultType,
    NN_Elementwise]> {
  let summary = "elementwise logical not";
  let description = [{
    ONNX [Not](https://onnx.ai/onnx/operators/onnx__Not.html), opsets 1 and
    later.
  }];
  let arguments = (ins NN_BoolTensor:$input);
  let results = (outs NN_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def NN_WhereOp : NN_BroadcastOp<"where", [
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>]> {
  let hasFolder = 1;
  let summary = "elementwise select with broadcasting";
  let description = [{
    ONNX [Where](https://onnx.ai/onnx/operators/onnx__Where.html), opsets 9
    and later: `condition ? x : y`, all three broadcast together.
  }];
  let arguments = (ins NN_BoolTensor:$condition, NN_Tensor:$x, NN_Tensor:$y);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $x `,` $y attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    static ::mlir::Type resultElementType(::mlir::MLIRContext *,
                                          Adaptor adaptor) {
      return ::mlir::getElementTypeOrSelf(adaptor.getX().getType());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def NN_GemmOp : NN_Op<"gemm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "general matrix multiply";
  let description = [{
    ONNX [Gemm](https://onnx.ai/onnx/operators/onnx__Gemm.html), opsets 7
    and later: `Y = alpha * A' * B' + beta * C`, where `A'` is `A` or its
    transpose (`transA`), likewise `B'`; `C` is optional and broadcasts to
    `[M, N]`.
  }];
  let arguments = (ins NN_FloatTensor:$a, NN_FloatTensor:$b,
                   Optional<NN_FloatTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$transA,
                   DefaultValuedAttr<BoolAttr, "false">:$transB);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MatMulOp : NN_Op<"matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "matrix product with numpy batch broadcasting";
  let description = [{
    ONNX [MatMul](https://onnx.ai/onnx/operators/onnx__MatMul.html), opsets
    9 and later, for operands of rank 2 or more: the last two dimensions
    multiply, the leading ones broadcast. The importer turns rank-1 operands
    into rank-2 ones with reshapes, as numpy.matmul does.
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class NN_ReductionOp<string mnemonic, string onnxName,
                     Type tensorType = NN_FloatTensor>
    : NN_Op<mnemonic, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
        DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = onnxName # " over the given axes";
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html), opsets 1 and later. `axes` is sorted,
    non-negative and explicit: the importer resolves ONNX's axes input
    (opsets 13/18), negative axes and "empty means all".
  }];
  let arguments = (ins tensorType:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferReductionResultType(location, adaptor.getInput().getType(),
          adaptor.getAxes(), adaptor.getKeepdims(), types);
    }
  }];
}

def NN_ReduceSumOp
    : NN_ReductionOp<"reduce_sum", "ReduceSum", RankedTensorOf<[F32, F16, BF16,
                                                                F64, I64, I32]>> {
  let description = [{
    ONNX [ReduceSum](https://onnx.ai/onnx/operators/onnx__ReduceSum.html),
    opsets 1 and later, on floats and on i32/i64 (token counts such as
    `mask.sum()`). `axes` is sorted, non-negative and explicit: the importer
    resolves ONNX's axes input (opsets 13/18), negative axes and "empty
    means all".
  }];
}
def NN_ReduceMeanOp : NN_ReductionOp<"reduce_mean", "ReduceMean">;
def NN_ReduceMaxOp : NN_ReductionOp<"reduce_max", "ReduceMax"> {
  let description = [{
    ONNX [ReduceMax](https://onnx.ai/onnx/operators/onnx__ReduceMax.html),
    opsets 1 and later. The adjoint is shared evenly by the elements equal
    to the maximum, as torch.amax's is.
  }];
}
def NN_ReduceMinOp : NN_ReductionOp<"reduce_min", "ReduceMin"> {
  let description = [{
    ONNX [ReduceMin](https://onnx.ai/onnx/operators/onnx__ReduceMin.html),
    opsets 1 and later. The adjoint is shared evenly by the elements equal
    to the minimum, as torch.amin's is.
  }];
}

class NN_ArgReductionOp<string mnemonic, string onnxName>
    : NN_Op<mnemonic, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "index of the " # onnxName # " along an axis";
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html), opsets 1 and later: i64 indices of the extreme
    element along `axis` (the first, or the last with select_last_index).
    No gradient.
  }];
  let arguments = (ins NN_Tensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                   DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      ::llvm::SmallVector<::mlir::Type> reduced;
      int64_t axis = adaptor.getAxis();
      if (::mlir::failed(inferReductionResultType(location,
              adaptor.getInput().getType(), {axis}, adaptor.getKeepdims(),
              reduced)))
        return ::mlir::failure();
      types.push_back(::mlir::RankedTensorType::get(
          ::llvm::cast<::mlir::RankedTensorType>(reduced[0]).getShape(),
          ::mlir::IntegerType::get(context, 64)));
      return ::mlir::success();
    }
  }];
}

def NN_ArgMaxOp : NN_ArgReductionOp<"argmax", "ArgMax">;
def NN_ArgMinOp : NN_ArgReductionOp<"argmin", "ArgMin">;

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

def NN_ConstantOp : NN_Op<"constant", [Pure, ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "constant tensor";
  let description = [{
    ONNX [Constant](https://onnx.ai/onnx/operators/onnx__Constant.html),
    opsets 1 and later, and frozen or integer initializers.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def NN_ReshapeOp : NN_Op<"reshape", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "reshape to a static shape";
  let description = [{
    ONNX [Reshape](https://onnx.ai/onnx/operators/onnx__Reshape.html),
    opsets 5 and later. The target shape (with ONNX's 0 and -1 resolved) is
    the result type.
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_FlattenOp : NN_Op<"flatten", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "flatten to a matrix";
  let description = [{
    ONNX [Flatten](https://onnx.ai/onnx/operators/onnx__Flatten.html),
    opsets 1 and later: dimensions before `axis` become the rows, the rest
    the columns. `axis` is non-negative here (the importer resolves it).
  }];
  let arguments = (ins NN_Tensor:$input,
                   DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_TransposeOp : NN_Op<"transpose", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "permute dimensions";
  let description = [{
    ONNX [Transpose](https://onnx.ai/onnx/operators/onnx__Transpose.html),
    opsets 1 and later: result dimension `i` is input dimension `perm[i]`.
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_ExpandOp : NN_Op<"expand", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    NN_SampleRowsOpInterface]> {
  let summary = "broadcast to a static shape";
  let description = [{
    ONNX [Expand](https://onnx.ai/onnx/operators/onnx__Expand.html), opsets
    8 and later. The result type is the broadcast of the input shape with
    the requested shape; the importer resolves the shape input.
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_ConcatOp : NN_Op<"concat", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "concatenate along an axis";
  let description = [{
    ONNX [Concat](https://onnx.ai/onnx/operators/onnx__Concat.html), opsets
    4 and later; `axis` is non-negative.
  }];
  let arguments = (ins Variadic<NN_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def NN_SliceOp : NN_Op<"slice", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "strided slice with static bounds";
  let description = [{
    ONNX [Slice](https://onnx.ai/onnx/operators/onnx__Slice.html), opsets 1
    and later, after the importer has resolved starts/ends/axes/steps: along
    every dimension `d`, result element `i` is input element
    `starts[d] + i * steps[d]`, for the result's size. Steps may be negative.
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_SliceGradOp : NN_Op<"slice_grad", [Pure]> {
  let summary = "adjoint of nn.slice: place a slice into zeros";
  let description = [{
    Internal (no ONNX counterpart); emitted by the VJP rule of `nn.slice`.
    The result is zero except at the positions the slice read, which hold
    the elements of `input`.
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_GatherOp : NN_Op<"gather", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "gather slices along an axis";
  let description = [{
    ONNX [Gather](https://onnx.ai/onnx/operators/onnx__Gather.html), opsets
    1 and later: the result has shape `data[:axis] + indices + data[axis+1:]`.
    Negative indices count from the end. Embedding lookups are Gathers on
    axis 0; their adjoint scatters-adds into the table.
  }];
  let arguments = (ins NN_Tensor:$data, NN_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def NN_GatherElementsOp : NN_Op<"gather_elements", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "gather elements along an axis with per-element indices";
  let description = [{
    ONNX [GatherElements](https://onnx.ai/onnx/operators/onnx__GatherElements.html),
    opsets 11 and later (`torch.gather`): the result has the indices' shape
    and `result[i...] = data[i...]` with coordinate `axis` replaced by
    `indices[i...]` (negative indices count from the end). Its adjoint
    scatters-adds into the data's shape.
  }];
  let arguments = (ins NN_Tensor:$data, NN_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_GatherElementsGradOp : NN_Op<"gather_elements_grad", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "adjoint of nn.gather_elements: scatter-add into zeros";
  let description = [{
    Emitted by the VJP rule of `nn.gather_elements`, and by the importer for
    ONNX ScatterElements (a scatter-add of the updates). The result, shaped
    like the gathered data, holds at each position the sum of the `dresult`
    elements whose index points there. Differentiable: its adjoint gathers.
  }];
  let arguments = (ins NN_FloatTensor:$dresult, NN_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $dresult `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def NN_GatherGradOp : NN_Op<"gather_grad", [Pure]> {
  let summary = "adjoint of nn.gather: scatter-add into zeros";
  let description = [{
    Internal (no ONNX counterpart); emitted by the VJP rule of `nn.gather`.
    The result, shaped like the gathered data, is the sum of the slices of
    `dresult` that each index read.
  }];
  let arguments = (ins NN_FloatTensor:$dresult, NN_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $dresult `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def NN_TriluOp : NN_Op<"trilu", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    NN_SampleRowsOpInterface]> {
  let summary = "upper or lower triangle of the last two dimensions";
  let description = [{
    ONNX [Trilu](https://onnx.ai/onnx/operators/onnx__Trilu.html), opsets 14
    and later: keeps elements with `j - i >= k` (upper) or `j - i <= k`
    (lower), zero elsewhere.
  }];
  let arguments = (ins NN_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

include "accrue/Dialect/NN/IR/NNNeuralOps.td"
include "accrue/Dialect/NN/IR/NNScanOps.td"

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def NN_SoftmaxCrossEntropyLossOp : NN_Op<"softmax_cross_entropy_loss", [
    Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "softmax cross-entropy loss";
  let description = [{
    ONNX [SoftmaxCrossEntropyLoss](https://onnx.ai/onnx/operators/onnx__SoftmaxCrossEntropyLoss.html),
    opsets 12 and later. `scores` is `[N, C]` or `[N, C, d1, ...]`, `labels`
    `[N]` or `[N, d1, ...]`, optional class `weights` `[C]`. Per item
    `l_i = -w[y_i] * log_softmax(scores_i)[y_i]`, 0 where `y_i` equals
    `ignore_index`. `reduction = none` gives `[N, d1, ...]`; `sum` the sum;
    `mean` the sum divided by the sum of `w[y_i]` over non-ignored items.
    Only the loss output is modelled (not `log_prob`).
  }];
  let arguments = (ins NN_FloatTensor:$scores, NN_IndexTensor:$labels,
                   Optional<NN_FloatTensor>:$weights,
                   NN_LossReductionAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$loss);
  let assemblyFormat = [{
    $scores `,` $labels (`,` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
  }

def NN_SoftmaxCrossEntropyGradOp : NN_Op<"softmax_cross_entropy_grad", [
    Pure, AllTypesMatch<["scores", "result"]>]> {
  let summary = "adjoint of softmax_cross_entropy_loss w.r.t. its scores";
  let description = [{
    Internal (no ONNX counterpart); emitted by the VJP rule of
    `nn.softmax_cross_entropy_loss`. Given the adjoint `dloss` of the loss
    (shaped like the loss), computes
    `dscores_i = dloss_i * w[y_i] * (softmax(scores_i) - onehot(y_i))`
    (divided by the weight sum for `mean`), 0 on ignored items.
  }];
  let arguments = (ins NN_FloatTensor:$dloss, NN_FloatTensor:$scores,
                   NN_IndexTensor:$labels, Optional<NN_FloatTensor>:$weights,
                   NN_LossReductionAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $dloss `,` $scores `,` $labels (`,` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_NegativeLogLikelihoodLossOp : NN_Op<"negative_log_likelihood_loss", [
    Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = "negative log-likelihood loss";
  let description = [{
    ONNX [NegativeLogLikelihoodLoss](https://onnx.ai/onnx/operators/onnx__NegativeLogLikelihoodLoss.html),
    opsets 12 and later. `input` holds log-probabilities `[N, C, d...]`;
    per item `l_i = -w[y_i] * input[i, y_i]`, 0 where `y_i` is ignore_index,
    reduced like softmax_cross_entropy_loss.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IndexTensor:$target,
                   Optional<NN_FloatTensor>:$weights,
                   NN_LossReductionAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$loss);
  let assemblyFormat = [{
    $input `,` $target (`,` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_NegativeLogLikelihoodGradOp : NN_Op<"negative_log_likelihood_grad", [
    Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "adjoint of negative_log_likelihood_loss w.r.t. its input";
  let description = [{
    Internal (no ONNX counterpart); emitted by the VJP rule of
    `nn.negative_log_likelihood_loss`: `-dloss_i * w[y_i]` at the target
    class of each item (divided by the weight sum for `mean`), 0 elsewhere.
  }];
  let arguments = (ins NN_FloatTensor:$dloss, NN_FloatTensor:$input,
                   NN_IndexTensor:$target, Optional<NN_FloatTensor>:$weights,
                   NN_LossReductionAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $dloss `,` $input `,` $target (`,` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_ClassWeightSumOp : NN_Op<"class_weight_sum", [Pure]> {
  let summary = "denominator of a mean-reduced classification loss";
  let description = [{
    Internal (no ONNX counterpart); emitted by `train-microbatch` when it
    splits a mean-reduced SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss
    into sum and count. Returns `sum_i w[y_i]` over the items whose label is
    not `ignore_index` (`w` = 1 without weights), as a 0-d tensor of the
    result element type.
  }];
  let arguments = (ins NN_IndexTensor:$labels,
                   Optional<NN_FloatTensor>:$weights,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs 0DTensorOf<[F32, F16, BF16, F64]>:$result);
  let assemblyFormat = [{
    $labels (`,` $weights^)? attr-dict `:` functional-type(operands, results)
  }];
}

#endif // ACCRUE_DIALECT_NN_IR_NNOPS_TD
