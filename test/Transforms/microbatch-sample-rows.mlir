// RUN: accrue-opt %s -split-input-file -verify-diagnostics -train-microbatch | FileCheck %s

// Each op says how its results hold the micro-batch's samples (nn's
// Elementwise trait or SampleRowsOpInterface). An op that says nothing is
// taken to mix samples: padded samples cannot be masked, the step takes no
// partial windows, and the compile says which op it was.

func.func private @foreign(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // expected-remark @+1 {{padded samples of partial windows cannot be masked out of the loss: 'arith.negf' does not say how its results hold the micro-batch's samples}}
  %1 = arith.negf %0 : tensor<2x3xf32>
  %2 = nn.reduce_mean %1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// CHECK-NOT: func.func private @foreign_split_masked
// CHECK-LABEL: func.func private @foreign_split(
// CHECK-LABEL: func @step
// CHECK-NOT: train.partial_windows
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %valid: i64, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @foreign(%w, %x) valid %valid {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// The same loss through nn ops that say it: elementwise ops, a row-major
// matmul, a softmax over the features and a reduction over the batch all
// keep or resolve the rows, so the padded samples are masked, silently.

func.func private @said(%w: tensor<3x4xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = nn.tanh %0 : tensor<2x4xf32>
  %2 = nn.softmax %1 {axis = 1 : i64} : tensor<2x4xf32>
  %3 = nn.reduce_mean %2 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-LABEL: func.func private @said_split_masked(
// CHECK-LABEL: func @step
// CHECK-SAME: train.partial_windows
func.func @step(%w: tensor<3x4xf32>, %x: tensor<?x3xf32>, %valid: i64, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @said(%w, %x) valid %valid {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3x4xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3x4xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// An op that says it mixes samples (a mean over the batch axis) costs the
// partial windows too, but it said so: no remark, also not for an op that
// says nothing but does not reach the loss.

func.func private @mixed(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %unused = arith.negf %0 : tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  %2 = nn.sub %0, %1 : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %3 = nn.reduce_mean %2 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-NOT: func.func private @mixed_split_masked
// CHECK-LABEL: func.func private @mixed_split(
// CHECK-LABEL: func @step
// CHECK-NOT: train.partial_windows
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %valid: i64, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @mixed(%w, %x) valid %valid {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}
