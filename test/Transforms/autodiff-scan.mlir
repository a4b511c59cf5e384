// RUN: accrue-opt %s -split-input-file -train-autodiff -canonicalize | FileCheck %s

// Backpropagation through an nn.scan: h_t = tanh(x_t + h_{t-1} r) over 4
// steps, the loss the sum of all h_t, differentiated with respect to r and
// h0. The forward saves the carries entering each step (and its product's
// results, dropped here as the backward does not read them); the backward
// is a scan in the opposite direction whose carry is dh, which scans the
// outputs' adjoint and the stacked h_t (read, not recomputed: tanh's VJP
// needs only its result). dr = sum_t h_{t-1}^T dpre_t sums over the samples
// of each step, so it is one product over samples and steps after the
// loop: the saved carries^T times the stacked dpre, as [12, 2] matrices.
// x is not differentiated: the stacked dx is dropped (canonicalization).

// CHECK-LABEL: func.func private @fwd_grad
// CHECK-SAME: (%[[R:.+]]: tensor<2x2xf32>, %[[H0:.+]]: tensor<3x2xf32>, %[[X:.+]]: tensor<3x4x2xf32>)
// CHECK-DAG: %[[ONES:.+]] = nn.constant dense<1.000000e+00> : tensor<3x4x2xf32>
// CHECK-DAG: %[[DH0:.+]] = nn.constant dense<0.000000e+00> : tensor<3x2xf32>
// CHECK: %[[F:.+]]:3 = nn.scan(%[[H0]], %[[X]], %[[R]]) {num_carries = 1 : i64, num_scanned = 1 : i64, saves_carries} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<3x4x2xf32>)
// CHECK: %[[L:.+]] = nn.reduce_sum %[[F]]#1
// R^T, which the step's VJP reads, is hoisted out of the loop
// (canonicalization) and passed as an invariant.
// CHECK: %[[RT:.+]] = nn.transpose %[[R]]
// CHECK: %[[B:.+]]:2 = nn.scan(%[[DH0]], %[[ONES]], %[[F]]#1, %[[RT]]) {num_carries = 1 : i64, num_scanned = 2 : i64, reverse} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>)
// CHECK: ^bb0(%[[DH:.+]]: tensor<3x2xf32>, %[[DYT:.+]]: tensor<3x2xf32>, %[[H:.+]]: tensor<3x2xf32>, %[[RRT:.+]]: tensor<2x2xf32>):
// CHECK-NOT: nn.tanh
// h_t is both the next carry and the step output: their adjoints add.
// CHECK: %[[DHT:.+]] = nn.add %[[DH]], %[[DYT]]
// CHECK: %[[HH:.+]] = nn.mul %[[H]], %[[H]]
// CHECK: %[[DPRE:.+]] = nn.mul %[[DHT]]
// CHECK: %[[DHPREV:.+]] = nn.matmul %[[DPRE]], %[[RRT]]
// CHECK-NOT: nn.matmul
// CHECK: nn.yield %[[DHPREV]], %[[DPRE]]
// CHECK: %[[HS:.+]] = nn.reshape %[[F]]#2 : (tensor<3x4x2xf32>) -> tensor<12x2xf32>
// CHECK: %[[DPRES:.+]] = nn.reshape %[[B]]#1 : (tensor<3x4x2xf32>) -> tensor<12x2xf32>
// CHECK: %[[DR:.+]] = nn.gemm %[[HS]], %[[DPRES]] {transA = true} : (tensor<12x2xf32>, tensor<12x2xf32>) -> tensor<2x2xf32>
// CHECK: return %[[L]], %[[DR]], %[[B]]#0

func.func private @fwd(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> tensor<f32> {
  %res:2 = nn.scan(%h0, %x, %r) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>):
    %0 = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %1 = nn.add %xt, %0 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %2 = nn.tanh %1 : tensor<3x2xf32>
    nn.yield %2, %2 : tensor<3x2xf32>, tensor<3x2xf32>
  }
  %s = nn.reduce_sum %res#1 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<3x4x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @step(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>, tensor<3x2xf32>) {
  %l, %g:2 = train.value_and_grad @fwd(%r, %h0, %x) {wrt = array<i64: 0, 1>} : (tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>, tensor<3x2xf32>)
  return %l, %g#0, %g#1 : tensor<f32>, tensor<2x2xf32>, tensor<3x2xf32>
}

// -----

// Two carries, as an LSTM has (h and the cell state c): c_t = c_{t-1} + x_t,
// h_t = tanh(h_{t-1} r + c_t). The reverse scan carries both adjoints; c_t
// reaches the loss through h_t and through the next step, so its adjoint is
// the incoming dc plus the pre-activation's, and it flows to c_{t-1}
// unchanged (the add). Both initial carries get their adjoints; dr is the
// product after the loop of the saved h (the forward's result #3) and the
// stacked dpre.

// CHECK-LABEL: func.func private @fwd_grad
// CHECK-SAME: (%[[R:.+]]: tensor<2x2xf32>, %[[H0:.+]]: tensor<3x2xf32>, %[[C0:.+]]: tensor<3x2xf32>, %[[X:.+]]: tensor<3x4x2xf32>)
// CHECK: %[[F:.+]]:5 = nn.scan(%[[H0]], %[[C0]], %[[X]], %[[R]]) {num_carries = 2 : i64, num_scanned = 1 : i64, saves_carries}
// CHECK: %[[L:.+]] = nn.reduce_sum %[[F]]#2
// CHECK: %[[B:.+]]:3 = nn.scan(%{{.+}}, %{{.+}}, %{{.+}}, %[[F]]#2, %{{.+}}) {num_carries = 2 : i64, num_scanned = 2 : i64, reverse}
// CHECK: ^bb0(%[[DH:.+]]: tensor<3x2xf32>, %[[DC:.+]]: tensor<3x2xf32>, %[[DYT:.+]]: tensor<3x2xf32>, %[[H:.+]]: tensor<3x2xf32>, %[[RRT:.+]]: tensor<2x2xf32>):
// CHECK: %[[DHT:.+]] = nn.add %[[DH]], %[[DYT]]
// CHECK: %[[DPRE:.+]] = nn.mul %[[DHT]], %{{.+}}
// CHECK: %[[DCPREV:.+]] = nn.add %[[DC]], %[[DPRE]]
// CHECK: %[[DHPREV:.+]] = nn.matmul %[[DPRE]], %[[RRT]]
// CHECK: nn.yield %[[DHPREV]], %[[DCPREV]], %[[DPRE]]
// CHECK: %[[HS:.+]] = nn.reshape %[[F]]#3
// CHECK: %[[DPRES:.+]] = nn.reshape %[[B]]#2
// CHECK: %[[DR:.+]] = nn.gemm %[[HS]], %[[DPRES]] {transA = true}
// CHECK: return %[[L]], %[[DR]], %[[B]]#0, %[[B]]#1

func.func private @fwd(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %c0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> tensor<f32> {
  %res:3 = nn.scan(%h0, %c0, %x, %r) {num_carries = 2 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %c: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>):
    %c1 = nn.add %c, %xt : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %m = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %p = nn.add %m, %c1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %h1 = nn.tanh %p : tensor<3x2xf32>
    nn.yield %h1, %c1, %h1 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
  }
  %s = nn.reduce_sum %res#2 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<3x4x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @step(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %c0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %l, %g:3 = train.value_and_grad @fwd(%r, %h0, %c0, %x) {wrt = array<i64: 0, 1, 2>} : (tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>)
  return %l, %g#0, %g#1, %g#2 : tensor<f32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// A scan in a scan's body (a recurrence over sub-steps): the backward step
// differentiates the inner scan the same way, from its own saved carries,
// with an inner reverse scan.
// CHECK-LABEL: func.func private @fwd_grad
// CHECK: nn.scan({{.*}}saves_carries}
// CHECK: nn.scan(
// CHECK: %[[B:.+]]:2 = nn.scan({{.*}}reverse}
// CHECK: %[[IN:.+]]:2 = nn.scan({{.*}}saves_carries}
// CHECK: nn.scan(%{{.+}}, %{{.+}}, %[[IN]]#1, %{{.+}}) {{{.*}}reverse}
func.func private @fwd(%w: tensor<3x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x5x2xf32>) -> tensor<f32> {
  %res:2 = nn.scan(%h0, %x, %w) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x5x2xf32>, tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x5x2xf32>, %ww: tensor<3x2xf32>):
    %in = nn.scan(%h, %xt, %ww) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x5x2xf32>, tensor<3x2xf32>) -> (tensor<3x2xf32>) {
    ^bb0(%g: tensor<3x2xf32>, %yt: tensor<3x2xf32>, %v: tensor<3x2xf32>):
      %0 = nn.mul %g, %v : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
      %1 = nn.add %0, %yt : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
      nn.yield %1 : tensor<3x2xf32>
    }
    nn.yield %in, %in : tensor<3x2xf32>, tensor<3x2xf32>
  }
  %a = nn.reduce_sum %res#1 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<3x4x2xf32>) -> tensor<f32>
  return %a : tensor<f32>
}
func.func @step(%w: tensor<3x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x5x2xf32>) -> (tensor<f32>, tensor<3x2xf32>) {
  %l, %g = train.value_and_grad @fwd(%w, %h0, %x) {wrt = array<i64: 0>} : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x5x2xf32>) -> (tensor<f32>, tensor<3x2xf32>)
  return %l, %g : tensor<f32>, tensor<3x2xf32>
}

// -----

// A step whose backward needs a sigmoid's result: h_t = sigmoid(h_{t-1} r
// + x_t) is a carry, and the step outputs h_t^2. sigmoid's VJP, y (1 - y),
// reads its result alone: the forward stacks it as a new step output (its
// result #2) and the backward scans it (and not x) instead of multiplying,
// adding and applying sigmoid again: its body has no nn.sigmoid, and its
// only product is dpre R^T. The forward stacks the pre-activation too (the
// add that is the product's only use), which the backward no longer reads:
// dropped, as x is an argument (see the next case).

// CHECK-LABEL: func.func private @fwd_grad
// CHECK-SAME: (%[[R:.+]]: tensor<2x2xf32>, %[[H0:.+]]: tensor<3x2xf32>, %[[X:.+]]: tensor<3x4x2xf32>)
// CHECK: %[[F:.+]]:4 = nn.scan(%[[H0]], %[[X]], %[[R]]) {num_carries = 1 : i64, num_scanned = 1 : i64, saves_carries} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<3x4x2xf32>, tensor<3x4x2xf32>)
// CHECK: %[[P:.+]] = nn.matmul
// CHECK: %[[SUM:.+]] = nn.add %{{.+}}, %[[P]]
// CHECK: %[[Y:.+]] = nn.sigmoid %[[SUM]]
// CHECK: nn.yield %[[Y]], %{{.+}}, %[[Y]] :
// CHECK: %[[B:.+]]:2 = nn.scan(%{{.+}}, %{{.+}}, %[[F]]#2, %{{.+}}) {num_carries = 1 : i64, num_scanned = 2 : i64, reverse}
// CHECK: ^bb0(%{{.+}}: tensor<3x2xf32>, %{{.+}}: tensor<3x2xf32>, %[[YT:.+]]: tensor<3x2xf32>, %[[RRT:.+]]: tensor<2x2xf32>):
// CHECK-NOT: nn.sigmoid
// CHECK: nn.mul %[[YT]], %{{.+}}
// CHECK-NOT: nn.sigmoid
// CHECK: nn.matmul %{{.+}}, %[[RRT]]
// CHECK-NOT: nn.matmul
// CHECK: nn.yield
// CHECK: nn.gemm %{{.+}}, %{{.+}} {transA = true}

func.func private @fwd(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> tensor<f32> {
  %res:2 = nn.scan(%h0, %x, %r) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>):
    %0 = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %1 = nn.add %xt, %0 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %2 = nn.sigmoid %1 : tensor<3x2xf32>
    %3 = nn.mul %2, %2 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    nn.yield %2, %3 : tensor<3x2xf32>, tensor<3x2xf32>
  }
  %s = nn.reduce_sum %res#1 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<3x4x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @step(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>) {
  %l, %g = train.value_and_grad @fwd(%r, %h0, %x) {wrt = array<i64: 0>} : (tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>)
  return %l, %g : tensor<f32>, tensor<2x2xf32>
}

// -----

// The same step on an x the function computes (x x): the stacked
// pre-activation, though the backward reads the sigmoid's results instead,
// stays (the forward's result #2): on the CPU its stack is x's own buffer,
// which each step's product accumulates into, where a dropped one would
// need a sum of its own every step (nn.ScanOp::getInPlaceSources).

// CHECK-LABEL: func.func private @fwd_grad
// CHECK: %[[F:.+]]:5 = nn.scan(%{{.+}}, %{{.+}}, %{{.+}}) {num_carries = 1 : i64, num_scanned = 1 : i64, saves_carries}
// CHECK: %[[SUM:.+]] = nn.add
// CHECK: %[[Y:.+]] = nn.sigmoid %[[SUM]]
// CHECK: nn.yield %[[Y]], %{{.+}}, %[[SUM]], %[[Y]] :
// CHECK: nn.scan(%{{.+}}, %{{.+}}, %[[F]]#3, %{{.+}}) {num_carries = 1 : i64, num_scanned = 2 : i64, reverse}
// CHECK-NOT: nn.sigmoid
// CHECK: nn.yield

func.func private @fwd(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> tensor<f32> {
  %xx = nn.mul %x, %x : (tensor<3x4x2xf32>, tensor<3x4x2xf32>) -> tensor<3x4x2xf32>
  %res:2 = nn.scan(%h0, %xx, %r) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>):
    %0 = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %1 = nn.add %xt, %0 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %2 = nn.sigmoid %1 : tensor<3x2xf32>
    %3 = nn.mul %2, %2 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    nn.yield %2, %3 : tensor<3x2xf32>, tensor<3x2xf32>
  }
  %s = nn.reduce_sum %res#1 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<3x4x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @step(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>) {
  %l, %g = train.value_and_grad @fwd(%r, %h0, %x) {wrt = array<i64: 0>} : (tensor<2x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<f32>, tensor<2x2xf32>)
  return %l, %g : tensor<f32>, tensor<2x2xf32>
}
