// RUN: accrue-opt %s -split-input-file -fuse-elementwise="recompute-casts=true" | FileCheck %s
// RUN: accrue-opt %s -split-input-file -fuse-elementwise | FileCheck %s --check-prefix=DEFAULT

// With recompute-casts (the CUDA pipeline's), a widening of bf16 logits
// that two reductions read (a row's maximum and its sum of exponentials)
// is recomputed in each: both read the bf16 tensor, and the f32 copy goes
// (its last reader, elementwise, then fuses it as any single-use
// producer). Without the option, a producer with several uses stays.

// CHECK-LABEL: func.func @widened_rows
// CHECK-SAME: (%[[X:.+]]: tensor<4x64xbf16>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x64xbf16>)
// CHECK:   arith.extf
// CHECK:   arith.maximumf
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x64xbf16>)
// CHECK:   arith.extf
// CHECK:   math.exp
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%[[X]] : tensor<4x64xbf16>)
// CHECK:   arith.extf
// CHECK:   arith.negf
// CHECK-NOT: linalg.generic
// DEFAULT-LABEL: func.func @widened_rows
// DEFAULT-COUNT-2: iterator_types = ["parallel", "reduction"]} ins(%{{.+}} : tensor<4x64xf32>)
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @widened_rows(%x: tensor<4x64xbf16>, %m: tensor<4xf32>, %s: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x64xf32>) {
  %e = tensor.empty() : tensor<4x64xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x64xbf16>) outs(%e : tensor<4x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<4x64xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%w : tensor<4x64xf32>) outs(%m : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%w : tensor<4x64xf32>) outs(%s : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    %1 = arith.addf %0, %out : f32
    linalg.yield %1 : f32
  } -> tensor<4xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x64xf32>) outs(%e : tensor<4x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x64xf32>
  return %max, %sum, %neg : tensor<4xf32>, tensor<4xf32>, tensor<4x64xf32>
}

// -----

// Only into reductions: a widening two elementwise ops read stays one
// tensor (recomputing it in each would read the narrow tensor twice for
// nothing), and a contraction reading it keeps reading it, for
// cuda-fold-into-contractions.

// CHECK-LABEL: func.func @kept_widenings
// CHECK: %[[W:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<4x8xbf16>) outs(%{{.+}} : tensor<4x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[W]] : tensor<4x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[W]] : tensor<4x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[W]], %{{.+}} : tensor<4x8xf32>, tensor<8x3xf32>)
#id = affine_map<(d0, d1) -> (d0, d1)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @kept_widenings(%x: tensor<4x8xbf16>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xbf16>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %p = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%w, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %0 = arith.mulf %l, %r : f32
    %1 = arith.addf %o, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<4x3xf32>
  return %neg, %exp, %p : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32>
}
