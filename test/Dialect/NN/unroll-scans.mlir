// RUN: accrue-opt %s --unroll-scans | FileCheck %s --check-prefix=UNROLL

// A reverse scan over 3 steps that saves its carries (the input of
// test/Conversion/scan.mlir, which lowers it to a loop instead).

// Unrolled: step 2 first, its input sliced and reshaped, the outputs
// concatenated in time order.
// UNROLL-LABEL: func @reverse_scan
// UNROLL-SAME: (%[[H0:.+]]: tensor<2x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>)
// UNROLL: %[[S0:.+]] = nn.reshape %[[H0]] : (tensor<2x4xf32>) -> tensor<2x1x4xf32>
// UNROLL: %[[X2:.+]] = nn.slice %[[X]] {starts = array<i64: 0, 2, 0>, steps = array<i64: 1, 1, 1>}
// UNROLL: %[[X2R:.+]] = nn.reshape %[[X2]] : (tensor<2x1x4xf32>) -> tensor<2x4xf32>
// UNROLL: %[[H2:.+]] = nn.add %[[H0]], %[[X2R]]
// UNROLL: %[[Y2:.+]] = nn.reshape %[[H2]]
// UNROLL: nn.slice %[[X]] {starts = array<i64: 0, 1, 0>
// UNROLL: nn.slice %[[X]] {starts = array<i64: 0, 0, 0>
// UNROLL: %[[H0F:.+]] = nn.add
// UNROLL: %[[Y0:.+]] = nn.reshape %[[H0F]]
// UNROLL: %[[Y:.+]] = nn.concat %[[Y0]], %{{.+}}, %[[Y2]] {axis = 1 : i64}
// UNROLL: %[[S:.+]] = nn.concat %{{.+}}, %{{.+}}, %[[S0]] {axis = 1 : i64}
// UNROLL: return %[[H0F]], %[[Y]], %[[S]]
// UNROLL-NOT: nn.scan
func.func @reverse_scan(%h0: tensor<2x4xf32>, %x: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %r:3 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64, reverse, saves_carries} : (tensor<2x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  ^bb0(%h: tensor<2x4xf32>, %xt: tensor<2x4xf32>):
    %0 = nn.add %h, %xt : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    nn.yield %0, %0 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
