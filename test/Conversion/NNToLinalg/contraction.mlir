// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s
// Contractions: Gemm, MatMul and batched products as linalg contractions.
// (The execution tests in ../execution run the lowered ops against
// numpy.)

// Gemm with transB (a Linear layer): the bias seeds the output, then one
// contraction with k innermost and reassociation allowed.
// CHECK-DAG: #[[$XMAP:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$WMAP:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$YMAP:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func @linear
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>, %[[W:.+]]: tensor<3x4xf32>, %[[B:.+]]: tensor<3xf32>)
// CHECK: %[[INIT:.+]] = linalg.generic {{.*}} ins(%[[B]] : tensor<3xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[$XMAP]], #[[$WMAP]], #[[$YMAP]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[W]] : tensor<2x4xf32>, tensor<3x4xf32>) outs(%[[INIT]] : tensor<2x3xf32>)
// CHECK: arith.mulf %{{.+}}, %{{.+}} fastmath<reassoc,contract>
// CHECK: arith.addf %{{.+}}, %{{.+}} fastmath<reassoc,contract>
func.func @linear(%x: tensor<2x4xf32>, %w: tensor<3x4xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = nn.gemm %x, %w, %b {transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
// Without transB the loops run (m, k, n): the innermost loop streams rows.
// CHECK-DAG: #[[$A:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$B:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$C:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func @gemm_alpha
// CHECK: linalg.fill
// CHECK: linalg.generic {indexing_maps = [#[[$A]], #[[$B]], #[[$C]]], iterator_types = ["parallel", "reduction", "parallel"]}
// alpha != 1 scales the product afterwards.
// CHECK: arith.constant 5.000000e-01
func.func @gemm_alpha(%a: tensor<2x4xf32>, %b: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %0 = nn.gemm %a, %b {alpha = 0.5 : f32} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
// Batched MatMul broadcasts the rhs over the batch dimension.
// CHECK-DAG: #[[$L:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[$R:.+]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-DAG: #[[$O:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func @batched
// CHECK: linalg.generic {indexing_maps = [#[[$L]], #[[$R]], #[[$O]]], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
func.func @batched(%a: tensor<5x2x4xf32>, %b: tensor<4x3xf32>) -> tensor<5x2x3xf32> {
  %0 = nn.matmul %a, %b : (tensor<5x2x4xf32>, tensor<4x3xf32>) -> tensor<5x2x3xf32>
  return %0 : tensor<5x2x3xf32>
}
