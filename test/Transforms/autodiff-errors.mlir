// RUN: accrue-opt %s -split-input-file -train-autodiff -verify-diagnostics

// An op on the path from a parameter to the loss without a VJP rule.
func.func private @no_rule(%w: tensor<2x3xf32>, %y: tensor<2xi64>) -> tensor<f32> {
  %d = nn.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'nn.softmax_cross_entropy_grad' has no gradient rule, but the loss depends on it through a trainable parameter}}
  %0 = nn.softmax_cross_entropy_grad %d, %w, %y {reduction = #nn<reduction sum>} : (tensor<f32>, tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

func.func @step(%w: tensor<2x3xf32>, %y: tensor<2xi64>) -> tensor<2x3xf32> {
  %l, %g = train.value_and_grad @no_rule(%w, %y) {wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  return %g : tensor<2x3xf32>
}

// -----

func.func private @fwd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32>

// The whole-batch form needs train-microbatch first.
func.func @whole_batch(%w: tensor<3xf32>, %x: tensor<?x3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{value_and_grad over a whole effective batch must be split by train-microbatch before train-autodiff}}
  %l, %g = train.value_and_grad @fwd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %g : tensor<3xf32>
}
