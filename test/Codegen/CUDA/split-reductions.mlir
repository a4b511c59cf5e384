// RUN: accrue-opt %s -split-input-file -cuda-split-reductions | FileCheck %s

// A row of 256 into a fill of zeros (LayerNorm's mean): a warp reduction.
// The op iterates the rows and the 32 lanes of a warp (a placeholder input
// indexes the lanes, marked accrue.warp_lanes); lane l folds the elements
// l, l + 32, ... (8 of them) from the identity, then combines into the
// row. Lane 0 combines with the fill's constant where the others combine
// with the accumulator: the op reads no initial value, and the fill goes
// (canonicalization drops it).

// CHECK-LABEL: func @row_warp
// CHECK-SAME: (%[[X:.+]]: tensor<4x256xf32>)
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[LANES:.+]] = tensor.empty() : tensor<32xi8>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[LANES]] : tensor<32xi8>) outs(%[[E]] : tensor<4xf32>) {{.*}}{accrue.warp_lanes}
// CHECK: ^bb0(%{{.+}}: i8, %[[OUT:.+]]: f32):
// CHECK:   %[[LANE:.+]] = linalg.index 1 : index
// CHECK:   %[[ROW:.+]] = linalg.index 0 : index
// CHECK:   %[[ID:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:   %[[SHARE:.+]] = scf.for %[[J:.+]] = %{{.+}} to %c8 step %{{.+}} iter_args(%[[ACC:.+]] = %[[ID]])
// CHECK:     %[[JP:.+]] = arith.muli %[[J]], %c32
// CHECK:     %[[I:.+]] = arith.addi %[[JP]], %[[LANE]]
// CHECK:     %[[VALID:.+]] = arith.cmpi ult, %[[I]], %c256
// CHECK:     affine.apply #{{.+}}(%[[ROW]], %{{.+}})
// CHECK:     tensor.extract %[[X]]
// CHECK:     %[[ADD:.+]] = arith.addf
// CHECK:     arith.select %[[VALID]], %[[ADD]], %[[ACC]]
// CHECK:   %[[FIRST:.+]] = arith.cmpi eq, %[[LANE]], %{{.+}} : index
// CHECK:   %[[START:.+]] = arith.select %[[FIRST]], %[[ZERO]], %[[OUT]] : f32
// CHECK:   %[[R:.+]] = arith.addf %[[SHARE]], %[[START]] : f32
// CHECK:   linalg.yield %[[R]] : f32
#in = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_warp(%x: tensor<4x256xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#in, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x256xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A maximum into a fill of -inf (softmax's): each lane starts from -inf,
// lane 0 combines with the fill's -inf.

// CHECK-LABEL: func @max_warp
// CHECK: %[[NEG:.+]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.generic {{.*}}["parallel", "reduction"]} {{.*}} {{.*}}{accrue.warp_lanes}
// CHECK:   %[[ID:.+]] = arith.constant 0xFF800000 : f32
// CHECK:   scf.for {{.+}} to %c4 {{.+}} iter_args(%{{.+}} = %[[ID]])
// CHECK:     arith.maximumf
// CHECK:   arith.select %{{.+}}, %[[NEG]], %{{.+}} : f32
// CHECK:   arith.maximumf
#sx = affine_map<(d0, d1) -> (d0, d1)>
#sr = affine_map<(d0, d1) -> (d0)>
func.func @max_warp(%x: tensor<4x128xf32>) -> tensor<4xf32> {
  %neg = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%neg : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#sx, #sr], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x128xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Rows of a dynamic count (keepdims) into an initial value that is not a
// fill: every lane combines with the accumulator (lane 0's is the initial
// value), in the body's order.

// CHECK-LABEL: func @rows
// CHECK-SAME: (%[[X:.+]]: tensor<?x256xf32>, %[[INIT:.+]]: tensor<?x1xf32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<32xi8>) outs(%[[INIT]] : tensor<?x1xf32>) {{.*}}{accrue.warp_lanes}
// CHECK: ^bb0(%{{.+}}: i8, %[[OUT:.+]]: f32):
// CHECK:   %[[SHARE:.+]] = scf.for
// CHECK:     scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[R:.+]] = arith.addf %[[SHARE]], %[[OUT]] : f32
// CHECK:   linalg.yield %[[R]]
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

// A full reduction over 100 elements: one warp, 4 elements a lane.

// CHECK-LABEL: func @sum
// CHECK-SAME: (%[[X:.+]]: tensor<10x10xf32>, %[[INIT:.+]]: tensor<f32>)
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%{{.+}} : tensor<32xi8>) outs(%[[INIT]] : tensor<f32>) {{.*}}{accrue.warp_lanes}
// CHECK:   %[[LANE:.+]] = linalg.index 0 : index
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c4
// CHECK:     arith.cmpi ult, %{{.+}}, %c100
// CHECK:     tensor.extract %[[X]]
// CHECK:     arith.mulf
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

// A million elements (a global gradient norm): 15,625 threads of 64, each
// from the identity in its registers (the partials are not filled first:
// no fill kernel), then their partials split again, 245 threads of 64
// (the last ones padded), then a warp folds those 245, 8 a lane, into the
// initial value. No thread folds more than 64.

// CHECK-LABEL: func @big_sum
// CHECK: %[[S1:.+]] = linalg.generic {{.*}}["parallel"]} outs(%{{.+}} : tensor<15625xf32>)
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c64
// CHECK: %[[S2:.+]] = linalg.generic {{.*}}["parallel"]} outs(%{{.+}} : tensor<245xf32>)
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c64
// CHECK:     tensor.extract %[[S1]]
// CHECK: linalg.generic {{.*}}["reduction"]} ins(%{{.+}} : tensor<32xi8>) outs(%{{.+}} : tensor<f32>) {{.*}}{accrue.warp_lanes}
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c8
// CHECK:     tensor.extract %[[S2]]
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

// Rows longer than a warp folds (a loss over a vocabulary of 8192): 256
// threads a row fold strided shares of 32 into partials (threads last:
// neighbouring threads read neighbouring elements of one row), then a warp
// a row folds its 256 partials, 8 a lane.

// CHECK-LABEL: func @long_rows
// CHECK: %[[P:.+]] = linalg.generic {{.*}}["parallel", "parallel"]} outs(%{{.+}} : tensor<4x256xf32>)
// CHECK:   %[[T:.+]] = linalg.index 1 : index
// CHECK:   scf.for %[[J:.+]] = %{{.+}} to %c32
// CHECK:     %[[JP:.+]] = arith.muli %[[J]], %c256
// CHECK:     arith.addi %[[JP]], %[[T]]
// CHECK: linalg.generic {{.*}}["parallel", "reduction"]} {{.*}} {{.*}}{accrue.warp_lanes}
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c8
// CHECK:     tensor.extract %[[P]]
#lx = affine_map<(d0, d1) -> (d0, d1)>
#lr = affine_map<(d0, d1) -> (d0)>
func.func @long_rows(%x: tensor<4x8192xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#lx, #lr], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8192xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %in, %out : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A column reduction (a bias gradient: 1024 rows of 64 contiguous
// columns): the first stage's loops put the threads first, so that
// neighbouring threads take neighbouring columns and a warp reads 32
// contiguous elements of a row; its 192 threads a column (about
// sqrt(32 x 1024)) each fold rows p, p + 192, ... (6 of them) in order and
// store their partials threads last (the transposed map), so that a warp
// a column folds its 192 partials, 6 a lane.

// CHECK-DAG: #[[$TRANSPOSED:.+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func @columns
// CHECK-SAME: (%[[X:.+]]: tensor<1024x64xf32>, %[[INIT:.+]]: tensor<64xf32>)
// CHECK: %[[P0:.+]] = tensor.empty() : tensor<64x192xf32>
// CHECK: %[[P:.+]] = linalg.generic {indexing_maps = [#[[$TRANSPOSED]]], iterator_types = ["parallel", "parallel"]} outs(%[[P0]] : tensor<64x192xf32>)
// CHECK:   %[[T:.+]] = linalg.index 0 : index
// CHECK:   %[[COL:.+]] = linalg.index 1 : index
// CHECK:   scf.for %[[J:.+]] = %{{.+}} to %c6 step
// CHECK:     %[[JP:.+]] = arith.muli %[[J]], %c192
// CHECK:     %[[I:.+]] = arith.addi %[[JP]], %[[T]]
// CHECK:     tensor.extract %[[X]]
// CHECK: linalg.generic {{.*}}["parallel", "reduction"]} {{.*}} outs(%[[INIT]] : tensor<64xf32>) {{.*}}{accrue.warp_lanes}
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c6
// CHECK:     tensor.extract %[[P]]
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

// A column of 64-bit values (shuffles move 32): the partials stay
// threads-first, 32 a column, and one thread per column folds its 32 in
// order, neighbouring threads reading neighbouring partials.

// CHECK-DAG: #[[$TRANSPOSED:.+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func @columns_i64
// CHECK: %[[P:.+]] = linalg.generic {{.*}}["parallel", "parallel"]} outs(%{{.+}} : tensor<32x64xi64>)
// CHECK:   scf.for %{{.+}} = %{{.+}} to %c32
// CHECK: linalg.generic {indexing_maps = [#[[$TRANSPOSED]], #{{.+}}], iterator_types = ["parallel", "reduction"]} ins(%[[P]] : tensor<32x64xi64>)
// CHECK-NOT: accrue.warp_lanes
#all = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @columns_i64(%x: tensor<1024x64xi64>, %init: tensor<64xi64>) -> tensor<64xi64> {
  %r = linalg.generic {indexing_maps = [#all, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<1024x64xi64>) outs(%init : tensor<64xi64>) {
  ^bb0(%in: i64, %out: i64):
    %v = arith.addi %in, %out : i64
    linalg.yield %v : i64
  } -> tensor<64xi64>
  return %r : tensor<64xi64>
}

// -----

// Left alone: too few elements, rows shorter than a warp (16: one thread
// per row), a combiner the pass does not know, a matrix-vector product
// (M = 4: a GEMM for cuda-contractions-to-gemm), and a window's reduction
// (a convolution's: neighbouring points read neighbouring elements).

// CHECK-LABEL: func @left_alone
// CHECK-COUNT-5: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK-NOT: accrue.warp_lanes
#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#mk = affine_map<(d0, d1) -> (d0, d1)>
#k = affine_map<(d0, d1) -> (d1)>
#window = affine_map<(d0, d1) -> (d0 + d1)>
#tap = affine_map<(d0, d1) -> (d1)>
func.func @left_alone(%small: tensor<8xf32>, %x: tensor<4x16xf32>, %y: tensor<256xf32>,
                      %s: tensor<f32>, %r: tensor<4xf32>, %m: tensor<4x256xf32>,
                      %w: tensor<67xf32>, %taps: tensor<64xf32>)
    -> (tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>) {
  %a = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%small : tensor<8xf32>) outs(%s : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.addf %in, %out : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %b = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x16xf32>) outs(%r : tensor<4xf32>) {
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
    %q = arith.addf %out, %p : f32
    linalg.yield %q : f32
  } -> tensor<4xf32>
  %e = linalg.generic {indexing_maps = [#window, #tap, #row], iterator_types = ["parallel", "reduction"]}
      ins(%w, %taps : tensor<67xf32>, tensor<64xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%in: f32, %tap: f32, %out: f32):
    %p = arith.mulf %in, %tap : f32
    %v = arith.addf %p, %out : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %a, %b, %c, %d, %e : tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A reduction into a constant fill (rows of 16, too short for a warp; a
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

// A dot product per row (sum of x * y along contiguous rows: M = N = 1,
// LayerNorm's and softmax's backward, RMSNorm's sum of squares) is a
// reduction, not a GEMM: rows of 64 become a warp reduction. A dot product
// per column (a LayerNorm scale's gradient, summed over rows) stays a
// contraction for cuda-contractions-to-gemm, which adds into the
// accumulator itself.

// CHECK-LABEL: func @dot_products
// CHECK-SAME: (%[[X:.+]]: tensor<4x64xf32>, %[[Y:.+]]: tensor<4x64xf32>, %[[U:.+]]: tensor<256x64xf32>, %[[V:.+]]: tensor<256x64xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.+}} : tensor<32xi8>) outs(%{{.+}} : tensor<4xf32>) {{.*}}{accrue.warp_lanes}
// CHECK:   scf.for
// CHECK:     tensor.extract %[[X]]
// CHECK:     tensor.extract %[[Y]]
// CHECK:     arith.mulf
// CHECK-NOT: accrue.warp_lanes
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[U]], %[[V]] : tensor<256x64xf32>, tensor<256x64xf32>) outs(%{{.+}} : tensor<64xf32>)
// CHECK-NOT: linalg.generic
#dx = affine_map<(d0, d1) -> (d0, d1)>
#dr = affine_map<(d0, d1) -> (d0)>
#cx = affine_map<(d0, d1) -> (d1, d0)>
#cr = affine_map<(d0, d1) -> (d0)>
func.func @dot_products(%x: tensor<4x64xf32>, %y: tensor<4x64xf32>, %u: tensor<256x64xf32>, %v: tensor<256x64xf32>, %r: tensor<4xf32>, %c: tensor<64xf32>) -> (tensor<4xf32>, tensor<64xf32>) {
  %rows = linalg.generic {indexing_maps = [#dx, #dx, #dr], iterator_types = ["parallel", "reduction"]}
      ins(%x, %y : tensor<4x64xf32>, tensor<4x64xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %cols = linalg.generic {indexing_maps = [#cx, #cx, #cr], iterator_types = ["parallel", "reduction"]}
      ins(%u, %v : tensor<256x64xf32>, tensor<256x64xf32>) outs(%c : tensor<64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %rows, %cols : tensor<4xf32>, tensor<64xf32>
}

// -----

// A Linear's bias gradient: the sum over the samples and tokens of the
// output gradient, whose values the weight gradient's contraction reads
// (through a reshape merging the rows) and sums over the same rows as K,
// with the bias's dimension its only N loop. Both are marked as a pair and
// the sum stays whole: the GEMM's epilogue computes it.

// CHECK-LABEL: func @bias_gradient
// CHECK: linalg.fill
// CHECK: %[[SUM:.+]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction", "parallel"]{{.*}}attrs =  {accrue.bias_gradient = 0 : i64}
// CHECK: linalg.generic {{.*}}attrs =  {accrue.bias_gradient = array<i64: 0, 1>}
// CHECK-NOT: accrue.warp_lanes
#x3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bias3 = affine_map<(d0, d1, d2) -> (d2)>
#xa = affine_map<(d0, d1, d2) -> (d1, d0)>
#xb = affine_map<(d0, d1, d2) -> (d1, d2)>
#xc = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @bias_gradient(%dy: tensor<4x256x64xf32>, %x: tensor<1024x32xf32>) -> (tensor<64xf32>, tensor<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %db = linalg.generic {indexing_maps = [#x3, #bias3], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : tensor<4x256x64xf32>) outs(%z : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %rows = tensor.collapse_shape %dy [[0, 1], [2]] : tensor<4x256x64xf32> into tensor<1024x64xf32>
  %ew = tensor.empty() : tensor<32x64xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<32x64xf32>) -> tensor<32x64xf32>
  %dw = linalg.generic {indexing_maps = [#xa, #xb, #xc], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %rows : tensor<1024x32xf32>, tensor<1024x64xf32>) outs(%zw : tensor<32x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  return %db, %dw : tensor<64xf32>, tensor<32x64xf32>
}

// -----

// Under bf16: the gradient is computed in bf16 and widened (the sum reads
// the f32 values), and the weight gradient reads its rounding back to bf16,
// which is exact: the same values.

// CHECK-LABEL: func @bias_gradient_bf16
// CHECK: accrue.bias_gradient = 0 : i64
// CHECK: accrue.bias_gradient = array<i64: 0, 1>
#e2 = affine_map<(d0, d1) -> (d0, d1)>
#col2 = affine_map<(d0, d1) -> (d1)>
#wa = affine_map<(d0, d1, d2) -> (d1, d0)>
#wb = affine_map<(d0, d1, d2) -> (d1, d2)>
#wc = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @bias_gradient_bf16(%g: tensor<1024x64xbf16>, %x: tensor<1024x32xbf16>) -> (tensor<64xf32>, tensor<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : bf16
  %ef = tensor.empty() : tensor<1024x64xf32>
  %dy = linalg.generic {indexing_maps = [#e2, #e2], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<1024x64xbf16>) outs(%ef : tensor<1024x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %m = arith.mulf %in, %two : bf16
    %w = arith.extf %m : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<1024x64xf32>
  %e = tensor.empty() : tensor<64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %db = linalg.generic {indexing_maps = [#e2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<1024x64xf32>) outs(%z : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %eb = tensor.empty() : tensor<1024x64xbf16>
  %dyb = linalg.generic {indexing_maps = [#e2, #e2], iterator_types = ["parallel", "parallel"]}
      ins(%dy : tensor<1024x64xf32>) outs(%eb : tensor<1024x64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<1024x64xbf16>
  %ew = tensor.empty() : tensor<32x64xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<32x64xf32>) -> tensor<32x64xf32>
  %dw = linalg.generic {indexing_maps = [#wa, #wb, #wc], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %dyb : tensor<1024x32xbf16>, tensor<1024x64xbf16>) outs(%zw : tensor<32x64xf32>) {
  ^bb0(%a: bf16, %b: bf16, %out: f32):
    %aw = arith.extf %a : bf16 to f32
    %bw = arith.extf %b : bf16 to f32
    %p = arith.mulf %aw, %bw : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  return %db, %dw : tensor<64xf32>, tensor<32x64xf32>
}

// -----

// Not bias gradients, so split as any column sum: a rounding of values
// that are not widened bf16 (it loses bits), and a contraction that keeps
// the rows the sum sums (a product over the columns).

// CHECK-LABEL: func @not_bias_gradients
// CHECK-NOT: accrue.bias_gradient
// CHECK: accrue.warp_lanes
// CHECK-NOT: accrue.bias_gradient
// CHECK: accrue.warp_lanes
// CHECK-NOT: accrue.bias_gradient
#n2 = affine_map<(d0, d1) -> (d0, d1)>
#ncol = affine_map<(d0, d1) -> (d1)>
#na = affine_map<(d0, d1, d2) -> (d1, d0)>
#nb = affine_map<(d0, d1, d2) -> (d1, d2)>
#nc = affine_map<(d0, d1, d2) -> (d0, d2)>
#ra = affine_map<(d0, d1, d2) -> (d0, d2)>
#rb = affine_map<(d0, d1, d2) -> (d1, d2)>
#rc = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @not_bias_gradients(%g: tensor<1024x64xf32>, %x: tensor<1024x32xbf16>, %w: tensor<16x64xf32>) -> (tensor<64xf32>, tensor<32x64xf32>, tensor<1024x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %ef = tensor.empty() : tensor<1024x64xf32>
  %dy = linalg.generic {indexing_maps = [#n2, #n2], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<1024x64xf32>) outs(%ef : tensor<1024x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %half : f32
    linalg.yield %m : f32
  } -> tensor<1024x64xf32>
  %e = tensor.empty() : tensor<64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %db = linalg.generic {indexing_maps = [#n2, #ncol], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<1024x64xf32>) outs(%z : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %eb = tensor.empty() : tensor<1024x64xbf16>
  %dyb = linalg.generic {indexing_maps = [#n2, #n2], iterator_types = ["parallel", "parallel"]}
      ins(%dy : tensor<1024x64xf32>) outs(%eb : tensor<1024x64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<1024x64xbf16>
  %ew = tensor.empty() : tensor<32x64xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<32x64xf32>) -> tensor<32x64xf32>
  %dw = linalg.generic {indexing_maps = [#na, #nb, #nc], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %dyb : tensor<1024x32xbf16>, tensor<1024x64xbf16>) outs(%zw : tensor<32x64xf32>) {
  ^bb0(%a: bf16, %b: bf16, %out: f32):
    %aw = arith.extf %a : bf16 to f32
    %bw = arith.extf %b : bf16 to f32
    %p = arith.mulf %aw, %bw : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  %e2 = tensor.empty() : tensor<64xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64xf32>) -> tensor<64xf32>
  %db2 = linalg.generic {indexing_maps = [#n2, #ncol], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<1024x64xf32>) outs(%z2 : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %ey = tensor.empty() : tensor<1024x16xf32>
  %zy = linalg.fill ins(%zero : f32) outs(%ey : tensor<1024x16xf32>) -> tensor<1024x16xf32>
  %y = linalg.generic {indexing_maps = [#ra, #rb, #rc], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %w : tensor<1024x64xf32>, tensor<16x64xf32>) outs(%zy : tensor<1024x16xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  } -> tensor<1024x16xf32>
  return %db, %dw, %y : tensor<64xf32>, tensor<32x64xf32>, tensor<1024x16xf32>
}
