// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s

// A reverse scan over 3 steps that saves its carries. Lowered: one scf.for
// whose iteration arguments are the carry, the stacked output and the
// saved carries; step t = 2 - iv reads its slice of x, stores the carry
// entering it, and writes its output into its slice.

// CHECK-LABEL: func @reverse_scan
// CHECK-SAME: (%[[H0:.+]]: tensor<2x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[C2:.+]] = arith.constant 2 : index
// CHECK: %[[LOOP:.+]]:3 = scf.for %[[IV:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[H:.+]] = %[[H0]], %[[Y:.+]] = %{{.+}}, %[[S:.+]] = %{{.+}}) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK: %[[T:.+]] = arith.subi %[[C2]], %[[IV]] : index
// CHECK: %[[XT:.+]] = tensor.extract_slice %[[X]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1] : tensor<2x3x4xf32> to tensor<2x4xf32>
// CHECK: %[[SAVED:.+]] = tensor.insert_slice %[[H]] into %[[S]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1]
// CHECK: %[[NEXT:.+]] = linalg.generic {{.+}} ins(%[[H]], %[[XT]] :
// CHECK: %[[YT:.+]] = tensor.insert_slice %[[NEXT]] into %[[Y]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1]
// CHECK: scf.yield %[[NEXT]], %[[YT]], %[[SAVED]]
// CHECK: return %[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2

func.func @reverse_scan(%h0: tensor<2x4xf32>, %x: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %r:3 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64, reverse, saves_carries} : (tensor<2x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  ^bb0(%h: tensor<2x4xf32>, %xt: tensor<2x4xf32>):
    %0 = nn.mul %h, %xt : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    nn.yield %0, %0 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// A step output x_t + p whose x nothing else reads (an RNN's gate
// pre-activations: the input projection plus the recurrent product) is
// stacked in x's place: the loop starts its stack from x instead of an
// empty tensor, and step t reads x_t from that stack, adds p and writes the
// sum back into the same slice (in place once bufferized; the product can
// then accumulate into it).

// CHECK-LABEL: func @accumulated_output
// CHECK-SAME: (%[[H0:.+]]: tensor<2x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>, %[[R:.+]]: tensor<4x4xf32>)
// CHECK: %[[LOOP:.+]]:2 = scf.for %[[T:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[H:.+]] = %[[H0]], %[[Y:.+]] = %[[X]]) -> (tensor<2x4xf32>, tensor<2x3x4xf32>)
// CHECK: %[[XT:.+]] = tensor.extract_slice %[[Y]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1] : tensor<2x3x4xf32> to tensor<2x4xf32>
// CHECK: %[[P:.+]] = linalg.generic {{.+}} ins(%[[H]], %[[R]] :
// CHECK: %[[SUM:.+]] = linalg.generic {{.+}} ins(%[[XT]], %[[P]] :
// CHECK: %[[YT:.+]] = tensor.insert_slice %[[SUM]] into %[[Y]][0, %[[T]], 0] [2, 1, 4] [1, 1, 1]
// CHECK: scf.yield %{{.+}}, %[[YT]]

// x is read after the scan too: its stack is a new tensor.
// CHECK-LABEL: func @read_again
// CHECK-SAME: (%[[H0:.+]]: tensor<2x4xf32>, %[[X:.+]]: tensor<2x3x4xf32>, %[[R:.+]]: tensor<4x4xf32>)
// CHECK: %[[EMPTY:.+]] = tensor.empty() : tensor<2x3x4xf32>
// CHECK: scf.for %[[T:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %[[H0]], %{{.+}} = %[[EMPTY]])
// CHECK: tensor.extract_slice %[[X]][0, %[[T]], 0]

func.func @accumulated_output(%h0: tensor<2x4xf32>, %x: tensor<2x3x4xf32>, %r: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>) {
  %s:2 = nn.scan(%h0, %x, %r) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>) {
  ^bb0(%h: tensor<2x4xf32>, %xt: tensor<2x4xf32>, %rr: tensor<4x4xf32>):
    %p = nn.matmul %h, %rr : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %pre = nn.add %xt, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %next = nn.tanh %pre : tensor<2x4xf32>
    nn.yield %next, %pre : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %s#0, %s#1 : tensor<2x4xf32>, tensor<2x3x4xf32>
}

func.func @read_again(%h0: tensor<2x4xf32>, %x: tensor<2x3x4xf32>, %r: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %s:2 = nn.scan(%h0, %x, %r) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>) {
  ^bb0(%h: tensor<2x4xf32>, %xt: tensor<2x4xf32>, %rr: tensor<4x4xf32>):
    %p = nn.matmul %h, %rr : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %pre = nn.add %xt, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %next = nn.tanh %pre : tensor<2x4xf32>
    nn.yield %next, %pre : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %s#0, %s#1, %x : tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
