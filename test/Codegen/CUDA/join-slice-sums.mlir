// RUN: accrue-opt %s -split-input-file -cuda-join-slice-sums -canonicalize | FileCheck %s

// A split's gradient: each part inserted into zeros, the inserts summed
// (in two adds, as the autodiff accumulates them). The parts cover the
// tensor: they are inserted into one empty tensor, with no fill and no
// add.

// CHECK-LABEL: func @split
// CHECK-SAME: (%[[A:.+]]: tensor<2x4xf32>, %[[B:.+]]: tensor<2x4xf32>, %[[C:.+]]: tensor<2x4xf32>)
// CHECK-NOT: linalg.fill
// CHECK: %[[E:.+]] = tensor.empty() : tensor<2x12xf32>
// CHECK: %[[I1:.+]] = tensor.insert_slice %[[A]] into %[[E]][0, 0] [2, 4] [1, 1]
// CHECK: %[[I2:.+]] = tensor.insert_slice %[[B]] into %[[I1]][0, 4] [2, 4] [1, 1]
// CHECK: %[[I3:.+]] = tensor.insert_slice %[[C]] into %[[I2]][0, 8] [2, 4] [1, 1]
// CHECK-NOT: linalg.generic
// CHECK: return %[[I3]]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @split(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>, %c: tensor<2x4xf32>) -> tensor<2x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x12xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x12xf32>) -> tensor<2x12xf32>
  %ia = tensor.insert_slice %a into %z0[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %e1 = tensor.empty() : tensor<2x12xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x12xf32>) -> tensor<2x12xf32>
  %ib = tensor.insert_slice %b into %z1[0, 4] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %e2 = tensor.empty() : tensor<2x12xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x12xf32>) -> tensor<2x12xf32>
  %ic = tensor.insert_slice %c into %z2[0, 8] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %o = tensor.empty() : tensor<2x12xf32>
  %ab = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ia, %ib : tensor<2x12xf32>, tensor<2x12xf32>) outs(%o : tensor<2x12xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<2x12xf32>
  %abc = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ab, %ic : tensor<2x12xf32>, tensor<2x12xf32>) outs(%o : tensor<2x12xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<2x12xf32>
  return %abc : tensor<2x12xf32>
}

// -----

// Parts that leave elements uncovered go into zeros.

// CHECK-LABEL: func @partial
// CHECK: %[[Z:.+]] = linalg.fill
// CHECK: %[[I1:.+]] = tensor.insert_slice %{{.+}} into %[[Z]][0, 0] [2, 4]
// CHECK: tensor.insert_slice %{{.+}} into %[[I1]][0, 8] [2, 4]
// CHECK-NOT: linalg.generic
#id1 = affine_map<(d0, d1) -> (d0, d1)>
func.func @partial(%a: tensor<2x4xf32>, %c: tensor<2x4xf32>) -> tensor<2x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x12xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x12xf32>) -> tensor<2x12xf32>
  %ia = tensor.insert_slice %a into %z0[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %e2 = tensor.empty() : tensor<2x12xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x12xf32>) -> tensor<2x12xf32>
  %ic = tensor.insert_slice %c into %z2[0, 8] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %o = tensor.empty() : tensor<2x12xf32>
  %s = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel", "parallel"]}
      ins(%ia, %ic : tensor<2x12xf32>, tensor<2x12xf32>) outs(%o : tensor<2x12xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %t = arith.addf %x, %y : f32
    linalg.yield %t : f32
  } -> tensor<2x12xf32>
  return %s : tensor<2x12xf32>
}

// -----

// Overlapping parts, a nonzero base or a body that is not their sum stay.

// CHECK-LABEL: func @kept
// CHECK-COUNT-3: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @kept(%a: tensor<2x8xf32>, %b: tensor<2x4xf32>, %base: tensor<2x12xf32>) -> (tensor<2x12xf32>, tensor<2x12xf32>, tensor<2x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x12xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x12xf32>) -> tensor<2x12xf32>
  %ia = tensor.insert_slice %a into %z0[0, 0] [2, 8] [1, 1] : tensor<2x8xf32> into tensor<2x12xf32>
  %ib = tensor.insert_slice %b into %z0[0, 4] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %o = tensor.empty() : tensor<2x12xf32>
  %overlap = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%ia, %ib : tensor<2x12xf32>, tensor<2x12xf32>) outs(%o : tensor<2x12xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %t = arith.addf %x, %y : f32
    linalg.yield %t : f32
  } -> tensor<2x12xf32>
  %ja = tensor.insert_slice %b into %base[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %jb = tensor.insert_slice %b into %z0[0, 8] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %onbase = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%ja, %jb : tensor<2x12xf32>, tensor<2x12xf32>) outs(%o : tensor<2x12xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %t = arith.addf %x, %y : f32
    linalg.yield %t : f32
  } -> tensor<2x12xf32>
  %ka = tensor.insert_slice %b into %z0[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %kb = tensor.insert_slice %b into %z0[0, 8] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x12xf32>
  %product = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%ka, %kb : tensor<2x12xf32>, tensor<2x12xf32>) outs(%o : tensor<2x12xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %t = arith.mulf %x, %y : f32
    linalg.yield %t : f32
  } -> tensor<2x12xf32>
  return %overlap, %onbase, %product : tensor<2x12xf32>, tensor<2x12xf32>, tensor<2x12xf32>
}
