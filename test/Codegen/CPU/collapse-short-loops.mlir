// RUN: accrue-opt %s -split-input-file -collapse-short-loops | FileCheck %s

// A bias gradient summed over a 2x2 pooling window's split dimensions:
// innermost loop 2. The four trailing reduction loops, which the input
// reads contiguously, merge into one loop over H W = 1024.
// CHECK-DAG: #[[$IN:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$OUT:.+]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-LABEL: func @bias_gradient
// CHECK: %[[C:.+]] = tensor.collapse_shape %{{.+}} {{\[}}[0], [1], [2, 3, 4, 5]] : tensor<16x32x16x2x16x2xf32> into tensor<16x32x1024xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$OUT]]], iterator_types = ["reduction", "parallel", "reduction"]} ins(%[[C]] : tensor<16x32x1024xf32>)
func.func @bias_gradient(%dy: tensor<16x32x16x2x16x2xf32>, %acc: tensor<32xf32>) -> tensor<32xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d1)>], iterator_types = ["reduction", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%dy : tensor<16x32x16x2x16x2xf32>) outs(%acc : tensor<32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.addf %in, %out : f32
    linalg.yield %1 : f32
  } -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// -----

// An elementwise op over the same split shape whose second operand reads
// the window's position (d0, d1, d2, d4): only loops every operand reads
// contiguously may merge, and d5 cannot merge with d4 (the second operand
// reads d4 without d5): nothing changes.
// CHECK-LABEL: func @window_spread
// CHECK-NOT: tensor.collapse_shape
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]
func.func @window_spread(%x: tensor<16x32x16x2x16x2xf32>, %w: tensor<16x32x16x16xf32>) -> tensor<16x32x16x2x16x2xf32> {
  %e = tensor.empty() : tensor<16x32x16x2x16x2xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x, %w : tensor<16x32x16x2x16x2xf32>, tensor<16x32x16x16xf32>) outs(%e : tensor<16x32x16x2x16x2xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %1 = arith.mulf %a, %b : f32
    linalg.yield %1 : f32
  } -> tensor<16x32x16x2x16x2xf32>
  return %0 : tensor<16x32x16x2x16x2xf32>
}

// -----

// A contraction is left to vectorize-contractions, an innermost loop of 8
// or more already vectorizes, and a small op keeps its loops.
// CHECK-LABEL: func @untouched
// CHECK-NOT: tensor.collapse_shape
func.func @untouched(%a: tensor<4x2xf32>, %b: tensor<2x2xf32>, %c: tensor<4x2xf32>, %x: tensor<512x4x8xf32>, %small: tensor<2x4x2x2xf32>, %acc: tensor<4xf32>) -> (tensor<4x2xf32>, tensor<4xf32>) {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<4x2xf32>, tensor<2x2xf32>) outs(%c : tensor<4x2xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %1 = arith.mulf %p, %q : f32
    %2 = arith.addf %out, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<4x2xf32>
  %3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d1)>], iterator_types = ["reduction", "parallel", "reduction"]} ins(%x : tensor<512x4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %4 = arith.addf %in, %out : f32
    linalg.yield %4 : f32
  } -> tensor<4xf32>
  %5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1)>], iterator_types = ["reduction", "parallel", "reduction", "reduction"]} ins(%small : tensor<2x4x2x2xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %6 = arith.addf %in, %out : f32
    linalg.yield %6 : f32
  } -> tensor<4xf32>
  return %0, %3 : tensor<4x2xf32>, tensor<4xf32>
}
