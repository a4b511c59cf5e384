// RUN: accrue-opt %s -split-input-file --convert-train-to-linalg -cse | FileCheck %s

// GradScaler's rule on scalars, the same for every target: an overflow
// backs the scale off and restarts the streak; the interval-th finite step
// in a row grows the scale and restarts the streak. The scale stays f32.
// (test/e2e/loss_scaling.py checks whole runs against torch.amp.GradScaler.)
// CHECK-LABEL: func @next_loss_scale
// CHECK-SAME: (%[[S:[^:]+]]: f32, %[[K:[^:]+]]: i64, %[[NORM:[^:]+]]: f32)
// CHECK: %[[INF:.+]] = arith.constant 0x7F800000 : f32
// CHECK: %[[ABS:.+]] = math.absf %[[NORM]] : f32
// CHECK: %[[FINITE:.+]] = arith.cmpf olt, %[[ABS]], %[[INF]] : f32
// CHECK: %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[BACKED_OFF:.+]] = arith.mulf %[[S]], %[[HALF]] : f32
// CHECK: %[[ONE:.+]] = arith.constant 1 : i64
// CHECK: %[[NEXT:.+]] = arith.addi %[[K]], %[[ONE]] : i64
// CHECK: %[[INTERVAL:.+]] = arith.constant 3 : i64
// CHECK: %[[GROW:.+]] = arith.cmpi eq, %[[NEXT]], %[[INTERVAL]] : i64
// CHECK: %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[GROWN:.+]] = arith.mulf %[[S]], %[[TWO]] : f32
// CHECK: %[[KEPT:.+]] = arith.select %[[GROW]], %[[GROWN]], %[[S]] : f32
// CHECK: %[[SCALE:.+]] = arith.select %[[FINITE]], %[[KEPT]], %[[BACKED_OFF]] : f32
// CHECK: %[[ZERO:.+]] = arith.constant 0 : i64
// CHECK: %[[RESTART:.+]] = arith.select %[[GROW]], %[[ZERO]], %[[NEXT]] : i64
// CHECK: %[[STREAK:.+]] = arith.select %[[FINITE]], %[[RESTART]], %[[ZERO]] : i64
// CHECK: return %[[SCALE]], %[[STREAK]], %[[FINITE]]
func.func @next_loss_scale(%s: f32, %k: i64, %norm: f32) -> (f32, i64, i1) {
  %next:3 = train.next_loss_scale %s, %k, %norm {growth = 2.0 : f64, backoff = 0.5 : f64, interval = 3 : i64}
  return %next#0, %next#1, %next#2 : f32, i64, i1
}

// -----

// Static scaling (growth = backoff = 1, interval 0): the scale stays, the
// streak stays 0.
// CHECK-LABEL: func @static_loss_scale
// CHECK-SAME: (%[[S:[^:]+]]: f32, %[[K:[^:]+]]: i64, %[[NORM:[^:]+]]: f32)
// CHECK: %[[FINITE:.+]] = arith.cmpf olt
// CHECK: %[[SAME:.+]] = arith.mulf %[[S]], %{{.+}} : f32
// CHECK: %[[SCALE:.+]] = arith.select %[[FINITE]], %[[S]], %[[SAME]] : f32
// CHECK: %[[ZERO:.+]] = arith.constant 0 : i64
// CHECK: return %[[SCALE]], %[[ZERO]], %[[FINITE]]
func.func @static_loss_scale(%s: f32, %k: i64, %norm: f32) -> (f32, i64, i1) {
  %next:3 = train.next_loss_scale %s, %k, %norm {growth = 1.0 : f64, backoff = 1.0 : f64, interval = 0 : i64}
  return %next#0, %next#1, %next#2 : f32, i64, i1
}
