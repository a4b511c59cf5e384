// RUN: accrue-opt %s -split-input-file -vectorize-contractions | FileCheck %s
// RUN: accrue-opt %s -split-input-file -vectorize-contractions="pack-b" | FileCheck %s --check-prefix=PACKED

// An outer product whose block of C reads B unpacked: each step of k
// prefetches both cache lines (16 floats each) of its row of B in the next
// block of n (32 columns on), or in its own block at the last one.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func @next_block_of_n
// CHECK: scf.for %[[N:[^ ]+]] = %{{[^ ]+}} to %c96 step %c32 {
// CHECK: %[[C32:.+]] = arith.constant 32 : index
// CHECK-NEXT: %[[AHEAD:.+]] = arith.addi %[[N]], %[[C32]] : index
// CHECK-NEXT: %[[C96:.+]] = arith.constant 96 : index
// CHECK-NEXT: %[[INSIDE:.+]] = arith.cmpi slt, %[[AHEAD]], %[[C96]] : index
// CHECK-NEXT: %[[NEXT:.+]] = arith.select %[[INSIDE]], %[[AHEAD]], %[[N]] : index
// CHECK: scf.for %[[K:[^ ]+]] = {{.+}} iter_args
// CHECK-NEXT: vector.load %arg1[%[[K]], %[[N]]] : memref<64x96xf32>, vector<32xf32>
// CHECK-NEXT: memref.prefetch %arg1[%[[K]], %[[NEXT]]], read, locality<3>, data : memref<64x96xf32>
// CHECK-NEXT: %[[C16:.+]] = arith.constant 16 : index
// CHECK-NEXT: %[[SECOND:.+]] = arith.addi %[[NEXT]], %[[C16]] : index
// CHECK-NEXT: memref.prefetch %arg1[%[[K]], %[[SECOND]]], read, locality<3>, data : memref<64x96xf32>
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @next_block_of_n(%a: memref<16x64xf32>, %b: memref<64x96xf32>, %c: memref<16x96xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x64xf32>, memref<64x96xf32>) outs(%c : memref<16x96xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Packed (pack-b, 64 rows or more), the blocks of C read B's packed rows
// from one buffer: nothing to prefetch. Unpacked, the same product
// prefetches.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// PACKED-LABEL: func @packed
// PACKED-NOT: memref.prefetch
// PACKED: return
// CHECK-LABEL: func @packed
// CHECK: memref.prefetch
func.func @packed(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A dot-product kernel (B contiguous along k: each row of B one stream
// the prefetchers follow) prefetches nothing.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapBt = affine_map<(m, n, k) -> (n, k)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func @dot
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @dot(%a: memref<16x64xf32>, %b: memref<32x64xf32>, %c: memref<16x32xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapBt, #mapC],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x64xf32>, memref<32x64xf32>) outs(%c : memref<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
