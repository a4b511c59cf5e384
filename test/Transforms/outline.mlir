// RUN: accrue-opt %s --train-outline-microbatch --outline-kernels | FileCheck %s

// The micro-batch loop body becomes a noinline function; constants go with
// it, other values it uses become arguments. Then every linalg op on
// buffers becomes a noinline function of its own.

// CHECK-LABEL: func.func private @step_microbatch_k0(
// CHECK-SAME: %[[X:.+]]: memref<4xf32>, %[[ACC:.+]]: memref<4xf32>, %[[S:.+]]: f32) attributes {passthrough = ["noinline"]}
// CHECK-NEXT: %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[X]] : memref<4xf32>) outs(%[[ACC]] : memref<4xf32>)
// CHECK: arith.mulf %{{.+}}, %[[TWO]]
// CHECK: arith.mulf %{{.+}}, %[[S]]

// CHECK-LABEL: func.func private @step_microbatch(
// CHECK-SAME: %{{.+}}: index, %{{.+}}: f32, %[[S2:.+]]: f32, %[[X2:.+]]: memref<4xf32>, %[[ACC2:.+]]: memref<4xf32>) -> f32 attributes {passthrough = ["noinline"]}
// CHECK-NOT: linalg.generic
// CHECK: call @step_microbatch_k0(%[[X2]], %[[ACC2]], %[[S2]])
// CHECK-NOT: linalg.generic
// CHECK: return

// CHECK-LABEL: func.func private @step_k0(
// CHECK-SAME: %{{.+}}: memref<4xf32>) attributes {passthrough = ["noinline"]}
// CHECK-NEXT: arith.constant 0.000000e+00 : f32
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: return

// CHECK-LABEL: func.func @step(
// CHECK: call @step_k0(
// CHECK: scf.for
// CHECK-NEXT: func.call @step_microbatch(
// CHECK-NOT: train.microbatch_loop
#map = affine_map<(d0) -> (d0)>
func.func @step(%x: memref<4xf32>, %acc: memref<4xf32>, %s: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  linalg.fill ins(%zero : f32) outs(%acc : memref<4xf32>)
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%l = %zero) -> (f32) {
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%x : memref<4xf32>) outs(%acc : memref<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.mulf %in, %two : f32
      %b = arith.mulf %a, %s : f32
      %c = arith.addf %out, %b : f32
      linalg.yield %c : f32
    }
    %next = arith.addf %l, %s : f32
    scf.yield %next : f32
  } {train.microbatch_loop}
  return %r : f32
}
