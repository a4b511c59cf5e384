// RUN: accrue-opt %s -train-shard-optimizer -verify-diagnostics | FileCheck %s
// RUN: accrue-opt %s -train-shard-optimizer -convert-train-to-linalg | FileCheck %s --check-prefix=LOWERED

// ZeRO stage 1: the all-reduce of the accumulator becomes a reduce-scatter,
// the update is sharded, and the optimizer states are the rank's shard
// (tensor<?xf32>, arguments and results of the step).

// CHECK-LABEL: func @train_step
// CHECK-SAME: %{{.+}}: tensor<64xf32> {train.role = #train.role<params>}, %{{.+}}: tensor<64xf32> {train.role = #train.role<accumulator>}, %[[M:.+]]: tensor<?xf32> {train.role = #train.role<state>}, %[[V:.+]]: tensor<?xf32> {train.role = #train.role<state>}
// CHECK-SAME: -> (tensor<64xf32> {train.tied = 0 : i64}, tensor<?xf32> {train.tied = 2 : i64}, tensor<?xf32> {train.tied = 3 : i64}, f32)
// CHECK: %[[R:.+]], %{{.+}}, %{{.+}} = train.all_reduce %{{.+}}, %{{.+}}, %{{.+}} scalars_at 60 scatter : tensor<64xf32>
// CHECK: train.fused_update %{{.+}}, %[[R]] states(%[[M]], %[[V]]) {{.+}}sharded} : tensor<64xf32>, tensor<?xf32>, tensor<?xf32>

// Lowered: the shard's bounds from the host, the norm's partial sum
// all-reduced, the update on the shard, the parameters gathered and the
// whole accumulator zeroed.
// LOWERED-LABEL: func @train_step
// LOWERED: %[[N:.+]] = arith.constant 64 : i64
// LOWERED: call @accrue_shard_begin(%[[N]]) : (i64) -> i64
// LOWERED: %[[N2:.+]] = arith.constant 64 : i64
// LOWERED: call @accrue_shard_size(%[[N2]]) : (i64) -> i64
// LOWERED: tensor.extract_slice
// LOWERED: %[[PARTIAL:.+]] = tensor.from_elements %{{.+}} : tensor<1xf32>
// LOWERED: train.all_reduce_arena %[[PARTIAL]] : tensor<1xf32>
// LOWERED: math.sqrt
// LOWERED: linalg.generic
// LOWERED: %[[UPDATED:.+]] = tensor.insert_slice
// LOWERED: train.all_gather_arena %[[UPDATED]] : tensor<64xf32>
// LOWERED: linalg.fill
func.func @train_step(%params: tensor<64xf32> {train.role = #train.role<params>},
                      %acc: tensor<64xf32> {train.role = #train.role<accumulator>},
                      %m: tensor<64xf32> {train.role = #train.role<state>},
                      %v: tensor<64xf32> {train.role = #train.role<state>},
                      %lr: f32, %step: i64, %n: f32, %d: f32)
    -> (tensor<64xf32> {train.tied = 0 : i64}, tensor<64xf32> {train.tied = 2 : i64},
        tensor<64xf32> {train.tied = 3 : i64}, f32) attributes {train.step} {
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 60 : tensor<64xf32>
  %scale = arith.divf %rn, %rd : f32
  %p, %a, %s:2, %norm = train.fused_update %params, %r states(%m, %v) grad_scale %scale lr %lr step %step {max_norm = 1.0 : f32, optimizer = #train.adamw<>} : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
  return %p, %s#0, %s#1, %norm : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, f32
}

