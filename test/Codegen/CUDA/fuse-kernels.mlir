// RUN: accrue-opt %s -split-input-file -cuda-fuse-kernels | FileCheck %s
// RUN: accrue-opt %s -split-input-file -cuda-fuse-kernels -mlir-print-local-scope | FileCheck %s --check-prefix=LOCAL

// A chain of elementwise ops over the same points is one op; what the
// second reads of the first comes from the first's yield, and the
// temporary between them, unread afterwards, is neither written nor
// allocated.

// CHECK-LABEL: func @chain
// CHECK-SAME: (%[[X:.+]]: memref<4x8xf32>, %[[Y:.+]]: memref<4x8xf32>, %[[OUT:.+]]: memref<4x8xf32>)
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]], %[[Y]] : memref<4x8xf32>, memref<4x8xf32>) outs(%[[OUT]] : memref<4x8xf32>)
// CHECK: ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32, %{{.+}}: f32):
// CHECK:   %[[E:.+]] = math.exp %[[A]] : f32
// CHECK:   %[[S:.+]] = arith.addf %[[E]], %[[B]] : f32
// CHECK:   linalg.yield %[[S]] : f32
// CHECK-NOT: linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @chain(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %out: memref<4x8xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%t : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %y : memref<4x8xf32>, memref<4x8xf32>) outs(%out : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An intermediate read again later is still stored (once), by the fused
// op; a division written in place after its producer joins it, reading
// the producer's value, not the buffer.

// CHECK-LABEL: func @kept
// CHECK: %[[T:.+]] = memref.alloc() : memref<8xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.+}} : memref<8xf32>) outs(%[[T]], %[[OUT:.+]] : memref<8xf32>, memref<8xf32>)
// CHECK: ^bb0(%[[A:.+]]: f32, %{{.+}}: f32, %{{.+}}: f32):
// CHECK:   %[[E:.+]] = math.exp %[[A]] : f32
// CHECK:   %[[D:.+]] = arith.divf %[[E]], %{{.+}} : f32
// CHECK:   linalg.yield %[[E]], %[[D]] : f32, f32
// CHECK: call @use(%[[T]])
#id1 = affine_map<(d0) -> (d0)>
func.func private @use(memref<8xf32>)
func.func @kept(%x: memref<8xf32>, %out: memref<8xf32>) {
  %c = arith.constant 2.0 : f32
  %t = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : memref<8xf32>) outs(%t : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%t : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.divf %a, %c : f32
    linalg.yield %d : f32
  }
  call @use(%t) : (memref<8xf32>) -> ()
  return
}

// -----

// Nothing is fused across an op with memory effects, where the second op
// reads the first's output at another point, where a body reads a buffer
// the other op writes (at elements of other points), or where the second
// writes an element the first read at another point.

// CHECK-LABEL: func @across_call
// CHECK-COUNT-2: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#tr2 = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d0, 0)>
func.func private @touch(memref<4x4xf32>)
func.func @across_call(%x: memref<4x4xf32>, %t: memref<4x4xf32>, %u: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x4xf32>) outs(%t : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  call @touch(%t) : (memref<4x4xf32>) -> ()
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<4x4xf32>) outs(%u : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// CHECK-LABEL: func @other_point
// CHECK-COUNT-2: linalg.generic
func.func @other_point(%x: memref<4x4xf32>, %u: memref<4x4xf32>, %out: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x4xf32>) outs(%u : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  // Point (r, c) reads element (r, 0).
  linalg.generic {indexing_maps = [#row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%u : memref<4x4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// CHECK-LABEL: func @body_read
// CHECK-COUNT-2: linalg.generic
func.func @body_read(%x: memref<4x4xf32>, %t: memref<4x4xf32>, %out: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%t : memref<4x4xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 1 : index
    %v = memref.load %out[%i, %i] : memref<4x4xf32>
    linalg.yield %v : f32
  }
  return
}

// CHECK-LABEL: func @other_element
// CHECK-COUNT-2: linalg.generic
func.func @other_element(%x: memref<4x4xf32>, %t: memref<4x4xf32>) {
  // Point (i, j) reads x[j, i] ...
  linalg.generic {indexing_maps = [#tr2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x4xf32>) outs(%t : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  // ... and writes x[i, j].
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<4x4xf32>) outs(%x : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// A transpose takes the elementwise work before and after it (a rounding
// in place, an add into an accumulator) when it still reads one buffer
// and writes one: the fused op is a transpose (cuda-form-kernels tiles
// it), over the transpose's loops, the rounding's reordered to them.

// CHECK-LABEL: func @transpose
// CHECK-SAME: (%[[ACC:.+]]: memref<4x8xf32>)
// CHECK: %[[G:.+]] = memref.alloc() : memref<8x4xf32>
// CHECK: call @gemm(%[[G]])
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]] : memref<8x4xf32>) outs(%[[ACC]] : memref<4x8xf32>)
// CHECK: ^bb0(%[[V:.+]]: f32, %[[OLD:.+]]: f32):
// CHECK:   %[[T:.+]] = arith.truncf %[[V]] : f32 to bf16
// CHECK:   %[[E:.+]] = arith.extf %[[T]] : bf16 to f32
// CHECK:   %[[S:.+]] = arith.addf %[[OLD]], %[[E]] : f32
// CHECK:   linalg.yield %[[S]] : f32
// CHECK-NOT: linalg.generic
// LOCAL-LABEL: func @transpose
// LOCAL: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
#idt = affine_map<(d0, d1) -> (d0, d1)>
func.func private @gemm(memref<8x4xf32>)
func.func @transpose(%acc: memref<4x8xf32>) {
  %g = memref.alloc() : memref<8x4xf32>
  call @gemm(%g) : (memref<8x4xf32>) -> ()
  linalg.generic {indexing_maps = [#idt, #idt], iterator_types = ["parallel", "parallel"]}
      ins(%g : memref<8x4xf32>) outs(%g : memref<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.truncf %a : f32 to bf16
    %e = arith.extf %t : bf16 to f32
    linalg.yield %e : f32
  }
  %t = memref.alloc() : memref<4x8xf32>
  linalg.transpose ins(%g : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  linalg.generic {indexing_maps = [#idt, #idt], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<4x8xf32>) outs(%acc : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func @transpose_apart
// CHECK-COUNT-2: linalg.generic
func.func @transpose_apart(%g: memref<8x4xf32>, %y: memref<4x8xf32>, %out: memref<4x8xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  linalg.transpose ins(%g : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  // A second buffer read elementwise: the tiled form would not take it.
  linalg.generic {indexing_maps = [#idt, #idt, #idt], iterator_types = ["parallel", "parallel"]}
      ins(%t, %y : memref<4x8xf32>, memref<4x8xf32>) outs(%out : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// What follows a warp reduction at its points is its epilogue: the body
// runs it after the combine, on the running value, and its outputs take
// what it computes at the last lane (the point's result), keeping what
// they held before. A division written over the reduction's output moves
// the running value to a buffer of its own.

// CHECK-LABEL: func @epilogue
// CHECK-SAME: (%[[X:.+]]: memref<4x64xf32>, %[[LANES:.+]]: memref<32xi8>, %[[SUM:.+]]: memref<4xf32>, %[[G:.+]]: memref<4xf32>, %[[OUT:.+]]: memref<4xf32>)
// CHECK: %[[RUNNING:.+]] = memref.alloc() : memref<4xf32>
// CHECK: linalg.generic {indexing_maps = [#[[LANE:.+]], #[[POINT:.+]], #[[POINT]], #[[POINT]], #[[POINT]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[LANES]], %[[G]] : memref<32xi8>, memref<4xf32>) outs(%[[RUNNING]], %[[SUM]], %[[OUT]] : memref<4xf32>, memref<4xf32>, memref<4xf32>)
// CHECK-SAME: attrs = {accrue.warp_lanes}
// CHECK: ^bb0(%{{.+}}: i8, %[[GV:.+]]: f32, %{{.+}}: f32, %{{.+}}: f32, %{{.+}}: f32):
// CHECK:   arith.select
// CHECK:   %[[R:.+]] = arith.addf
// CHECK:   %[[MEAN:.+]] = arith.divf %[[R]], %{{.+}} : f32
// CHECK:   %[[L:.+]] = linalg.index 1 : index
// CHECK:   %[[C31:.+]] = arith.constant 31 : index
// CHECK:   %[[LAST:.+]] = arith.cmpi eq, %[[L]], %[[C31]] : index
// CHECK:   %[[M:.+]] = arith.select %[[LAST]], %[[MEAN]], %{{.+}} : f32
// CHECK:   %[[Y:.+]] = arith.mulf %[[M]], %[[GV]] : f32
// CHECK:   %[[YS:.+]] = arith.select %{{.+}}, %[[Y]], %{{.+}} : f32
// CHECK:   linalg.yield %[[R]], %[[M]], %[[YS]] : f32, f32, f32
// CHECK-NOT: linalg.generic
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#p1 = affine_map<(d0) -> (d0)>
func.func @epilogue(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %sum: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%sum : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    %id = arith.constant 0.0 : f32
    %share = scf.for %k = %c0 to %c2 step %c1 iter_args(%s = %id) -> (f32) {
      %base = arith.muli %k, %c32 : index
      %i = arith.addi %base, %l : index
      %v = memref.load %x[%r, %i] : memref<4x64xf32>
      %t = arith.addf %v, %s : f32
      scf.yield %t : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %zero, %acc : f32
    %total = arith.addf %share, %start : f32
    linalg.yield %total : f32
  }
  linalg.generic {indexing_maps = [#p1, #p1], iterator_types = ["parallel"]}
      ins(%sum : memref<4xf32>) outs(%sum : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.divf %a, %n : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#p1, #p1, #p1], iterator_types = ["parallel"]}
      ins(%sum, %g : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %y = arith.mulf %a, %b : f32
    linalg.yield %y : f32
  }
  return
}

// An epilogue may not write what the reduction's body reads (other lanes
// and warps read the row).

// CHECK-LABEL: func @epilogue_writes_row
// CHECK-COUNT-2: linalg.generic
func.func @epilogue_writes_row(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %sum: memref<4xf32>) {
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%sum : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %v = memref.load %x[%r, %l] : memref<4x32xf32>
    %total = arith.addf %v, %acc : f32
    linalg.yield %total : f32
  }
  %row = memref.subview %x[0, 0] [4, 1] [1, 1] : memref<4x32xf32> to memref<4xf32, strided<[32]>>
  linalg.generic {indexing_maps = [#p1, #p1], iterator_types = ["parallel"]}
      ins(%sum : memref<4xf32>) outs(%row : memref<4xf32, strided<[32]>>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// A gradient's accumulation, emitted at the end of the micro-batch, moves
// up to the reduction computing the gradient (past ops that touch none of
// its elements: another part of the accumulator) and becomes its
// epilogue, reading its output's old value and writing it at the last
// lane; the view the accumulation read the gradient through goes (the
// reduction's output keeps its running value). It stays where an op
// between touches its part of the accumulator.

// CHECK-LABEL: func @accumulate
// CHECK-SAME: (%[[X:.+]]: memref<4x32xf32>, %[[LANES:.+]]: memref<32xi8>, %[[ACC:.+]]: memref<16xf32>, %[[Y:.+]]: memref<8xf32>)
// CHECK: %[[RUNNING:.+]] = memref.alloc() : memref<1x4xf32>
// CHECK-NOT: memref.collapse_shape
// CHECK: %[[PART:.+]] = memref.subview %[[ACC]][4] [4] [1]
// CHECK-NOT: memref.collapse_shape
// CHECK: linalg.generic
// CHECK-SAME: outs(%[[RUNNING]], %[[PART]] : memref<1x4xf32>, memref<4xf32, strided<[1], offset: 4>>)
// CHECK-SAME: attrs = {accrue.warp_lanes}
// CHECK: ^bb0(%{{.+}}: i8, %{{.+}}: f32, %[[OLD:.+]]: f32):
// CHECK:   %[[R:.+]] = arith.addf
// CHECK:   %[[S:.+]] = arith.addf %[[OLD]], %[[R]] : f32
// CHECK:   %[[LAST:.+]] = arith.cmpi eq
// CHECK:   %[[V:.+]] = arith.select %[[LAST]], %[[S]], %[[OLD]] : f32
// CHECK:   linalg.yield %[[R]], %[[V]] : f32, f32
// CHECK: linalg.generic
// CHECK-SAME: outs(%[[Y]] : memref<8xf32>)
// CHECK-NOT: linalg.generic
#lanew = affine_map<(d0, d1, d2) -> (d2)>
#pointw = affine_map<(d0, d1, d2) -> (d0, d1)>
#q1 = affine_map<(d0) -> (d0)>
func.func @accumulate(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %acc: memref<16xf32>, %y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<1x4xf32>
  linalg.generic {indexing_maps = [#lanew, #pointw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%g : memref<1x4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %a: f32):
    %l = linalg.index 2 : index
    %c = linalg.index 1 : index
    %v = memref.load %x[%c, %l] : memref<4x32xf32>
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %zero, %a : f32
    %total = arith.addf %v, %start : f32
    linalg.yield %total : f32
  }
  // Another part of the accumulator, and another buffer.
  %other = memref.subview %acc[8] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 8>>
  linalg.generic {indexing_maps = [#q1, #q1], iterator_types = ["parallel"]}
      ins(%other : memref<8xf32, strided<[1], offset: 8>>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  %flat = memref.collapse_shape %g [[0, 1]] : memref<1x4xf32> into memref<4xf32>
  %part = memref.subview %acc[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
  linalg.generic {indexing_maps = [#q1, #q1], iterator_types = ["parallel"]}
      ins(%flat : memref<4xf32>) outs(%part : memref<4xf32, strided<[1], offset: 4>>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func @accumulate_stays
// CHECK-COUNT-3: linalg.generic
func.func @accumulate_stays(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %acc: memref<16xf32>, %y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<1x4xf32>
  linalg.generic {indexing_maps = [#lanew, #pointw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%g : memref<1x4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %a: f32):
    %l = linalg.index 2 : index
    %c = linalg.index 1 : index
    %v = memref.load %x[%c, %l] : memref<4x32xf32>
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %zero, %a : f32
    %total = arith.addf %v, %start : f32
    linalg.yield %total : f32
  }
  // Reads elements 2 to 9 of the accumulator: the part's 4 and 5 among them.
  %other = memref.subview %acc[2] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 2>>
  linalg.generic {indexing_maps = [#q1, #q1], iterator_types = ["parallel"]}
      ins(%other : memref<8xf32, strided<[1], offset: 2>>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  %flat = memref.collapse_shape %g [[0, 1]] : memref<1x4xf32> into memref<4xf32>
  %part = memref.subview %acc[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
  linalg.generic {indexing_maps = [#q1, #q1], iterator_types = ["parallel"]}
      ins(%flat : memref<4xf32>) outs(%part : memref<4xf32, strided<[1], offset: 4>>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A copy out of a collapsed view copies the view's source into the target
// expanded alike, so it joins the op writing that source: a split's part
// is written into its place in the whole by the kernel computing it.

// CHECK-LABEL: func @split_part
// CHECK-SAME: (%[[X:.+]]: memref<2x3x4xf32>, %[[WHOLE:.+]]: memref<2x24xf32>)
// CHECK-NOT: memref.alloc
// CHECK: %[[PART:.+]] = memref.subview %[[WHOLE]][0, 12] [2, 12] [1, 1]
// CHECK: %[[INTO:.+]] = memref.expand_shape %[[PART]] {{\[}}[0], [1, 2]] output_shape [2, 3, 4]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : memref<2x3x4xf32>) outs(%[[INTO]] : memref<2x3x4xf32, strided<[24, 4, 1], offset: 12>>)
// CHECK: math.exp
// CHECK-NOT: memref.copy
// CHECK-NOT: linalg.generic
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @split_part(%x: memref<2x3x4xf32>, %whole: memref<2x24xf32>) {
  %t = memref.alloc() : memref<2x3x4xf32>
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<2x3x4xf32>) outs(%t : memref<2x3x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  %flat = memref.collapse_shape %t [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
  %part = memref.subview %whole[0, 12] [2, 12] [1, 1] : memref<2x24xf32> to memref<2x12xf32, strided<[24, 1], offset: 12>>
  memref.copy %flat, %part : memref<2x12xf32> to memref<2x12xf32, strided<[24, 1], offset: 12>>
  return
}

// -----

// A full reduction's epilogue (a rank-0 division of the loss sum).

// CHECK-LABEL: func @scalar_epilogue
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.+}}, %{{.+}} : memref<f32>, memref<f32>)
// CHECK-SAME: attrs = {accrue.warp_lanes}
// CHECK: arith.divf
// CHECK-NOT: linalg.generic
#lane0 = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @scalar_epilogue(%x: memref<32xf32>, %lanes: memref<32xi8>, %sum: memref<f32>, %mean: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 32.0 : f32
  linalg.generic {indexing_maps = [#lane0, #scalar], iterator_types = ["reduction"]}
      ins(%lanes : memref<32xi8>) outs(%sum : memref<f32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 0 : index
    %v = memref.load %x[%l] : memref<32xf32>
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %zero, %acc : f32
    %total = arith.addf %v, %start : f32
    linalg.yield %total : f32
  }
  linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%sum : memref<f32>) outs(%mean : memref<f32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.divf %a, %n : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Columns side by side of one buffer do not meet (their spans of
// addresses do): the copy of one part moves past the op writing the
// other part to its producer.

// CHECK-LABEL: func @parts_side_by_side
// CHECK-SAME: (%[[X:.+]]: memref<2x12xf32>, %[[Y:.+]]: memref<2x12xf32>, %[[WHOLE:.+]]: memref<2x24xf32>)
// CHECK-NOT: memref.alloc
// CHECK: %[[RIGHT:.+]] = memref.subview %[[WHOLE]][0, 12] [2, 12] [1, 1]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : memref<2x12xf32>) outs(%[[RIGHT]] :
// CHECK: math.exp
// CHECK: %[[LEFT:.+]] = memref.subview %[[WHOLE]][0, 0] [2, 12] [1, 1]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[Y]] : memref<2x12xf32>) outs(%[[LEFT]] :
// CHECK-NOT: linalg.generic
#id4 = affine_map<(d0, d1) -> (d0, d1)>
func.func @parts_side_by_side(%x: memref<2x12xf32>, %y: memref<2x12xf32>, %whole: memref<2x24xf32>) {
  %t = memref.alloc() : memref<2x12xf32>
  linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<2x12xf32>) outs(%t : memref<2x12xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  %left = memref.subview %whole[0, 0] [2, 12] [1, 1] : memref<2x24xf32> to memref<2x12xf32, strided<[24, 1]>>
  linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<2x12xf32>) outs(%left : memref<2x12xf32, strided<[24, 1]>>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  %right = memref.subview %whole[0, 12] [2, 12] [1, 1] : memref<2x24xf32> to memref<2x12xf32, strided<[24, 1], offset: 12>>
  memref.copy %t, %right : memref<2x12xf32> to memref<2x12xf32, strided<[24, 1], offset: 12>>
  return
}

// -----

// A call that names no buffer may touch any: nothing moves past it.

// CHECK-LABEL: func @opaque_call
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: call @opaque()
// CHECK: linalg.generic
#id5 = affine_map<(d0, d1) -> (d0, d1)>
#v5 = affine_map<(d0) -> (d0)>
func.func private @opaque()
func.func @opaque_call(%x: memref<4x4xf32>, %t: memref<4x4xf32>, %v: memref<8xf32>, %w: memref<8xf32>, %acc: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#id5, #id5], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x4xf32>) outs(%t : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#v5, #v5], iterator_types = ["parallel"]}
      ins(%v : memref<8xf32>) outs(%w : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  call @opaque() : () -> ()
  linalg.generic {indexing_maps = [#id5, #id5], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<4x4xf32>) outs(%acc : memref<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  }
  return
}
