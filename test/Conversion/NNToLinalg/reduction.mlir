// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s
// Reductions.
// (The execution tests in ../execution run the lowered ops against
// numpy.)

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
