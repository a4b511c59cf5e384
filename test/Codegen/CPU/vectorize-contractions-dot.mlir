// RUN: accrue-opt %s -split-input-file -vectorize-contractions | FileCheck %s

// A and B contiguous along k: a 4 x 4 block of C keeps 16 vectors of 16
// partial sums, reduced together after the loop over k: four levels of
// shuffles pair the vectors and add the low half of each group of lanes
// to its high half (16 -> 8 vectors of two groups of 8, ..., 1 vector of
// 16 sums), vector i's sum in lane i. C being contiguous along n, each row
// of the block is one vector<4> added to C.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (n, k)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func @block_rows
// CHECK: %[[SUMS:.*]]:16 = scf.for
// CHECK: %[[LO:.*]] = vector.shuffle %[[SUMS]]#0, %[[SUMS]]#1 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]
// CHECK: %[[HI:.*]] = vector.shuffle %[[SUMS]]#0, %[[SUMS]]#1 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31]
// CHECK: arith.addf %[[LO]], %[[HI]] : vector<16xf32>
// CHECK-COUNT-7: arith.addf {{.*}} : vector<16xf32>
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
// CHECK: vector.shuffle {{.*}} [0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29]
// CHECK: vector.shuffle {{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
// CHECK: %[[ODD:.*]] = vector.shuffle {{.*}} [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31]
// CHECK: %[[ALL:.*]] = arith.addf %{{.*}}, %[[ODD]] : vector<16xf32>
// CHECK-NOT: vector.reduction
// CHECK: %[[OLD:.*]] = vector.load %{{.*}} : memref<8x8xf32>, vector<4xf32>
// CHECK: %[[ROW:.*]] = vector.extract_strided_slice %[[ALL]] {offsets = [0], sizes = [4], strides = [1]}
// CHECK: %[[NEW:.*]] = arith.addf %[[ROW]], %[[OLD]] : vector<4xf32>
// CHECK: vector.store %[[NEW]], %{{.*}} : memref<8x8xf32>, vector<4xf32>
// CHECK: vector.extract_strided_slice %[[ALL]] {offsets = [4], sizes = [4], strides = [1]}
// CHECK: vector.extract_strided_slice %[[ALL]] {offsets = [8], sizes = [4], strides = [1]}
// CHECK: vector.extract_strided_slice %[[ALL]] {offsets = [12], sizes = [4], strides = [1]}
func.func @block_rows(%a: memref<8x64xf32>, %b: memref<8x64xf32>, %c: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x64xf32>, memref<8x64xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// C with a stride along n (every other column): the 16 sums are still
// reduced together, then added to C one element at a time.
#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (n, k)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func @block_elements
// CHECK: vector.shuffle
// CHECK-NOT: vector.reduction
// CHECK: %[[OLD:.*]] = memref.load
// CHECK: %[[LANE:.*]] = vector.extract %{{.*}}[0] : f32 from vector<16xf32>
// CHECK: arith.addf %[[LANE]], %[[OLD]] : f32
// CHECK: vector.extract %{{.*}}[15] : f32 from vector<16xf32>
func.func @block_elements(%a: memref<4x64xf32>, %b: memref<4x64xf32>, %c: memref<4x4xf32, strided<[8, 2]>>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x64xf32>, memref<4x64xf32>) outs(%c : memref<4x4xf32, strided<[8, 2]>>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A block of the remainder of m (5 rows: a block of 4, then one of 1 x 4)
// holds 4 vectors: each is reduced alone, reassociated (the same tree of
// halves).
#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (n, k)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func @remainder
// CHECK: vector.shuffle
// CHECK: vector.store {{.*}} : memref<5x4xf32>, vector<4xf32>
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-4: vector.reduction <add>, %{{.*}}, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
func.func @remainder(%a: memref<5x64xf32>, %b: memref<4x64xf32>, %c: memref<5x4xf32>) {
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<5x64xf32>, memref<4x64xf32>) outs(%c : memref<5x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
