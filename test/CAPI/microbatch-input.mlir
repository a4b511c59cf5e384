// Input of test/e2e/capi.test's pipeline check: a step over a forward of
// nn ops, before train-microbatch.
func.func private @fwd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @fwd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}
