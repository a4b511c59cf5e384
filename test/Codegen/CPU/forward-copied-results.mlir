// RUN: accrue-opt %s -split-input-file -forward-copied-results | FileCheck %s

// An op computes two results into temporaries that are then copied into
// side-by-side slices of one row of a stack (an LSTM cell's backward, its
// gate gradients): it computes them there, the copies and temporaries go
// (its input, an argument, and the stack, allocated here, are apart).
// The slices' subviews move before the op. The op writes the first slice
// of the same row too: apart from the others, so that does not block them.

#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func @concatenated
// CHECK-SAME: (%[[A:.+]]: memref<2x16xf32>, %[[T:.+]]: index)
// CHECK: %[[STACK:.+]] = memref.alloc() : memref<2x4x48xf32>
// CHECK-NOT: memref.alloc
// CHECK: %[[ROW:.+]] = memref.subview %[[STACK]][0, %[[T]], 0] [2, 1, 48]
// CHECK-DAG: %[[S0:.+]] = memref.subview %[[ROW]][0, 0] [2, 16]
// CHECK-DAG: %[[S1:.+]] = memref.subview %[[ROW]][0, 16] [2, 16]
// CHECK-DAG: %[[S2:.+]] = memref.subview %[[ROW]][0, 32] [2, 16]
// CHECK: linalg.generic {{.*}} ins(%[[A]] : memref<2x16xf32>) outs(%[[S0]], %[[S1]], %[[S2]] :
// CHECK-NOT: memref.copy
// CHECK: return
func.func @concatenated(%a: memref<2x16xf32>, %t: index) -> memref<2x4x48xf32> {
  %stack = memref.alloc() : memref<2x4x48xf32>
  %row = memref.subview %stack[0, %t, 0] [2, 1, 48] [1, 1, 1] : memref<2x4x48xf32> to memref<2x48xf32, strided<[192, 1], offset: ?>>
  %s0 = memref.subview %row[0, 0] [2, 16] [1, 1] : memref<2x48xf32, strided<[192, 1], offset: ?>> to memref<2x16xf32, strided<[192, 1], offset: ?>>
  %t1 = memref.alloc() : memref<2x16xf32>
  %t2 = memref.alloc() : memref<2x16xf32>
  linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<2x16xf32>) outs(%s0, %t1, %t2 : memref<2x16xf32, strided<[192, 1], offset: ?>>, memref<2x16xf32>, memref<2x16xf32>) {
  ^bb0(%x: f32, %o0: f32, %o1: f32, %o2: f32):
    %p = arith.mulf %x, %x : f32
    %s = arith.addf %x, %x : f32
    linalg.yield %x, %p, %s : f32, f32, f32
  }
  %s1 = memref.subview %row[0, 16] [2, 16] [1, 1] : memref<2x48xf32, strided<[192, 1], offset: ?>> to memref<2x16xf32, strided<[192, 1], offset: ?>>
  memref.copy %t1, %s1 : memref<2x16xf32> to memref<2x16xf32, strided<[192, 1], offset: ?>>
  %s2 = memref.subview %row[0, 32] [2, 16] [1, 1] : memref<2x48xf32, strided<[192, 1], offset: ?>> to memref<2x16xf32, strided<[192, 1], offset: ?>>
  memref.copy %t2, %s2 : memref<2x16xf32> to memref<2x16xf32, strided<[192, 1], offset: ?>>
  return %stack : memref<2x4x48xf32>
}

// -----

// The op reads the buffer the copy writes (an elementwise op that reads
// one column block and would write the next, earlier than the copy did):
// the copy stays.
#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func @reads_destination
// CHECK: memref.alloc
// CHECK: linalg.generic
// CHECK: memref.copy
func.func @reads_destination(%d: memref<2x32xf32>) {
  %in = memref.subview %d[0, 0] [2, 16] [1, 1] : memref<2x32xf32> to memref<2x16xf32, strided<[32, 1]>>
  %out = memref.subview %d[0, 8] [2, 16] [1, 1] : memref<2x32xf32> to memref<2x16xf32, strided<[32, 1], offset: 8>>
  %t = memref.alloc() : memref<2x16xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%in : memref<2x16xf32, strided<[32, 1]>>) outs(%t : memref<2x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %p = arith.mulf %x, %x : f32
    linalg.yield %p : f32
  }
  memref.copy %t, %out : memref<2x16xf32> to memref<2x16xf32, strided<[32, 1], offset: 8>>
  return
}

// -----

// Something in between writes memory (perhaps the destination): the copy
// stays. So does one whose temporary another op reads too. (The ops'
// inputs are allocated here, apart from the destinations.)
#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func @in_between
// CHECK: linalg.generic
// CHECK: memref.store
// CHECK: memref.copy
// CHECK-LABEL: func @read_elsewhere
// CHECK: linalg.generic
// CHECK: memref.copy
// CHECK: linalg.generic
func.func @in_between(%d: memref<2x16xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<2x16xf32>
  %t = memref.alloc() : memref<2x16xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<2x16xf32>) outs(%t : memref<2x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %p = arith.mulf %x, %x : f32
    linalg.yield %p : f32
  }
  memref.store %v, %d[%c0, %c0] : memref<2x16xf32>
  memref.copy %t, %d : memref<2x16xf32> to memref<2x16xf32>
  return
}
func.func @read_elsewhere(%d: memref<2x16xf32>, %e: memref<2x16xf32>) {
  %a = memref.alloc() : memref<2x16xf32>
  %t = memref.alloc() : memref<2x16xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<2x16xf32>) outs(%t : memref<2x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %p = arith.mulf %x, %x : f32
    linalg.yield %p : f32
  }
  memref.copy %t, %d : memref<2x16xf32> to memref<2x16xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<2x16xf32>) outs(%e : memref<2x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}
