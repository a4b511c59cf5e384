//===- NNNeuralOps.td - softmax, convolution, pooling, dropout -*- tablegen -*-===//

#ifndef ACCRUE_DIALECT_NN_IR_NNNEURALOPS_TD
#define ACCRUE_DIALECT_NN_IR_NNNEURALOPS_TD

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

class NN_SoftmaxOpBase<string mnemonic, string onnxName>
    : NN_Op<mnemonic, [Pure, SameOperandsAndResultType,
        DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
        DeclareOpInterfaceMethods<NN_SampleRowsOpInterface, ["getSampleRows"]>]> {
  let summary = onnxName # " along one axis";
  let description = [{
    ONNX [}] # onnxName # [{](https://onnx.ai/onnx/operators/onnx__}]
    # onnxName # [{.html) with opset 13 semantics: normalizes along `axis`
    (non-negative). The importer expresses opsets 1-12 (coerce to 2-D at
    the axis) with reshapes around this op.
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def NN_SoftmaxOp : NN_SoftmaxOpBase<"softmax", "Softmax">;
def NN_LogSoftmaxOp : NN_SoftmaxOpBase<"log_softmax", "LogSoftmax">;

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

def NN_ConvOp : NN_Op<"conv", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    NN_SampleRowsOpInterface]> {
  let summary = "2-D convolution (NCHW)";
  let description = [{
    ONNX [Conv](https://onnx.ai/onnx/operators/onnx__Conv.html), opsets 1
    and later, for 2-D inputs `[N, C, H, W]` and weights
    `[F, C/group, KH, KW]`, with explicit `pads` (top, left, bottom, right;
    the importer resolves auto_pad), `strides`, `dilations` and `group`.
    `bias` `[F]` is optional.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                   Optional<NN_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_ConvGradInputOp : NN_Op<"conv_grad_input", [Pure,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    NN_SampleRowsOpInterface]> {
  let summary = "adjoint of nn.conv w.r.t. its input (transposed convolution)";
  let description = [{
    Emitted by the VJP rule of `nn.conv`, and by the importer for ONNX
    [ConvTranspose](https://onnx.ai/onnx/operators/onnx__ConvTranspose.html)
    (whose weight `[C_in, C_out/group, KH, KW]` is this op's `weight`). The
    result type is the convolution's input type; rows and columns of the
    result that no window reaches (ConvTranspose's `output_padding`) are 0.
    Differentiable: both adjoints are convolutions again.
  }];
  let arguments = (ins NN_FloatTensor:$dresult, NN_FloatTensor:$weight,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $dresult `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def NN_ConvGradWeightOp : NN_Op<"conv_grad_weight", [Pure]> {
  let summary = "adjoint of nn.conv w.r.t. its weight";
  let description = [{
    Internal (no ONNX counterpart); emitted by the VJP rule of `nn.conv`.
    The result type is the convolution's weight type.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$dresult,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $dresult attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

def NN_MaxPoolOp : NN_Op<"max_pool", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    NN_SampleRowsOpInterface]> {
  let summary = "2-D max pooling (NCHW)";
  let description = [{
    ONNX [MaxPool](https://onnx.ai/onnx/operators/onnx__MaxPool.html),
    opsets 1 and later, 2-D, with explicit `pads` (top, left, bottom,
    right). The importer resolves auto_pad and ceil_mode into the pads and
    the result type; padding never wins the max. The adjoint goes to the
    first maximum of each window, as PyTorch's does.
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_MaxPoolIndicesOp : NN_Op<"max_pool_indices", [Pure]> {
  let summary = "where each window of a 2-D max pooling has its maximum";
  let description = [{
    ONNX MaxPool's `Indices` output: for each window of the `nn.max_pool`
    with the same attributes, the flat index into `input` of its first
    maximum (in kernel row-major order, padding never counts). With
    `storage_order` 0 the index is `((n * C + c) * H + h) * W + w`; with 1,
    `(n * C + c) * H * W + h + w * H`. The result has the pooling's shape.
    Not differentiable (an integer result).
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<I64Attr, "0">:$storage_order);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_MaxPoolGradOp : NN_Op<"max_pool_grad", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "adjoint of nn.max_pool";
  let description = [{
    Internal (no ONNX counterpart); emitted by the VJP rule of
    `nn.max_pool`: each window's adjoint goes to its first maximum.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$dresult,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $dresult attr-dict `:` functional-type(operands, results)
  }];
}

def NN_AveragePoolOp : NN_Op<"average_pool", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    NN_SampleRowsOpInterface]> {
  let summary = "2-D average pooling (NCHW)";
  let description = [{
    ONNX [AveragePool](https://onnx.ai/onnx/operators/onnx__AveragePool.html),
    opsets 1 and later, 2-D, with explicit `pads`. Each window's sum is
    divided by the kernel size with count_include_pad, else by the number
    of its elements inside the input.
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_AveragePoolGradOp : NN_Op<"average_pool_grad", [Pure]> {
  let summary = "adjoint of nn.average_pool";
  let description = [{
    Internal (no ONNX counterpart); emitted by the VJP rule of
    `nn.average_pool`. The result type is the pooling's input type.
  }];
  let arguments = (ins NN_FloatTensor:$dresult, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   BoolAttr:$count_include_pad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$dresult attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

def NN_DropoutOp : NN_Op<"dropout", [Pure,
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<NN_DifferentiableOpInterface>,
    NN_SampleRowsOpInterface]> {
  let summary = "training-mode dropout with a counter-based mask";
  let description = [{
    ONNX [Dropout](https://onnx.ai/onnx/operators/onnx__Dropout.html),
    opsets 12 and later, in training mode (in inference mode the importer
    emits nothing). Element `e` of sample `i` is kept, scaled by
    `1 / (1 - ratio)`, when a hash of (`seed`, the optimizer step `step`,
    the global sample index `sample_base + i`, `e`, `salt`) maps to a uniform
    number >= `ratio`. The mask depends on nothing else, so it does not
    change with the micro-batch size, the number of accumulation steps or
    data-parallel ranks. `salt` tells the dropout nodes of a graph apart.
  }];
  let arguments = (ins NN_FloatTensor:$input, 0DTensorOf<[I64]>:$step,
                   0DTensorOf<[I64]>:$sample_base, F64Attr:$ratio,
                   I64Attr:$seed, I64Attr:$salt);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $step `,` $sample_base attr-dict `:` type($input) `,`
    type($step) `,` type($sample_base)
  }];
}

#endif // ACCRUE_DIALECT_NN_IR_NNNEURALOPS_TD
