// RUN: accrue-opt %s -split-input-file -accumulate-in-place=fold-zero-fills | FileCheck %s --check-prefix=FOLD
// RUN: accrue-opt %s -split-input-file -accumulate-in-place=fold-zero-fills -vectorize-contractions | FileCheck %s --check-prefix=KERNEL
// RUN: accrue-opt %s -split-input-file -accumulate-in-place | FileCheck %s --check-prefix=OFF

// A contraction into a buffer zero-filled just before: the fill is folded
// into it (accrue.zero_init), and its vector kernel starts the first k
// block from zeros instead of loading C. Without the option nothing
// changes.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// FOLD-LABEL: func @fold
// FOLD-NOT: linalg.fill
// FOLD: linalg.generic
// FOLD: accrue.zero_init
// KERNEL-LABEL: func @fold
// KERNEL-NOT: linalg.fill
// KERNEL: %[[FIRST:.+]] = arith.cmpi eq
// KERNEL: scf.if %[[FIRST]] -> (vector<32xf32>
// KERNEL: arith.constant dense<0.000000e+00> : vector<32xf32>
// KERNEL: } else {
// KERNEL: vector.load
// KERNEL: vector.fma
// OFF-LABEL: func @fold
// OFF: linalg.fill
// OFF-NOT: accrue.zero_init
func.func @fold(%a: memref<16x64xf32>, %b: memref<64x32xf32>, %c: memref<16x32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<16x32xf32>)
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x64xf32>, memref<64x32xf32>) outs(%c : memref<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Something reads the buffer between the fill and the contraction: the
// fill stays.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// FOLD-LABEL: func @read_between
// FOLD: linalg.fill
// FOLD-NOT: accrue.zero_init
func.func @read_between(%a: memref<16x64xf32>, %b: memref<64x32xf32>, %c: memref<16x32xf32>, %d: memref<16x32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<16x32xf32>)
  memref.copy %c, %d : memref<16x32xf32> to memref<16x32xf32>
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x64xf32>, memref<64x32xf32>) outs(%c : memref<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A contraction no vector kernel takes (A contiguous along m, B along k)
// gets its fill back before its loops.

#mapA = affine_map<(m, n, k) -> (k, m)>
#mapB = affine_map<(m, n, k) -> (n, k)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// FOLD-LABEL: func @scalar
// FOLD: accrue.zero_init
// KERNEL-LABEL: func @scalar
// KERNEL: linalg.fill
// KERNEL-NEXT: linalg.generic
// KERNEL-NOT: accrue.zero_init
// KERNEL: return
func.func @scalar(%a: memref<64x16xf32>, %b: memref<32x64xf32>, %c: memref<16x32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<16x32xf32>)
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<64x16xf32>, memref<32x64xf32>) outs(%c : memref<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
