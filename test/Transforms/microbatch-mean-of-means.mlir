// RUN: accrue-opt %s -split-input-file -train-microbatch -verify-diagnostics | FileCheck %s
// RUN: accrue-opt %s -split-input-file -train-microbatch=normalization=per-micro-batch | FileCheck %s --check-prefix=FRAMEWORK

// An unrecognized loss form: a warning that names the op, then the mean of
// the micro-batch losses (each micro-batch counts 1).

func.func private @odd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  // expected-warning @+1 {{loss is not a recognized mean- or sum-reduced form, nor a linear combination of such terms ('nn.sqrt' is neither); averaging it over micro-batches (mean of means)}}
  %2 = nn.sqrt %1 : tensor<f32>
  return %2 : tensor<f32>
}

// CHECK-LABEL: func.func private @odd_split
// CHECK: %[[L:.+]] = nn.sqrt
// CHECK: %[[ONE:.+]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: return %[[L]], %[[ONE]]

func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @odd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// Asked for explicitly, mean of means applies to a recognized form too,
// without a warning.

func.func private @mean(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// FRAMEWORK-LABEL: func.func private @mean_split
// FRAMEWORK: %[[L:.+]] = nn.reduce_mean
// FRAMEWORK: %[[ONE:.+]] = nn.constant dense<1.000000e+00> : tensor<f32>
// FRAMEWORK: return %[[L]], %[[ONE]]
// FRAMEWORK-LABEL: func @step
// FRAMEWORK: %[[LOOP:.+]]:3 = scf.for
// FRAMEWORK: arith.divf %[[LOOP]]#1, %[[LOOP]]#2
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @mean(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// A linear combination of two means with different counts: a counting
// function gives each term's count, a counting loop sums them over the
// window, and each micro-batch's loss is its share of c1 N1 / D1 + c2 N2 / D2
// (a sum: the accumulated gradient is not divided again).

func.func private @combined(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  %2 = nn.reduce_mean %x {axes = array<i64: 0>, keepdims = false} : (tensor<2x3xf32>) -> tensor<3xf32>
  %3 = nn.mul %2, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %4 = nn.reduce_mean %3 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %half = nn.constant dense<5.000000e-01> : tensor<f32>
  %5 = nn.mul %4, %half : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %6 = nn.add %1, %5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %6 : tensor<f32>
}

// CHECK-LABEL: func.func private @combined_counts
// CHECK: %[[D1:.+]] = nn.constant dense<6.000000e+00>
// CHECK: %[[D2:.+]] = nn.constant dense<3.000000e+00>
// CHECK: return %[[D1]], %[[D2]]
// CHECK-LABEL: func.func private @combined_split_combined
// CHECK-SAME: %[[T1:[^:]+]]: tensor<f32>, %[[T2:[^:]+]]: tensor<f32>) -> (tensor<f32>, tensor<f32>)
// CHECK: nn.div %{{.+}}, %[[T1]]
// CHECK: nn.div %{{.+}}, %[[T2]]
// CHECK: nn.constant dense<5.000000e-01>
// CHECK-LABEL: func.func @step_combined
// CHECK: scf.for
// CHECK: func.call @combined_counts
// CHECK: scf.for
// CHECK: train.value_and_grad @combined_split_combined
// CHECK-NOT: arith.divf

func.func @step_combined(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @combined(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}
