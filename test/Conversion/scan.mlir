// RUN: accrue-opt %s --convert-nn-to-linalg | FileCheck %s

// A reverse scan over 3 steps that saves its carries. Lowered: one scf.for
// whose iteration arguments are the carry, the stacked output and the
// saved carries; step t = 2 - iv reads its slice of x, stores the carry
// entering it, and writes its output into its slice.

// CHECK-LABEL: func @reverse_scan
// CHECK-SAME: (%[[H0:.+]]: tensor<2x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[C2:.+]] = arith.constant 2 : index
// CHECK: %[[LOOP:.+]]:3 = scf.for %[[IV:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[H:.+]] = %[[H0]], %[[Y:.+]] = %{{.+}}, %[[S:.+]] = %{{.+}}) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK: %[[T:.+]] = arith.subi %[[C2]], %[[IV]] : index
// CHECK: %[[XT:.+]] = tensor.extract_slice %[[X]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1] : tensor<2x3x4xf32> to tensor<2x4xf32>
// CHECK: %[[SAVED:.+]] = tensor.insert_slice %[[H]] into %[[S]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1]
// CHECK: %[[NEXT:.+]] = linalg.generic {{.+}} ins(%[[H]], %[[XT]] :
// CHECK: %[[YT:.+]] = tensor.insert_slice %[[NEXT]] into %[[Y]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1]
// CHECK: scf.yield %[[NEXT]], %[[YT]], %[[SAVED]]
// CHECK: return %[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2

func.func @reverse_scan(%h0: tensor<2x4xf32>, %x: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %r:3 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64, reverse, saves_carries} : (tensor<2x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  ^bb0(%h: tensor<2x4xf32>, %xt: tensor<2x4xf32>):
    %0 = nn.add %h, %xt : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    nn.yield %0, %0 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
