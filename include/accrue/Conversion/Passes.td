//===- Passes.td - conversion passes -----------------------*- tablegen -*-===//

#ifndef ACCRUE_CONVERSION_PASSES_TD
#define ACCRUE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertNNToLinalg : Pass<"convert-nn-to-linalg"> {
  let summary = "Lower nn ops to linalg, tensor, arith and math";
  let description = [{
    Elementwise ops become `linalg.generic` with broadcasting indexing maps,
    contractions `linalg.matmul`/`linalg.generic`, reductions `linalg.reduce`
    style generics, shape ops `tensor` reshapes and transposes, losses
    generics. Every op of the `nn` dialect is covered; the pass fails on
    anything left.

    With `decode-labels-once` (the CPU pipeline), a loss gradient over the
    classes decodes each item's label (range and ignore_index checks) once,
    into an i32 class, -1 where it does not count, in a generic over the
    items, and its elementwise body compares that with its class index in
    i32; without, each element decodes the label, in i64. (On the CPU the
    label's load stays in the loop, since the gradient's store may alias
    it, and LLVM vectorizes a loop with i64 lanes at half the width; a GPU
    would pay a launch for it.)
  }];
  let options = [
    Option<"decodeLabelsOnce", "decode-labels-once", "bool", "false",
           "Loss gradients decode each item's label into an i32 class in a "
           "generic over the items, not per element">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def ConvertTrainToLinalg : Pass<"convert-train-to-linalg"> {
  let summary = "Lower train arena ops and optimizers to linalg";
  let description = [{
    `train.unpack` becomes slices and reshapes of the flat arena;
    `train.global_norm` a reduction; optimizer updates one elementwise
    `linalg.generic` whose body is the optimizer's scalar rule;
    `train.fused_update` a reduction followed by that generic.
    `train.accumulate` is left to one-shot bufferization, which adds each
    gradient into a view of the accumulator buffer in place.
    `train.value_and_grad` must be gone (run `train-autodiff` first).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

#endif // ACCRUE_CONVERSION_PASSES_TD
