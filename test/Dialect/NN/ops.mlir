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

// -----

// CHECK-LABEL: func @more_elementwise
func.func @more_elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<2x3xi64>)
    -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi64>, tensor<2x3xbf16>) {
  // CHECK: nn.abs %{{.*}} : tensor<2x3xi64>
  %0 = nn.abs %i : tensor<2x3xi64>
  %1 = nn.erf %a : tensor<2x3xf32>
  // CHECK: nn.clip %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<2x3xf32>
  %2 = nn.clip %1 {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x3xf32>
  // CHECK: nn.clip %{{.*}} {max = 1.000000e+00 : f64} : tensor<2x3xf32>
  %3 = nn.clip %2 {max = 1.0 : f64} : tensor<2x3xf32>
  %4 = nn.max %3, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = nn.min %4, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.less {{.*}} -> tensor<2x3xi1>
  %6 = nn.less %5, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %7 = nn.equal %0, %i : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi1>
  %8 = nn.and %6, %7 : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: nn.not %{{.*}} : tensor<2x3xi1>
  %9 = nn.not %8 : tensor<2x3xi1>
  // CHECK: nn.cast %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xbf16>
  %10 = nn.cast %5 : (tensor<2x3xf32>) -> tensor<2x3xbf16>
  return %5, %9, %0, %10 : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi64>, tensor<2x3xbf16>
}

// -----

// CHECK-LABEL: func @more_reductions
func.func @more_reductions(%x: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<1x3x4xf32>, tensor<2x1x4xi64>, tensor<2x3xi64>) {
  // CHECK: nn.reduce_max %{{.*}} {axes = array<i64: 1>, keepdims = false}
  %0 = nn.reduce_max %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %1 = nn.reduce_min %x {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
  // CHECK: nn.argmax %{{.*}} {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x1x4xi64>
  %2 = nn.argmax %x {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x1x4xi64>
  // CHECK: nn.argmin %{{.*}} {axis = 2 : i64, keepdims = false, select_last_index = true}
  %3 = nn.argmin %x {axis = 2 : i64, keepdims = false, select_last_index = true} : (tensor<2x3x4xf32>) -> tensor<2x3xi64>
  return %0, %1, %2, %3 : tensor<2x4xf32>, tensor<1x3x4xf32>, tensor<2x1x4xi64>, tensor<2x3xi64>
}

// -----

// CHECK-LABEL: func @data_movement
func.func @data_movement(%x: tensor<2x8x6xf32>, %y: tensor<2x1x6xf32>, %table: tensor<17x4xf32>,
                         %idx: tensor<2x8xi64>) -> (tensor<2x9x6xf32>, tensor<2x4x3xf32>, tensor<2x8x6xf32>,
                                                    tensor<2x8x4xf32>, tensor<17x4xf32>, tensor<2x8x6xf32>) {
  // CHECK: nn.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x8x6xf32>, tensor<2x1x6xf32>) -> tensor<2x9x6xf32>
  %0 = nn.concat %x, %y {axis = 1 : i64} : (tensor<2x8x6xf32>, tensor<2x1x6xf32>) -> tensor<2x9x6xf32>
  // CHECK: nn.slice %{{.*}} {starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 2, 2>} : (tensor<2x8x6xf32>) -> tensor<2x4x3xf32>
  %1 = nn.slice %x {starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 2, 2>} : (tensor<2x8x6xf32>) -> tensor<2x4x3xf32>
  // CHECK: nn.slice_grad %{{.*}} {starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 2, 2>} : (tensor<2x4x3xf32>) -> tensor<2x8x6xf32>
  %2 = nn.slice_grad %1 {starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 2, 2>} : (tensor<2x4x3xf32>) -> tensor<2x8x6xf32>
  // CHECK: nn.gather %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<17x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %3 = nn.gather %table, %idx {axis = 0 : i64} : (tensor<17x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  // CHECK: nn.gather_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x8x4xf32>, tensor<2x8xi64>) -> tensor<17x4xf32>
  %4 = nn.gather_grad %3, %idx {axis = 0 : i64} : (tensor<2x8x4xf32>, tensor<2x8xi64>) -> tensor<17x4xf32>
  // CHECK: nn.trilu %{{.*}} {k = -1 : i64, upper = false} : tensor<2x8x6xf32>
  %5 = nn.trilu %x {upper = false, k = -1 : i64} : tensor<2x8x6xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x9x6xf32>, tensor<2x4x3xf32>, tensor<2x8x6xf32>, tensor<2x8x4xf32>, tensor<17x4xf32>, tensor<2x8x6xf32>
}

// -----

// CHECK-LABEL: func @neural
func.func @neural(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>,
                  %step: tensor<i64>, %base: tensor<i64>) -> (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  // CHECK: nn.conv %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x4x4xf32>
  %0 = nn.conv %x, %w, %b {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x4x4xf32>
  // CHECK: nn.conv_grad_input
  %1 = nn.conv_grad_input %0, %w {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: nn.conv_grad_weight
  %2 = nn.conv_grad_weight %x, %0 {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<2x6x4x4xf32>) -> tensor<6x2x3x3xf32>
  // CHECK: nn.max_pool %{{.*}} {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %3 = nn.max_pool %x {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: nn.max_pool_grad
  %4 = nn.max_pool_grad %x, %3 {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: nn.average_pool %{{.*}} {count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
  %5 = nn.average_pool %x {count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: nn.average_pool_grad
  %6 = nn.average_pool_grad %5 {count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: nn.softmax %{{.*}} {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %7 = nn.softmax %6 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %8 = nn.log_softmax %7 {axis = 1 : i64} : tensor<2x4x8x8xf32>
  // CHECK: nn.dropout %{{.*}}, %{{.*}}, %{{.*}} {ratio = 1.000000e-01 : f64, salt = 3 : i64, seed = 7 : i64} : tensor<2x4x8x8xf32>, tensor<i64>, tensor<i64>
  %9 = nn.dropout %8, %step, %base {ratio = 0.1 : f64, salt = 3 : i64, seed = 7 : i64} : tensor<2x4x8x8xf32>, tensor<i64>, tensor<i64>
  return %1, %2, %4, %9, %7 : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// CHECK-LABEL: func @nll
func.func @nll(%logp: tensor<4x3x5xf32>, %y: tensor<4x5xi64>, %w: tensor<3xf32>) -> (tensor<f32>, tensor<4x3x5xf32>) {
  // CHECK: nn.negative_log_likelihood_loss %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = 0 : i64, reduction = #nn<reduction mean>}
  %0 = nn.negative_log_likelihood_loss %logp, %y, %w {reduction = #nn<reduction mean>, ignore_index = 0} : (tensor<4x3x5xf32>, tensor<4x5xi64>, tensor<3xf32>) -> tensor<f32>
  // CHECK: nn.negative_log_likelihood_grad
  %1 = nn.negative_log_likelihood_grad %0, %logp, %y, %w {reduction = #nn<reduction mean>, ignore_index = 0} : (tensor<f32>, tensor<4x3x5xf32>, tensor<4x5xi64>, tensor<3xf32>) -> tensor<4x3x5xf32>
  return %0, %1 : tensor<f32>, tensor<4x3x5xf32>
}
