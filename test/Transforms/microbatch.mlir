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
// CHECK-DAG: %[[N:.+]] = nn.reduce_sum %[[P]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK-DAG: %[[D:.+]] = nn.constant dense<6.000000e+00> : tensor<f32>
// CHECK: return %[[N]], %[[D]] : tensor<f32>, tensor<f32>

// CHECK-LABEL: func @step
// CHECK-SAME: (%[[W:.+]]: tensor<3xf32>, %[[X:.+]]: tensor<?x3xf32>, %[[ACC:.+]]: tensor<16xf32>)
// CHECK: %[[ROWS:.+]] = tensor.dim %[[X]], %{{.+}} : tensor<?x3xf32>
// CHECK: %[[K:.+]] = arith.divui %[[ROWS]], %{{.+}} : index
// CHECK: %[[LOOP:.+]]:3 = scf.for %[[I:.+]] = %{{.+}} to %[[K]] step %{{.+}} iter_args(%[[A:.+]] = %[[ACC]], %[[NS:.+]] = %{{.+}}, %[[DS:.+]] = %{{.+}}) -> (tensor<16xf32>, f32, f32)
// CHECK:   %[[OFF:.+]] = arith.muli %[[I]], %{{.+}} : index
// CHECK:   %[[XS:.+]] = tensor.extract_slice %[[X]][%[[OFF]], 0] [2, 3] [1, 1] : tensor<?x3xf32> to tensor<2x3xf32>
// CHECK:   %[[VG:.+]]:3 = train.value_and_grad @fwd_split(%[[W]], %[[XS]]) {wrt = array<i64: 0>}
// CHECK:   %[[N:.+]] = tensor.extract %[[VG]]#0[]
// CHECK:   %[[D:.+]] = tensor.extract %[[VG]]#1[]
// CHECK:   %[[A2:.+]] = train.accumulate %[[A]], %[[VG]]#2 {offsets = array<i64: 0>}
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

// -----

// NegativeLogLikelihoodLoss with reduction=mean: like SoftmaxCrossEntropyLoss.

func.func private @nll(%w: tensor<4x3xf32>, %x: tensor<2x4xf32>, %y: tensor<2xi64>) -> tensor<f32> {
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %1 = nn.log_softmax %0 {axis = 1 : i64} : tensor<2x3xf32>
  %2 = nn.negative_log_likelihood_loss %1, %y {reduction = #nn<reduction mean>, ignore_index = 0} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %2 : tensor<f32>
}

// CHECK-LABEL: func.func private @nll_split
// CHECK-SAME: %[[Y:[^:]+]]: tensor<2xi64>
// CHECK: %[[N:.+]] = nn.negative_log_likelihood_loss %{{.+}}, %[[Y]] {ignore_index = 0 : i64, reduction = #nn<reduction sum>}
// CHECK: %[[D:.+]] = nn.class_weight_sum %[[Y]] {ignore_index = 0 : i64}
// CHECK: return %[[N]], %[[D]]
func.func @step(%w: tensor<4x3xf32>, %x: tensor<?x4xf32>, %y: tensor<?xi64>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @nll(%w, %x, %y) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<4x3xf32>, tensor<?x4xf32>, tensor<?xi64>) -> (tensor<f32>, tensor<4x3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<4x3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// A masked token loss divided by the number of real tokens,
// (l * m).sum() / m.sum().clamp(min=1): N = the masked sum, D = the mask's
// sum; the clamp applies once, to the total count.

func.func private @masked(%w: tensor<3xf32>, %x: tensor<2x3xf32>, %m: tensor<2x3xi64>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %mf = nn.cast %m : (tensor<2x3xi64>) -> tensor<2x3xf32>
  %1 = nn.mul %0, %mf : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = nn.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %3 = nn.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xi64>) -> tensor<i64>
  %4 = nn.cast %3 : (tensor<i64>) -> tensor<f32>
  %5 = nn.clip %4 {min = 1.0 : f64} : tensor<f32>
  %6 = nn.div %2, %5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %6 : tensor<f32>
}

// CHECK-LABEL: func.func private @masked_split
// CHECK: %[[N:.+]] = nn.reduce_sum %{{.+}} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK: %[[C:.+]] = nn.reduce_sum %{{.+}} : (tensor<2x3xi64>) -> tensor<i64>
// CHECK: nn.div
// CHECK-NEXT: %[[D:.+]] = nn.cast %[[C]] : (tensor<i64>) -> tensor<f32>
// CHECK-NEXT: return %[[N]], %[[D]]
// CHECK-LABEL: func @step
// CHECK: %[[LOOP:.+]]:3 = scf.for
// CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[TOTAL:.+]] = arith.maximumf %[[LOOP]]#2, %[[ONE]] : f32
// CHECK: arith.divf %[[LOOP]]#1, %[[TOTAL]] : f32
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %m: tensor<?x3xi64>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @masked(%w, %x, %m) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>, tensor<?x3xi64>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// With a seed (loss scaling), each micro-batch's backward is seeded with
// S / P, P the power of two at or below the window's full count (2 x 3
// elements per micro-batch times K): gradients as large as the mean loss's.
// The accumulated gradient is divided by count x S / P once.

func.func private @seeded(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-LABEL: func @step
// CHECK-SAME: %[[S:[^:]+]]: f32
// CHECK: %[[ROWS:.+]] = tensor.dim
// CHECK: %[[K:.+]] = arith.divui %[[ROWS]]
// CHECK: %[[K64:.+]] = arith.index_castui %[[K]] : index to i64
// CHECK: %[[KF:.+]] = arith.uitofp %[[K64]] : i64 to f32
// CHECK: %[[SIX:.+]] = arith.constant 6.000000e+00 : f32
// CHECK: %[[UNITS:.+]] = arith.mulf %[[SIX]], %[[KF]] : f32
// CHECK: %[[CLAMPED:.+]] = arith.maximumf %[[UNITS]]
// CHECK: %[[BITS:.+]] = arith.bitcast %[[CLAMPED]] : f32 to i32
// CHECK: %[[EXP:.+]] = arith.andi %[[BITS]], %c2139095040_i32 : i32
// CHECK: %[[P:.+]] = arith.bitcast %[[EXP]] : i32 to f32
// CHECK: %[[INVP:.+]] = arith.divf %{{.+}}, %[[P]] : f32
// CHECK: %[[SEED:.+]] = arith.mulf %[[S]], %[[INVP]] : f32
// CHECK: %[[LOOP:.+]]:3 = scf.for
// CHECK: train.value_and_grad @seeded_split(%{{.+}}, %{{.+}}) seed %[[SEED]]
// CHECK: arith.divf %[[LOOP]]#1, %[[LOOP]]#2 : f32
// CHECK: %[[DIV:.+]] = arith.mulf %[[LOOP]]#2, %[[SEED]] : f32

// With K known (steps=4): 24 elements per window, P = 16.
// STATIC-LABEL: func.func private @seeded_split
// STATIC: func @step
// STATIC-SAME: %[[S:[^:]+]]: f32
// STATIC: %[[INVP:.+]] = arith.constant 6.250000e-02 : f32
// STATIC: %[[SEED:.+]] = arith.mulf %[[S]], %[[INVP]] : f32
// STATIC: train.value_and_grad @seeded_split(%{{.+}}, %{{.+}}) seed %[[SEED]]
// STATIC: arith.mulf %{{.+}}#2, %[[SEED]] : f32
// CHECK: %[[INV:.+]] = arith.divf %{{.+}}, %[[DIV]] : f32
// CHECK: train.scale %[[LOOP]]#0, %[[INV]]
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %s: f32, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @seeded(%w, %x) seed %s {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// A result tied to an argument (a buffer: a running statistic) is carried
// through the loop: each micro-batch reads the previous one's value and its
// new value is written over the carried one (a copy in destination-passing
// style, so bufferization updates one buffer in place). A micro-batch of
// padding only (its first sample at or past `valid`) keeps the old value.

func.func private @stat(%w: tensor<3xf32>, %s: tensor<3xf32>, %x: tensor<2x3xf32>) -> (tensor<f32>, tensor<3xf32> {train.tied = 1 : i64}) {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %2 = nn.reduce_mean %x {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  %3 = nn.add %s, %2 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1, %3 : tensor<f32>, tensor<3xf32>
}

// CHECK-LABEL: func.func private @stat_split_masked
// CHECK: return %{{.+}}, %{{.+}}, %{{.+}} : tensor<f32>, tensor<f32>, tensor<3xf32>
// CHECK-LABEL: func @carried
// CHECK-SAME: (%[[W:[^:]+]]: tensor<3xf32>, %[[S:[^:]+]]: tensor<3xf32>, %[[X:[^:]+]]: tensor<?x3xf32>, %[[ACC:[^:]+]]: tensor<16xf32>, %[[VALID:[^:]+]]: i64)
// CHECK: %[[LOOP:.+]]:4 = scf.for %[[I:.+]] = %{{.+}} iter_args(%{{.+}} = %[[ACC]], %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %[[OLD:.+]] = %[[S]]) -> (tensor<16xf32>, f32, f32, tensor<3xf32>)
// CHECK:   %[[VG:.+]]:4 = train.value_and_grad @stat_split_masked(%[[W]], %[[OLD]], %{{.+}}, %{{.+}})
// CHECK:   train.accumulate %{{.+}}, %[[VG]]#3
// CHECK:   %[[FIRST:.+]] = arith.index_cast %{{.+}} : index to i64
// CHECK:   %[[HAS:.+]] = arith.cmpi sgt, %[[VALID]], %[[FIRST]] : i64
// CHECK:   %[[SEL:.+]] = linalg.generic {{.*}} ins(%[[VG]]#2, %[[OLD]] : tensor<3xf32>, tensor<3xf32>)
// CHECK:     arith.select %[[HAS]]
// CHECK:   %[[NEW:.+]] = linalg.copy ins(%[[SEL]] : tensor<3xf32>) outs(%[[OLD]] : tensor<3xf32>)
// CHECK:   scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %[[NEW]] :
// CHECK: return %{{.+}}, %[[LOOP]]#3
func.func @carried(%w: tensor<3xf32>, %s: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>, %valid: i64) -> (tensor<16xf32>, tensor<3xf32>) {
  %l, %new, %g = train.value_and_grad @stat(%w, %s, %x) valid %valid {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %a, %new : tensor<16xf32>, tensor<3xf32>
}
