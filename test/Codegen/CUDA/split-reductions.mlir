// RUN: accrue-opt %s -split-input-file -cuda-split-reductions | FileCheck %s

// A full reduction over 100 elements: 2 threads (64 elements a thread at
// most) fold the strided shares p, p + 2, ... (50 each), each from the
// identity in its registers (the partials are not filled first: no fill
// kernel), then one thread folds the partials into the original initial
// value.

// CHECK-LABEL: func @sum
// CHECK-SAME: (%[[X:.+]]: tensor<10x10xf32>, %[[INIT:.+]]: tensor<f32>)
// CHECK-NOT: linalg.fill
// CHECK: %[[P0:.+]] = tensor.empty() : tensor<2xf32>
// CHECK: %[[P:.+]] = linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%[[P0]] : tensor<2xf32>)
// CHECK:   %[[T:.+]] = linalg.index 0 : index
// CHECK:   %[[ID:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:   scf.for %[[J:.+]] = %{{.+}} to %c50 step %{{.+}} iter_args(%[[ACC:.+]] = %[[ID]])
// CHECK:     %[[JP:.+]] = arith.muli %[[J]], %c2
// CHECK:     %[[I:.+]] = arith.addi %[[JP]], %[[T]]
// CHECK:     %[[VALID:.+]] = arith.cmpi ult, %[[I]], %c100
// CHECK:     tensor.extract %[[X]]
// CHECK:     %[[ADD:.+]] = arith.addf
// CHECK:     arith.select %[[VALID]], %[[ADD]], %[[ACC]]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[P]] : tensor<2xf32>) outs(%[[INIT]] : tensor<f32>)
// CHECK:   arith.addf
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> ()>
func.func @sum(%x: tensor<10x10xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<10x10xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %out, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// A million elements (a global gradient norm): 15,625 threads of 64, then
// their partials split again, 245 threads of 64 (the last ones padded),
// then 4 of 62; one thread folds those 4 into the initial value. No thread
// folds more than 64.

// CHECK-LABEL: func @big_sum
// CHECK: %[[S1:.+]] = linalg.generic {{.*}}["parallel"]} outs(%{{.+}} : tensor<15625xf32>)
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c64
// CHECK: %[[S2:.+]] = linalg.generic {{.*}}["parallel"]} outs(%{{.+}} : tensor<245xf32>)
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c64
// CHECK:     tensor.extract %[[S1]]
// CHECK: %[[S3:.+]] = linalg.generic {{.*}}["parallel"]} outs(%{{.+}} : tensor<4xf32>)
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c62
// CHECK:     tensor.extract %[[S2]]
// CHECK: linalg.generic {{.*}}["reduction"]} ins(%[[S3]] : tensor<4xf32>) outs(%{{.+}} : tensor<f32>)
#big_in = affine_map<(d0, d1) -> (d0, d1)>
#big_out = affine_map<(d0, d1) -> ()>
func.func @big_sum(%x: tensor<1000x1000xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#big_in, #big_out], iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<1000x1000xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %out, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// A maximum starts its partials at -inf.

// CHECK-LABEL: func @max
// CHECK: linalg.generic {{.*}}["parallel"]
// CHECK:   %[[NEG:.+]] = arith.constant 0xFF800000 : f32
// CHECK:   scf.for {{.+}} iter_args(%{{.+}} = %[[NEG]])
// CHECK: linalg.generic {{.*}}["reduction"]
// CHECK:   arith.maximumf
#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>
func.func @max(%x: tensor<256xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%x : tensor<256xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Left alone: too few elements, rows shorter than 128 elements (one thread
// per row), a combiner the pass does not know, and a matrix-vector product
// (M = 4: a GEMM for cuda-contractions-to-gemm).

// CHECK-LABEL: func @left_alone
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#mk = affine_map<(d0, d1) -> (d0, d1)>
#k = affine_map<(d0, d1) -> (d1)>
func.func @left_alone(%small: tensor<8xf32>, %x: tensor<4x64xf32>, %y: tensor<256xf32>,
                      %s: tensor<f32>, %r: tensor<4xf32>, %m: tensor<4x256xf32>)
    -> (tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) {
  %a = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%small : tensor<8xf32>) outs(%s : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %in, %out : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %b = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x64xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %in, %out : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %c = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%y : tensor<256xf32>) outs(%s : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.subf %out, %in : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %d = linalg.generic {indexing_maps = [#mk, #k, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m, %y : tensor<4x256xf32>, tensor<256xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%in: f32, %v: f32, %out: f32):
    %p = arith.mulf %in, %v : f32
    %w = arith.addf %out, %p : f32
    linalg.yield %w : f32
  } -> tensor<4xf32>
  return %a, %b, %c, %d : tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
}

// -----

// Rows of 256 elements (a dynamic number of them, keepdims): a warp per
// row folds strided shares (thread p of row r: elements p, p + 32, ...),
// then one thread per row folds its 32 partials in order.

// CHECK-LABEL: func @rows
// CHECK-SAME: (%[[X:.+]]: tensor<?x256xf32>, %[[INIT:.+]]: tensor<?x1xf32>)
// CHECK: %[[N:.+]] = tensor.dim %[[INIT]], %c0
// CHECK: %[[E:.+]] = tensor.empty(%[[N]]) : tensor<?x1x32xf32>
// CHECK: %[[P:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} outs(%[[E]] : tensor<?x1x32xf32>)
// CHECK:   %[[T:.+]] = linalg.index 2 : index
// CHECK:   %[[ROW:.+]] = linalg.index 0 : index
// CHECK:   scf.for %[[J:.+]] = %{{.+}} to %c8 step
// CHECK:     %[[JP:.+]] = arith.muli %[[J]], %c32
// CHECK:     %[[I:.+]] = arith.addi %[[JP]], %[[T]]
// CHECK:     affine.apply #{{.+}}(%[[ROW]], %{{.+}})
// CHECK:     tensor.extract %[[X]]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[P]] : tensor<?x1x32xf32>) outs(%[[INIT]] : tensor<?x1xf32>)
#rows = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
func.func @rows(%x: tensor<?x256xf32>, %init: tensor<?x1xf32>) -> tensor<?x1xf32> {
  %r = linalg.generic {indexing_maps = [#rows, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x256xf32>) outs(%init : tensor<?x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %in, %out : f32
    linalg.yield %v : f32
  } -> tensor<?x1xf32>
  return %r : tensor<?x1xf32>
}

// -----

// A column reduction (a bias gradient: 1024 rows of 64 contiguous
// columns): the partials are threads-first, so that neighbouring threads
// take neighbouring columns and a warp reads 32 contiguous elements of a
// row; thread p of column c still folds rows p, p + 32, ... in order, and
// one thread per column folds its 32 partials in order.

// CHECK-DAG: #[[$TRANSPOSED:.+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[$COLUMN:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func @columns
// CHECK-SAME: (%[[X:.+]]: tensor<1024x64xf32>, %[[INIT:.+]]: tensor<64xf32>)
// CHECK: %[[P0:.+]] = tensor.empty() : tensor<32x64xf32>
// CHECK: %[[P:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} outs(%[[P0]] : tensor<32x64xf32>)
// CHECK:   %[[T:.+]] = linalg.index 0 : index
// CHECK:   %[[COL:.+]] = linalg.index 1 : index
// CHECK:   scf.for %[[J:.+]] = %{{.+}} to %c32 step
// CHECK:     %[[JP:.+]] = arith.muli %[[J]], %c32
// CHECK:     %[[I:.+]] = arith.addi %[[JP]], %[[T]]
// CHECK:     tensor.extract %[[X]]
// CHECK: linalg.generic {indexing_maps = [#[[$TRANSPOSED]], #[[$COLUMN]]], iterator_types = ["parallel", "reduction"]} ins(%[[P]] : tensor<32x64xf32>) outs(%[[INIT]] : tensor<64xf32>)
#all = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @columns(%x: tensor<1024x64xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [#all, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<1024x64xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %in, %out : f32
    linalg.yield %v : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// A reduction into a constant fill (rows of 16, too short to split; a
// sum's zeros) folds each row from the constant in its thread's registers,
// in order, and writes a tensor.empty: the fill and its kernel go. A
// product into a fill (a GEMM for cuda-contractions-to-gemm) keeps it.

// CHECK-LABEL: func @from_fill
// CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>, %[[A:.+]]: tensor<8x16xf32>, %[[B:.+]]: tensor<16x4xf32>)
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill
// CHECK: %[[E:.+]] = tensor.empty() : tensor<8xf32>
// CHECK: %[[R:.+]] = linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%[[E]] : tensor<8xf32>)
// CHECK:   %[[ROW:.+]] = linalg.index 0 : index
// CHECK:   scf.for %[[J:.+]] = %c0{{.*}} to %c16 step %c1 iter_args(%[[ACC:.+]] = %[[ZERO]]) -> (f32)
// CHECK:     %[[V:.+]] = tensor.extract %[[X]]
// CHECK:     %[[S:.+]] = arith.addf %[[V]], %[[ACC]] : f32
// CHECK:     scf.yield %[[S]] : f32
// CHECK: %[[F:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.+}} : tensor<8x4xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[A]], %[[B]] : tensor<8x16xf32>, tensor<16x4xf32>) outs(%[[F]] : tensor<8x4xf32>)
#fx = affine_map<(d0, d1) -> (d0, d1)>
#fr = affine_map<(d0, d1) -> (d0)>
#ma = affine_map<(d0, d1, d2) -> (d0, d2)>
#mb = affine_map<(d0, d1, d2) -> (d2, d1)>
#mc = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @from_fill(%x: tensor<8x16xf32>, %a: tensor<8x16xf32>, %b: tensor<16x4xf32>) -> (tensor<8xf32>, tensor<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#fx, #fr], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8x4xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %p = linalg.generic {indexing_maps = [#ma, #mb, #mc], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%init2 : tensor<8x4xf32>) {
  ^bb0(%ia: f32, %ib: f32, %out: f32):
    %m = arith.mulf %ia, %ib : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %r, %p : tensor<8xf32>, tensor<8x4xf32>
}

// -----

// A row of 256 into a fill of -inf (softmax's maximum): both stages start
// from the constant, the first from the identity, the second from the
// fill's value; nothing reads the fill (canonicalization drops it).

// CHECK-LABEL: func @split_from_fill
// CHECK: %[[NEG:.+]] = arith.constant 0xFF800000 : f32
// CHECK: %[[P:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} outs(%{{.+}} : tensor<4x32xf32>)
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%[[E]] : tensor<4xf32>)
// CHECK:   scf.for %{{.+}} = %c0{{.*}} to %c32 step %c1 iter_args(%{{.+}} = %[[NEG]]) -> (f32)
// CHECK:     tensor.extract %[[P]]
// CHECK:     arith.maximumf
#sx = affine_map<(d0, d1) -> (d0, d1)>
#sr = affine_map<(d0, d1) -> (d0)>
func.func @split_from_fill(%x: tensor<4x256xf32>) -> tensor<4xf32> {
  %neg = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%neg : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#sx, #sr], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x256xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
