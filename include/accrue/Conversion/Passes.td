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
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def ConvertTrainToLinalg : Pass<"convert-train-to-linalg"> {
  let summary = "Lower train arena ops and optimizers to linalg";
  let description = [{
    `train.unpack`/`train.accumulate` become slices, reshapes and elementwise
    adds on the flat arenas; `train.global_norm` a reduction; optimizer
    updates one elementwise `linalg.generic` whose body is the optimizer's
    scalar rule; `train.fused_update` a reduction followed by that generic.
    `train.value_and_grad` must be gone (run `train-autodiff` first).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def ExpandStridedCopies : Pass<"expand-strided-copies"> {
  let summary = "Turn memref.copy between strided buffers into loops";
  let description = [{
    A memref.copy between buffers with non-identity layouts lowers to a call
    of `memrefCopy` from MLIR's runner utilities, which compiled artifacts do
    not link. This rewrites such copies into linalg.copy, which lowers to
    plain loops; contiguous copies stay memref.copy (a memcpy).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

#endif // ACCRUE_CONVERSION_PASSES_TD
