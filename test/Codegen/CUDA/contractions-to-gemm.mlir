// RUN: accrue-opt %s -split-input-file -cuda-contractions-to-gemm -canonicalize | FileCheck %s

// A zero-started product of row-major matrices: one call, beta 0, the
// fill gone. A is 4x3 (strides 3, 1), B 3x5 (5, 1), C 4x5 (5, 1).

// CHECK-LABEL: func @row_major
// CHECK-SAME: (%[[A:.+]]: memref<4x3xf32>, %[[B:.+]]: memref<3x5xf32>)
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[C:.+]] = memref.alloc() : memref<4x5xf32>
// CHECK-DAG: %[[PA:.+]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK-DAG: %[[PB:.+]] = memref.extract_aligned_pointer_as_index %[[B]]
// CHECK-DAG: %[[PC:.+]] = memref.extract_aligned_pointer_as_index %[[C]]
// CHECK-NOT: linalg
// CHECK: call @accrue_gemm(%c1, %c4, %c5, %c3, %[[PA]], %c3, %c1, %c0, %[[PB]], %c5, %c1, %c0, %[[PC]], %c5, %c1, %c0, %c0, %[[ZERO]], %{{c0[_0-9]*}})
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @row_major(%a: memref<4x3xf32>, %b: memref<3x5xf32>) -> memref<4x5xf32> attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}]} {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x5xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x5xf32>)
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return %c : memref<4x5xf32>
}

// -----

// A weight gradient (x^T dy) added into the accumulator: written there
// directly, beta 0 on the first micro-batch and 1 after; no temporary, no
// add. The view of the accumulator is built before the call.

// CHECK-LABEL: func @weight_gradient
// CHECK-SAME: (%[[ACC:[^:]+]]: memref<20xf32>
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: scf.for %[[I:.+]] = %c0 to
// CHECK-NOT: memref.alloc
// CHECK: %[[VIEW:.+]] = memref.expand_shape
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[I]], %c0
// CHECK: %[[BETA:.+]] = arith.select %[[FIRST]], %[[ZERO]], %[[ONE]] : f32
// CHECK: %[[PC:.+]] = memref.extract_aligned_pointer_as_index %[[VIEW]]
// CHECK: call @accrue_gemm(%c1, %c3, %c5, %c4, %{{.+}}, %c1, %c3, %c0, %{{.+}}, %c5, %c1, %c0, %[[PC]], %c5, %c1, %c0, %c0, %[[BETA]], %{{c0[_0-9]*}})
// CHECK-NOT: linalg.generic
// CHECK: train.microbatch_loop
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @weight_gradient(%acc: memref<20xf32>, %x: memref<4x3xf32>, %dy: memref<4x5xf32>, %k: index) attributes {train.abi = [{train.name = "grads", train.role = #train.role<accumulator>}, {train.name = "x", train.role = #train.role<batch>}, {train.name = "dy", train.role = #train.role<batch>}, {train.name = "k", train.role = #train.role<step>}]} {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %k step %c1 {
    %t = memref.alloc() : memref<3x5xf32>
    linalg.fill ins(%zero : f32) outs(%t : memref<3x5xf32>)
    linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %dy : memref<4x3xf32>, memref<4x5xf32>) outs(%t : memref<3x5xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    }
    %sv = memref.subview %acc[0] [15] [1] : memref<20xf32> to memref<15xf32, strided<[1]>>
    %v = memref.expand_shape %sv [[0, 1]] output_shape [3, 5] : memref<15xf32, strided<[1]>> into memref<3x5xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%t : memref<3x5xf32>) outs(%v : memref<3x5xf32>) {
    ^bb0(%in: f32, %o: f32):
      %s = arith.addf %o, %in : f32
      linalg.yield %s : f32
    }
  } {train.microbatch_loop}
  return
}

// -----

// A part of the accumulator another op also adds into (a tied weight): the
// product goes there with beta 1 always.

// CHECK-LABEL: func @shared_gradient
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK: scf.for
// CHECK-NOT: arith.select
// CHECK: call @accrue_gemm({{.*}}, %[[ONE]], %{{c0[_0-9]*}})
// CHECK: linalg.generic
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @shared_gradient(%acc: memref<20xf32>, %x: memref<4x3xf32>, %dy: memref<4x5xf32>, %other: memref<3x5xf32>, %k: index) attributes {train.abi = [{train.name = "grads", train.role = #train.role<accumulator>}, {train.name = "x", train.role = #train.role<batch>}, {train.name = "dy", train.role = #train.role<batch>}, {train.name = "o", train.role = #train.role<batch>}, {train.name = "k", train.role = #train.role<step>}]} {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %k step %c1 {
    %t = memref.alloc() : memref<3x5xf32>
    linalg.fill ins(%zero : f32) outs(%t : memref<3x5xf32>)
    linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %dy : memref<4x3xf32>, memref<4x5xf32>) outs(%t : memref<3x5xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    }
    %sv = memref.subview %acc[0] [15] [1] : memref<20xf32> to memref<15xf32, strided<[1]>>
    %v = memref.expand_shape %sv [[0, 1]] output_shape [3, 5] : memref<15xf32, strided<[1]>> into memref<3x5xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%t : memref<3x5xf32>) outs(%v : memref<3x5xf32>) {
    ^bb0(%in: f32, %o: f32):
      %s = arith.addf %o, %in : f32
      linalg.yield %s : f32
    }
    %sv2 = memref.subview %acc[5] [15] [1] : memref<20xf32> to memref<15xf32, strided<[1], offset: 5>>
    %v2 = memref.expand_shape %sv2 [[0, 1]] output_shape [3, 5] : memref<15xf32, strided<[1], offset: 5>> into memref<3x5xf32, strided<[5, 1], offset: 5>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%other : memref<3x5xf32>) outs(%v2 : memref<3x5xf32, strided<[5, 1], offset: 5>>) {
    ^bb0(%in: f32, %o: f32):
      %s = arith.addf %o, %in : f32
      linalg.yield %s : f32
    }
  } {train.microbatch_loop}
  return
}

// -----

// Attention's [batch, heads] over a [batch, seq, heads, dim] layout: in A
// the samples and the heads are two strides (24 and 4 floats), which one
// strided batched call cannot take. A is copied into a buffer of its own
// with the samples and heads outermost ([2, 2, 3, 4]: compact[b, h, m, k]
// = q[b, m, h, k]), and one call takes all 4 (sample, head) pairs, every
// operand's batch stride one (A: 12, B: 12, C: 9).

// CHECK-DAG: #[[$GATHER:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.+]]: memref<2x3x2x4xf32>, %{{.+}}: memref<2x2x4x3xf32>, %{{.+}}: memref<2x2x3x3xf32>)
// CHECK: %[[COMPACT:.+]] = memref.alloc() : memref<2x2x3x4xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$GATHER]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[Q]] : memref<2x3x2x4xf32>) outs(%[[COMPACT]] : memref<2x2x3x4xf32>)
// CHECK-NOT: scf.for
// CHECK: %[[PA:.+]] = memref.extract_aligned_pointer_as_index %[[COMPACT]]
// CHECK: call @accrue_gemm(%c4, %c3, %c3, %c4, %{{.+}}, %c4, %c1, %c12, %{{.+}}, %c3, %c1, %c12, %{{.+}}, %c3, %c1, %c9,
// CHECK-NOT: call @accrue_gemm
#a = affine_map<(b, h, m, n, k) -> (b, m, h, k)>
#b = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#c = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
func.func @attention(%q: memref<2x3x2x4xf32>, %kt: memref<2x2x4x3xf32>, %s: memref<2x2x3x3xf32>) attributes {train.abi = [{train.name = "q", train.role = #train.role<batch>}, {train.name = "k", train.role = #train.role<batch>}, {train.name = "s", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : memref<2x3x2x4xf32>, memref<2x2x4x3xf32>) outs(%s : memref<2x2x3x3xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Where the output has the samples and heads in two strides
// ([batch, seq, heads, dim]), no copy of an input helps: the heads are the
// GEMM's batch (stride 4 in C), the samples a host loop moving every
// address along (C: 24 floats = 96 bytes).

// CHECK-LABEL: func @attention_output
// CHECK-NOT: memref.alloc
// CHECK: scf.for %[[B:.+]] = %c0 to %c2 step %c1
// CHECK: %[[OFFSET:.+]] = arith.muli %[[B]], %c96
// CHECK: call @accrue_gemm(%c2, %c3, %c4, %c3,
#oa = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#ob = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#oc = affine_map<(b, h, m, n, k) -> (b, m, h, n)>
func.func @attention_output(%p: memref<2x2x3x3xf32>, %v: memref<2x2x3x4xf32>, %o: memref<2x3x2x4xf32>) attributes {train.abi = [{train.name = "p", train.role = #train.role<batch>}, {train.name = "v", train.role = #train.role<batch>}, {train.name = "o", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#oa, #ob, #oc], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x2x3x3xf32>, memref<2x2x3x4xf32>) outs(%o : memref<2x3x2x4xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %r = arith.addf %z, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// f32 inputs whose only writer widened bf16 values are marked exact in
// bf16 (types = f32 | f32 << 8 | bf16 << 16, with StepABI.h's AccrueDType
// codes f32 = 0 and bf16 = 7); bf16 inputs widened in the body are passed as
// bf16 (types = 7).

// CHECK-LABEL: func @precision
// CHECK: call @accrue_gemm({{.*}}, %c458752, %{{.+}})
// CHECK: call @accrue_gemm({{.*}}, %c7, %{{.+}})
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @precision(%a: memref<4x3xbf16>, %b: memref<3x5xbf16>, %c: memref<4x5xf32>) attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "c", train.role = #train.role<batch>}]} {
  %wa = memref.alloc() : memref<4x3xf32>
  %wb = memref.alloc() : memref<3x5xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x3xbf16>) outs(%wa : memref<4x3xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<3x5xbf16>) outs(%wb : memref<3x5xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %wb : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x3xbf16>, memref<3x5xbf16>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: bf16, %y: bf16, %o: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// What an operand is exact in is decided by its LAST writer before the
// contraction: widened bf16 values doubled in f32 afterwards are not
// bf16-exact (types = 0: an fp32 multiply).

// CHECK-LABEL: func @overwritten
// CHECK: call @accrue_gemm({{.*}}, %c0, %{{[^,]+}}, %{{c0[_0-9]*}})
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @overwritten(%a: memref<4x3xbf16>, %b: memref<3x5xbf16>, %c: memref<4x5xf32>) attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "c", train.role = #train.role<batch>}]} {
  %wa = memref.alloc() : memref<4x3xf32>
  %wb = memref.alloc() : memref<3x5xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x3xbf16>) outs(%wa : memref<4x3xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<3x5xbf16>) outs(%wb : memref<3x5xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%wa : memref<4x3xf32>) {
  ^bb0(%o: f32):
    %d = arith.addf %o, %o : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %wb : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Widened before a loop: a contraction in the loop reads bf16-exact values
// when nothing in the loop writes them; when the loop writes one after the
// contraction, the next iteration reads f32 values.

// CHECK-LABEL: func @loops
// CHECK: scf.for
// CHECK: call @accrue_gemm({{.*}}, %c458752, %{{[^,]+}}, %{{c0[_0-9]*}})
// CHECK: scf.for
// CHECK: call @accrue_gemm({{.*}}, %c0, %{{[^,]+}}, %{{c0[_0-9]*}})
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @loops(%a: memref<4x3xbf16>, %b: memref<3x5xbf16>, %c: memref<4x5xf32>) attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "c", train.role = #train.role<batch>}]} {
  %wa = memref.alloc() : memref<4x3xf32>
  %wb = memref.alloc() : memref<3x5xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x3xbf16>) outs(%wa : memref<4x3xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<3x5xbf16>) outs(%wb : memref<3x5xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%wa, %wb : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %p = arith.mulf %x, %y : f32
      %r = arith.addf %o, %p : f32
      linalg.yield %r : f32
    }
  }
  scf.for %j = %c0 to %c4 step %c1 {
    linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%wa, %wb : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %p = arith.mulf %x, %y : f32
      %r = arith.addf %o, %p : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
        outs(%wa : memref<4x3xf32>) {
    ^bb0(%o: f32):
      %d = arith.addf %o, %o : f32
      linalg.yield %d : f32
    }
  }
  return
}

// -----

// Views and moves: contractions reading a reshape of a widened buffer and a
// transpose of a widened buffer read bf16-exact values; one reading a
// buffer that was widened only in part (a subview) does not.

// CHECK-LABEL: func @views
// CHECK: call @accrue_gemm({{.*}}, %c458752, %{{[^,]+}}, %{{c0[_0-9]*}})
// CHECK: call @accrue_gemm({{.*}}, %c0, %{{[^,]+}}, %{{c0[_0-9]*}})
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
#i = affine_map<(i) -> (i)>
func.func @views(%a: memref<12xbf16>, %b: memref<3x5xbf16>, %c: memref<4x5xf32>) attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "c", train.role = #train.role<batch>}]} {
  %flat = memref.alloc() : memref<12xf32>
  %bt = memref.alloc() : memref<5x3xf32>
  %wb = memref.alloc() : memref<3x5xf32>
  %half = memref.alloc() : memref<4x3xf32>
  linalg.generic {indexing_maps = [#i, #i], iterator_types = ["parallel"]}
      ins(%a : memref<12xbf16>) outs(%flat : memref<12xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  %wa = memref.expand_shape %flat [[0, 1]] output_shape [4, 3] : memref<12xf32> into memref<4x3xf32>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<3x5xbf16>) outs(%bt : memref<5x3xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.transpose ins(%bt : memref<5x3xf32>) outs(%wb : memref<3x5xf32>) permutation = [1, 0]
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %wb : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  %part = memref.subview %half[0, 0] [2, 3] [1, 1] : memref<4x3xf32> to memref<2x3xf32, strided<[3, 1]>>
  %wpart = memref.subview %wa[0, 0] [2, 3] [1, 1] : memref<4x3xf32> to memref<2x3xf32, strided<[3, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wpart : memref<2x3xf32, strided<[3, 1]>>) outs(%part : memref<2x3xf32, strided<[3, 1]>>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.truncf %in : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%half, %wb : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// An op whose memory effects are unknown (a call) between the widening and
// the contraction may have written the operand.

// CHECK-LABEL: func @unknown_writer
// CHECK: call @opaque
// CHECK: call @accrue_gemm({{.*}}, %c0, %{{[^,]+}}, %{{c0[_0-9]*}})
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func private @opaque()
func.func @unknown_writer(%a: memref<4x3xbf16>, %b: memref<3x5xbf16>, %c: memref<4x5xf32>) attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "c", train.role = #train.role<batch>}]} {
  %wa = memref.alloc() : memref<4x3xf32>
  %wb = memref.alloc() : memref<3x5xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x3xbf16>) outs(%wa : memref<4x3xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<3x5xbf16>) outs(%wb : memref<3x5xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %e = arith.extf %in : bf16 to f32
    linalg.yield %e : f32
  }
  func.call @opaque() : () -> ()
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%wa, %wb : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Not GEMMs: a reduction over a loop only one input has, and an operand
// with unit stride along neither dimension. Both stay linalg ops.

// CHECK-LABEL: func @not_gemms
// CHECK-NOT: accrue_gemm
// CHECK-COUNT-2: linalg.generic
#mk = affine_map<(m, n, k) -> (m, k)>
#n = affine_map<(m, n, k) -> (n)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @not_gemms(%a: memref<4x3xf32>, %v: memref<5xf32>, %b: memref<3x5xf32, strided<[10, 2]>>, %c: memref<4x5xf32>) attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "v", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "c", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#mk, #n, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %v : memref<4x3xf32>, memref<5xf32>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x3xf32>, memref<3x5xf32, strided<[10, 2]>>) outs(%c : memref<4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A zero-started product rounded to bf16 (the rounding marked by
// cuda-fold-into-contractions) through a collapsed view: the GEMM writes
// the bf16 buffer itself through the same view (types = bf16 inputs | bf16
// output << 8 = 7 | 7 << 8 = 1799), and the rounding and the f32 buffer
// go. The second product's rounded buffer is read between the product and
// its rounding: it keeps its f32 output (types = 7) and the rounding.
// (The first's rounded buffer is returned, so that it stays.)

// CHECK-LABEL: func @rounded_output
// CHECK-SAME: (%[[A:.+]]: memref<2x2x3xbf16>, %[[B:.+]]: memref<3x5xbf16>, %{{.+}}: memref<4x5xbf16>)
// CHECK-NOT: memref<2x2x5xf32>
// CHECK: %[[Y:.+]] = memref.alloc() : memref<2x2x5xbf16>
// CHECK: %[[YV:.+]] = memref.collapse_shape %[[Y]] {{\[}}[0, 1], [2]] : memref<2x2x5xbf16> into memref<4x5xbf16>
// CHECK: %[[PY:.+]] = memref.extract_aligned_pointer_as_index %[[YV]]
// CHECK: call @accrue_gemm(%c1, %c4, %c5, %c3, %{{.+}}, %[[PY]], %c5, %c1, %c0, %c1799, %{{.+}})
// CHECK-NOT: memref<2x2x5xf32>
// CHECK: memref.alloc() : memref<4x5xf32>
// CHECK: call @accrue_gemm({{.*}}, %c7, %{{.+}})
// CHECK: linalg.generic {{.+}} attrs = {accrue.gemm_rounding}
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @rounded_output(%a: memref<2x2x3xbf16>, %b: memref<3x5xbf16>, %o: memref<4x5xbf16>) -> memref<2x2x5xbf16> attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "o", train.role = #train.role<batch>}]} {
  %zero = arith.constant 0.0 : f32
  %av = memref.collapse_shape %a [[0, 1], [2]] : memref<2x2x3xbf16> into memref<4x3xbf16>
  %p = memref.alloc() : memref<2x2x5xf32>
  %pv = memref.collapse_shape %p [[0, 1], [2]] : memref<2x2x5xf32> into memref<4x5xf32>
  linalg.fill ins(%zero : f32) outs(%pv : memref<4x5xf32>)
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%av, %b : memref<4x3xbf16>, memref<3x5xbf16>) outs(%pv : memref<4x5xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %y = memref.alloc() : memref<2x2x5xbf16>
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : memref<2x2x5xf32>) outs(%y : memref<2x2x5xbf16>) attrs = {accrue.gemm_rounding} {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  // The second: its rounded buffer %z is copied out between the product
  // and its rounding.
  %z = memref.alloc() : memref<4x5xbf16>
  %q = memref.alloc() : memref<4x5xf32>
  linalg.fill ins(%zero : f32) outs(%q : memref<4x5xf32>)
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%av, %b : memref<4x3xbf16>, memref<3x5xbf16>) outs(%q : memref<4x5xf32>) {
  ^bb0(%x: bf16, %y2: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y2 : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  memref.copy %z, %o : memref<4x5xbf16> to memref<4x5xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%q : memref<4x5xf32>) outs(%z : memref<4x5xbf16>) attrs = {accrue.gemm_rounding} {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  return %y : memref<2x2x5xbf16>
}

// -----

// A convolution over its columns (im2col), Y[n, g, f, p] += W[g, f, kk] *
// Col[n, g, kk, p] with one group: the samples are N loops that do not
// collapse with the pixels (the filters lie between them in Y), so they
// become the GEMM's batch, which the weight does not have (batch stride
// 0); the group's loop of one iteration goes. One call of 16.

// CHECK-LABEL: func @conv_forward
// CHECK-NOT: scf.for
// CHECK: call @accrue_gemm(%c16, %c4, %c64, %c18, %{{.+}}, %c18, %c1, %c0, %{{.+}}, %c64, %c1, %c1152, %{{.+}}, %c64, %c1, %c256, %c0, %{{.+}})
// CHECK-NOT: call @accrue_gemm
#fw = affine_map<(n, g, f, kk, p) -> (g, f, kk)>
#fc = affine_map<(n, g, f, kk, p) -> (n, g, kk, p)>
#fy = affine_map<(n, g, f, kk, p) -> (n, g, f, p)>
func.func @conv_forward(%w: memref<1x4x18xf32>, %col: memref<16x1x18x64xf32>, %y: memref<16x1x4x64xf32>) attributes {train.abi = [{train.name = "w", train.role = #train.role<batch>}, {train.name = "col", train.role = #train.role<batch>}, {train.name = "y", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#fw, #fc, #fy], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%w, %col : memref<1x4x18xf32>, memref<16x1x18x64xf32>) outs(%y : memref<16x1x4x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Two groups: the samples (16, absent from the weight) and the groups (2)
// do not collapse into one batch dimension, since the weight has only
// one of them. The larger, the samples, is the GEMM's batch; the groups a
// host loop moving A by 54 floats (216 bytes), B by 72 (288) and C by 12
// (48).

// CHECK-LABEL: func @grouped_conv
// CHECK: scf.for %[[G:.+]] = %c0 to %c2 step %c1
// CHECK-DAG: arith.muli %[[G]], %c216
// CHECK-DAG: arith.muli %[[G]], %c288
// CHECK-DAG: arith.muli %[[G]], %c48
// CHECK: call @accrue_gemm(%c16, %c3, %c4, %c18, %{{.+}}, %c18, %c1, %c0, %{{.+}}, %c4, %c1, %c144, %{{.+}}, %c4, %c1, %c24, %c0, %{{.+}})
// CHECK-NOT: call @accrue_gemm
#gw = affine_map<(n, g, f, kk, p) -> (g, f, kk)>
#gc = affine_map<(n, g, f, kk, p) -> (n, g, kk, p)>
#gy = affine_map<(n, g, f, kk, p) -> (n, g, f, p)>
func.func @grouped_conv(%w: memref<2x3x18xf32>, %col: memref<16x2x18x4xf32>, %y: memref<16x2x3x4xf32>) attributes {train.abi = [{train.name = "w", train.role = #train.role<batch>}, {train.name = "col", train.role = #train.role<batch>}, {train.name = "y", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#gw, #gc, #gy], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%w, %col : memref<2x3x18xf32>, memref<16x2x18x4xf32>) outs(%y : memref<16x2x3x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A convolution's weight gradient, dW[g, f, kk] += dY[n, g, f, p] *
// Col[n, g, kk, p]: the sum runs over samples and pixels, which do not
// collapse in either input (channels lie between them). Both inputs are
// copied with the summed dimensions innermost (dY as [g, f, n, p], the
// columns as [g, kk, n, p]), and one call of 2 groups sums over all 64.

// CHECK-DAG: #[[$DY:.+]] = affine_map<(d0, d1, d2, d3) -> (d2, d0, d1, d3)>
// CHECK-LABEL: func @conv_weight_gradient
// CHECK-SAME: (%[[DY:.+]]: memref<16x2x3x4xf32>, %[[COL:.+]]: memref<16x2x18x4xf32>
// CHECK: %[[CDY:.+]] = memref.alloc() : memref<2x3x16x4xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$DY]], #{{.+}}], {{.*}} ins(%[[DY]] : {{.+}}) outs(%[[CDY]] :
// CHECK: %[[CCOL:.+]] = memref.alloc() : memref<2x18x16x4xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$DY]], #{{.+}}], {{.*}} ins(%[[COL]] : {{.+}}) outs(%[[CCOL]] :
// CHECK-NOT: scf.for
// CHECK-DAG: %[[PA:.+]] = memref.extract_aligned_pointer_as_index %[[CDY]]
// CHECK-DAG: %[[PB:.+]] = memref.extract_aligned_pointer_as_index %[[CCOL]]
// CHECK: call @accrue_gemm(%c2, %c3, %c18, %c64, %[[PA]], %c64, %c1, %c192, %[[PB]], %c1, %c64, %c1152, %{{.+}}, %c18, %c1, %c54, %c0, %{{.+}})
// CHECK-NOT: call @accrue_gemm
#wdy = affine_map<(g, f, kk, n, p) -> (n, g, f, p)>
#wcol = affine_map<(g, f, kk, n, p) -> (n, g, kk, p)>
#wdw = affine_map<(g, f, kk, n, p) -> (g, f, kk)>
func.func @conv_weight_gradient(%dy: memref<16x2x3x4xf32>, %col: memref<16x2x18x4xf32>, %dw: memref<2x3x18xf32>) attributes {train.abi = [{train.name = "dy", train.role = #train.role<batch>}, {train.name = "col", train.role = #train.role<batch>}, {train.name = "dw", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#wdy, #wcol, #wdw], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%dy, %col : memref<16x2x3x4xf32>, memref<16x2x18x4xf32>) outs(%dw : memref<2x3x18xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Two samples of four groups: the groups are the GEMM's batch and the
// samples, which the weight does not have, a host loop that moves only B
// (by 288 floats, 1152 bytes) and C (by 48, 192 bytes).

// CHECK-LABEL: func @grouped_conv_few_samples
// CHECK-SAME: (%[[W:.+]]: memref<4x3x18xf32>,
// CHECK: %[[PW:.+]] = memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: scf.for %[[N:.+]] = %c0 to %c2 step %c1
// CHECK-DAG: arith.muli %[[N]], %c1152
// CHECK-DAG: arith.muli %[[N]], %c192
// CHECK: call @accrue_gemm(%c4, %c3, %c4, %c18, %[[PW]], %c18, %c1, %c54, %{{.+}}, %c4, %c1, %c72, %{{.+}}, %c4, %c1, %c12, %c0, %{{.+}})
#hw = affine_map<(n, g, f, kk, p) -> (g, f, kk)>
#hc = affine_map<(n, g, f, kk, p) -> (n, g, kk, p)>
#hy = affine_map<(n, g, f, kk, p) -> (n, g, f, p)>
func.func @grouped_conv_few_samples(%w: memref<4x3x18xf32>, %col: memref<2x4x18x4xf32>, %y: memref<2x4x3x4xf32>) attributes {train.abi = [{train.name = "w", train.role = #train.role<batch>}, {train.name = "col", train.role = #train.role<batch>}, {train.name = "y", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#hw, #hc, #hy], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%w, %col : memref<4x3x18xf32>, memref<2x4x18x4xf32>) outs(%y : memref<2x4x3x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A weight gradient over outputs of one pixel: the pixels' loop of one
// iteration goes, and the samples alone are K, strided in both inputs (3
// and 18) with unit stride along M and N: one call, nothing copied.

// CHECK-LABEL: func @unit_reduction_loop
// CHECK-NOT: memref.alloc
// CHECK: call @accrue_gemm(%c1, %c3, %c18, %c16, %{{.+}}, %c1, %c3, %c0, %{{.+}}, %c18, %c1, %c0, %{{.+}}, %c18, %c1, %c0, %c0, %{{.+}})
#udy = affine_map<(f, kk, n, p) -> (n, f, p)>
#ucol = affine_map<(f, kk, n, p) -> (n, kk, p)>
#udw = affine_map<(f, kk, n, p) -> (f, kk)>
func.func @unit_reduction_loop(%dy: memref<16x3x1xf32>, %col: memref<16x18x1xf32>, %dw: memref<3x18xf32>) attributes {train.abi = [{train.name = "dy", train.role = #train.role<batch>}, {train.name = "col", train.role = #train.role<batch>}, {train.name = "dw", train.role = #train.role<batch>}]} {
  linalg.generic {indexing_maps = [#udy, #ucol, #udw], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%dy, %col : memref<16x3x1xf32>, memref<16x18x1xf32>) outs(%dw : memref<3x18xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A bias gradient paired with its weight gradient (cuda-split-reductions'
// marks): the GEMM call computes it as B's sums over K (types bit 25: 2 <<
// 24 = 33554432), writing the sum's vector, whose fill and sum go; the add
// reading the vector stays after the call. A sum paired with a contraction
// with a batch is not: it stays.

// CHECK-LABEL: func @bias_gradient
// CHECK-SAME: (%[[X:.+]]: memref<8x3xf32>, %[[DY:.+]]: memref<2x4x5xf32>, %[[ACC:.+]]: memref<5xf32>)
// CHECK: %[[V:.+]] = memref.alloc() : memref<1x5xf32>
// CHECK: %[[PV:.+]] = memref.extract_aligned_pointer_as_index %[[V]] :
// CHECK: call @accrue_gemm(%c1, %c3, %c5, %c8, %{{.+}}, %c1, %c3, %c0, %{{.+}}, %c5, %c1, %c0, %{{.+}}, %c5, %c1, %c0, %c33554432, %{{.+}}, %[[PV]])
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic {{.*}} ins(%[[ACC]], %[[V]]
// CHECK-NOT: linalg.generic
// CHECK-LABEL: func @bias_gradient_of_a
// CHECK: %[[V:.+]] = memref.alloc() : memref<1x3xf32>
// CHECK: %[[PV:.+]] = memref.extract_aligned_pointer_as_index %[[V]] :
// CHECK: call @accrue_gemm(%c1, %c3, %c6, %c16, {{.*}}, %c16777216, %{{.+}}, %[[PV]])
// CHECK-NOT: linalg.generic
// CHECK: return
// CHECK-LABEL: func @batched_not_fused
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}}["reduction", "reduction", "parallel"]
// CHECK: call @accrue_gemm({{.*}}, %{{c0[_0-9]*}})
#xt = affine_map<(m, n, k) -> (k, m)>
#dyk = affine_map<(m, n, k) -> (k, n)>
#w = affine_map<(m, n, k) -> (m, n)>
#rows3 = affine_map<(i, j, n) -> (i, j, n)>
#bias = affine_map<(i, j, n) -> (0, n)>
#vec = affine_map<(n) -> (n)>
#vec2 = affine_map<(n) -> (0, n)>
func.func @bias_gradient(%x: memref<8x3xf32>, %dy: memref<2x4x5xf32>, %acc: memref<5xf32>) -> memref<3x5xf32> attributes {train.abi = [{train.name = "x", train.role = #train.role<batch>}, {train.name = "dy", train.role = #train.role<batch>}, {train.name = "acc", train.role = #train.role<batch>}]} {
  %zero = arith.constant 0.0 : f32
  %v = memref.alloc() : memref<1x5xf32>
  linalg.fill ins(%zero : f32) outs(%v : memref<1x5xf32>)
  linalg.generic {indexing_maps = [#rows3, #bias], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : memref<2x4x5xf32>) outs(%v : memref<1x5xf32>) attrs = {accrue.bias_gradient = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  %rows = memref.collapse_shape %dy [[0, 1], [2]] : memref<2x4x5xf32> into memref<8x5xf32>
  %dw = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#xt, #dyk, #w], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %rows : memref<8x3xf32>, memref<8x5xf32>) outs(%dw : memref<3x5xf32>) attrs = {accrue.bias_gradient = array<i64: 0, 1>} {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#vec, #vec2, #vec], iterator_types = ["parallel"]}
      ins(%acc, %v : memref<5xf32>, memref<1x5xf32>) outs(%acc : memref<5xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return %dw : memref<3x5xf32>
}

// The head's weight gradient, dW = dy^T x (the gradient is A, its bias the
// sums of A's rows: types bit 24, 1 << 24 = 16777216), with the sum and its
// fill after the contraction: the call writes the vector where the
// contraction stands.
#dyt = affine_map<(m, n, k) -> (k, m)>
#xk = affine_map<(m, n, k) -> (k, n)>
#wmn = affine_map<(m, n, k) -> (m, n)>
#rows2 = affine_map<(k, m) -> (k, m)>
#bias2 = affine_map<(k, m) -> (0, m)>
func.func @bias_gradient_of_a(%dy: memref<16x3xf32>, %x: memref<16x6xf32>) -> (memref<1x3xf32>, memref<3x6xf32>) attributes {train.abi = [{train.name = "dy", train.role = #train.role<batch>}, {train.name = "x", train.role = #train.role<batch>}]} {
  %zero = arith.constant 0.0 : f32
  %dw = memref.alloc() : memref<3x6xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<3x6xf32>)
  linalg.generic {indexing_maps = [#dyt, #xk, #wmn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %x : memref<16x3xf32>, memref<16x6xf32>) outs(%dw : memref<3x6xf32>) attrs = {accrue.bias_gradient = array<i64: 0, 0>} {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  }
  %v = memref.alloc() : memref<1x3xf32>
  linalg.fill ins(%zero : f32) outs(%v : memref<1x3xf32>)
  linalg.generic {indexing_maps = [#rows2, #bias2], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<16x3xf32>) outs(%v : memref<1x3xf32>) attrs = {accrue.bias_gradient = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return %v, %dw : memref<1x3xf32>, memref<3x6xf32>
}

#bxt = affine_map<(b, m, n, k) -> (b, k, m)>
#bdy = affine_map<(b, m, n, k) -> (b, k, n)>
#bw = affine_map<(b, m, n, k) -> (b, m, n)>
#brows = affine_map<(b, k, n) -> (b, k, n)>
#bsum = affine_map<(b, k, n) -> (n)>
func.func @batched_not_fused(%x: memref<2x4x3xf32>, %dy: memref<2x4x5xf32>) -> (memref<5xf32>, memref<2x3x5xf32>) attributes {train.abi = [{train.name = "x", train.role = #train.role<batch>}, {train.name = "dy", train.role = #train.role<batch>}]} {
  %zero = arith.constant 0.0 : f32
  %v = memref.alloc() : memref<5xf32>
  linalg.fill ins(%zero : f32) outs(%v : memref<5xf32>)
  linalg.generic {indexing_maps = [#brows, #bsum], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : memref<2x4x5xf32>) outs(%v : memref<5xf32>) attrs = {accrue.bias_gradient = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  %dw = memref.alloc() : memref<2x3x5xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<2x3x5xf32>)
  linalg.generic {indexing_maps = [#bxt, #bdy, #bw], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<2x4x3xf32>, memref<2x4x5xf32>) outs(%dw : memref<2x3x5xf32>) attrs = {accrue.bias_gradient = array<i64: 0, 1>} {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  }
  return %v, %dw : memref<5xf32>, memref<2x3x5xf32>
}

// -----

// Two sums marked with one number (the marks of two runs): neither is the
// contraction's, which gets no epilogue; both sums stay.

// CHECK-LABEL: func @ambiguous_pair
// CHECK-COUNT-2: accrue.bias_gradient = 0 : i64
// CHECK: call @accrue_gemm({{.*}}, %c0, %{{[^,]+}}, %{{c0[_0-9]*}})
#axt = affine_map<(m, n, k) -> (k, m)>
#ady = affine_map<(m, n, k) -> (k, n)>
#aw = affine_map<(m, n, k) -> (m, n)>
#arows = affine_map<(k, n) -> (k, n)>
#asum = affine_map<(k, n) -> (0, n)>
func.func @ambiguous_pair(%x: memref<8x3xf32>, %dy: memref<8x5xf32>) -> (memref<1x5xf32>, memref<1x5xf32>, memref<3x5xf32>) attributes {train.abi = [{train.name = "x", train.role = #train.role<batch>}, {train.name = "dy", train.role = #train.role<batch>}]} {
  %zero = arith.constant 0.0 : f32
  %v = memref.alloc() : memref<1x5xf32>
  linalg.fill ins(%zero : f32) outs(%v : memref<1x5xf32>)
  linalg.generic {indexing_maps = [#arows, #asum], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<8x5xf32>) outs(%v : memref<1x5xf32>) attrs = {accrue.bias_gradient = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  %u = memref.alloc() : memref<1x5xf32>
  linalg.fill ins(%zero : f32) outs(%u : memref<1x5xf32>)
  linalg.generic {indexing_maps = [#arows, #asum], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<8x5xf32>) outs(%u : memref<1x5xf32>) attrs = {accrue.bias_gradient = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  %dw = memref.alloc() : memref<3x5xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#axt, #ady, #aw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<8x3xf32>, memref<8x5xf32>) outs(%dw : memref<3x5xf32>) attrs = {accrue.bias_gradient = array<i64: 0, 1>} {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  }
  return %v, %u, %dw : memref<1x5xf32>, memref<1x5xf32>, memref<3x5xf32>
}
