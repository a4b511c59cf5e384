// RUN: accrue-opt %s --train-mixed-precision="precision=fp8" -split-input-file -verify-diagnostics

// Only bf16 and fp16 are compute precisions.
// expected-error @+1 {{train-mixed-precision: precision must be bf16 or fp16, not 'fp8'}}
module {
  func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
