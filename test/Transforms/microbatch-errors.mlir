// RUN: accrue-opt %s -split-input-file -train-microbatch -verify-diagnostics

func.func private @fwd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32>

func.func @no_accumulate(%w: tensor<3xf32>, %x: tensor<?x3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{the gradients of a micro-batched value_and_grad must all feed the same train.accumulate}}
  %l, %g = train.value_and_grad @fwd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %g : tensor<3xf32>
}

// -----

func.func private @fwd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32>

func.func @gradient_used_twice(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> (tensor<16xf32>, tensor<3xf32>) {
  // expected-error @+1 {{each gradient of a micro-batched value_and_grad must have exactly one use}}
  %l, %g = train.value_and_grad @fwd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %a, %g : tensor<16xf32>, tensor<3xf32>
}

// -----

func.func private @two_results(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> (tensor<f32>, tensor<f32>)

func.func @aux_results(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{micro-batching needs a callee whose results after the loss are new values of its arguments (train.tied); result #1 of 'two_results' is not}}
  %l, %aux, %g = train.value_and_grad @two_results(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %a : tensor<16xf32>
}
