// Only bf16 and fp16 are compute precisions: the option is typed, so
// anything else is refused when the pipeline is parsed, naming the option.
// RUN: not accrue-opt %s --train-mixed-precision="precision=fp8" 2>&1 | FileCheck %s
// RUN: not accrue-opt %s --train-mixed-precision="precision=fp32" 2>&1 | FileCheck %s --check-prefix=FP32
// CHECK: for the --precision option: Cannot find option named 'fp8'!
// FP32: for the --precision option: Cannot find option named 'fp32'!
module {
  func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
