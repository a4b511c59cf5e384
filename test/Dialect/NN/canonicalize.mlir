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

// -----

// The adjoint of a [4, 10] tensor read by three slices along axis 1 (the
// VJPs of the slices of an LSTM's gates): disjoint placed slices summed
// become one concat, in start order, zeros in the gap [5, 7).
// CHECK-LABEL: func @sum_of_placed_slices
// CHECK-SAME: (%[[A:.+]]: tensor<4x3xf32>, %[[B:.+]]: tensor<4x2xf32>, %[[C:.+]]: tensor<4x2xf32>)
// CHECK-NEXT: %[[Z:.+]] = nn.constant dense<0.000000e+00> : tensor<4x2xf32>
// CHECK-NEXT: %[[R:.+]] = nn.concat %[[B]], %[[A]], %[[Z]], %[[C]] {axis = 1 : i64} : (tensor<4x2xf32>, tensor<4x3xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x9xf32>
// CHECK-NEXT: return %[[R]]
func.func @sum_of_placed_slices(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>, %c: tensor<4x2xf32>) -> tensor<4x9xf32> {
  %0 = nn.slice_grad %a {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<4x9xf32>
  %1 = nn.slice_grad %c {starts = array<i64: 0, 7>, steps = array<i64: 1, 1>} : (tensor<4x2xf32>) -> tensor<4x9xf32>
  %2 = nn.add %0, %1 : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  %3 = nn.slice_grad %b {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x2xf32>) -> tensor<4x9xf32>
  %4 = nn.add %2, %3 : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  return %4 : tensor<4x9xf32>
}

// -----

// Overlapping slices add up, and slices along two axes are no concat:
// both stay sums.
// CHECK-LABEL: func @sums_of_placed_slices_kept
// CHECK-NOT: nn.concat
// CHECK: return
func.func @sums_of_placed_slices_kept(%a: tensor<4x3xf32>, %b: tensor<3x9xf32>) -> (tensor<4x9xf32>, tensor<4x9xf32>) {
  %0 = nn.slice_grad %a {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<4x9xf32>
  %1 = nn.slice_grad %a {starts = array<i64: 0, 4>, steps = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<4x9xf32>
  %2 = nn.add %0, %1 : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  %3 = nn.slice_grad %b {starts = array<i64: 1, 0>, steps = array<i64: 1, 1>} : (tensor<3x9xf32>) -> tensor<4x9xf32>
  %4 = nn.add %0, %3 : (tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  return %2, %4 : tensor<4x9xf32>, tensor<4x9xf32>
}
