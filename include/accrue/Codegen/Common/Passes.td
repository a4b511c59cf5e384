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
  }];
  let options = [
    Option<"recomputeCasts", "recompute-casts", "bool", "false",
           "Also fuse a producer that only casts its input (a widening "
           "of bf16 to f32) into every reduction that reads it (not a "
           "contraction), however many: each recomputes the cast, and the "
           "cast's own result (a copy in the wider type) goes where "
           "nothing else reads it">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

#endif // ACCRUE_CODEGEN_COMMON_PASSES_TD
