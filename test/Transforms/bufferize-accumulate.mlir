// RUN: accrue-opt %s --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// train.accumulate in a micro-batch loop updates the accumulator buffer in
// place: a view of the arena per gradient (0-d, 1-d and 2-d), an add into
// it, no copy of the arena and no new arena buffer.
// CHECK-LABEL: func @accumulate
// CHECK-SAME: (%[[ACC:[^:]+]]: memref<16xf32{{.*}}>, %[[G0:[^:]+]]: memref<f32{{.*}}>, %[[G1:[^:]+]]: memref<3xf32{{.*}}>, %[[G2:[^:]+]]: memref<3x4xf32{{.*}}>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: %[[LOOP:.+]] = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[A:.+]] = %[[ACC]])
// CHECK: %[[S0:.+]] = memref.subview %[[A]][0] [1] [1]
// CHECK: %[[V0:.+]] = memref.collapse_shape %[[S0]] []
// CHECK: linalg.generic {{.*}} ins(%[[G0]] : {{.*}}) outs(%[[V0]] : {{.*}})
// CHECK: arith.addf
// CHECK: %[[S1:.+]] = memref.subview %[[A]][1] [3] [1]
// CHECK: linalg.generic {{.*}} ins(%[[G1]] : {{.*}}) outs(%[[S1]] : {{.*}})
// CHECK: %[[S2:.+]] = memref.subview %[[A]][4] [12] [1]
// CHECK: %[[V2:.+]] = memref.expand_shape %[[S2]] {{\[}}[0, 1]] output_shape [3, 4]
// CHECK: linalg.generic {{.*}} ins(%[[G2]] : {{.*}}) outs(%[[V2]] : {{.*}})
// CHECK-NOT: memref.copy
// CHECK: scf.yield %[[A]]
// CHECK: return %[[LOOP]]
func.func @accumulate(%acc: tensor<16xf32>, %g0: tensor<f32>, %g1: tensor<3xf32>, %g2: tensor<3x4xf32>, %n: index) -> tensor<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %acc) -> (tensor<16xf32>) {
    %next = train.accumulate %a, %g0, %g1, %g2 {offsets = array<i64: 0, 1, 4>} : tensor<16xf32>, tensor<f32>, tensor<3xf32>, tensor<3x4xf32>
    scf.yield %next : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}

// train.store writes each value over its slice of the arena in place.
// CHECK-LABEL: func @store
// CHECK-SAME: (%[[ARENA:[^:]+]]: memref<32xf32{{.*}}>, %[[V0:[^:]+]]: memref<2xf32{{.*}}>, %[[V1:[^:]+]]: memref<2x2xf32{{.*}}>
// CHECK-NOT: memref.alloc
// CHECK: %[[S0:.+]] = memref.subview %[[ARENA]][0] [2] [1]
// CHECK: linalg.copy ins(%[[V0]] : {{.*}}) outs(%[[S0]] : {{.*}})
// CHECK: %[[S1:.+]] = memref.subview %[[ARENA]][16] [4] [1]
// CHECK: %[[E1:.+]] = memref.expand_shape %[[S1]] {{\[}}[0, 1]] output_shape [2, 2]
// CHECK: linalg.copy ins(%[[V1]] : {{.*}}) outs(%[[E1]] : {{.*}})
// CHECK: return %[[ARENA]]
func.func @store(%arena: tensor<32xf32>, %v0: tensor<2xf32>, %v1: tensor<2x2xf32>) -> tensor<32xf32> {
  %r = train.store %arena, %v0, %v1 {offsets = array<i64: 0, 16>} : tensor<32xf32>, tensor<2xf32>, tensor<2x2xf32>
  return %r : tensor<32xf32>
}
