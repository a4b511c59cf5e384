// RUN: accrue-opt %s -duplicate-shared-fills | FileCheck %s

// Two contractions start from one (CSE'd) zero tensor: each gets a fill of
// its own, right before it, so that neither needs a copy when bufferized in
// place; the shared fill goes.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func @shared
// CHECK: %[[Z:.+]] = arith.constant 0.0
// CHECK: linalg.transpose
// CHECK-NEXT: %[[E1:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[F1:.+]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E1]] : tensor<4x8xf32>)
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[F1]] : tensor<4x8xf32>)
// CHECK: %[[E2:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[F2:.+]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E2]] : tensor<4x8xf32>)
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[F2]] : tensor<4x8xf32>)
// CHECK-NOT: linalg.fill
// CHECK-NOT: tensor.empty() : tensor<4x8xf32>
func.func @shared(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %c: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %et = tensor.empty() : tensor<8x16xf32>
  %bt = linalg.transpose ins(%b : tensor<16x8xf32>) outs(%et : tensor<8x16xf32>) permutation = [1, 0]
  %0 = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x16xf32>, tensor<16x8xf32>) outs(%z : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %c : tensor<4x16xf32>, tensor<16x8xf32>) outs(%z : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %0, %1, %bt : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x16xf32>
}

// A fill that is also read keeps its original for the reader; the
// destinations get their own.
// CHECK-LABEL: func @read_too
// CHECK: %[[Z:.+]] = arith.constant 1.0
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[F:.+]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<4x8xf32>)
// CHECK: %[[E1:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[F1:.+]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E1]] : tensor<4x8xf32>)
// CHECK-NEXT: %[[S:.+]] = linalg.generic {{.*}} ins(%[[F]] : tensor<4x8xf32>) outs(%[[F1]] : tensor<4x8xf32>)
// CHECK: return %[[S]], %[[F]]
#id = affine_map<(m, n) -> (m, n)>
func.func @read_too() -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%f : tensor<4x8xf32>) outs(%f : tensor<4x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %0, %f : tensor<4x8xf32>, tensor<4x8xf32>
}

// A tensor.empty two results of one op start from (CSE merged theirs): each
// init gets its own, so that bufferized, the results get buffers of their
// own rather than one and a copy, or one reused after being copied out.
// CHECK-LABEL: func @shared_empty
// CHECK: %[[E1:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[E2:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[E2]], %[[E1]] : tensor<4x8xf32>, tensor<4x8xf32>)
#ij = affine_map<(i, j) -> (i, j)>
func.func @shared_empty(%a: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %0:2 = linalg.generic {indexing_maps = [#ij, #ij, #ij], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e, %e : tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%x: f32, %o1: f32, %o2: f32):
    %s = arith.addf %x, %x : f32
    %p = arith.mulf %x, %x : f32
    linalg.yield %s, %p : f32, f32
  } -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>
}
