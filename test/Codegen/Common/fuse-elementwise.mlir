// RUN: accrue-opt %s -split-input-file -fuse-elementwise | FileCheck %s

// A chain of elementwise ops with single uses becomes one generic.
// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK-NEXT: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: return

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// A producer the contraction reads through a map that leaves out one of
// its loops (n) stays apart: fused, tanh would run once per (m, n, k), and
// the consumer would no longer be a plain contraction (upstream's
// linalg-fuse-elementwise-ops fuses it).
// CHECK-LABEL: func.func @into_contraction
// CHECK: %[[T:.+]] = linalg.generic {{.*}} ins(%arg0
// CHECK: math.tanh
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[T]], %arg1
// CHECK-NOT: math.tanh
// CHECK: return

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @into_contraction(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %acc: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%acc : tensor<4x3xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %0 = arith.mulf %l, %r : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<4x3xf32>
  return %c : tensor<4x3xf32>
}

// -----

// A producer with another use is not recomputed in its consumer.
// CHECK-LABEL: func.func @two_uses
// CHECK: %[[E:.+]] = linalg.generic
// CHECK: math.exp
// CHECK: %[[S:.+]] = linalg.generic {{.*}} ins(%[[E]]
// CHECK-NOT: math.exp
// CHECK: return %[[E]], %[[S]]

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @two_uses(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}
