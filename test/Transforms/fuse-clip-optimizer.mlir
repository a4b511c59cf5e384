// RUN: accrue-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(train-fuse-clip-optimizer))' | FileCheck %s

// The end of a step after train-microbatch: normalize by 1/D, take the norm,
// clip, update, reset. Before: five ops, each a pass over the arena. After:
// one fused_update carrying the normalization factor and max_norm.

// CHECK-LABEL: func @clip_adamw
// CHECK-SAME: (%[[P:[^:]+]]: tensor<32xf32>, %[[A:[^:]+]]: tensor<32xf32>, %[[M:[^:]+]]: tensor<32xf32>, %[[V:[^:]+]]: tensor<32xf32>, %[[LR:[^:]+]]: f32, %[[T:[^:]+]]: i64, %[[INV:[^:]+]]: f32)
// CHECK-NOT: train.global_norm
// CHECK-NOT: train.clip_coefficient
// CHECK-NOT: train.scale
// CHECK-NOT: linalg.fill
// CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[S:.+]] = arith.mulf %[[ONE]], %[[INV]] : f32
// CHECK: %[[NP:.+]], %[[NA:.+]], %[[NS:.+]]:2, %[[NORM:.+]] = train.fused_update %[[P]], %[[A]] states(%[[M]], %[[V]]) grad_scale %[[S]] lr %[[LR]] step %[[T]] {max_norm = 1.000000e+00 : f32, optimizer = #train.adamw<>}
// CHECK-NOT: train.update
// CHECK: return %[[NP]], %[[NA]], %[[NS]]#0, %[[NS]]#1, %[[NORM]]
func.func @clip_adamw(%p: tensor<32xf32>, %acc: tensor<32xf32>, %m: tensor<32xf32>, %v: tensor<32xf32>, %lr: f32, %t: i64, %inv: f32)
    -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, f32) {
  %g = train.scale %acc, %inv : tensor<32xf32>
  %n = train.global_norm %g : tensor<32xf32>
  %c = train.clip_coefficient %n {max_norm = 1.0 : f32}
  %gc = train.scale %g, %c : tensor<32xf32>
  %p2, %m2, %v2 = train.update %p, %gc states(%m, %v) lr %lr step %t {optimizer = #train.adamw<>} : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>
  %zero = arith.constant 0.0 : f32
  %reset = linalg.fill ins(%zero : f32) outs(%acc : tensor<32xf32>) -> tensor<32xf32>
  return %p2, %reset, %m2, %v2, %n : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, f32
}

// -----

// Without clipping the norm is still reported (grad_norm), from the fused op.

// CHECK-LABEL: func @no_clip_sgd
// CHECK: %[[NP:.+]], %[[NA:.+]], %[[NORM:.+]] = train.fused_update %{{.+}}, %{{.+}} grad_scale %{{.+}} lr %{{.+}} step %{{.+}} {optimizer = #train.sgd<>}
// CHECK-NOT: max_norm
// CHECK: return %[[NP]], %[[NA]], %[[NORM]]
func.func @no_clip_sgd(%p: tensor<32xf32>, %acc: tensor<32xf32>, %lr: f32, %t: i64, %inv: f32) -> (tensor<32xf32>, tensor<32xf32>, f32) {
  %g = train.scale %acc, %inv : tensor<32xf32>
  %n = train.global_norm %g : tensor<32xf32>
  %p2 = train.update %p, %g lr %lr step %t {optimizer = #train.sgd<>} : tensor<32xf32>
  %zero = arith.constant 0.0 : f32
  %reset = linalg.fill ins(%zero : f32) outs(%acc : tensor<32xf32>) -> tensor<32xf32>
  return %p2, %reset, %n : tensor<32xf32>, tensor<32xf32>, f32
}

// -----

// A norm used before the update cannot move into the fused op: nothing is
// fused.

// CHECK-LABEL: func @norm_used_early
// CHECK: train.global_norm
// CHECK: train.update
// CHECK-NOT: train.fused_update
func.func @norm_used_early(%p: tensor<32xf32>, %acc: tensor<32xf32>, %lr: f32, %t: i64) -> (tensor<32xf32>, f32) {
  %n = train.global_norm %acc : tensor<32xf32>
  %lr2 = arith.mulf %lr, %n : f32
  %p2 = train.update %p, %acc lr %lr2 step %t {optimizer = #train.sgd<>} : tensor<32xf32>
  return %p2, %n : tensor<32xf32>, f32
}
