// RUN: accrue-opt %s -train-mixed-precision=precision=bf16 | FileCheck %s
// RUN: accrue-opt %s -train-mixed-precision=precision=bf16 -convert-nn-to-linalg | FileCheck %s --check-prefix=WIDE

// torch.autocast's classes: the Gemm runs in bf16 (parameters and the input
// cast where used), the elementwise op follows its operands, the softmax
// and the loss run in fp32; the loss stays fp32 and the parameters stay
// fp32 arguments.
// CHECK-LABEL: func.func private @fwd
// CHECK-SAME: (%[[W:.+]]: tensor<3x4xf32>, %[[B:.+]]: tensor<3xf32>, %[[X:.+]]: tensor<2x4xf32>, %[[Y:.+]]: tensor<2xi64>) -> tensor<f32>
// CHECK-DAG: %[[WL:.+]] = nn.cast %[[W]] : (tensor<3x4xf32>) -> tensor<3x4xbf16>
// CHECK-DAG: %[[BL:.+]] = nn.cast %[[B]] : (tensor<3xf32>) -> tensor<3xbf16>
// CHECK-DAG: %[[XL:.+]] = nn.cast %[[X]] : (tensor<2x4xf32>) -> tensor<2x4xbf16>
// CHECK: %[[H:.+]] = nn.gemm %[[XL]], %[[WL]], %[[BL]] {transB = true} : (tensor<2x4xbf16>, tensor<3x4xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
// CHECK: %[[R:.+]] = nn.relu %[[H]] : tensor<2x3xbf16>
// CHECK: %[[RF:.+]] = nn.cast %[[R]] : (tensor<2x3xbf16>) -> tensor<2x3xf32>
// CHECK: %[[S:.+]] = nn.log_softmax %[[RF]] {axis = 1 : i64} : tensor<2x3xf32>
// CHECK: %[[L:.+]] = nn.negative_log_likelihood_loss %[[S]], %[[Y]]
// CHECK: return %[[L]] : tensor<f32>

// Lowered, the bf16 Gemm accumulates in f32 and rounds once.
// WIDE-LABEL: func.func private @fwd
// WIDE: arith.extf %{{.+}} : bf16 to f32
// WIDE: linalg.generic
// WIDE: arith.mulf %{{.+}}, %{{.+}} {{.*}}: f32
// WIDE: arith.addf %{{.+}}, %{{.+}} {{.*}}: f32
// WIDE: arith.truncf %{{.+}} : f32 to bf16
func.func private @fwd(%w: tensor<3x4xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>, %y: tensor<2xi64>) -> tensor<f32> {
  %0 = nn.gemm %x, %w, %b {transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.relu %0 : tensor<2x3xf32>
  %2 = nn.log_softmax %1 {axis = 1 : i64} : tensor<2x3xf32>
  %3 = nn.negative_log_likelihood_loss %2, %y {reduction = #nn<reduction mean>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %3 : tensor<f32>
}

func.func @step(%w: tensor<3x4xf32>, %b: tensor<3xf32>, %x: tensor<2x4xf32>, %y: tensor<2xi64>) -> (tensor<f32>, tensor<3x4xf32>) {
  %l, %g = train.value_and_grad @fwd(%w, %b, %x, %y) {wrt = array<i64: 0>} : (tensor<3x4xf32>, tensor<3xf32>, tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<3x4xf32>)
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}

// A recurrence keeps the model's types (its body is typed for them, and
// rounding the carried state every step would compound): the bf16 input
// projection is cast back to f32 for the scan.
// CHECK-LABEL: func.func private @rnn_fwd
// CHECK: %[[P:.+]] = nn.matmul %{{.+}}, %{{.+}} : (tensor<3x4x2xbf16>, tensor<2x2xbf16>) -> tensor<3x4x2xbf16>
// CHECK: %[[PF:.+]] = nn.cast %[[P]] : (tensor<3x4x2xbf16>) -> tensor<3x4x2xf32>
// CHECK: nn.scan(%{{.+}}, %[[PF]], %{{.+}}) {{.*}} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>)
// CHECK: nn.matmul %{{.+}}, %{{.+}} : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
func.func private @rnn_fwd(%w: tensor<2x2xf32>, %r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> tensor<f32> {
  %p = nn.matmul %x, %w : (tensor<3x4x2xf32>, tensor<2x2xf32>) -> tensor<3x4x2xf32>
  %res:2 = nn.scan(%h0, %p, %r) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>):
    %0 = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %1 = nn.add %xt, %0 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %2 = nn.tanh %1 : tensor<3x2xf32>
    nn.yield %2, %2 : tensor<3x2xf32>, tensor<3x2xf32>
  }
  %s = nn.reduce_sum %res#1 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<3x4x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

func.func @rnn_step(%w: tensor<2x2xf32>, %r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>) {
  %l, %g = train.value_and_grad @rnn_fwd(%w, %r, %h0, %x) {wrt = array<i64: 1>} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>)
  return %l, %g : tensor<f32>, tensor<2x2xf32>
}

// The exporters' Linear over rank-3 inputs (MatMul, then Add of the bias):
// the product runs in bf16 and its bias is added in fp32 before the result
// is rounded to bf16, as torch.nn.Linear under autocast adds it in the
// GEMM; what follows then runs in bf16. A scalar (rank 0) does not widen a
// tensor, as in PyTorch's type promotion: the bf16 result times an f32
// scale stays bf16, while a tensor of rank 1 (the bias of a plain add)
// widens.
// CHECK-LABEL: func.func private @linear_fwd
// CHECK-SAME: (%[[W:.+]]: tensor<4x3xf32>, %[[B:.+]]: tensor<3xf32>, %[[X:.+]]: tensor<2x5x4xf32>)
// CHECK: %[[P:.+]] = nn.matmul %{{.+}}, %{{.+}} : (tensor<2x5x4xbf16>, tensor<4x3xbf16>) -> tensor<2x5x3xbf16>
// CHECK: %[[PF:.+]] = nn.cast %[[P]] : (tensor<2x5x3xbf16>) -> tensor<2x5x3xf32>
// CHECK: %[[Y:.+]] = nn.add %[[PF]], %[[B]] : (tensor<2x5x3xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
// CHECK: %[[YL:.+]] = nn.cast %[[Y]] : (tensor<2x5x3xf32>) -> tensor<2x5x3xbf16>
// CHECK: %[[S:.+]] = nn.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SL:.+]] = nn.cast %[[S]] : (tensor<f32>) -> tensor<bf16>
// CHECK: %[[M:.+]] = nn.mul %[[YL]], %[[SL]] : (tensor<2x5x3xbf16>, tensor<bf16>) -> tensor<2x5x3xbf16>
// CHECK: %[[ML:.+]] = nn.cast %[[M]] : (tensor<2x5x3xbf16>) -> tensor<2x5x3xf32>
// CHECK: nn.add %[[ML]], %[[B]] : (tensor<2x5x3xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
func.func private @linear_fwd(%w: tensor<4x3xf32>, %b: tensor<3xf32>, %x: tensor<2x5x4xf32>) -> tensor<f32> {
  %p = nn.matmul %x, %w : (tensor<2x5x4xf32>, tensor<4x3xf32>) -> tensor<2x5x3xf32>
  %y = nn.add %p, %b : (tensor<2x5x3xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
  %s = nn.constant dense<0.5> : tensor<f32>
  %m = nn.mul %y, %s : (tensor<2x5x3xf32>, tensor<f32>) -> tensor<2x5x3xf32>
  %z = nn.add %m, %b : (tensor<2x5x3xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
  %l = nn.reduce_sum %z {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x5x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

func.func @linear_step(%w: tensor<4x3xf32>, %b: tensor<3xf32>, %x: tensor<2x5x4xf32>) -> (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>) {
  %l, %gw, %gb = train.value_and_grad @linear_fwd(%w, %b, %x) {wrt = array<i64: 0, 1>} : (tensor<4x3xf32>, tensor<3xf32>, tensor<2x5x4xf32>) -> (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>)
  return %l, %gw, %gb : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
}
