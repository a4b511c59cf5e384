// RUN: accrue-opt %s -split-input-file -allow-unregistered-dialect -hoist-loop-invariants | FileCheck %s

// In the micro-batch loop: a weight's transpose and its bf16 cast read only
// the parameters, so they move before the loop, each into a tensor.empty of
// its own (the loop's users keep the one CSE shared); the constant-index
// gather of a table captured from outside moves too. Left in the loop: the
// product with the micro-batch's input, an op reading it, a gather whose
// body captures a value of the loop, and zero fills the loop writes into
// (a destination, an inner loop's initial value).

// CHECK-LABEL: func @step
// CHECK-SAME: (%[[W:.+]]: tensor<4x8xf32>, %[[TABLE:.+]]: tensor<8xf32>
// CHECK: %[[E1:.+]] = tensor.empty() : tensor<8x4xf32>
// CHECK: %[[T:.+]] = linalg.transpose ins(%[[W]] : tensor<4x8xf32>) outs(%[[E1]] : tensor<8x4xf32>)
// CHECK: %[[E2:.+]] = tensor.empty() : tensor<8x4xbf16>
// CHECK: %[[CAST:.+]] = linalg.generic {{.+}} ins(%[[T]] : tensor<8x4xf32>) outs(%[[E2]] : tensor<8x4xbf16>)
// CHECK: %[[E3:.+]] = tensor.empty() : tensor<8x4xf32>
// CHECK: %[[ROWS:.+]] = linalg.generic {{.+}} outs(%[[E3]] : tensor<8x4xf32>)
// CHECK: tensor.extract %[[TABLE]]
// CHECK: scf.for
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %[[CAST]] : tensor<2x8xbf16>, tensor<8x4xbf16>)
// CHECK: arith.extf
// CHECK: tensor.extract %{{.+}}[%{{.+}}] : tensor<2x8xf32>
// CHECK: linalg.fill
// CHECK: linalg.generic {{.+}} ins(%[[ROWS]], %{{.+}} : tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK: %[[Z2:.+]] = linalg.fill
// CHECK: scf.for {{.+}} iter_args(%{{.+}} = %[[Z2]])
// CHECK: } {train.microbatch_loop}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#mm_a = affine_map<(m, n, k) -> (m, k)>
#mm_b = affine_map<(m, n, k) -> (k, n)>
#mm_c = affine_map<(m, n, k) -> (m, n)>
func.func @step(%w: tensor<4x8xf32>, %table: tensor<8xf32>, %xs: tensor<8x8xbf16>,
                %acc: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%a = %acc) -> (tensor<2x4xf32>) {
    %x = tensor.extract_slice %xs[%i, 0] [2, 8] [1, 1] : tensor<8x8xbf16> to tensor<2x8xbf16>
    %e = tensor.empty() : tensor<8x4xf32>
    %t = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
    %eb = tensor.empty() : tensor<8x4xbf16>
    %cast = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%t : tensor<8x4xf32>) outs(%eb : tensor<8x4xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %v = arith.truncf %in : f32 to bf16
      linalg.yield %v : bf16
    } -> tensor<8x4xbf16>
    %p = linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %cast : tensor<2x8xbf16>, tensor<8x4xbf16>) outs(%a : tensor<2x4xf32>) {
    ^bb0(%l: bf16, %rr: bf16, %out: f32):
      %lf = arith.extf %l : bf16 to f32
      %rf = arith.extf %rr : bf16 to f32
      %m = arith.mulf %lf, %rf : f32
      %s = arith.addf %out, %m : f32
      linalg.yield %s : f32
    } -> tensor<2x4xf32>
    // Rows of the table at constant indices: the same in every micro-batch.
    %rows = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
        outs(%e : tensor<8x4xf32>) {
    ^bb0(%out: f32):
      %j = linalg.index 0 : index
      %v = tensor.extract %table[%j] : tensor<8xf32>
      linalg.yield %v : f32
    } -> tensor<8x4xf32>
    // A gather whose body reads a tensor of the loop.
    %xf = tensor.empty() : tensor<2x8xf32>
    %wide = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<2x8xbf16>) outs(%xf : tensor<2x8xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %v = arith.extf %in : bf16 to f32
      linalg.yield %v : f32
    } -> tensor<2x8xf32>
    %picked = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
        outs(%e : tensor<8x4xf32>) {
    ^bb0(%out: f32):
      %j = linalg.index 1 : index
      %v = tensor.extract %wide[%c0, %j] : tensor<2x8xf32>
      linalg.yield %v : f32
    } -> tensor<8x4xf32>
    // A zero fill the loop writes into.
    %zeros = linalg.fill ins(%zero : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
    %sum = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%rows, %picked : tensor<8x4xf32>, tensor<8x4xf32>) outs(%zeros : tensor<8x4xf32>) {
    ^bb0(%u: f32, %v: f32, %out: f32):
      %s = arith.addf %u, %v : f32
      %s2 = arith.addf %s, %out : f32
      linalg.yield %s2 : f32
    } -> tensor<8x4xf32>
    // A zero fill a loop starts from (written into in place).
    %z2 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
    %scattered = scf.for %j = %c0 to %c4 step %c1 iter_args(%t2 = %z2) -> (tensor<8x4xf32>) {
      %v = tensor.extract %sum[%j, %j] : tensor<8x4xf32>
      %t3 = tensor.insert %v into %t2[%j, %c0] : tensor<8x4xf32>
      scf.yield %t3 : tensor<8x4xf32>
    }
    %keep = tensor.extract %scattered[%c0, %c0] : tensor<8x4xf32>
    %a2 = tensor.insert %keep into %p[%c0, %c0] : tensor<2x4xf32>
    scf.yield %a2 : tensor<2x4xf32>
  } {train.microbatch_loop}
  return %r : tensor<2x4xf32>
}

// -----

// A loop that is not the micro-batch loop is left alone.

// CHECK-LABEL: func @other_loop
// CHECK: scf.for
// CHECK: linalg.transpose
func.func @other_loop(%w: tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %e = tensor.empty() : tensor<8x4xf32>
    %t = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
    "test.use"(%t) : (tensor<8x4xf32>) -> ()
  }
  return
}
