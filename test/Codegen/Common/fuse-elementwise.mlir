// RUN: accrue-opt %s -split-input-file -fuse-elementwise | FileCheck %s
// RUN: accrue-opt %s -split-input-file -fuse-elementwise="shared-producers=1" | FileCheck %s --check-prefix=SHARED

// A chain of elementwise ops with single uses becomes one generic.
// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK-NEXT: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: return

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// A producer the contraction reads through a map that leaves out one of
// its loops (n) stays apart: fused, tanh would run once per (m, n, k), and
// the consumer would no longer be a plain contraction (upstream's
// linalg-fuse-elementwise-ops fuses it).
// CHECK-LABEL: func.func @into_contraction
// CHECK: %[[T:.+]] = linalg.generic {{.*}} ins(%arg0
// CHECK: math.tanh
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[T]], %arg1
// CHECK-NOT: math.tanh
// CHECK: return

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @into_contraction(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %acc: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%acc : tensor<4x3xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %0 = arith.mulf %l, %r : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<4x3xf32>
  return %c : tensor<4x3xf32>
}

// -----

// A producer with another use is not recomputed in its consumer.
// CHECK-LABEL: func.func @two_uses
// CHECK: %[[E:.+]] = linalg.generic
// CHECK: math.exp
// CHECK: %[[S:.+]] = linalg.generic {{.*}} ins(%[[E]]
// CHECK-NOT: math.exp
// CHECK: return %[[E]], %[[S]]
// With shared-producers, one generic computes both, exp once.
// SHARED-LABEL: func.func @two_uses
// SHARED: %[[F:.+]]:2 = linalg.generic
// SHARED: %[[EXP:.+]] = math.exp
// SHARED-NEXT: %[[SQ:.+]] = arith.mulf %[[EXP]], %[[EXP]]
// SHARED-NEXT: linalg.yield %[[EXP]], %[[SQ]]
// SHARED-NOT: linalg.generic
// SHARED: return %[[F]]#0, %[[F]]#1

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @two_uses(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The producer's other use (a sum) comes before the consumer, which the
// fused op would replace: the three ops stay apart.
// SHARED-LABEL: func.func @use_before_consumer
// SHARED: math.exp
// SHARED: linalg.generic {{.*}}"reduction"
// SHARED: linalg.generic
// SHARED-NOT: math.exp
// SHARED: return

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @use_before_consumer(%x: tensor<4x8xf32>, %z: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<4x8xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %s, %b : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// In a loop, a producer of values from outside it (a weight's cast, which
// hoist-loop-invariants moves out of the micro-batch loop) is not fused
// into a consumer of the loop's own values.
// SHARED-LABEL: func.func @invariant_producer
// SHARED: scf.for
// SHARED: %[[CAST:.+]] = linalg.generic {{.*}} ins(%arg0 :
// SHARED: arith.truncf
// SHARED: linalg.generic {{.*}} ins(%[[CAST]], %{{.*}} :
// SHARED: linalg.generic {{.*}} ins(%[[CAST]] :

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @invariant_producer(%w: tensor<4x8xf32>, %x0: tensor<4x8xbf16>, %s0: tensor<4xbf16>, %n: index) -> (tensor<4x8xbf16>, tensor<4xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%x = %x0, %acc = %s0) -> (tensor<4x8xbf16>, tensor<4xbf16>) {
    %e = tensor.empty() : tensor<4x8xbf16>
    %cast = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x8xf32>) outs(%e : tensor<4x8xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in : f32 to bf16
      linalg.yield %0 : bf16
    } -> tensor<4x8xbf16>
    %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%cast, %x : tensor<4x8xbf16>, tensor<4x8xbf16>) outs(%e : tensor<4x8xbf16>) {
    ^bb0(%a: bf16, %b: bf16, %out: bf16):
      %0 = arith.mulf %a, %b : bf16
      linalg.yield %0 : bf16
    } -> tensor<4x8xbf16>
    %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%cast : tensor<4x8xbf16>) outs(%acc : tensor<4xbf16>) {
    ^bb0(%in: bf16, %out: bf16):
      %0 = arith.addf %out, %in : bf16
      linalg.yield %0 : bf16
    } -> tensor<4xbf16>
    scf.yield %y, %s : tensor<4x8xbf16>, tensor<4xbf16>
  }
  return %r#0, %r#1 : tensor<4x8xbf16>, tensor<4xbf16>
}
