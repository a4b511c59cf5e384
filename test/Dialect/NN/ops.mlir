// RUN: accrue-opt %s -split-input-file | accrue-opt | FileCheck %s
// Round trip: every op prints in a form that parses back.

// CHECK-LABEL: func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: nn.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = nn.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = nn.mul %1, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = nn.div %2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = nn.pow %3, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.relu %{{.*}} : tensor<2x3xf32>
  %5 = nn.relu %4 : tensor<2x3xf32>
  %6 = nn.sigmoid %5 : tensor<2x3xf32>
  %7 = nn.tanh %6 : tensor<2x3xf32>
  %8 = nn.neg %7 : tensor<2x3xf32>
  %9 = nn.exp %8 : tensor<2x3xf32>
  %10 = nn.log %9 : tensor<2x3xf32>
  %11 = nn.sqrt %10 : tensor<2x3xf32>
  // CHECK: nn.greater %{{.*}} -> tensor<2x3xi1>
  %12 = nn.greater %11, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: nn.where
  %13 = nn.where %12, %11, %a : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %14 = nn.identity %13 : tensor<2x3xf32>
  return %14 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func @contractions
func.func @contractions(%a: tensor<4x8xf32>, %b: tensor<3x8xf32>, %c: tensor<3xf32>,
                        %x: tensor<2x5x4x8xf32>, %y: tensor<8x6xf32>) -> (tensor<4x3xf32>, tensor<2x5x4x6xf32>) {
  // CHECK: nn.gemm %{{.*}}, %{{.*}}, %{{.*}} {alpha = 2.000000e+00 : f32, transB = true}
  %0 = nn.gemm %a, %b, %c {transB = true, alpha = 2.0 : f32} : (tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  // CHECK: nn.matmul {{.*}} -> tensor<2x5x4x6xf32>
  %1 = nn.matmul %x, %y : (tensor<2x5x4x8xf32>, tensor<8x6xf32>) -> tensor<2x5x4x6xf32>
  return %0, %1 : tensor<4x3xf32>, tensor<2x5x4x6xf32>
}

// -----

// CHECK-LABEL: func @reductions_and_shapes
func.func @reductions_and_shapes(%x: tensor<2x3x4xf32>) -> (tensor<2x1x4xf32>, tensor<f32>, tensor<6x4xf32>, tensor<2x12xf32>, tensor<4x2x3xf32>, tensor<5x2x3x4xf32>) {
  // CHECK: nn.reduce_sum %{{.*}} {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  %0 = nn.reduce_sum %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  // CHECK: nn.reduce_mean %{{.*}} {axes = array<i64: 0, 1, 2>, keepdims = false}
  %1 = nn.reduce_mean %x {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  %2 = nn.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: nn.flatten %{{.*}} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
  %3 = nn.flatten %x : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
  // CHECK: nn.transpose %{{.*}} {perm = array<i64: 2, 0, 1>}
  %4 = nn.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %5 = nn.expand %x : (tensor<2x3x4xf32>) -> tensor<5x2x3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x1x4xf32>, tensor<f32>, tensor<6x4xf32>, tensor<2x12xf32>, tensor<4x2x3xf32>, tensor<5x2x3x4xf32>
}

// -----

// CHECK-LABEL: func @losses
func.func @losses(%s: tensor<4x3xf32>, %y: tensor<4xi64>, %w: tensor<3xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<4x3xf32>, tensor<f32>) {
  // CHECK: nn.softmax_cross_entropy_loss %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = #nn<reduction mean>}
  %0 = nn.softmax_cross_entropy_loss %s, %y, %w {reduction = #nn<reduction mean>, ignore_index = -100} : (tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>) -> tensor<f32>
  // CHECK: reduction = #nn<reduction none>{{.*}}-> tensor<4xf32>
  %1 = nn.softmax_cross_entropy_loss %s, %y {reduction = #nn<reduction none>} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<4xf32>
  // CHECK: nn.softmax_cross_entropy_grad
  %2 = nn.softmax_cross_entropy_grad %1, %s, %y {reduction = #nn<reduction none>} : (tensor<4xf32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  // CHECK: nn.class_weight_sum %{{.*}}, %{{.*}} {ignore_index = 1 : i64}
  %3 = nn.class_weight_sum %y, %w {ignore_index = 1} : (tensor<4xi64>, tensor<3xf32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<4xf32>, tensor<4x3xf32>, tensor<f32>
}
