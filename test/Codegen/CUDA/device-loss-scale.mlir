// RUN: accrue-opt %s -split-input-file -cuda-device-loss-scale -verify-diagnostics | FileCheck %s

// A device step keeps its loss-scaling state where the next step reads it:
// the results of its train.next_loss_scale (GradScaler's rule, lowered
// later as on every target) go into the loss-scale and streak buffers, and
// the step number plus one, if the gradient was finite, into the step
// buffer.

// CHECK-LABEL: func @train_step
// CHECK-SAME: %[[SCALE:[^:]+]]: memref<f32>, %[[STREAK:[^:]+]]: memref<i64>, %[[STEP:[^:]+]]: memref<i64>, %[[METRICS:[^:]+]]: memref<2xf32>)
// CHECK: %[[NEXT_SCALE:[^,]+]], %[[NEXT_STREAK:[^,]+]], %[[FINITE:[^ ]+]] = train.next_loss_scale %{{.+}}, %{{.+}}, %{{.+}} {backoff = 5.000000e-01 : f64, growth = 2.000000e+00 : f64, interval = 2 : i64}
// CHECK: %[[N:.+]] = tensor.extract %{{.+}}[] : tensor<i64>
// CHECK: %[[PLUS:.+]] = arith.addi %[[N]], %c1_i64
// CHECK: %[[NEW_STEP:.+]] = arith.select %[[FINITE]], %[[PLUS]], %[[N]]
// CHECK: memref.store %[[NEXT_SCALE]], %[[SCALE]][]
// CHECK: memref.store %[[NEW_STEP]], %[[STEP]][]
// CHECK: memref.store %[[NEXT_STREAK]], %[[STREAK]][]
// CHECK-NEXT: return
func.func @train_step(%scale: memref<f32>, %streak: memref<i64>, %step: memref<i64>, %metrics: memref<2xf32>) attributes {train.abi = [{train.name = "loss_scale", train.role = #train.role<loss_scale>}, {train.name = "loss_scale_streak", train.role = #train.role<loss_scale_streak>}, {train.name = "step", train.role = #train.role<step>}, {train.fields = ["loss", "grad_norm"], train.name = "metrics", train.role = #train.role<metrics>}]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = bufferization.to_tensor %scale restrict : memref<f32> to tensor<f32>
  %k = bufferization.to_tensor %streak restrict : memref<i64> to tensor<i64>
  %sv = tensor.extract %s[] : tensor<f32>
  %kv = tensor.extract %k[] : tensor<i64>
  %loss = arith.constant 1.0 : f32
  %norm = arith.constant 3.0 : f32
  %next:3 = train.next_loss_scale %sv, %kv, %norm {growth = 2.0 : f64, backoff = 0.5 : f64, interval = 2 : i64}
  memref.store %loss, %metrics[%c0] : memref<2xf32>
  memref.store %norm, %metrics[%c1] : memref<2xf32>
  return
}

// -----

// expected-error @+1 {{cuda-device-loss-scale: a step with a loss_scale argument needs exactly one train.next_loss_scale}}
func.func @no_rule(%scale: memref<f32>, %streak: memref<i64>, %step: memref<i64>) attributes {train.abi = [{train.name = "loss_scale", train.role = #train.role<loss_scale>}, {train.name = "loss_scale_streak", train.role = #train.role<loss_scale_streak>}, {train.name = "step", train.role = #train.role<step>}]} {
  return
}

// -----

// expected-error @+1 {{cuda-device-loss-scale: expected buffer arguments for the loss scale, the step number and the streak (run cuda-device-scalars first)}}
func.func @scalars(%scale: f32, %streak: i64, %step: i64) attributes {train.abi = [{train.name = "loss_scale", train.role = #train.role<loss_scale>}, {train.name = "loss_scale_streak", train.role = #train.role<loss_scale_streak>}, {train.name = "step", train.role = #train.role<step>}]} {
  return
}
