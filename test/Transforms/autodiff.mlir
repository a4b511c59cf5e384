// RUN: accrue-opt %s -split-input-file -train-autodiff | FileCheck %s

// A linear layer with a mean-squared loss: the generated function returns
// the loss and the gradients of the wrt arguments, built from the VJP rules
// in reverse order.

func.func private @fwd(%w: tensor<3x4xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>) -> tensor<f32> {
  %0 = nn.gemm %x, %w, %b {transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.mul %0, %0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = nn.reduce_mean %1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// CHECK-LABEL: func.func private @fwd_grad
// CHECK-SAME: (%[[W:.+]]: tensor<3x4xf32>, %[[B:.+]]: tensor<3xf32>, %[[X:.+]]: tensor<2x4xf32>) -> (tensor<f32>, tensor<3x4xf32>, tensor<3xf32>)
// CHECK: %[[Y:.+]] = nn.gemm %[[X]], %[[W]], %[[B]] {transB = true}
// CHECK: %[[SQ:.+]] = nn.mul %[[Y]], %[[Y]]
// CHECK: %[[L:.+]] = nn.reduce_mean %[[SQ]]
// CHECK: %[[SEED:.+]] = nn.constant dense<1.000000e+00> : tensor<f32>
// Mean: the seed divided by the element count, broadcast back.
// CHECK: %[[N:.+]] = nn.constant dense<6.000000e+00> : tensor<f32>
// CHECK: %[[D:.+]] = nn.div %[[SEED]], %[[N]]
// CHECK: %[[DSQ:.+]] = nn.expand
// y * y: both uses of y contribute, and their adjoints are summed.
// CHECK: %[[A1:.+]] = nn.mul %[[DSQ]], %[[Y]]
// CHECK: %[[A2:.+]] = nn.mul %[[DSQ]], %[[Y]]
// CHECK: %[[DY:.+]] = nn.add %[[A1]], %[[A2]]
// Gemm with transB: dW = dY^T x (a Gemm with transA), db = sum over rows.
// CHECK: nn.gemm %[[DY]], %[[W]] :
// CHECK: %[[DW:.+]] = nn.gemm %[[DY]], %[[X]] {transA = true} :
// CHECK: %[[DB0:.+]] = nn.reduce_sum %[[DY]] {axes = array<i64: 0>}
// CHECK: %[[DB:.+]] = nn.reshape %[[DB0]] : (tensor<1x3xf32>) -> tensor<3xf32>
// CHECK: return %[[L]], %[[DW]], %[[DB]]

// CHECK-LABEL: func @step
func.func @step(%w: tensor<3x4xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<3x4xf32>, tensor<3xf32>) {
  // CHECK: call @fwd_grad(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<3x4xf32>, tensor<3xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<3x4xf32>, tensor<3xf32>)
  %l, %gw, %gb = train.value_and_grad @fwd(%w, %b, %x) {wrt = array<i64: 0, 1>} : (tensor<3x4xf32>, tensor<3xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<3x4xf32>, tensor<3xf32>)
  return %l, %gw, %gb : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
}

// -----

// A parameter the loss does not depend on gets a zero gradient; ops off the
// path from the parameters to the loss are not differentiated.

func.func private @unused(%w: tensor<3xf32>, %u: tensor<2xf32>, %x: tensor<3xf32>) -> tensor<f32> {
  %0 = nn.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = nn.exp %x : tensor<3xf32>
  %2 = nn.add %0, %1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %3 = nn.reduce_sum %2 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-LABEL: func.func private @unused_grad
// CHECK-SAME: %[[W:[^:]+]]: tensor<3xf32>, %[[U:[^:]+]]: tensor<2xf32>, %[[X:[^:]+]]: tensor<3xf32>
// CHECK: %[[DW:.+]] = nn.mul %{{[0-9]+}}, %[[X]]
// CHECK: %[[ZERO:.+]] = nn.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: return %{{.*}}, %[[DW]], %[[ZERO]] : tensor<f32>, tensor<3xf32>, tensor<2xf32>

func.func @step(%w: tensor<3xf32>, %u: tensor<2xf32>, %x: tensor<3xf32>) -> (tensor<3xf32>, tensor<2xf32>) {
  %l, %gw, %gu = train.value_and_grad @unused(%w, %u, %x) {wrt = array<i64: 0, 1>} : (tensor<3xf32>, tensor<2xf32>, tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<2xf32>)
  return %gw, %gu : tensor<3xf32>, tensor<2xf32>
}

// -----

// Two value_and_grad ops on the same callee and wrt set share one function.

func.func private @shared(%w: tensor<3xf32>) -> tensor<f32> {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func private @shared_grad
// CHECK-NOT: func.func private @shared_grad_0
// CHECK-LABEL: func @twice
// CHECK-COUNT-2: call @shared_grad
func.func @twice(%w: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %l0, %g0 = train.value_and_grad @shared(%w) {wrt = array<i64: 0>} : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %l1, %g1 = train.value_and_grad @shared(%w) {wrt = array<i64: 0>} : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %g0, %g1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// A seed (loss scaling) starts the backward instead of 1; the function
// takes it as a trailing argument.

func.func private @scaled(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-LABEL: func.func private @scaled_grad_seeded
// CHECK-SAME: (%{{.+}}: tensor<3xf32>, %[[X:.+]]: tensor<2x3xf32>, %[[S:.+]]: tensor<f32>) -> (tensor<f32>, tensor<3xf32>)
// CHECK-NOT: dense<1.000000e+00>
// CHECK: %[[S2:.+]] = nn.reshape %[[S]] : (tensor<f32>) -> tensor<1x1xf32>
// CHECK: %[[DS:.+]] = nn.expand %[[S2]] : (tensor<1x1xf32>) -> tensor<2x3xf32>
// CHECK: nn.mul %[[DS]], %[[X]]
// CHECK-LABEL: func @use_seed
// CHECK: %[[T:.+]] = tensor.from_elements %{{.+}} : tensor<f32>
// CHECK: call @scaled_grad_seeded(%{{.+}}, %{{.+}}, %[[T]])
func.func @use_seed(%w: tensor<3xf32>, %x: tensor<2x3xf32>, %s: f32) -> (tensor<f32>, tensor<3xf32>) {
  %l, %g = train.value_and_grad @scaled(%w, %x) seed %s {wrt = array<i64: 0>} : (tensor<3xf32>, tensor<2x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}
