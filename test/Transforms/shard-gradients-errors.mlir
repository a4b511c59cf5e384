// RUN: accrue-opt %s -split-input-file -train-shard-optimizer=gradients=true -verify-diagnostics

// The accumulator must be carried by the loop and only summed into there.
func.func @train_step(%params: tensor<64xf32> {train.role = #train.role<params>},
                      %acc: tensor<64xf32> {train.role = #train.role<accumulator>},
                      %lr: f32, %step: i64, %n: f32, %d: f32)
    -> (tensor<64xf32> {train.tied = 0 : i64}, tensor<64xf32> {train.tied = 1 : i64}, f32)
    attributes {train.step} {
  // expected-error @+1 {{the all-reduced accumulator is not a loop's result (shard_gradients needs}}
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 60 : tensor<64xf32>
  %p, %a, %norm = train.fused_update %params, %r grad_scale %rd lr %lr step %step {optimizer = #train.sgd<>} : tensor<64xf32>
  return %p, %a, %norm : tensor<64xf32>, tensor<64xf32>, f32
}

// -----

// A micro-batch that reads the carried accumulator other than to sum into
// it would see only the shard.
func.func @train_step(%params: tensor<64xf32> {train.role = #train.role<params>},
                      %acc: tensor<64xf32> {train.role = #train.role<accumulator>},
                      %lr: f32, %step: i64, %k: index)
    -> (tensor<64xf32> {train.tied = 0 : i64}, tensor<64xf32> {train.tied = 1 : i64}, f32)
    attributes {train.step} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{the carried accumulator is not only summed into by one train.accumulate}}
  %r:3 = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc, %ls = %zero, %n = %zero)
      -> (tensor<64xf32>, f32, f32) {
    %norm = train.global_norm %a : tensor<64xf32>
    %e = tensor.empty() : tensor<32xf32>
    %g = linalg.fill ins(%norm : f32) outs(%e : tensor<32xf32>) -> tensor<32xf32>
    %a2 = train.accumulate %a, %g {offsets = array<i64: 0>} : tensor<64xf32>, tensor<32xf32>
    scf.yield %a2, %ls, %n : tensor<64xf32>, f32, f32
  }
  %s, %sl, %sn = train.all_reduce %r#0, %r#1, %r#2 scalars_at 60 : tensor<64xf32>
  %p, %na, %gn = train.fused_update %params, %s grad_scale %sn lr %lr step %step {optimizer = #train.sgd<>} : tensor<64xf32>
  return %p, %na, %gn : tensor<64xf32>, tensor<64xf32>, f32
}
