// RUN: accrue-opt %s -split-input-file -cuda-device-loss-scale -verify-diagnostics | FileCheck %s

// GradScaler's rule at the end of the step: a finite norm adds one to the
// step number and the streak (the 2nd in a row doubles the scale and
// restarts the streak); an overflow halves the scale, keeps the step
// number and restarts the streak. The streak is a new buffer argument.

// CHECK-LABEL: func @train_step
// CHECK-SAME: %[[SCALE:[^:]+]]: memref<f32>, %[[STEP:[^:]+]]: memref<i64>, %[[METRICS:[^:]+]]: memref<2xf32>, %[[STREAK:[^:]+]]: memref<i64>)
// CHECK-SAME: {train.name = "loss_scale_streak", train.role = "loss_scale_streak"}
// CHECK: memref.store %[[NORM:.+]], %[[METRICS]][%c1]
// CHECK-DAG: %[[S:.+]] = tensor.extract %{{.+}}[] : tensor<f32>
// CHECK-DAG: %[[N:.+]] = tensor.extract %{{.+}}[] : tensor<i64>
// CHECK-DAG: %[[K:.+]] = tensor.extract %{{.+}}[] : tensor<i64>
// CHECK: %[[ABS:.+]] = math.absf %[[NORM]]
// CHECK: %[[FINITE:.+]] = arith.cmpf olt, %[[ABS]], %cst{{.*}} : f32
// CHECK: %[[NEXT:.+]] = arith.addi %[[K]], %c1_i64
// CHECK: %[[GROW:.+]] = arith.cmpi eq, %[[NEXT]], %c2_i64
// CHECK: %[[DOUBLED:.+]] = arith.mulf %[[S]], %cst{{.*}}
// CHECK: %[[GROWN:.+]] = arith.select %[[GROW]], %[[DOUBLED]], %[[S]]
// CHECK: %[[HALVED:.+]] = arith.mulf %[[S]], %cst{{.*}}
// CHECK: %[[NEW_SCALE:.+]] = arith.select %[[FINITE]], %[[GROWN]], %[[HALVED]]
// CHECK: %[[RESTART:.+]] = arith.select %[[GROW]], %c0_i64, %[[NEXT]]
// CHECK: %[[NEW_STREAK:.+]] = arith.select %[[FINITE]], %[[RESTART]], %c0_i64
// CHECK: %[[PLUS:.+]] = arith.addi %[[N]], %c1_i64
// CHECK: %[[NEW_STEP:.+]] = arith.select %[[FINITE]], %[[PLUS]], %[[N]]
// CHECK: memref.store %[[NEW_SCALE]], %[[SCALE]][]
// CHECK: memref.store %[[NEW_STEP]], %[[STEP]][]
// CHECK: memref.store %[[NEW_STREAK]], %[[STREAK]][]
// CHECK-NEXT: return
func.func @train_step(%scale: memref<f32>, %step: memref<i64>, %metrics: memref<2xf32>) attributes {train.abi = [{train.name = "loss_scale", train.role = "loss_scale"}, {train.name = "step", train.role = "step"}, {train.fields = ["loss", "grad_norm"], train.name = "metrics", train.role = "metrics"}], train.loss_scale_rule = {backoff = 5.000000e-01 : f64, growth = 2.000000e+00 : f64, interval = 2 : i64}} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %loss = arith.constant 1.0 : f32
  %norm = arith.constant 3.0 : f32
  memref.store %loss, %metrics[%c0] : memref<2xf32>
  memref.store %norm, %metrics[%c1] : memref<2xf32>
  return
}

// -----

// expected-error @+1 {{cuda-device-loss-scale: a step with a loss_scale argument needs a train.loss_scale_rule {growth, backoff, interval}}}
func.func @no_rule(%scale: memref<f32>, %step: memref<i64>, %metrics: memref<2xf32>) attributes {train.abi = [{train.name = "loss_scale", train.role = "loss_scale"}, {train.name = "step", train.role = "step"}, {train.fields = ["loss", "grad_norm"], train.name = "metrics", train.role = "metrics"}]} {
  return
}

// -----

// expected-error @+1 {{cuda-device-loss-scale: the step stores no global norm into its metrics}}
func.func @no_norm(%scale: memref<f32>, %step: memref<i64>, %metrics: memref<2xf32>) attributes {train.abi = [{train.name = "loss_scale", train.role = "loss_scale"}, {train.name = "step", train.role = "step"}, {train.fields = ["loss", "grad_norm"], train.name = "metrics", train.role = "metrics"}], train.loss_scale_rule = {backoff = 5.000000e-01 : f64, growth = 2.000000e+00 : f64, interval = 2 : i64}} {
  return
}
