// RUN: accrue-opt %s -split-input-file -fold-into-contractions="bf16-dot layouts=false" | FileCheck %s
// RUN: accrue-opt %s -split-input-file -fold-into-contractions | FileCheck %s --check-prefix=OFF

// With bf16-dot, a contraction of two bf16 tensors widened to f32 (as
// nn-to-linalg widens a bf16 product) reads the bf16 tensors, widening in
// its body, where vectorize-contractions then has the same kind of kernel
// on vdpbf16ps (k in pairs).

#id = affine_map<(i, j) -> (i, j)>
#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func @widened_inputs
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<16x64xbf16>, tensor<64x32xbf16>)
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: arith.mulf
// OFF-LABEL: func @widened_inputs
// OFF: ins({{.*}} : tensor<16x64xf32>, tensor<64x32xf32>)
func.func @widened_inputs(%a: tensor<16x64xbf16>, %b: tensor<64x32xbf16>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<16x64xf32>
  %wa = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<16x64xbf16>) outs(%ea : tensor<16x64xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<16x64xf32>
  %eb = tensor.empty() : tensor<64x32xf32>
  %wb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<64x32xbf16>) outs(%eb : tensor<64x32xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<64x32xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %r = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %wb : tensor<16x64xf32>, tensor<64x32xf32>) outs(%c : tensor<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// -----

// Odd k: no bf16 kernel, so the product keeps reading the f32 copies.
#id = affine_map<(i, j) -> (i, j)>
#mapA = affine_map<(m, n, k) -> (m, k)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>

// CHECK-LABEL: func @odd_k
// CHECK: ins({{.*}} : tensor<16x63xf32>, tensor<63x32xf32>)
func.func @odd_k(%a: tensor<16x63xbf16>, %b: tensor<63x32xbf16>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<16x63xf32>
  %wa = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<16x63xbf16>) outs(%ea : tensor<16x63xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<16x63xf32>
  %eb = tensor.empty() : tensor<63x32xf32>
  %wb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<63x32xbf16>) outs(%eb : tensor<63x32xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<63x32xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %r = linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %wb : tensor<16x63xf32>, tensor<63x32xf32>) outs(%c : tensor<16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}
