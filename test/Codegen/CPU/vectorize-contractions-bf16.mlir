// RUN: accrue-opt %s -split-input-file -vectorize-contractions="bf16-dot" | FileCheck %s
// RUN: accrue-opt %s -split-input-file -vectorize-contractions | FileCheck %s --check-prefix=OFF
// RUN: accrue-opt %s -split-input-file -vectorize-contractions="bf16-dot parallel" | FileCheck %s --check-prefix=PAR

// A contraction of two bf16 buffers into f32 (its body widens them) runs on
// vdpbf16ps: with 64 rows of A, each block of k packs B's pairs (two rows
// interleaved, blocks of 32 columns) and A's pairs are one 32-bit load
// each, broadcast; two vectors of 16 sums per row of the block.
// Without bf16-dot it keeps its loops.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func @outer_products_packed
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x32x64xbf16>
// CHECK: vector.interleave {{.*}} : vector<16xbf16> -> vector<32xbf16>
// CHECK: vector.load %arg0{{.*}} : memref<64x64xbf16>, vector<2xbf16>
// CHECK: vector.broadcast {{.*}} : i32 to vector<16xi32>
// CHECK-COUNT-16: x86vector.avx512.dot
// CHECK: memref.dealloc
// CHECK-NOT: linalg.generic
// OFF-LABEL: func @outer_products_packed
// OFF: linalg.generic
// With parallel blocks of C, the pairs of each block of k are packed in
// parallel too (a loop over its 32 pairs of rows), before the blocks.
// PAR-LABEL: func @outer_products_packed
// PAR: memref.alloc() {alignment = 64 : i64} : memref<2x32x64xbf16>
// PAR-NOT: scf.for
// PAR: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c32) step (%{{.*}}) {
// PAR: vector.interleave
// PAR: } {accrue.parallel_kernel}
// PAR-NOT: vector.interleave
// PAR: scf.parallel (%{{.*}}, %{{.*}}) = {{.*}} to (%c64{{.*}}, %c64{{.*}}) step (%c8, %c32
// PAR: x86vector.avx512.dot
func.func @outer_products_packed(%a: memref<64x64xbf16>, %b: memref<64x64xbf16>, %c: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<64x64xbf16>, memref<64x64xbf16>) outs(%c : memref<64x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// 8 rows of A, stored [k, m] (a weight gradient's samples-by-features):
// no packing; each block interleaves B's rows and gathers A's pair from
// two rows.
#mapA = affine_map<(m, n, k) -> (k, m)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func @outer_products_in_place
// CHECK-NOT: memref.alloc
// CHECK: vector.interleave
// CHECK: vector.from_elements {{.*}} : vector<2xbf16>
// CHECK: x86vector.avx512.dot
func.func @outer_products_in_place(%a: memref<16x8xbf16>, %b: memref<16x32xbf16>, %c: memref<8x32xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x8xbf16>, memref<16x32xbf16>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A and B contiguous along k: dot products over 32 bf16 (16 pairs) a step,
// one block of k (the block's 16 vectors of sums reduced together once,
// each row of C one vector).
#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (n, k)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func @dot_products
// CHECK: vector.load {{.*}} : memref<4x512xbf16>, vector<32xbf16>
// CHECK: x86vector.avx512.dot {{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK: vector.shuffle
// CHECK: vector.load {{.*}} : memref<4x4xf32>, vector<4xf32>
func.func @dot_products(%a: memref<4x512xbf16>, %b: memref<4x512xbf16>, %c: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x512xbf16>, memref<4x512xbf16>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Odd k: vdpbf16ps takes pairs, so the loops stay.
#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func @odd_k
// CHECK-NOT: x86vector
// CHECK: linalg.generic
func.func @odd_k(%a: memref<8x7xbf16>, %b: memref<7x32xbf16>, %c: memref<8x32xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x7xbf16>, memref<7x32xbf16>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
