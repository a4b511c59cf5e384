// RUN: accrue-opt %s -split-input-file | accrue-opt | FileCheck %s

func.func private @loss(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32>

// CHECK-LABEL: func @whole_batch
func.func @whole_batch(%w: tensor<3x4xf32>, %x: tensor<?x4xf32>) -> (tensor<f32>, tensor<3x4xf32>) {
  // CHECK: train.value_and_grad @loss(%{{.*}}, %{{.*}}) {micro_batch = 2 : i64, wrt = array<i64: 0>}
  %l, %g = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3x4xf32>, tensor<?x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}

// CHECK-LABEL: func @loss_divisors
func.func @loss_divisors(%w: tensor<3x4xf32>, %x: tensor<?x4xf32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: train.value_and_grad @loss(%{{.*}}, %{{.*}}) {loss_divisor = #train.loss_divisor<per_sample = 2.500000e-01>, micro_batch = 2 : i64
  %l, %g = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 0>, micro_batch = 2, loss_divisor = #train.loss_divisor<per_sample = 0.25>} : (tensor<3x4xf32>, tensor<?x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  // CHECK: train.value_and_grad @loss(%{{.*}}, %{{.*}}) {loss_divisor = #train.loss_divisor<per_sample = 0.000000e+00>, micro_batch = 2 : i64
  %m, %h = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 0>, micro_batch = 2, loss_divisor = #train.loss_divisor<per_sample = 0.0>} : (tensor<3x4xf32>, tensor<?x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return %l, %m : tensor<f32>, tensor<f32>
}

// -----

// CHECK-LABEL: func @arenas
func.func @arenas(%p: tensor<32xf32>, %a: tensor<32xf32>, %g0: tensor<3x4xf32>, %g1: tensor<3xf32>) -> (tensor<3x4xf32>, tensor<32xf32>, f32) {
  // CHECK: train.unpack %{{.*}} {offsets = array<i64: 0, 16>} : tensor<32xf32> -> tensor<3x4xf32>, tensor<3xf32>
  %v:2 = train.unpack %p {offsets = array<i64: 0, 16>} : tensor<32xf32> -> tensor<3x4xf32>, tensor<3xf32>
  // CHECK: train.accumulate %{{.*}}, %{{.*}}, %{{.*}} {offsets = array<i64: 0, 16>} : tensor<32xf32>, tensor<3x4xf32>, tensor<3xf32>
  %acc = train.accumulate %a, %g0, %g1 {offsets = array<i64: 0, 16>} : tensor<32xf32>, tensor<3x4xf32>, tensor<3xf32>
  // CHECK: train.global_norm
  %n = train.global_norm %acc : tensor<32xf32>
  // CHECK: train.clip_coefficient %{{.*}} {max_norm = 1.000000e+00 : f32}
  %c = train.clip_coefficient %n {max_norm = 1.0 : f32}
  // CHECK: train.scale
  %s = train.scale %acc, %c : tensor<32xf32>
  return %v#0, %s, %n : tensor<3x4xf32>, tensor<32xf32>, f32
}

// -----

// CHECK-LABEL: func @optimizers
func.func @optimizers(%p: tensor<16xf32>, %g: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %lr: f32, %t: i64, %s: f32) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, f32) {
  // CHECK: train.update %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} {optimizer = #train.sgd<>}
  %p0 = train.update %p, %g lr %lr step %t {optimizer = #train.sgd<>} : tensor<16xf32>
  // CHECK: train.update {{.*}} states(%{{.*}}) {{.*}} {optimizer = #train.sgd<momentum = 9.000000e-01, nesterov = true>}
  %p1, %b1 = train.update %p0, %g states(%m) lr %lr step %t {optimizer = #train.sgd<momentum = 0.9, nesterov = true>} : tensor<16xf32>, tensor<16xf32>
  // CHECK: {optimizer = #train.adam<beta2 = 0.9799{{[0-9]*}}, weight_decay = 1.000000e-01>}
  %p2, %m2, %v2 = train.update %p1, %g states(%m, %v) lr %lr step %t {optimizer = #train.adam<beta2 = 0.98, weight_decay = 0.1>} : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  // CHECK: train.fused_update {{.*}} grad_scale %{{.*}} lr %{{.*}} step %{{.*}} {max_norm = 5.000000e-01 : f32, optimizer = #train.adamw<>}
  %p3, %a3, %m3, %v3, %n = train.fused_update %p2, %g states(%m2, %v2) grad_scale %s lr %lr step %t {optimizer = #train.adamw<>, max_norm = 0.5 : f32} : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  return %p3, %a3, %m3, %v3, %n : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, f32
}

// -----

// CHECK-LABEL: func @more_optimizers
func.func @more_optimizers(%p: tensor<16xf32>, %g: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %lr: f32, %t: i64) -> (tensor<16xf32>, tensor<16xf32>) {
  // CHECK: {optimizer = #train.adagrad<lr_decay = 1.000000e-01, eps = 9.99{{[0-9]*}}E-7>}
  %p0, %s0 = train.update %p, %g states(%m) lr %lr step %t {optimizer = #train.adagrad<lr_decay = 0.1, eps = 1.0e-6>} : tensor<16xf32>, tensor<16xf32>
  // CHECK: {optimizer = #train.onnx_adam<alpha = 0.9499{{[0-9]*}}, norm_coefficient_post = 1.000000e-02>}
  %p1, %m1, %v1 = train.update %p0, %g states(%m, %v) lr %lr step %t {optimizer = #train.onnx_adam<alpha = 0.95, norm_coefficient_post = 0.01>} : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  return %p1, %v1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// CHECK-LABEL: func @all_reduce
func.func @all_reduce(%acc: tensor<32xf32>, %n: f32, %d: f32) -> (tensor<32xf32>, f32, f32) {
  // CHECK: %{{.+}}, %{{.+}}, %{{.+}} = train.all_reduce %{{.+}}, %{{.+}}, %{{.+}} scalars_at 30 : tensor<32xf32>
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 30 : tensor<32xf32>
  return %r, %rn, %rd : tensor<32xf32>, f32, f32
}

// -----

// ZeRO stage 2: a gradient reduce-scattered into the accumulator's shard,
// and the sharded update of that shard (its type spelled after the
// parameters').
// CHECK-LABEL: func @stage2
func.func @stage2(%p: tensor<64xf32>, %shard: tensor<?xf32>, %m: tensor<?xf32>, %g: tensor<4x8xf32>, %lr: f32, %t: i64, %s: f32) -> (tensor<64xf32>, tensor<?xf32>, tensor<?xf32>) {
  // CHECK: train.reduce_scatter_add %{{.+}}, %{{.+}} offset 16 of 64 : tensor<?xf32>, tensor<4x8xf32>
  %a = train.reduce_scatter_add %shard, %g offset 16 of 64 : tensor<?xf32>, tensor<4x8xf32>
  // CHECK: train.fused_update {{.+}} {optimizer = #train.sgd<momentum = 9.000000e-01>, sharded} : tensor<64xf32> accumulator tensor<?xf32>, tensor<?xf32>
  %p1, %a1, %m1, %n = train.fused_update %p, %a states(%m) grad_scale %s lr %lr step %t {optimizer = #train.sgd<momentum = 0.9>, sharded} : tensor<64xf32> accumulator tensor<?xf32>, tensor<?xf32>
  return %p1, %a1, %m1 : tensor<64xf32>, tensor<?xf32>, tensor<?xf32>
}
