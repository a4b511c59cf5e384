// RUN: accrue-opt %s -train-autodiff=recompute-segments | FileCheck %s --check-prefix=SEG
// RUN: accrue-opt %s -train-autodiff="recompute-nodes=block/relu" | FileCheck %s --check-prefix=NODES
// RUN: accrue-opt %s -train-autodiff | FileCheck %s --check-prefix=NONE
// RUN: accrue-opt %s -train-autodiff=recompute-segments -train-strip-recompute-barriers | FileCheck %s --check-prefix=STRIP
// RUN: not accrue-opt %s -train-autodiff="recompute-nodes=(" 2>&1 | FileCheck %s --check-prefix=BAD

// Recomputation: a residual block x0 + fc2(relu(fc1(x0))) after a first
// layer. The forward's cuts (every differentiated path from x to the loss
// passes through them) are x0 and the block's sum; with
// recompute-segments, fc1 and relu, which the backward needs, are cloned
// into the backward just before their first use there, reading x0 through
// a barrier that CSE cannot merge. fc2's result is not needed by the
// backward and the cuts are kept. recompute-nodes clones the named nodes'
// ops only.

// SEG-LABEL: func.func private @fwd_grad
// SEG: %[[X0:.+]] = nn.gemm %arg3, %arg0
// SEG: %[[H1:.+]] = nn.gemm %[[X0]], %arg1
// SEG: nn.relu %[[H1]]
// SEG: %[[Y:.+]] = nn.add %[[X0]]
// SEG: nn.reduce_mean
// SEG: nn.mul %{{.+}}, %[[Y]]
// SEG: %[[DR:.+]] = nn.gemm %{{.+}}, %arg2 :
// The clone of fc1 reads x0 and fc1's weight, each through a barrier.
// SEG: %[[B:.+]] = train.recompute_barrier %[[X0]]
// SEG-NEXT: %[[W1B:.+]] = train.recompute_barrier %arg1
// SEG-NEXT: %[[H1R:.+]] = nn.gemm %[[B]], %[[W1B]] {transB = true}
// SEG: %[[R1R:.+]] = nn.relu %[[H1R]]
// SEG: nn.gemm %{{.+}}, %[[R1R]] {transA = true}
// SEG: nn.greater %[[H1R]]
// SEG: nn.gemm %{{.+}}, %[[X0]] {transA = true}
// SEG-NOT: train.recompute_barrier
// SEG: return
// SEG-LABEL: func.func private @fwd(

// NODES-LABEL: func.func private @fwd_grad
// NODES: %[[H1:.+]] = nn.gemm %{{.+}}, %arg1
// NODES: %[[B:.+]] = train.recompute_barrier %[[H1]]
// NODES-NEXT: %[[R1R:.+]] = nn.relu %[[B]]
// NODES-NEXT: nn.gemm %{{.+}}, %[[R1R]] {transA = true}
// NODES-NOT: train.recompute_barrier
// NODES-NOT: nn.relu
// NODES-LABEL: func.func private @fwd(

// NONE-LABEL: func.func private @fwd_grad
// NONE-NOT: train.recompute_barrier
// NONE-COUNT-1: nn.relu
// NONE-NOT: nn.relu
// NONE-LABEL: func.func private @fwd(

// STRIP-LABEL: func.func private @fwd_grad
// STRIP-NOT: train.recompute_barrier
// STRIP-COUNT-2: nn.relu
// STRIP-LABEL: func.func private @fwd(

// BAD: recompute-nodes: invalid regex '('

func.func private @fwd(%w0: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32> {
  %x0 = nn.gemm %x, %w0 {transB = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0")
  %h1 = nn.gemm %x0, %w1 {transB = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("block/fc1")
  %r1 = nn.relu %h1 : tensor<2x4xf32> loc("block/relu")
  %h2 = nn.gemm %r1, %w2 {transB = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("block/fc2")
  %y = nn.add %x0, %h2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("block/add")
  %sq = nn.mul %y, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("square")
  %l = nn.reduce_mean %sq {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32> loc("mean")
  return %l : tensor<f32>
}
func.func @step(%w0: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %l, %g0, %g1, %g2 = train.value_and_grad @fwd(%w0, %w1, %w2, %x) {wrt = array<i64: 0, 1, 2>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return %l, %g0, %g1, %g2 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
