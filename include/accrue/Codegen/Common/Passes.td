//===- Passes.td - passes every target runs -----------------*- tablegen -*-===//
//
// Code generation passes that the CPU and the CUDA pipelines share.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_COMMON_PASSES_TD
#define ACCRUE_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseElementwise : Pass<"fuse-elementwise"> {
  let summary = "Fuse elementwise producers into consumers without recomputing";
  let description = [{
    Upstream's `linalg-fuse-elementwise-ops` (elementwise fusion, folding
    of reshapes by expansion, linalg canonicalizations and constant
    folding), with one more condition on fusing a producer into a
    consumer: the consumer must read the producer's result through a
    permutation of all of its loops. A producer read through a map that
    leaves out consumer loops (an activation's gradient read by the
    contraction that computes a weight gradient) would be recomputed for
    every value of those loops, and the consumer would no longer be a plain
    contraction that `vectorize-contractions` handles.

    With `shared-producers`, a producer with other uses fuses too, into a
    consumer (all loops parallel, not a contraction) that every other use
    follows: the fused op yields the producer's values as well, which
    replace the producer's, so nothing is computed twice and a chain of
    elementwise ops over the same points (an LSTM cell's gates and their
    gradients; a value and its bf16 cast for a product) is one pass over
    memory. A loop-invariant producer (a weight's cast) stays for
    `hoist-loop-invariants` unless its consumer is invariant too.
  }];
  let options = [
    Option<"recomputeCasts", "recompute-casts", "bool", "false",
           "Also fuse a producer that only casts its input (a widening "
           "of bf16 to f32) into every reduction that reads it (not a "
           "contraction), however many: each recomputes the cast, and the "
           "cast's own result (a copy in the wider type) goes where "
           "nothing else reads it">,
    Option<"sharedProducers", "shared-producers", "bool", "false",
           "Also fuse an elementwise producer with other uses into a "
           "consumer (all parallel, not a contraction) that all those uses "
           "follow: the fused op yields both values and the producer goes">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

def HoistLoopInvariants
    : Pass<"hoist-loop-invariants", "::mlir::func::FuncOp"> {
  let summary = "Compute what every micro-batch computes alike once per step";
  let description = [{
    On tensors, before bufferization: a linalg op in the micro-batch loop
    (`train.microbatch_loop`) whose inputs, and every value its body uses,
    come from outside the loop computes the same tensor in every
    micro-batch: a weight's transpose or its bf16 / fp16 cast for the
    products, the position embedding's rows at a constant arange, a
    constant mask. It moves before the loop, writing into a `tensor.empty`
    of its own, so it runs once per optimizer step instead of K times (as
    PyTorch's autocast caches the casts of its weights). Its result then
    lives through the loop: the step's memory grows by the hoisted
    tensors (the weights' transposed or low-precision copies, at most), the
    same for every K. Left in the loop: an op whose result is used other
    than read (as an input of a linalg op or by `tensor.extract`): written
    into in place (a destination, a loop's initial value), it would
    bufferize into a copy per micro-batch; and an op writing into anything
    but a `tensor.empty` of static shape. Results are those of the loop as
    it was: the same ops on the same values. Both the CPU and the CUDA
    pipelines run it.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // ACCRUE_CODEGEN_COMMON_PASSES_TD
