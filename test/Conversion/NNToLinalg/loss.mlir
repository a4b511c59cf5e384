// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s
// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg=decode-labels-once | FileCheck %s --check-prefix=ONCE
// Classification losses and their gradients.
// (The execution tests in ../execution run the lowered ops against
// numpy.)

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
// With decode-labels-once (the CPU pipeline), each item's label is decoded
// once, into an i32 class (-1 where it does not count), which the
// elementwise gradient compares with its class index in i32: vectorized,
// the loop then runs as many classes per instruction as it has f32 lanes.
// ONCE-LABEL: func @cross_entropy_grad
// ONCE: %[[CLASSES:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<4xi64>) outs(%{{.+}} : tensor<4xi32>)
// ONCE: arith.constant -1 : i32
// ONCE: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.+}}, %[[CLASSES]], %{{.+}}, %{{.+}}, %{{.+}} : tensor<4x3xf32>, tensor<4xi32>,
// ONCE-NOT: i64
// ONCE: linalg.index 1
// ONCE-NEXT: arith.index_cast %{{.+}} : index to i32
// ONCE-NEXT: arith.cmpi eq, %{{.+}}, %{{.+}} : i32
// ONCE: linalg.yield
func.func @cross_entropy_grad(%d: tensor<f32>, %s: tensor<4x3xf32>, %y: tensor<4xi64>) -> tensor<4x3xf32> {
  %0 = nn.softmax_cross_entropy_grad %d, %s, %y {reduction = #nn<reduction sum>} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
