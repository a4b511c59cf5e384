// RUN: accrue-opt %s -free-at-last-use | FileCheck %s

// A dealloc at the end of its block moves to just after the last use of
// the buffer or of a view of it (an op with a region counts where it
// sits), and its alloc to just before the first use (%b is not live
// during the loop); a buffer yielded out of a loop keeps its dealloc.

// CHECK-LABEL: func @moved
// CHECK: %[[A:.+]] = memref.alloc() : memref<16xf32>
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[A]] : memref<16xf32>)
// CHECK-NEXT: %[[V:.+]] = memref.expand_shape %[[A]]
// CHECK-NEXT: scf.for
// CHECK: memref.load %[[V]]
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: %[[B:.+]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[B]] : memref<4x4xf32>)
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK: return
func.func @moved(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%one : f32) outs(%a : memref<16xf32>)
  %v = memref.expand_shape %a [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %v[%i, %i] : memref<4x4xf32>
    memref.store %x, %out[] : memref<f32>
  }
  linalg.fill ins(%zero : f32) outs(%b : memref<4x4xf32>)
  memref.dealloc %a : memref<16xf32>
  memref.dealloc %b : memref<4x4xf32>
  return
}

// A loop's result may be the buffer: its uses count too.
// CHECK-LABEL: func @loop_result
// CHECK: scf.for
// CHECK: scf.yield
// CHECK: memref.load
// CHECK-NEXT: memref.dealloc
// CHECK: arith.addf
func.func @loop_result(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%m = %a) -> (memref<16xf32>) {
    scf.yield %m : memref<16xf32>
  }
  %x = memref.load %r[%c0] : memref<16xf32>
  %c2 = arith.constant 2.0 : f32
  %y = arith.addf %x, %c2 : f32
  memref.dealloc %a : memref<16xf32>
  return %y : f32
}

// Yielded by a branch: the dealloc stays where it is.
// CHECK-LABEL: func @escapes
// CHECK: scf.if
// CHECK: memref.load
// CHECK: arith.addf
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: return
func.func @escapes(%c: i1, %other: memref<16xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<16xf32>
  %r = scf.if %c -> (memref<16xf32>) {
    scf.yield %a : memref<16xf32>
  } else {
    scf.yield %other : memref<16xf32>
  }
  %x = memref.load %r[%c0] : memref<16xf32>
  %c2 = arith.constant 2.0 : f32
  %y = arith.addf %x, %c2 : f32
  memref.dealloc %a : memref<16xf32>
  return %y : f32
}
