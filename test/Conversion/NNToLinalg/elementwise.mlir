// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s
// Elementwise ops: broadcasting through affine maps.
// (The execution tests in ../execution run the lowered ops against
// numpy.)

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
