// RUN: accrue-opt %s -split-input-file --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// train.all_reduce becomes one call of the runtime's accrue_all_reduce on one
// buffer: the loss sum and the count are stored in the arena's free elements
// at scalars_at, the prefix holding the gradients and them is summed in
// place, the sums are read back and the two elements zeroed again.

// CHECK: func.func private @accrue_all_reduce(memref<?xf32, strided<[?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func @in_place
// CHECK-SAME: (%[[ACC:[^:]+]]: memref<16xf32{{.*}}>, %[[N:[^:]+]]: f32, %[[D:[^:]+]]: f32)
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-DAG: %[[C12:.+]] = arith.constant 12 : index
// CHECK-DAG: %[[C13:.+]] = arith.constant 13 : index
// CHECK: memref.store %[[N]], %[[ACC]][%[[C12]]]
// CHECK: memref.store %[[D]], %[[ACC]][%[[C13]]]
// CHECK: %[[PREFIX:.+]] = memref.subview %[[ACC]][0] [14] [1]
// CHECK: %[[BUF:.+]] = memref.cast %[[PREFIX]]
// CHECK: call @accrue_all_reduce(%[[BUF]])
// CHECK: %[[RN:.+]] = memref.load %[[ACC]][%[[C12]]]
// CHECK: %[[RD:.+]] = memref.load %[[ACC]][%[[C13]]]
// CHECK: memref.store %[[ZERO:.+]], %[[ACC]][%[[C12]]]
// CHECK: memref.store %[[ZERO]], %[[ACC]][%[[C13]]]
// CHECK: %[[LOSS:.+]] = arith.divf %[[RN]], %[[RD]]
// CHECK: return %[[ACC]], %[[LOSS]]
func.func @in_place(%acc: tensor<16xf32>, %n: f32, %d: f32) -> (tensor<16xf32>, f32) {
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 12 : tensor<16xf32>
  %loss = arith.divf %rn, %rd : f32
  return %r, %loss : tensor<16xf32>, f32
}

// -----

// When the local sum is still read afterwards the collective works on a copy.

// CHECK-LABEL: func @local_still_read
// CHECK-SAME: (%[[ACC:[^:]+]]: memref<16xf32{{.*}}>,
// CHECK: %[[COPY:.+]] = memref.alloc() {{.*}} : memref<16xf32>
// CHECK: memref.copy %[[ACC]], %[[COPY]]
// CHECK: %[[PREFIX:.+]] = memref.subview %[[COPY]][0] [16] [1]
// CHECK: %[[BUF:.+]] = memref.cast %[[PREFIX]]
// CHECK: call @accrue_all_reduce(%[[BUF]])
// CHECK: return %[[COPY]], %[[ACC]]
func.func @local_still_read(%acc: tensor<16xf32>, %n: f32, %d: f32) -> (tensor<16xf32>, tensor<16xf32>) {
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 14 : tensor<16xf32>
  return %r, %acc : tensor<16xf32>, tensor<16xf32>
}
