// RUN: accrue-opt %s --accrue-lower-cpu --mlir-disable-threading --mlir-print-ir-after=outline-kernels -o /dev/null 2>&1 | FileCheck %s

// A scan step's output that is not its carry (an LSTM's gates, saved for
// the backward) is computed straight into its slice of the stacked output
// (eliminate-empty-tensors before bufferization), not into a temporary
// then copied there; the add both read is computed once, by the one kernel
// of the step that writes the carry and the output (fuse-elementwise's
// shared producers): no copy, one kernel a step.

// CHECK: func.func private @scan_k1(%{{.*}}: memref<2x4xf32>, %{{.*}}: memref<2x4xf32, strided<[?, ?], offset: ?>>, %{{.*}}: memref<2x4xf32>, %{{.*}}: memref<2x4xf32, strided<[12, 1], offset: ?>>)
// CHECK-NEXT: linalg.generic
// CHECK: %[[SUM:.+]] = arith.addf
// CHECK-DAG: math.tanh %[[SUM]]
// CHECK-DAG: arith.mulf %[[SUM]]
// CHECK: scf.for
// CHECK: %[[SLOT:.+]] = memref.subview %{{.*}}[0, %{{.*}}, 0] [2, 1, 4] [1, 1, 1] : memref<2x3x4xf32> to memref<2x4xf32, strided<[12, 1], offset: ?>>
// CHECK: func.call @scan_k1(%{{.*}}, %{{.*}}, %{{.*}}, %[[SLOT]])
// CHECK-NOT: call
// CHECK: scf.yield

func.func @scan(%h0: tensor<2x4xf32>, %x: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>) {
  %r:2 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<2x4xf32>, tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>) {
  ^bb0(%h: tensor<2x4xf32>, %xt: tensor<2x4xf32>):
    %0 = nn.add %h, %xt : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = nn.tanh %0 : tensor<2x4xf32>
    %2 = nn.mul %0, %xt : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    nn.yield %1, %2 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1 : tensor<2x4xf32>, tensor<2x3x4xf32>
}
