// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s
// Shape ops as views.
// (The execution tests in ../execution run the lowered ops against
// numpy.)

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
