// RUN: accrue-opt %s -split-input-file --convert-train-to-linalg | FileCheck %s

// Views of an arena are slices and reshapes; accumulation is left to
// bufferization (test/Transforms/bufferize-accumulate.mlir).
// CHECK-LABEL: func @arena
// CHECK-SAME: (%[[ARENA:.+]]: tensor<32xf32>, %[[ACC:.+]]: tensor<32xf32>, %[[G:.+]]: tensor<3x4xf32>)
// CHECK: %[[S:.+]] = tensor.extract_slice %[[ARENA]][16] [12] [1] : tensor<32xf32> to tensor<12xf32>
// CHECK: %[[V:.+]] = tensor.expand_shape %[[S]] {{\[}}[0, 1]] output_shape [3, 4] : tensor<12xf32> into tensor<3x4xf32>
// CHECK: train.accumulate %[[ACC]], %[[G]] {offsets = array<i64: 16>}
func.func @arena(%p: tensor<32xf32>, %acc: tensor<32xf32>, %g: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<32xf32>) {
  %v = train.unpack %p {offsets = array<i64: 16>} : tensor<32xf32> -> tensor<3x4xf32>
  %a = train.accumulate %acc, %g {offsets = array<i64: 16>} : tensor<32xf32>, tensor<3x4xf32>
  return %v, %a : tensor<3x4xf32>, tensor<32xf32>
}

// -----

// The fused update is two passes over the accumulator: a norm of the scaled
// gradient accumulated in f64, then one elementwise pass that writes the
// parameters, a zeroed accumulator and the optimizer state in place.
// CHECK-LABEL: func @fused
// CHECK-SAME: (%[[P:[^:]+]]: tensor<16xf32>, %[[A:[^:]+]]: tensor<16xf32>, %[[M:[^:]+]]: tensor<16xf32>, %[[V:[^:]+]]: tensor<16xf32>, %[[S:[^:]+]]: f32
// CHECK: %[[SQ:.+]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[A]] : tensor<16xf32>) outs(%{{.+}} : tensor<f64>)
// CHECK: arith.mulf %{{.+}}, %[[S]] : f32
// CHECK: arith.extf %{{.+}} : f32 to f64
// CHECK: %[[SUM:.+]] = tensor.extract %[[SQ]][] : tensor<f64>
// CHECK: %[[ROOT:.+]] = math.sqrt %[[SUM]] : f64
// CHECK: %[[NORM:.+]] = arith.truncf %[[ROOT]] : f64 to f32
// Clip coefficient min(1, max_norm / (norm + 1e-6)).
// CHECK: arith.addf %[[NORM]], %{{.+}} : f32
// CHECK: %[[COEF:.+]] = arith.minimumf
// CHECK: %[[UPD:.+]]:4 = linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%[[P]], %[[A]], %[[M]], %[[V]] : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK: ^bb0(%[[PO:.+]]: f32, %[[AO:.+]]: f32, %[[MO:.+]]: f32, %[[VO:.+]]: f32):
// CHECK: %[[G0:.+]] = arith.mulf %[[AO]], %[[S]]
// CHECK: %[[G:.+]] = arith.mulf %[[G0]], %[[COEF]]
// CHECK: math.powf
// CHECK: math.sqrt
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.yield %{{.+}}, %[[ZERO]], %{{.+}}, %{{.+}} : f32, f32, f32, f32
// CHECK: return %[[UPD]]#0, %[[UPD]]#1, %[[UPD]]#2, %[[UPD]]#3, %[[NORM]]
func.func @fused(%p: tensor<16xf32>, %a: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %s: f32, %lr: f32, %t: i64)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, f32) {
  %p1, %a1, %m1, %v1, %n = train.fused_update %p, %a states(%m, %v) grad_scale %s lr %lr step %t {optimizer = #train.adam<>, max_norm = 1.0 : f32} : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  return %p1, %a1, %m1, %v1, %n : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, f32
}

// -----

// SGD with momentum: the first step (step == 1) takes the whole gradient.
// CHECK-LABEL: func @sgd_momentum
// CHECK: linalg.generic {{.*}} ins(%{{.+}} : tensor<16xf32>) outs(%{{.+}}, %{{.+}} : tensor<16xf32>, tensor<16xf32>)
// CHECK: arith.constant 0.899999976 : f32
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %{{.+}}, %{{.+}} : i64
// CHECK: arith.select %[[FIRST]]
func.func @sgd_momentum(%p: tensor<16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %lr: f32, %t: i64) -> (tensor<16xf32>, tensor<16xf32>) {
  %p1, %b1 = train.update %p, %g states(%b) lr %lr step %t {optimizer = #train.sgd<momentum = 0.9>} : tensor<16xf32>, tensor<16xf32>
  return %p1, %b1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// skip_nonfinite: a norm that is not finite keeps parameters and states
// (an overflow under loss scaling); the accumulator is zeroed either way.
// CHECK-LABEL: func @skipping
// CHECK: %[[NORM:.+]] = arith.truncf
// CHECK: %[[ABS:.+]] = math.absf %[[NORM]] : f32
// CHECK: %[[FINITE:.+]] = arith.cmpf olt, %[[ABS]], %{{.+}} : f32
// CHECK: linalg.generic
// CHECK: ^bb0(%[[P:.+]]: f32, %[[A:.+]]: f32, %[[M:.+]]: f32):
// CHECK: %[[NEWP:.+]] = arith.select %[[FINITE]], %{{.+}}, %[[P]] : f32
// CHECK: %[[NEWM:.+]] = arith.select %[[FINITE]], %{{.+}}, %[[M]] : f32
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.yield %[[NEWP]], %[[ZERO]], %[[NEWM]]
func.func @skipping(%p: tensor<16xf32>, %a: tensor<16xf32>, %m: tensor<16xf32>, %s: f32, %lr: f32, %t: i64)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, f32) {
  %p1, %a1, %m1, %n = train.fused_update %p, %a states(%m) grad_scale %s lr %lr step %t {optimizer = #train.sgd<momentum = 0.9>, skip_nonfinite} : tensor<16xf32>, tensor<16xf32>
  return %p1, %a1, %m1, %n : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, f32
}
