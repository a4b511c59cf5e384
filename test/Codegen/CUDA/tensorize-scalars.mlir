// RUN: accrue-opt %s -split-input-file -cuda-tensorize-scalars | FileCheck %s

// The loss sum of a micro-batch loop: read from tensor data, carried by the
// loop, divided and stored into the metrics. Every step stays in rank-0
// tensors: the loop carries tensor<f32>, the sum is a rank-0 generic that
// updates the carried tensor in place, the metric a copy into the buffer.

// CHECK-LABEL: func @loop_sum
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[K:.+]]: index, %[[M:.+]]: memref<2xf32>)
// CHECK: %[[ZERO:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<f32>) -> tensor<f32>
// CHECK: %[[SUM:.+]] = scf.for %{{.+}} = %{{.+}} to %[[K]] step %{{.+}} iter_args(%[[ACC:.+]] = %[[ZERO]]) -> (tensor<f32>) {
// CHECK:   %[[R:.+]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4xf32>)
// CHECK:   %[[ADD:.+]] = linalg.generic {{.*}} iterator_types = []} ins(%[[R]] : tensor<f32>) outs(%[[ACC]] : tensor<f32>)
// CHECK:     arith.addf
// CHECK:   scf.yield %[[ADD]] : tensor<f32>
// CHECK: %[[MEAN:.+]] = linalg.generic {{.*}} iterator_types = []} outs(%[[SUM]] : tensor<f32>)
// CHECK:   arith.divf
// CHECK: %[[ELT:.+]] = memref.subview %[[M]][%{{.+}}] [1] [1] : memref<2xf32> to memref<f32, strided<[], offset: ?>>
// CHECK: bufferization.materialize_in_destination %[[MEAN]] in restrict writable %[[ELT]]
// CHECK-NOT: memref.store
// CHECK-NOT: tensor.extract
#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>
func.func @loop_sum(%x: tensor<4xf32>, %k: index, %metrics: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %four = arith.constant 4.0 : f32
  %sum = scf.for %i = %c0 to %k step %c1 iter_args(%acc = %zero) -> (f32) {
    %init = tensor.empty() : tensor<f32>
    %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<f32>) -> tensor<f32>
    %r = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
        ins(%x : tensor<4xf32>) outs(%filled : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %s = arith.addf %in, %out : f32
      linalg.yield %s : f32
    } -> tensor<f32>
    %v = tensor.extract %r[] : tensor<f32>
    %next = arith.addf %acc, %v : f32
    scf.yield %next : f32
  }
  %mean = arith.divf %sum, %four : f32
  memref.store %mean, %metrics[%c0] : memref<2xf32>
  return
}

// -----

// A value computed on the device that a linalg body uses becomes a rank-0
// input of the linalg op.

// CHECK-LABEL: func @captured
// CHECK: %[[S:.+]] = linalg.generic {{.*}} iterator_types = []} outs(%{{.+}} : tensor<f32>)
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}], iterator_types = ["parallel"]} ins(%[[S]] : tensor<f32>) outs(%{{.+}} : tensor<4xf32>)
// CHECK: ^bb0(%[[IN:.+]]: f32, %[[OUT:.+]]: f32):
// CHECK:   arith.mulf %[[OUT]], %[[IN]]
#id = affine_map<(d0) -> (d0)>
func.func @captured(%n: tensor<f32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  %one = arith.constant 1.0 : f32
  %v = tensor.extract %n[] : tensor<f32>
  %inv = arith.divf %one, %v : f32
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]} outs(%g : tensor<4xf32>) {
  ^bb0(%out: f32):
    %m = arith.mulf %out, %inv : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Scalars that never came from tensor data stay on the host.

// CHECK-LABEL: func @host_only
// CHECK: arith.addf %{{.+}}, %{{.+}} : f32
// CHECK-NOT: linalg.generic
func.func @host_only(%a: f32, %b: f32) -> f32 {
  %s = arith.addf %a, %b : f32
  return %s : f32
}

// -----

// A carried value that is not updated in place is copied back into the
// carried tensor, so that the loop keeps one buffer.

// CHECK-LABEL: func @replaced
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (tensor<f32>) {
// CHECK:   %[[BACK:.+]] = linalg.copy ins(%{{.+}} : tensor<f32>) outs(%[[ACC]] : tensor<f32>) -> tensor<f32>
// CHECK:   scf.yield %[[BACK]] : tensor<f32>
func.func @replaced(%t: tensor<f32>, %k: index, %m: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %last = scf.for %i = %c0 to %k step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = tensor.extract %t[] : tensor<f32>
    scf.yield %v : f32
  }
  memref.store %last, %m[] : memref<f32>
  return
}

// -----

// A scattering data-parallel all-reduce (ZeRO) stays one: its scalars go to
// the arena's tail and the arena is reduce-scattered up to them.
// CHECK-LABEL: func @scatter
// CHECK: %[[TAIL:.+]] = tensor.insert_slice %{{.+}} into %{{.+}}[61] [1] [1]
// CHECK: train.all_reduce_arena %[[TAIL]] scatter_used 62 : tensor<64xf32>
func.func @scatter(%acc: tensor<64xf32>, %s: tensor<f32>, %c: tensor<f32>) -> tensor<64xf32> {
  %n = tensor.extract %s[] : tensor<f32>
  %d = tensor.extract %c[] : tensor<f32>
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 60 scatter : tensor<64xf32>
  return %r : tensor<64xf32>
}
