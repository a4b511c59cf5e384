// RUN: accrue-opt %s -train-autodiff=recompute-elementwise | FileCheck %s
// RUN: accrue-opt %s -train-autodiff | FileCheck %s --check-prefix=NONE

// recompute-elementwise: a GELU between two Linears (h -> 0.5 h (1 +
// erf(h / sqrt 2))). Its division, erf and add are read only by other
// elementwise ops of the forward, so fusion keeps them in registers there,
// and they start from h, which the backward reads itself (the product's
// adjoint): the backward recomputes them from h instead of the forward
// storing them. The GELU's result feeds fc2's product (stored anyway) and
// stays. exp's result is kept: its input, fc2's product, is not read by
// the backward, so recomputing it would keep that alive instead.

// CHECK-LABEL: func.func private @fwd_grad
// CHECK: %[[H:.+]] = nn.gemm %arg2, %arg0
// CHECK: %[[C0:.+]] = nn.constant dense<1.41421354>
// CHECK: nn.erf
// CHECK: %[[G:.+]] = nn.mul %{{.+}} : (tensor<2x4xf32>, tensor<f32>)
// CHECK: %[[O:.+]] = nn.gemm %[[G]], %arg1
// CHECK: %[[Y:.+]] = nn.exp %[[O]]
// CHECK-NOT: nn.exp %{{.*}}recompute
// The backward: fc2's adjoints, then the GELU's, from clones of its ops.
// CHECK: nn.gemm %{{.+}}, %[[G]] {transA = true}
// h is read through a barrier, so that CSE does not merge the clones back;
// the constants need none.
// CHECK: %[[HB:.+]] = train.recompute_barrier %[[H]]
// CHECK-NEXT: %[[A:.+]] = nn.div %[[HB]], %[[C0]]
// CHECK-NEXT: %[[E:.+]] = nn.erf %[[A]]
// CHECK-NEXT: %[[B:.+]] = nn.add %[[E]]
// erf's adjoint reads the recomputed division, the product's the
// recomputed add.
// CHECK-DAG: nn.mul %[[A]], %[[A]]
// CHECK-DAG: nn.mul %{{.+}}, %[[B]]
// CHECK-NOT: train.recompute_barrier %[[O]]
// CHECK-NOT: train.recompute_barrier %[[Y]]
// CHECK: return
// CHECK-LABEL: func.func private @fwd(

// NONE-LABEL: func.func private @fwd_grad
// NONE-NOT: train.recompute_barrier
// NONE-COUNT-1: nn.erf
// NONE-NOT: nn.erf
// NONE-LABEL: func.func private @fwd(

func.func private @fwd(%w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32> {
  %h = nn.gemm %x, %w1 {transB = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("fc1")
  %sqrt2 = nn.constant dense<1.41421354> : tensor<f32> loc("c0")
  %a = nn.div %h, %sqrt2 : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("gelu/div")
  %e = nn.erf %a : tensor<2x4xf32> loc("gelu/erf")
  %one = nn.constant dense<1.0> : tensor<f32> loc("c1")
  %b = nn.add %e, %one : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("gelu/add")
  %c = nn.mul %h, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("gelu/mul")
  %half = nn.constant dense<0.5> : tensor<f32> loc("c2")
  %g = nn.mul %c, %half : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("gelu/mul2")
  %o = nn.gemm %g, %w2 {transB = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("fc2")
  %y = nn.exp %o : tensor<2x4xf32> loc("exp")
  %z = nn.mul %y, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("square")
  %l = nn.reduce_mean %z {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32> loc("mean")
  return %l : tensor<f32>
}
func.func @step(%w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %l, %g1, %g2 = train.value_and_grad @fwd(%w1, %w2, %x) {wrt = array<i64: 0, 1>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return %l, %g1, %g2 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}
