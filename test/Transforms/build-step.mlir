// RUN: accrue-opt %s -split-input-file -train-build-step=micro-batch=2 -verify-diagnostics | FileCheck %s
// RUN: not accrue-opt %s -split-input-file -train-build-step=forward=nope 2>&1 | FileCheck %s --check-prefix=MISSING

// A forward function written in MLIR: the step over flat arenas around it
// (gradient-only), and the errors that name what breaks the contract.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[P:.+]]: tensor<16xf32> {train.name = "params", train.role = #train.role<params>}
// CHECK-SAME: tensor<?x4xf32> {train.name = "x", train.role = #train.role<batch>}
// CHECK: train.unpack %[[P]]
// CHECK: train.value_and_grad @forward({{.*}}) valid %{{.*}} {micro_batch = 2 : i64, wrt = array<i64: 0>}
// CHECK: train.accumulate
// MISSING: error: no forward function 'nope'
func.func private @forward(%w: tensor<3x4xf32> {train.role = #train.role<params>, train.name = "w"}, %x: tensor<2x4xf32> {train.role = #train.role<batch>, train.name = "x"}) -> tensor<f32> {
  %0 = nn.gemm %x, %w {transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %1 = nn.mul %0, %0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = nn.reduce_mean %1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// expected-error @+1 {{argument #1 has no train.role/train.name}}
func.func private @forward(%w: tensor<4xf32> {train.role = #train.role<params>, train.name = "w"}, %x: tensor<2x4xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// expected-error @+1 {{the model has no trainable parameters}}
func.func private @forward(%x: tensor<2x4xf32> {train.role = #train.role<batch>, train.name = "x"}) -> tensor<f32> {
  %0 = nn.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A buffer (running statistic) whose new value the forward does not return.
// expected-error @+1 {{buffer argument #1 has no result with its new value}}
func.func private @forward(%w: tensor<4xf32> {train.role = #train.role<params>, train.name = "w"}, %r: tensor<4xf32> {train.role = #train.role<buffers>, train.name = "r"}, %x: tensor<2x4xf32> {train.role = #train.role<batch>, train.name = "x"}) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A second result that names no buffer.
// expected-error @+1 {{result #1 must be the new value of a buffer argument (train.tied naming one, of its type, once)}}
func.func private @forward(%w: tensor<4xf32> {train.role = #train.role<params>, train.name = "w"}, %x: tensor<2x4xf32> {train.role = #train.role<batch>, train.name = "x"}) -> (tensor<f32>, tensor<4xf32>) {
  %0 = nn.mul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %1, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Two results for one buffer.
// expected-error @+1 {{result #2 must be the new value of a buffer argument (train.tied naming one, of its type, once)}}
func.func private @forward(%w: tensor<4xf32> {train.role = #train.role<params>, train.name = "w"}, %r: tensor<4xf32> {train.role = #train.role<buffers>, train.name = "r"}, %x: tensor<2x4xf32> {train.role = #train.role<batch>, train.name = "x"}) -> (tensor<f32>, tensor<4xf32> {train.tied = 1 : i64}, tensor<4xf32> {train.tied = 1 : i64}) {
  %0 = nn.mul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %1, %r, %r : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A loss whose constant divisor counts samples (d = 3 per sample): the
// function says so, and the step's value_and_grad carries it.
// CHECK-LABEL: func.func @train_step
// CHECK: train.value_and_grad @forward({{.*}}) valid %{{.*}} {loss_divisor = #train.loss_divisor<per_sample = 3.000000e+00>, micro_batch = 2 : i64
func.func private @forward(%w: tensor<3xf32> {train.role = #train.role<params>, train.name = "w"}, %x: tensor<2x3xf32> {train.role = #train.role<batch>, train.name = "x"}) -> tensor<f32> attributes {train.loss_divisor = #train.loss_divisor<per_sample = 3.0>} {
  %c = nn.constant dense<6.0> : tensor<f32>
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %2 = nn.div %1, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// expected-error @+1 {{'train.loss_divisor' must be a #train.loss_divisor, not 3.000000e+00 : f64}}
func.func private @forward(%w: tensor<3xf32> {train.role = #train.role<params>, train.name = "w"}, %x: tensor<2x3xf32> {train.role = #train.role<batch>, train.name = "x"}) -> tensor<f32> attributes {train.loss_divisor = 3.0 : f64} {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
