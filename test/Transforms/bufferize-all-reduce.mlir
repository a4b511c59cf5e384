// RUN: accrue-opt %s -split-input-file --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// train.all_reduce becomes one call of the runtime's accrue_all_reduce on
// the arena (reduced in place) and a two-element buffer holding the loss
// sum and the count: one collective for all of them.

// CHECK: func.func private @accrue_all_reduce(memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func @in_place
// CHECK-SAME: (%[[ACC:[^:]+]]: memref<16xf32{{.*}}>, %[[N:[^:]+]]: f32, %[[D:[^:]+]]: f32)
// CHECK-NOT: memref.alloc()
// CHECK-NOT: memref.copy
// CHECK: %[[SCALARS:.+]] = memref.alloca() : memref<2xf32>
// CHECK: memref.store %[[N]], %[[SCALARS]][%[[C0:.+]]]
// CHECK: memref.store %[[D]], %[[SCALARS]][%[[C1:.+]]]
// CHECK: %[[A:.+]] = memref.cast %[[ACC]]
// CHECK: %[[S:.+]] = memref.cast %[[SCALARS]]
// CHECK: call @accrue_all_reduce(%[[A]], %[[S]])
// CHECK: %[[RN:.+]] = memref.load %[[SCALARS]][%[[C0]]]
// CHECK: %[[RD:.+]] = memref.load %[[SCALARS]][%[[C1]]]
// CHECK: %[[LOSS:.+]] = arith.divf %[[RN]], %[[RD]]
// CHECK: return %[[ACC]], %[[LOSS]]
func.func @in_place(%acc: tensor<16xf32>, %n: f32, %d: f32) -> (tensor<16xf32>, f32) {
  %r, %rn, %rd = train.all_reduce %acc, %n, %d : tensor<16xf32>
  %loss = arith.divf %rn, %rd : f32
  return %r, %loss : tensor<16xf32>, f32
}

// -----

// When the local sum is still read afterwards the collective works on a copy.

// CHECK-LABEL: func @local_still_read
// CHECK-SAME: (%[[ACC:[^:]+]]: memref<16xf32{{.*}}>,
// CHECK: %[[COPY:.+]] = memref.alloc() {{.*}} : memref<16xf32>
// CHECK: memref.copy %[[ACC]], %[[COPY]]
// CHECK: %[[A:.+]] = memref.cast %[[COPY]]
// CHECK: call @accrue_all_reduce(%[[A]], %{{.+}})
// CHECK: return %[[COPY]], %[[ACC]]
func.func @local_still_read(%acc: tensor<16xf32>, %n: f32, %d: f32) -> (tensor<16xf32>, tensor<16xf32>) {
  %r, %rn, %rd = train.all_reduce %acc, %n, %d : tensor<16xf32>
  return %r, %acc : tensor<16xf32>, tensor<16xf32>
}
