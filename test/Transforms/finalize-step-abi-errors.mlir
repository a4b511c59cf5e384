// RUN: accrue-opt %s -split-input-file -train-finalize-step-abi -verify-diagnostics

// Every argument of a step needs a role the contract knows, or no host
// could tell what to pass.

// expected-error @+1 {{argument #1 needs a known train.role and a train.name: a host could not tell what to pass}}
func.func @train_step(%p: tensor<16xf32> {train.role = #train.role<params>, train.name = "params"}, %lr: f32)
    -> (tensor<16xf32> {train.tied = 0 : i64}) attributes {train.step} {
  return %p : tensor<16xf32>
}

// -----

// A role the step contract does not know is refused where it is written.
// expected-error @+1 {{unknown step argument role 'weights'}}
func.func @train_step(%p: tensor<16xf32> {train.role = #train.role<weights>, train.name = "params"})
    -> (tensor<16xf32> {train.tied = 0 : i64}) attributes {train.step} {
  return %p : tensor<16xf32>
}

// -----

// An untied tensor result gets an output buffer, which needs a static shape.

// expected-error @+1 {{result #0 must have a static shape, not 'tensor<?xf32>'}}
func.func @train_step(%p: tensor<?xf32> {train.role = #train.role<batch>, train.name = "x"})
    -> tensor<?xf32> attributes {train.step} {
  return %p : tensor<?xf32>
}

// -----

// A scalar result is a metric, which needs a name.

// expected-error @+1 {{result #0 must be a tensor, or an f32 metric (train.metric), not 'f32'}}
func.func @train_step(%lr: f32 {train.role = #train.role<lr>, train.name = "lr"})
    -> f32 attributes {train.step} {
  return %lr : f32
}

// -----

// expected-error @+1 {{result #0 is tied to argument #1, which is not a tensor argument}}
func.func @train_step(%p: tensor<16xf32> {train.role = #train.role<params>, train.name = "params"}, %lr: f32 {train.role = #train.role<lr>, train.name = "lr"})
    -> (tensor<16xf32> {train.tied = 1 : i64}) attributes {train.step} {
  return %p : tensor<16xf32>
}

// -----

// expected-error @+1 {{a training step must have a single block}}
func.func @train_step(%p: tensor<16xf32> {train.role = #train.role<params>, train.name = "params"})
    -> (tensor<16xf32> {train.tied = 0 : i64}) attributes {train.step} {
  cf.br ^bb1
^bb1:
  return %p : tensor<16xf32>
}
