// RUN: accrue-opt %s -split-input-file -fold-into-contractions | FileCheck %s
// RUN: accrue-opt %s -split-input-file -fold-into-contractions="vector-bits=128" | FileCheck %s --check-prefix=SSE

// Transposes between contractions and their operands or results become
// permuted indexing maps where vectorize-contractions' kernel for the
// result is at least as good as before.

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// A transposed A: outer products either way (A is broadcast), so the
// transpose folds into A's map.
// CHECK-DAG: #[[$AT:.+]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func @input_keeps_outer_product
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[$AT]], {{.*}}]{{.*}} ins(%arg0, %arg1 : tensor<64x16xf32>, tensor<64x32xf32>)
func.func @input_keeps_outer_product(%at: tensor<64x16xf32>, %b: tensor<64x32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x64xf32>
  %a = linalg.transpose ins(%at : tensor<64x16xf32>) outs(%empty : tensor<16x64xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<16x32xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %r = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<16x64xf32>, tensor<64x32xf32>) outs(%c : tensor<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// -----

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// x @ W^T with W stored [n, k] (PyTorch's Linear): folded, B would be
// contiguous along k, and the outer products would become dot products.
// The transpose stays.
// CHECK-LABEL: func @input_would_lose_outer_product
// CHECK: linalg.transpose
// CHECK: linalg.generic {{.*}} ins(%arg0, %transposed : tensor<16x64xf32>, tensor<64x32xf32>)
func.func @input_would_lose_outer_product(%a: tensor<16x64xf32>, %w: tensor<32x64xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64x32xf32>
  %b = linalg.transpose ins(%w : tensor<32x64xf32>) outs(%empty : tensor<64x32xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<16x32xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %r = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<16x64xf32>, tensor<64x32xf32>) outs(%c : tensor<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// -----

#mapX = affine_map<(i, t, o) -> (t, i)>
#mapDY = affine_map<(i, t, o) -> (t, o)>
#mapC = affine_map<(i, t, o) -> (i, o)>

// A weight gradient dW = (X^T dY)^T as Linear's VJP writes it: the
// contraction writes dW directly, from a fill of dW's shape (X and dY
// trade roles in the outer products: dW is contiguous along X's i).
// CHECK-DAG: #[[$DW:.+]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func @result
// CHECK-NOT: linalg.transpose
// CHECK: %[[FILL:.+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<48x32xf32>)
// CHECK: linalg.generic {indexing_maps = [{{.*}}, {{.*}}, #[[$DW]]]{{.*}} outs(%[[FILL]] : tensor<48x32xf32>)
// CHECK-NOT: linalg.transpose
// With 128-bit vectors (blocks of 8 along n), the same.
// SSE-LABEL: func @result
// SSE-NOT: linalg.transpose
// SSE: linalg.fill {{.*}} -> tensor<48x32xf32>
func.func @result(%x: tensor<64x32xf32>, %dy: tensor<64x48xf32>) -> tensor<48x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x48xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<32x48xf32>) -> tensor<32x48xf32>
  %r = linalg.generic {indexing_maps = [#mapX, #mapDY, #mapC], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %dy : tensor<64x32xf32>, tensor<64x48xf32>) outs(%c : tensor<32x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x48xf32>
  %empty = tensor.empty() : tensor<48x32xf32>
  %t = linalg.transpose ins(%r : tensor<32x48xf32>) outs(%empty : tensor<48x32xf32>) permutation = [1, 0]
  return %t : tensor<48x32xf32>
}

// -----

#mapX = affine_map<(i, t, o) -> (t, i)>
#mapDY = affine_map<(i, t, o) -> (t, o)>
#mapC = affine_map<(i, t, o) -> (i, o)>
#id = affine_map<(i, j) -> (i, j)>

// The same weight gradient rounded to bf16 before the transpose (bf16
// autocast's gradient of a bf16 weight copy): the transpose moves before the
// rounding and folds into the contraction, which writes dW; the rounding
// maps dW's values.
// CHECK-DAG: #[[$DW:.+]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func @rounded_result
// CHECK-NOT: linalg.transpose
// CHECK: %[[FILL:.+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<48x32xf32>)
// CHECK: %[[DW:.+]] = linalg.generic {indexing_maps = [{{.*}}, {{.*}}, #[[$DW]]]{{.*}} outs(%[[FILL]] : tensor<48x32xf32>)
// CHECK: %[[R:.+]] = linalg.generic {{.*}} ins(%[[DW]] : tensor<48x32xf32>) outs(%{{.*}} : tensor<48x32xf32>)
// CHECK: arith.truncf
// CHECK: arith.extf
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @rounded_result(%x: tensor<64x32xf32>, %dy: tensor<64x48xf32>) -> tensor<48x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x48xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<32x48xf32>) -> tensor<32x48xf32>
  %r = linalg.generic {indexing_maps = [#mapX, #mapDY, #mapC], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %dy : tensor<64x32xf32>, tensor<64x48xf32>) outs(%c : tensor<32x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x48xf32>
  %e2 = tensor.empty() : tensor<32x48xf32>
  %rounded = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<32x48xf32>) outs(%e2 : tensor<32x48xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.truncf %in : f32 to bf16
    %w = arith.extf %n : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<32x48xf32>
  %empty = tensor.empty() : tensor<48x32xf32>
  %t = linalg.transpose ins(%rounded : tensor<32x48xf32>) outs(%empty : tensor<48x32xf32>) permutation = [1, 0]
  return %t : tensor<48x32xf32>
}

// -----

#mapX = affine_map<(i, t, o) -> (t, i)>
#mapDY = affine_map<(i, t, o) -> (t, o)>
#mapC = affine_map<(i, t, o) -> (i, o)>

// The same contraction adding to a value that is not a fill (transposing
// it would be another copy), or whose result has another use: the
// transposes stay.
// CHECK-LABEL: func @result_not_folded
// CHECK: linalg.transpose
// CHECK: linalg.transpose
func.func @result_not_folded(%x: tensor<64x32xf32>, %dy: tensor<64x48xf32>, %start: tensor<32x48xf32>) -> (tensor<48x32xf32>, tensor<48x32xf32>, tensor<32x48xf32>) {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#mapX, #mapDY, #mapC], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %dy : tensor<64x32xf32>, tensor<64x48xf32>) outs(%start : tensor<32x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x48xf32>
  %empty = tensor.empty() : tensor<48x32xf32>
  %t = linalg.transpose ins(%r : tensor<32x48xf32>) outs(%empty : tensor<48x32xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<32x48xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<32x48xf32>) -> tensor<32x48xf32>
  %r2 = linalg.generic {indexing_maps = [#mapX, #mapDY, #mapC], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %dy : tensor<64x32xf32>, tensor<64x48xf32>) outs(%c : tensor<32x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x48xf32>
  %t2 = linalg.transpose ins(%r2 : tensor<32x48xf32>) outs(%empty : tensor<48x32xf32>) permutation = [1, 0]
  return %t, %t2, %r2 : tensor<48x32xf32>, tensor<48x32xf32>, tensor<32x48xf32>
}

// -----

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

// x + h r, the product's and x's only use (an RNN step's input projection
// plus its recurrent product): the product starts from x instead of zeros,
// and the add is gone.
// CHECK-LABEL: func @added_init
// CHECK-SAME: (%[[X:.+]]: tensor<16x64xf32>, %[[H:.+]]: tensor<16x32xf32>, %[[R:.+]]: tensor<32x64xf32>)
// CHECK: %[[P:.+]] = linalg.generic {{.+}} ins(%[[H]], %[[R]] : tensor<16x32xf32>, tensor<32x64xf32>) outs(%[[X]] : tensor<16x64xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[P]]
func.func @added_init(%x: tensor<16x64xf32>, %h: tensor<16x32xf32>, %r: tensor<32x64xf32>) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %p = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%h, %r : tensor<16x32xf32>, tensor<32x64xf32>) outs(%c : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %p : tensor<16x64xf32>, tensor<16x64xf32>) outs(%e : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  return %sum : tensor<16x64xf32>
}

// -----

#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

// Not when x is read again (starting from it would copy it first), nor
// for x - h r.
// CHECK-LABEL: func @added_init_stays
// CHECK-COUNT-4: linalg.generic
func.func @added_init_stays(%x: tensor<16x64xf32>, %h: tensor<16x32xf32>, %r: tensor<32x64xf32>, %x2: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %p = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%h, %r : tensor<16x32xf32>, tensor<32x64xf32>) outs(%c : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %p : tensor<16x64xf32>, tensor<16x64xf32>) outs(%e : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  %p2 = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%h, %r : tensor<16x32xf32>, tensor<32x64xf32>) outs(%c : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  %diff = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x2, %p2 : tensor<16x64xf32>, tensor<16x64xf32>) outs(%e : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  return %sum, %diff, %x : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}
