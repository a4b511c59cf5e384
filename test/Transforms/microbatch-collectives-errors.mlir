// RUN: accrue-opt %s -train-microbatch=collectives=per-micro-batch -verify-diagnostics

// The all-reduce carries the loss sum and count in the accumulator after its
// last gradient: an arena that the gradients fill has no room for them.

func.func private @fwd(%w: tensor<16xf32>, %x: tensor<2x16xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x16xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

func.func @full_arena(%w: tensor<16xf32>, %x: tensor<?x16xf32>, %acc: tensor<16xf32>) -> tensor<16xf32> {
  %l, %g = train.value_and_grad @fwd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<16xf32>, tensor<?x16xf32>) -> (tensor<f32>, tensor<16xf32>)
  // expected-error @+1 {{the accumulator has no room after its last gradient for the all-reduce's loss sum and count (two elements)}}
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<16xf32>
  return %a : tensor<16xf32>
}
