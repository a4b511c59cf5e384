// RUN: accrue-opt %s -split-input-file -train-microbatch | FileCheck %s
// RUN: accrue-opt %s -split-input-file -train-microbatch=steps=4 | FileCheck %s --check-prefix=STATIC

// ReduceMean of a per-sample loss: N = ReduceSum, D = the element count of
// one micro-batch; N, D and the gradient of N are summed over the loop and
// divided once by the total D.

func.func private @fwd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-LABEL: func.func private @fwd_split
// CHECK: %[[P:.+]] = nn.mul
// CHECK: %[[N:.+]] = nn.reduce_sum %[[P]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK: %[[D:.+]] = nn.constant dense<6.000000e+00> : tensor<f32>
// CHECK: return %[[N]], %[[D]] : tensor<f32>, tensor<f32>

// CHECK-LABEL: func @step
// CHECK-SAME: (%[[W:.+]]: tensor<3xf32>, %[[X:.+]]: tensor<?x3xf32>, %[[ACC:.+]]: tensor<16xf32>)
// CHECK: %[[ROWS:.+]] = tensor.dim %[[X]], %{{.+}} : tensor<?x3xf32>
// CHECK: %[[K:.+]] = arith.divui %[[ROWS]], %{{.+}} : index
// CHECK: %[[LOOP:.+]]:3 = scf.for %[[I:.+]] = %{{.+}} to %[[K]] step %{{.+}} iter_args(%[[A:.+]] = %[[ACC]], %[[NS:.+]] = %{{.+}}, %[[DS:.+]] = %{{.+}}) -> (tensor<16xf32>, f32, f32)
// CHECK:   %[[OFF:.+]] = arith.muli %[[I]], %{{.+}} : index
// CHECK:   %[[XS:.+]] = tensor.extract_slice %[[X]][%[[OFF]], 0] [2, 3] [1, 1] : tensor<?x3xf32> to tensor<2x3xf32>
// CHECK:   %[[VG:.+]]:3 = train.value_and_grad @fwd_split(%[[W]], %[[XS]]) {wrt = array<i64: 0>}
// CHECK:   %[[A2:.+]] = train.accumulate %[[A]], %[[VG]]#2 {offsets = array<i64: 0>}
// CHECK:   %[[N:.+]] = tensor.extract %[[VG]]#0[]
// CHECK:   %[[D:.+]] = tensor.extract %[[VG]]#1[]
// CHECK:   %[[NS2:.+]] = arith.addf %[[NS]], %[[N]] : f32
// CHECK:   %[[DS2:.+]] = arith.addf %[[DS]], %[[D]] : f32
// CHECK:   scf.yield %[[A2]], %[[NS2]], %[[DS2]]
// CHECK: %[[LOSS:.+]] = arith.divf %[[LOOP]]#1, %[[LOOP]]#2 : f32
// CHECK: %[[INV:.+]] = arith.divf %{{.+}}, %[[LOOP]]#2 : f32
// CHECK: %[[G:.+]] = train.scale %[[LOOP]]#0, %[[INV]]
// CHECK: %[[LT:.+]] = tensor.from_elements %[[LOSS]] : tensor<f32>
// The reset of the accumulator keeps the raw loop result.
// CHECK: linalg.fill ins(%{{.+}} : f32) outs(%[[LOOP]]#0 : tensor<16xf32>)
// CHECK: return %[[LT]], %[[G]]

// With a fixed number of steps the trip count is a constant.
// STATIC-LABEL: func @step
// STATIC: %[[C4:.+]] = arith.constant 4 : index
// STATIC: scf.for %{{.+}} = %{{.+}} to %[[C4]]
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @fwd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  %zero = arith.constant 0.0 : f32
  %reset = linalg.fill ins(%zero : f32) outs(%a : tensor<16xf32>) -> tensor<16xf32>
  return %l, %a, %reset : tensor<f32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// SoftmaxCrossEntropyLoss with reduction=mean, class weights and
// ignore_index: N is the weighted sum of item losses, D the sum of the
// weights of the non-ignored labels.

func.func private @ce(%w: tensor<4x3xf32>, %x: tensor<2x4xf32>, %y: tensor<2xi64>, %cw: tensor<3xf32>) -> tensor<f32> {
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %1 = nn.softmax_cross_entropy_loss %0, %y, %cw {reduction = #nn<reduction mean>, ignore_index = -100} : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-LABEL: func.func private @ce_split
// CHECK-SAME: %{{[^:]+}}: tensor<4x3xf32>, %{{[^:]+}}: tensor<2x4xf32>, %[[Y:[^:]+]]: tensor<2xi64>, %[[CW:[^:]+]]: tensor<3xf32>
// CHECK: %[[N:.+]] = nn.softmax_cross_entropy_loss %{{.+}}, %[[Y]], %[[CW]] {ignore_index = -100 : i64, reduction = #nn<reduction sum>}
// CHECK: %[[D:.+]] = nn.class_weight_sum %[[Y]], %[[CW]] {ignore_index = -100 : i64}
// CHECK: return %[[N]], %[[D]]

// CHECK-LABEL: func @step
// CHECK: scf.for
// CHECK: tensor.extract_slice %{{.+}} : tensor<?x4xf32> to tensor<2x4xf32>
// CHECK: tensor.extract_slice %{{.+}} : tensor<?xi64> to tensor<2xi64>
// CHECK: train.value_and_grad @ce_split
// CHECK: train.scale
func.func @step(%w: tensor<4x3xf32>, %x: tensor<?x4xf32>, %y: tensor<?xi64>, %cw: tensor<3xf32>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @ce(%w, %x, %y, %cw) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<4x3xf32>, tensor<?x4xf32>, tensor<?xi64>, tensor<3xf32>) -> (tensor<f32>, tensor<4x3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<4x3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// A sum-reduced loss is already a sum over samples: nothing to divide.

func.func private @sum(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-LABEL: func @step
// CHECK: %[[LOOP:.+]]:3 = scf.for
// CHECK-NOT: arith.divf
// CHECK-NOT: train.scale
// CHECK: %[[L:.+]] = tensor.from_elements %[[LOOP]]#1
// CHECK: return %[[L]], %[[LOOP]]#0
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @sum(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}
