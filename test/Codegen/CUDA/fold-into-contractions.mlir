// RUN: accrue-opt %s -split-input-file -cuda-fold-into-contractions | FileCheck %s

// A transposed input is read from the tensor it was moved from; the
// contraction keeps what it was marked with (a bias gradient's pair).

// CHECK-DAG: #[[XT:.+]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[W:.+]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK: func @moved_input
// CHECK-SAME: (%[[X:.+]]: tensor<3x4xf32>, %[[Y:.+]]: tensor<3x5xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[XT]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]], %[[Y]] : tensor<3x4xf32>, tensor<3x5xf32>)
// CHECK-SAME: attrs =  {accrue.bias_gradient = array<i64: 0, 1>}
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @moved_input(%x: tensor<3x4xf32>, %y: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %xt = linalg.transpose ins(%x : tensor<3x4xf32>) outs(%e : tensor<4x3xf32>) permutation = [1, 0]
  %o = tensor.empty() : tensor<4x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%xt, %y : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init : tensor<4x5xf32>) attrs = {accrue.bias_gradient = array<i64: 0, 1>} {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}

// -----

// A Linear's weight gradient as autodiff writes it: a product per sample,
// summed over the samples (keeping a unit dimension), transposed. One
// contraction sums over samples and tokens and writes the transpose.

// CHECK-DAG: #[[X:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1)>
// CHECK-DAG: #[[DY:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG: #[[DW:.+]] = affine_map<(d0, d1, d2, d3) -> (d3, 0, d1)>
// CHECK: func @weight_gradient
// CHECK: %[[INIT:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<5x1x4xf32>)
// CHECK-NEXT: %[[DWT:.+]] = linalg.generic {indexing_maps = [#[[X]], #[[DY]], #[[DW]]], iterator_types = ["reduction", "parallel", "reduction", "parallel"]}
// CHECK-SAME: outs(%[[INIT]] : tensor<5x1x4xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: return %[[DWT]]
#b_mk = affine_map<(b, m, k, n) -> (b, m, k)>
#b_kn = affine_map<(b, m, k, n) -> (b, k, n)>
#b_mn = affine_map<(b, m, k, n) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#keep = affine_map<(b, m, n) -> (0, m, n)>
func.func @weight_gradient(%x: tensor<2x7x4xf32>, %dy: tensor<2x7x5xf32>) -> tensor<5x1x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x7xf32>
  %xt = linalg.transpose ins(%x : tensor<2x7x4xf32>) outs(%e : tensor<2x4x7xf32>) permutation = [0, 2, 1]
  %o = tensor.empty() : tensor<2x4x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  %per = linalg.generic {indexing_maps = [#b_mk, #b_kn, #b_mn], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%xt, %dy : tensor<2x4x7xf32>, tensor<2x7x5xf32>) outs(%init : tensor<2x4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x5xf32>
  %so = tensor.empty() : tensor<1x4x5xf32>
  %sinit = linalg.fill ins(%zero : f32) outs(%so : tensor<1x4x5xf32>) -> tensor<1x4x5xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #keep], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%per : tensor<2x4x5xf32>) outs(%sinit : tensor<1x4x5xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<1x4x5xf32>
  %to = tensor.empty() : tensor<5x1x4xf32>
  %t = linalg.transpose ins(%sum : tensor<1x4x5xf32>) outs(%to : tensor<5x1x4xf32>) permutation = [2, 0, 1]
  return %t : tensor<5x1x4xf32>
}

// -----

// A contraction that does not start from zeros keeps its sum separate (the
// init would be summed too); one used twice keeps its result.

// CHECK-LABEL: func @not_zero_based
// CHECK-COUNT-2: linalg.generic
// CHECK-LABEL: func @used_twice
// CHECK: linalg.generic
// CHECK: linalg.transpose
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (n)>
func.func @not_zero_based(%x: tensor<4x3xf32>, %y: tensor<3x5xf32>, %c: tensor<4x5xf32>) -> tensor<5xf32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : tensor<4x3xf32>, tensor<3x5xf32>) outs(%c : tensor<4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %so = tensor.empty() : tensor<5xf32>
  %sinit = linalg.fill ins(%zero : f32) outs(%so : tensor<5xf32>) -> tensor<5xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["reduction", "parallel"]}
      ins(%r : tensor<4x5xf32>) outs(%sinit : tensor<5xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<5xf32>
  return %sum : tensor<5xf32>
}
func.func @used_twice(%x: tensor<4x3xf32>, %y: tensor<3x5xf32>) -> (tensor<4x5xf32>, tensor<5x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<4x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init : tensor<4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %to = tensor.empty() : tensor<5x4xf32>
  %t = linalg.transpose ins(%r : tensor<4x5xf32>) outs(%to : tensor<5x4xf32>) permutation = [1, 0]
  return %r, %t : tensor<4x5xf32>, tensor<5x4xf32>
}

// -----

// Two contractions starting from one (CSE-merged) zero fill get one each.

// CHECK-LABEL: func @shared_fill
// CHECK: %[[F1:.+]] = linalg.fill
// CHECK: %[[F2:.+]] = linalg.fill
// CHECK: linalg.generic {{.*}} outs(%[[F2]] : tensor<4x5xf32>)
// CHECK: linalg.generic {{.*}} outs(%[[F1]] : tensor<4x5xf32>)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @shared_fill(%x: tensor<4x3xf32>, %y: tensor<3x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<4x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r1 = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init : tensor<4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %r2 = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init : tensor<4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %b, %a : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %r1, %r2 : tensor<4x5xf32>, tensor<4x5xf32>
}

// -----

// A bf16 product as nn-to-linalg writes it: both operands widened to f32
// by elementwise ops, then an f32 contraction. The contraction reads the
// bf16 tensors and widens in its body (the GEMM reads bf16 and
// accumulates in f32); the widenings are left without users. One operand
// widened alone is left as it is (a GEMM's A and B share a type).

// CHECK-LABEL: func @widened_inputs
// CHECK-SAME: (%[[A:.+]]: tensor<4x3xbf16>, %[[B:.+]]: tensor<3x5xbf16>, %[[C:.+]]: tensor<3x5xf32>)
// CHECK: %[[R:.+]] = linalg.generic {{.+}} ins(%[[A]], %[[B]] : tensor<4x3xbf16>, tensor<3x5xbf16>) {{.*}}attrs =  {accrue.bias_gradient = array<i64: 0, 0>}
// CHECK: ^bb0(%[[X:.+]]: bf16, %[[Y:.+]]: bf16, %[[ACC:.+]]: f32):
// CHECK:   %[[XW:.+]] = arith.extf %[[X]] : bf16 to f32
// CHECK:   %[[YW:.+]] = arith.extf %[[Y]] : bf16 to f32
// CHECK:   %[[P:.+]] = arith.mulf %[[XW]], %[[YW]] : f32
// CHECK:   arith.addf %[[ACC]], %[[P]] : f32
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %[[C]] : tensor<4x3xf32>, tensor<3x5xf32>)
// CHECK: return %[[R]]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @widened_inputs(%a: tensor<4x3xbf16>, %b: tensor<3x5xbf16>, %c: tensor<3x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<4x3xf32>
  %wa = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x3xbf16>) outs(%ea : tensor<4x3xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<4x3xf32>
  %eb = tensor.empty() : tensor<3x5xf32>
  %wb = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<3x5xbf16>) outs(%eb : tensor<3x5xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<3x5xf32>
  %o = tensor.empty() : tensor<4x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %wb : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init : tensor<4x5xf32>) attrs = {accrue.bias_gradient = array<i64: 0, 0>} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %o2 = tensor.empty() : tensor<4x5xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%o2 : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r2 = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %c : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init2 : tensor<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  return %r, %r2 : tensor<4x5xf32>, tensor<4x5xf32>
}

// -----

// A zero-started product whose only use rounds it to bf16 (nn-to-linalg's
// low-precision matmul): the rounding is marked for the GEMM to do
// (accrue.gemm_rounding), and the product's fill gets an empty tensor of
// its own (the one it shared with another op would bufferize into a buffer
// both use). A product with a second use, and one added to a given tensor,
// are rounded by kernels as before.

// CHECK-LABEL: func @rounded_products
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4x5xf32>
// CHECK: %[[OWN:.+]] = tensor.empty() : tensor<4x5xf32>
// CHECK: %[[F:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[OWN]] : tensor<4x5xf32>)
// CHECK: %[[P:.+]] = linalg.generic {{.+}} outs(%[[F]] : tensor<4x5xf32>)
// CHECK: linalg.generic {{.+}} ins(%[[P]] : tensor<4x5xf32>) outs(%{{.+}} : tensor<4x5xbf16>) attrs = {accrue.gemm_rounding}
// CHECK: %[[Q:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<4x5xf32>)
// CHECK: linalg.generic {{.+}} ins(%[[Q]] : tensor<4x5xf32>) outs(%{{.+}} : tensor<4x5xbf16>) {
// CHECK: %[[R:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<4x5xf32>)
// CHECK: linalg.generic {{.+}} ins(%[[R]] : tensor<4x5xf32>) outs(%{{.+}} : tensor<4x5xbf16>) {
// CHECK: linalg.generic {{.+}} ins(%[[E]] : tensor<4x5xf32>)
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @rounded_products(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4x5xf32>) -> (tensor<4x5xbf16>, tensor<4x5xbf16>, tensor<4x5xf32>, tensor<4x5xbf16>, tensor<4x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %eb = tensor.empty() : tensor<4x5xbf16>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init : tensor<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %pb = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<4x5xf32>) outs(%eb : tensor<4x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x5xbf16>
  // Used twice.
  %init2 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %q = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x3xf32>, tensor<3x5xf32>) outs(%init2 : tensor<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %qb = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%q : tensor<4x5xf32>) outs(%eb : tensor<4x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x5xbf16>
  // Added to %c.
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x3xf32>, tensor<3x5xf32>) outs(%c : tensor<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x5xf32>
  %rb = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<4x5xf32>) outs(%eb : tensor<4x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x5xbf16>
  %other = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%e : tensor<4x5xf32>) outs(%e : tensor<4x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x5xf32>
  return %pb, %qb, %q, %rb, %other : tensor<4x5xbf16>, tensor<4x5xbf16>, tensor<4x5xf32>, tensor<4x5xbf16>, tensor<4x5xf32>
}

// -----

// A bf16 convolution as nn-to-linalg writes it: the input widened, padded
// and laid out as columns (im2col), the weight widened and reshaped, then
// an f32 contraction. The widenings move past the padding (its zero is
// exact in bf16), the columns' copy and the reshapes, so those move bf16
// values, and then fold into the contraction, which reads bf16.

// CHECK-LABEL: func @widened_columns
// CHECK-SAME: (%[[X:.+]]: tensor<2x1x3x3xbf16>, %[[W:.+]]: tensor<3x1x2x2xbf16>)
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : bf16
// CHECK-DAG: %[[PAD:.+]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK-DAG: tensor.yield %[[ZERO]] : bf16
// CHECK-DAG: %[[COLS:.+]] = linalg.generic {{.+}} ins(%[[PAD]] : tensor<2x1x5x5xbf16>) outs(%{{.+}} : tensor<2x1x2x2x4x4xbf16>)
// CHECK-DAG: %[[C:.+]] = tensor.collapse_shape %[[COLS]] {{.+}} into tensor<2x4x16xbf16>
// CHECK-DAG: %[[WM:.+]] = tensor.collapse_shape %[[W]] {{.+}} into tensor<3x4xbf16>
// CHECK: linalg.generic {{.+}} ins(%[[WM]], %[[C]] : tensor<3x4xbf16>, tensor<2x4x16xbf16>)
// CHECK-NOT: arith.extf {{.+}} : bf16 to f32
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK-NOT: arith.extf
// CHECK: return
#x4 = affine_map<(n, c, i, j, h, w) -> (n, c, h + i, w + j)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#id6 = affine_map<(n, c, i, j, h, w) -> (n, c, i, j, h, w)>
#cw = affine_map<(n, f, kk, p) -> (f, kk)>
#cc = affine_map<(n, f, kk, p) -> (n, kk, p)>
#cy = affine_map<(n, f, kk, p) -> (n, f, p)>
func.func @widened_columns(%x: tensor<2x1x3x3xbf16>, %w: tensor<3x1x2x2xbf16>) -> tensor<2x3x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<2x1x3x3xf32>
  %wx = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x1x3x3xbf16>) outs(%ex : tensor<2x1x3x3xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<2x1x3x3xf32>
  %ew = tensor.empty() : tensor<3x1x2x2xf32>
  %ww = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%w : tensor<3x1x2x2xbf16>) outs(%ew : tensor<3x1x2x2xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<3x1x2x2xf32>
  %padded = tensor.pad %wx low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : f32
  } : tensor<2x1x3x3xf32> to tensor<2x1x5x5xf32>
  %e6 = tensor.empty() : tensor<2x1x2x2x4x4xf32>
  %cols = linalg.generic {indexing_maps = [#x4, #id6], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%padded : tensor<2x1x5x5xf32>) outs(%e6 : tensor<2x1x2x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x1x2x2x4x4xf32>
  %c = tensor.collapse_shape %cols [[0], [1, 2, 3], [4, 5]] : tensor<2x1x2x2x4x4xf32> into tensor<2x4x16xf32>
  %wm = tensor.collapse_shape %ww [[0], [1, 2, 3]] : tensor<3x1x2x2xf32> into tensor<3x4xf32>
  %o = tensor.empty() : tensor<2x3x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  %y = linalg.generic {indexing_maps = [#cw, #cc, #cy], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%wm, %c : tensor<3x4xf32>, tensor<2x4x16xf32>) outs(%init : tensor<2x3x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x3x16xf32>
  return %y : tensor<2x3x16xf32>
}

// -----

// What stays: padding with a value bf16 cannot hold (0.1), and a widened
// input that something other than data movement and contractions also
// reads (its widening would stay, beside a second one).

// CHECK-LABEL: func @widened_kept
// CHECK: tensor.pad %{{.+}} low[1] high[1]
// CHECK: tensor.yield %{{.+}} : f32
// CHECK: tensor.pad %{{.+}} low[1] high[1]
// CHECK: tensor.yield %{{.+}} : f32
// CHECK-NOT: : bf16)
// CHECK: return
#i1 = affine_map<(d0) -> (d0)>
#pm = affine_map<(m, k) -> (k)>
#pv = affine_map<(m, k) -> (m, k)>
#po = affine_map<(m, k) -> (m)>
func.func @widened_kept(%x: tensor<4xbf16>, %w: tensor<3x6xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %tenth = arith.constant 0.1 : f32
  %e = tensor.empty() : tensor<4xf32>
  %wx = linalg.generic {indexing_maps = [#i1, #i1], iterator_types = ["parallel"]}
      ins(%x : tensor<4xbf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %p1 = tensor.pad %wx low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %tenth : f32
  } : tensor<4xf32> to tensor<6xf32>
  %o = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<3xf32>) -> tensor<3xf32>
  %y1 = linalg.generic {indexing_maps = [#pm, #pv, #po], iterator_types = ["parallel", "reduction"]}
      ins(%p1, %w : tensor<6xf32>, tensor<3x6xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %wx2 = linalg.generic {indexing_maps = [#i1, #i1], iterator_types = ["parallel"]}
      ins(%x : tensor<4xbf16>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %p2 = tensor.pad %wx2 low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %zero : f32
  } : tensor<4xf32> to tensor<6xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%o : tensor<3xf32>) -> tensor<3xf32>
  %y2 = linalg.generic {indexing_maps = [#pm, #pv, #po], iterator_types = ["parallel", "reduction"]}
      ins(%p2, %w : tensor<6xf32>, tensor<3x6xf32>) outs(%init2 : tensor<3xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  %neg = linalg.generic {indexing_maps = [#i1, #i1], iterator_types = ["parallel"]}
      ins(%wx2 : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  return %y1, %y2, %neg : tensor<3xf32>, tensor<3xf32>, tensor<4xf32>
}

// -----

// A contraction that widens one bf16 input in its body while the other is
// f32 (elementwise fusion recomputed a widening into what became a
// contraction: a LayerNorm scale's gradient, sum over rows of dy x xhat):
// a GEMM's A and B share a type, so the bf16 input is widened into an f32
// tensor again, which the contraction reads as it is.

// CHECK-LABEL: func @mixed_widening
// CHECK-SAME: (%[[DY:.+]]: tensor<16x8xbf16>, %[[XHAT:.+]]: tensor<16x8xf32>
// CHECK: %[[W:.+]] = linalg.generic {{.*}} ins(%[[DY]] : tensor<16x8xbf16>) outs(%{{.+}} : tensor<16x8xf32>)
// CHECK:   arith.extf
// CHECK: linalg.generic {{.*}} ins(%[[W]], %[[XHAT]] : tensor<16x8xf32>, tensor<16x8xf32>)
// CHECK-NOT: arith.extf
// CHECK: return
#md = affine_map<(c, r) -> (r, c)>
#mo = affine_map<(c, r) -> (c)>
func.func @mixed_widening(%dy: tensor<16x8xbf16>, %xhat: tensor<16x8xf32>, %g: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.generic {indexing_maps = [#md, #md, #mo], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %xhat : tensor<16x8xbf16>, tensor<16x8xf32>) outs(%g : tensor<8xf32>) {
  ^bb0(%a: bf16, %b: f32, %o: f32):
    %w = arith.extf %a : bf16 to f32
    %p = arith.mulf %w, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Nor does a widening move past padding computed in the pad's own region,
// nor into a copy that writes it (the widened tensor as the copy's init:
// what the copy yields is its input's, which the product reads).

// CHECK-LABEL: func @widened_not_moved
// CHECK: %[[ONES:.+]] = arith.constant dense<1.000000e+00> : tensor<2x4xf32>
// CHECK: tensor.pad
// CHECK: arith.addf %{{.+}}, %{{.+}} : f32
// CHECK: tensor.yield %{{.+}} : f32
// CHECK-NOT: tensor<6xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[ONES]], %[[ONES]] : tensor<2x4xf32>, tensor<2x4xf32>)
#nm1 = affine_map<(d0) -> (d0)>
#nmk = affine_map<(m, k) -> (k)>
#nmv = affine_map<(m, k) -> (m, k)>
#nmo = affine_map<(m, k) -> (m)>
#nm2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @widened_not_moved(%x: tensor<4xbf16>, %w: tensor<3x6xf32>, %p: f32, %y: tensor<2x4xbf16>) -> (tensor<3xf32>, tensor<2xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %wx = linalg.generic {indexing_maps = [#nm1, #nm1], iterator_types = ["parallel"]}
      ins(%x : tensor<4xbf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %padded = tensor.pad %wx low[1] high[1] {
  ^bb0(%i: index):
    %v = arith.addf %p, %p : f32
    tensor.yield %v : f32
  } : tensor<4xf32> to tensor<6xf32>
  %o = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<3xf32>) -> tensor<3xf32>
  %r = linalg.generic {indexing_maps = [#nmk, #nmv, #nmo], iterator_types = ["parallel", "reduction"]}
      ins(%padded, %w : tensor<6xf32>, tensor<3x6xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  %e2 = tensor.empty() : tensor<2x4xf32>
  %wy = linalg.generic {indexing_maps = [#nm2, #nm2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<2x4xbf16>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<2x4xf32>
  %f = arith.constant dense<1.0> : tensor<2x4xf32>
  %c = linalg.generic {indexing_maps = [#nm2, #nm2], iterator_types = ["parallel", "parallel"]}
      ins(%f : tensor<2x4xf32>) outs(%wy : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x4xf32>
  %o2 = tensor.empty() : tensor<2xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%o2 : tensor<2xf32>) -> tensor<2xf32>
  %r2 = linalg.generic {indexing_maps = [#nm2, #nm2, #nmo], iterator_types = ["parallel", "reduction"]}
      ins(%c, %f : tensor<2x4xf32>, tensor<2x4xf32>) outs(%init2 : tensor<2xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  return %r, %r2 : tensor<3xf32>, tensor<2xf32>
}
