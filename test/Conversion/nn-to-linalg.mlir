// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s

// Broadcasting reads the smaller operand through a map that drops the
// leading dimension.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func @broadcast_add
// CHECK: %[[E:.+]] = tensor.empty() : tensor<2x3xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]], iterator_types = ["parallel", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<2x3xf32>, tensor<3xf32>) outs(%[[E]] : tensor<2x3xf32>)
// CHECK: arith.addf
func.func @broadcast_add(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = nn.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A stretched size-1 dimension reads index 0.
// CHECK-DAG: #[[$COL:.+]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func @stretch
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #[[$COL]], #{{.+}}]
// CHECK: arith.cmpf ogt
func.func @stretch(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>) -> tensor<2x3xi1> {
  %0 = nn.greater %a, %b : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// -----

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

// -----

// Mean keeping dims: a sum into zeros, then a division by the count.
// CHECK-DAG: #[[$KEEP:.+]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func @mean
// CHECK: %[[Z:.+]] = linalg.fill
// CHECK: %[[S:.+]] = linalg.generic {indexing_maps = [#{{.+}}, #[[$KEEP]]], iterator_types = ["parallel", "reduction"]} {{.*}} outs(%[[Z]] : tensor<2x1xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[S]] : tensor<2x1xf32>)
// CHECK: arith.constant 3.000000e+00
// CHECK: arith.divf
func.func @mean(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %0 = nn.reduce_mean %x {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

// Reshapes and flattens are views: collapse to 1-D, expand to the target.
// CHECK-LABEL: func @views
// CHECK: %[[F:.+]] = tensor.collapse_shape %{{.+}} {{\[}}[0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK: tensor.expand_shape %[[F]] {{\[}}[0, 1]] output_shape [6, 4] : tensor<24xf32> into tensor<6x4xf32>
// CHECK: linalg.transpose ins(%{{.+}} : tensor<2x3x4xf32>) outs(%{{.+}} : tensor<4x2x3xf32>) permutation = [2, 0, 1]
func.func @views(%x: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<4x2x3xf32>) {
  %0 = nn.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = nn.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0, %1 : tensor<6x4xf32>, tensor<4x2x3xf32>
}

// -----

// Cross-entropy: max and sum-of-exp over classes, a per-item gather of the
// label's score (NaN for a label out of range, 0 when ignored), a sum, and
// a division by the number of counted labels.
// CHECK-LABEL: func @cross_entropy
// CHECK: %[[MAX:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: %[[SUMEXP:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: math.exp
// CHECK: %[[ITEMS:.+]] = linalg.generic {{.*}} ins(%{{.+}}, %[[MAX]], %[[SUMEXP]] : tensor<4xi64>, tensor<4xf32>, tensor<4xf32>)
// CHECK: arith.constant -1 : i64
// CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<4x3xf32>
// CHECK: math.log
// CHECK: arith.constant 0x7FC00000 : f32
// CHECK: %[[SUM:.+]] = linalg.generic {{.*}} ins(%[[ITEMS]] : tensor<4xf32>) outs(%{{.+}} : tensor<f32>)
// CHECK: %[[COUNT:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%[[SUM]], %[[COUNT]] : tensor<f32>, tensor<f32>)
// CHECK: arith.divf
func.func @cross_entropy(%s: tensor<4x3xf32>, %y: tensor<4xi64>) -> tensor<f32> {
  %0 = nn.softmax_cross_entropy_loss %s, %y {reduction = #nn<reduction mean>, ignore_index = -1} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// The gradient of cross-entropy: softmax minus one-hot, per element.
// CHECK-LABEL: func @cross_entropy_grad
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: linalg.index 1
// CHECK: arith.cmpi eq
func.func @cross_entropy_grad(%d: tensor<f32>, %s: tensor<4x3xf32>, %y: tensor<4xi64>) -> tensor<4x3xf32> {
  %0 = nn.softmax_cross_entropy_grad %d, %s, %y {reduction = #nn<reduction sum>} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
