// RUN: accrue-opt %s -split-input-file | accrue-opt | FileCheck %s
// RUN: accrue-opt %s -split-input-file -canonicalize | FileCheck %s --check-prefix=CANON

// A recurrence h_t = tanh(x_t + h_{t-1} r) over 4 steps of a [3, 4, 2]
// sequence: one carry, one scanned input, one invariant; the results are
// the final carry, the outputs stacked along axis 1 and (saves_carries)
// the carries entering each step.

// CHECK-LABEL: func @rnn
// CHECK: nn.scan(%{{.+}}, %{{.+}}, %{{.+}}) {num_carries = 1 : i64, num_scanned = 1 : i64, reverse, saves_carries}
// CHECK: ^bb0(%{{.+}}: tensor<3x2xf32>, %{{.+}}: tensor<3x2xf32>, %{{.+}}: tensor<2x2xf32>):
// CHECK: nn.yield %{{.+}}, %{{.+}} : tensor<3x2xf32>, tensor<3x2xf32>

// Unread step outputs and saved carries are dropped; the body stays.
// CANON-LABEL: func @rnn
// CANON: %[[S:.+]]:2 = nn.scan(%{{.+}}, %{{.+}}, %{{.+}}) {num_carries = 1 : i64, num_scanned = 1 : i64, reverse} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>)
// CANON: %[[H:.+]] = nn.tanh
// CANON: nn.yield %[[H]], %[[H]] : tensor<3x2xf32>, tensor<3x2xf32>
// CANON: return %[[S]]#0, %[[S]]#1
func.func @rnn(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  %res:4 = nn.scan(%h0, %x, %r) {num_carries = 1 : i64, num_scanned = 1 : i64, reverse, saves_carries} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<3x4x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>):
    %0 = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %1 = nn.add %xt, %0 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %2 = nn.tanh %1 : tensor<3x2xf32>
    %3 = nn.neg %2 : tensor<3x2xf32>
    nn.yield %2, %2, %3 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
  }
  return %res#0, %res#1 : tensor<3x2xf32>, tensor<3x4x2xf32>
}

// -----

// Body ops that read only invariants move out of the loop and become
// invariants; constants they read are cloned out with them.
// CANON-LABEL: func @hoist
// CANON-SAME: (%[[R:.+]]: tensor<2x2xf32>, %[[H0:.+]]: tensor<3x2xf32>, %[[X:.+]]: tensor<3x4x2xf32>)
// CANON: %[[C:.+]] = nn.constant dense<2.000000e+00>
// CANON: %[[RT:.+]] = nn.transpose %[[R]]
// CANON: %[[RT2:.+]] = nn.mul %[[RT]], %[[C]]
// (R itself, no longer read, is dropped.)
// CANON: nn.scan(%[[H0]], %[[X]], %[[RT2]])
// CANON: ^bb0(%[[H:.+]]: tensor<3x2xf32>, %{{.+}}: tensor<3x2xf32>, %[[INV:.+]]: tensor<2x2xf32>):
// CANON-NEXT: %[[M:.+]] = nn.matmul %[[H]], %[[INV]]
// CANON-NEXT: nn.yield %[[M]], %[[M]]
func.func @hoist(%r: tensor<2x2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> tensor<3x4x2xf32> {
  %res:2 = nn.scan(%h0, %x, %r) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>):
    %c = nn.constant dense<2.0> : tensor<f32>
    %0 = nn.transpose %rr {perm = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %1 = nn.mul %0, %c : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
    %2 = nn.matmul %h, %1 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    nn.yield %2, %2 : tensor<3x2xf32>, tensor<3x2xf32>
  }
  return %res#1 : tensor<3x4x2xf32>
}

// -----

// Inputs the body does not read are dropped, and a carry yielded unchanged
// becomes an invariant (then dropped: nothing reads it): its final value
// is its initial one.
// CANON-LABEL: func @dead_inputs
// CANON-SAME: (%[[A:.+]]: tensor<3x2xf32>, %[[X:.+]]: tensor<3x4x2xf32>, %{{.+}}: tensor<3x4x1xf32>, %{{.+}}: tensor<2x2xf32>)
// CANON: %[[S:.+]]:2 = nn.scan(%[[A]], %[[X]]) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>)
// CANON: ^bb0(%{{.+}}: tensor<3x2xf32>, %{{.+}}: tensor<3x2xf32>):
// CANON: return %[[S]]#0, %[[A]], %[[S]]#1
func.func @dead_inputs(%a: tensor<3x2xf32>, %x: tensor<3x4x2xf32>, %m: tensor<3x4x1xf32>, %u: tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) {
  %r:3 = nn.scan(%a, %a, %x, %m, %u) {num_carries = 2 : i64, num_scanned = 2 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<3x4x1xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %k: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %mt: tensor<3x1xf32>, %uu: tensor<2x2xf32>):
    %0 = nn.add %h, %xt : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    nn.yield %0, %k, %0 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4x2xf32>
}

// -----

// x_t + (h r + b), b an invariant vector, x read by nothing else: b is
// added to x once, outside the loop ([3, 4, 2] + [2]), and the step adds x_t
// to the product alone.
// CANON-LABEL: func @bias_to_scanned
// CANON-SAME: (%[[R:.+]]: tensor<2x2xf32>, %[[B:.+]]: tensor<2xf32>, %[[H0:.+]]: tensor<3x2xf32>, %[[X:.+]]: tensor<3x4x2xf32>)
// CANON: %[[XB:.+]] = nn.add %[[X]], %[[B]] : (tensor<3x4x2xf32>, tensor<2xf32>) -> tensor<3x4x2xf32>
// CANON: nn.scan(%[[H0]], %[[XB]], %[[R]])
// CANON: ^bb0(%[[H:.+]]: tensor<3x2xf32>, %[[XT:.+]]: tensor<3x2xf32>, %[[RR:.+]]: tensor<2x2xf32>):
// CANON-NEXT: %[[P:.+]] = nn.matmul %[[H]], %[[RR]]
// CANON-NEXT: %[[PRE:.+]] = nn.add %[[XT]], %[[P]]
// CANON-NEXT: %[[NEXT:.+]] = nn.tanh %[[PRE]]
// CANON-NEXT: nn.yield %[[NEXT]], %[[PRE]]
func.func @bias_to_scanned(%r: tensor<2x2xf32>, %b: tensor<2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) -> tensor<3x4x2xf32> {
  %res:2 = nn.scan(%h0, %x, %r, %b) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>, %bb: tensor<2xf32>):
    %0 = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %1 = nn.add %0, %bb : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
    %2 = nn.add %xt, %1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %3 = nn.tanh %2 : tensor<3x2xf32>
    nn.yield %3, %2 : tensor<3x2xf32>, tensor<3x2xf32>
  }
  return %res#1 : tensor<3x4x2xf32>
}

// -----

// Not when x is read again (its sum with b would be a second pass over
// it), nor for a bias along the batch ([3] against the step [3]).
// CANON-LABEL: func @bias_stays
// CANON: nn.scan
// CANON: nn.add %{{.+}}, %{{.+}} : (tensor<3x2xf32>, tensor<2xf32>)
// CANON: nn.scan
// CANON: nn.add %{{.+}}, %{{.+}} : (tensor<3xf32>, tensor<3xf32>)
func.func @bias_stays(%r: tensor<2x2xf32>, %b: tensor<2xf32>, %h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>, %c0: tensor<3xf32>, %y: tensor<3x4xf32>, %c: tensor<3xf32>) -> (tensor<3x4x2xf32>, tensor<3x4x2xf32>, tensor<3x4xf32>) {
  %res:2 = nn.scan(%h0, %x, %r, %b) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %rr: tensor<2x2xf32>, %bb: tensor<2xf32>):
    %0 = nn.matmul %h, %rr : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %1 = nn.add %0, %bb : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
    %2 = nn.add %xt, %1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    nn.yield %2, %2 : tensor<3x2xf32>, tensor<3x2xf32>
  }
  %seq:2 = nn.scan(%c0, %y, %c) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3xf32>, tensor<3x4xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3x4xf32>) {
  ^bb0(%k: tensor<3xf32>, %yt: tensor<3xf32>, %cc: tensor<3xf32>):
    %0 = nn.mul %k, %k : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = nn.add %0, %cc : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %2 = nn.add %yt, %1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    nn.yield %2, %2 : tensor<3xf32>, tensor<3xf32>
  }
  return %res#1, %x, %seq#1 : tensor<3x4x2xf32>, tensor<3x4x2xf32>, tensor<3x4xf32>
}
