// RUN: accrue-opt %s -split-input-file -train-shard-optimizer -verify-diagnostics

// Outside the rank's shard the reduce-scattered accumulator holds no sum:
// nothing else may read it.
func.func @train_step(%params: tensor<64xf32> {train.role = #train.role<params>},
                      %acc: tensor<64xf32> {train.role = #train.role<accumulator>},
                      %m: tensor<64xf32> {train.role = #train.role<state>},
                      %v: tensor<64xf32> {train.role = #train.role<state>},
                      %lr: f32, %step: i64, %n: f32, %d: f32)
    -> (tensor<64xf32> {train.tied = 0 : i64}, tensor<64xf32> {train.tied = 2 : i64},
        tensor<64xf32> {train.tied = 3 : i64}, f32) attributes {train.step} {
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 60 : tensor<64xf32>
  // expected-error @+1 {{reads the summed gradients, of which a sharded rank holds only its shard}}
  %gn = train.global_norm %r : tensor<64xf32>
  %p, %a, %s:2, %norm = train.fused_update %params, %r states(%m, %v) grad_scale %rd lr %lr step %step {optimizer = #train.adamw<>} : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
  return %p, %s#0, %s#1, %gn : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, f32
}

// -----

// Without the all-reduce after the loop there is nothing to scatter.
func.func @train_step(%params: tensor<64xf32> {train.role = #train.role<params>},
                      %acc: tensor<64xf32> {train.role = #train.role<accumulator>},
                      %lr: f32, %step: i64, %scale: f32)
    -> (tensor<64xf32> {train.tied = 0 : i64}, f32) attributes {train.step} {
  // expected-error @+1 {{are not summed over the ranks by one train.all_reduce}}
  %p, %a, %norm = train.fused_update %params, %acc grad_scale %scale lr %lr step %step {optimizer = #train.sgd<>} : tensor<64xf32>
  return %p, %norm : tensor<64xf32>, f32
}
