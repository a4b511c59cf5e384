// RUN: accrue-opt %s -split-input-file -expand-strided-copies | FileCheck %s

// A copy between buffers with non-identity layouts (a column of a matrix
// into a strided view) becomes linalg.copy, which lowers to loops: as
// memref.copy it would call memrefCopy, which artifacts do not link.
// CHECK-LABEL: func.func @strided
// CHECK-SAME: (%[[A:.+]]: memref<4x2xf32, strided<[8, 2]>>, %[[B:.+]]: memref<4x2xf32>)
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%[[A]] : memref<4x2xf32, strided<[8, 2]>>) outs(%[[B]] : memref<4x2xf32>)
func.func @strided(%a: memref<4x2xf32, strided<[8, 2]>>, %b: memref<4x2xf32>) {
  memref.copy %a, %b : memref<4x2xf32, strided<[8, 2]>> to memref<4x2xf32>
  return
}

// -----

// Copies between contiguous buffers stay memref.copy (a memcpy).
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<4x2xf32>, %b: memref<4x2xf32>) {
  memref.copy %a, %b : memref<4x2xf32> to memref<4x2xf32>
  return
}
