//===- Passes.td - nn passes -------------------------------*- tablegen -*-===//
//
// Rewrites of nn ops into other nn ops (before any lowering).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_DIALECT_NN_TRANSFORMS_PASSES_TD
#define ACCRUE_DIALECT_NN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def UnrollScans : Pass<"unroll-scans"> {
  let summary = "Unroll nn.scan into one copy of its body per step";
  let description = [{
    Replaces each `nn.scan` with straight-line nn ops: per step, slices of
    the scanned inputs, a copy of the body, and at the end the step outputs
    (and saved carries) concatenated along the time axis. The CUDA pipeline
    runs it before lowering, because it forms kernels over straight-line
    code; the CPU pipeline lowers scans to loops instead.
  }];
}

#endif // ACCRUE_DIALECT_NN_TRANSFORMS_PASSES_TD
