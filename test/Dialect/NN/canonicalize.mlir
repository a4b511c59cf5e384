// RUN: accrue-opt %s -split-input-file -canonicalize | FileCheck %s

// CHECK-LABEL: func @fold_identity_and_noop_shapes
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]]
func.func @fold_identity_and_noop_shapes(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = nn.identity %x : tensor<2x3xf32>
  %1 = nn.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = nn.expand %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func @fold_reshape_chain
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[R:.+]] = nn.reshape %[[X]] : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT: return %[[R]]
func.func @fold_reshape_chain(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = nn.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = nn.reshape %0 : (tensor<3x2xf32>) -> tensor<6xf32>
  return %1 : tensor<6xf32>
}

// -----

// CHECK-LABEL: func @fold_constant_shapes
// CHECK-DAG: nn.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: nn.constant dense<5.000000e-01> : tensor<3x2xf32>
func.func @fold_constant_shapes() -> (tensor<2x2xf32>, tensor<3x2xf32>) {
  %0 = nn.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %1 = nn.reshape %0 : (tensor<4xf32>) -> tensor<2x2xf32>
  %2 = nn.constant dense<0.5> : tensor<2xf32>
  %3 = nn.expand %2 : (tensor<2xf32>) -> tensor<3x2xf32>
  return %1, %3 : tensor<2x2xf32>, tensor<3x2xf32>
}
