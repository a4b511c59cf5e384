// RUN: accrue-opt %s -split-input-file -cuda-group-rows | FileCheck %s
// RUN: accrue-opt %s -split-input-file -cuda-group-rows -cuda-form-kernels | FileCheck %s --check-prefix=FORMED

// A LayerNorm over 4 rows of 64: the mean (a warp reduction), x - mean, the
// sum of squares (a warp reduction reading the row of x - mean) and the
// normalization are one row group: every element one of them writes and
// another touches lies in its point's row (the row stride is 64 for the
// rows, 1 for the per-row values), and gamma, read by every row, is not
// written.

// The mean, x - mean and the variance are buffers only the group touches,
// each written by the first member that touches it: they are marked
// row-local ([group, row stride]) and cuda-form-kernels keeps a point's
// rows of each in the block's workgroup memory (1, 64 and 1 elements,
// after the two reductions' warps' values), indexed by the element less
// 64 (or 1) x the block's point; no allocation is left.

// CHECK-LABEL: func @layernorm
// FORMED-LABEL: func @layernorm
// FORMED-NOT: memref.alloc
// FORMED: gpu.launch blocks(%[[POINT:[^,]+]], {{.+}} workgroup({{.+}} : memref<2xf32, #gpu.address_space<workgroup>>, {{.+}} : memref<2xf32, #gpu.address_space<workgroup>>, %[[MEAN:.+]] : memref<1xf32, #gpu.address_space<workgroup>>, %[[D:.+]] : memref<64xf32, #gpu.address_space<workgroup>>, %[[VAR:.+]] : memref<1xf32, #gpu.address_space<workgroup>>)
// FORMED: memref.store %{{.+}}, %[[MEAN]][%{{.+}}]
// FORMED: memref.load %[[MEAN]]
// FORMED: %[[ROW:.+]] = arith.muli %[[POINT]], %c64
// FORMED: %[[AT:.+]] = arith.subi %{{.+}}, %[[ROW]]
// FORMED: memref.store %{{.+}}, %[[D]][%[[AT]]]
// FORMED: memref.load %[[D]]
// FORMED: memref.store %{{.+}}, %[[VAR]]
// FORMED: memref.load %[[VAR]]
// FORMED-NOT: gpu.launch
// FORMED-LABEL: func @kept
// CHECK: memref.alloc() {accrue.row_local = array<i64: 0, 1>} : memref<4xf32>
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 0 : i64, accrue.warp_lanes}
// CHECK: memref.alloc() {accrue.row_local = array<i64: 0, 64>} : memref<4x64xf32>
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 0 : i64}
// CHECK: memref.alloc() {accrue.row_local = array<i64: 0, 1>} : memref<4xf32>
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 0 : i64, accrue.warp_lanes}
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 0 : i64}
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
#gamma = affine_map<(d0, d1) -> (d1)>
func.func @layernorm(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %g: memref<64xf32>,
                     %y: memref<4x64xf32>) {
  %mean = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%mean : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  %d = memref.alloc() : memref<4x64xf32>
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : memref<4x64xf32>, memref<4xf32>) outs(%d : memref<4x64xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  }
  %var = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%var : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
      %v = memref.load %d[%r, %i] : memref<4x64xf32>
      %q = arith.mulf %v, %v : f32
      %t = arith.addf %q, %s : f32
      scf.yield %t : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  linalg.generic {indexing_maps = [#row, #point, #gamma, #row], iterator_types = ["parallel", "parallel"]}
      ins(%d, %var, %g : memref<4x64xf32>, memref<4xf32>, memref<64xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%a: f32, %v: f32, %w: f32, %o: f32):
    %n = arith.mulf %a, %v : f32
    %s = arith.mulf %n, %w : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// What stays in global memory: x - mean, which its first member adds to
// what it held (its allocation moves before the kernel), and the variance,
// read after the group. The mean is the group's own.

// CHECK-LABEL: func @kept
// CHECK: memref.alloc() {accrue.row_local = array<i64: 0, 1>} : memref<4xf32>
// CHECK: memref.alloc() : memref<4x64xf32>
// CHECK: memref.alloc() : memref<4xf32>
// FORMED-COUNT-2: memref.alloc
// FORMED: gpu.launch {{.+}} workgroup({{.+}} : memref<2xf32, #gpu.address_space<workgroup>>, {{.+}} : memref<2xf32, #gpu.address_space<workgroup>>, {{.+}} : memref<1xf32, #gpu.address_space<workgroup>>) {
#klane = affine_map<(d0, d1) -> (d1)>
#kpoint = affine_map<(d0, d1) -> (d0)>
#krow = affine_map<(d0, d1) -> (d0, d1)>
func.func @kept(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %out: memref<4xf32>) {
  %mean = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#klane, #kpoint], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%mean : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  %d = memref.alloc() : memref<4x64xf32>
  linalg.generic {indexing_maps = [#krow, #kpoint, #krow], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : memref<4x64xf32>, memref<4xf32>) outs(%d : memref<4x64xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %s = arith.subf %a, %m : f32
    %t = arith.addf %s, %o : f32
    linalg.yield %t : f32
  }
  %var = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#klane, #kpoint], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%var : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
      %v = memref.load %d[%r, %i] : memref<4x64xf32>
      %q = arith.mulf %v, %v : f32
      %t = arith.addf %q, %s : f32
      scf.yield %t : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  memref.copy %var, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// Two groups, apart (a call between them): the first writes x - mean, the
// second reads it. Its rows cross from one kernel to the other, so they
// stay in global memory; each group's own reduction is local to it.

// CHECK-LABEL: func @across_groups
// CHECK: memref.alloc() {accrue.row_local = array<i64: 0, 1>} : memref<4xf32>
// CHECK: memref.alloc() : memref<4x64xf32>
// CHECK: memref.alloc() {accrue.row_local = array<i64: 1, 1>} : memref<4xf32>
#alane = affine_map<(d0, d1) -> (d1)>
#apoint = affine_map<(d0, d1) -> (d0)>
#arow = affine_map<(d0, d1) -> (d0, d1)>
func.func private @opaque_between()
func.func @across_groups(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %y: memref<4x64xf32>) {
  %mean = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#alane, #apoint], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%mean : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  %d = memref.alloc() : memref<4x64xf32>
  linalg.generic {indexing_maps = [#arow, #apoint, #arow], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : memref<4x64xf32>, memref<4xf32>) outs(%d : memref<4x64xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  }
  func.call @opaque_between() : () -> ()
  %var = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#alane, #apoint], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%var : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
      %v = memref.load %d[%r, %i] : memref<4x64xf32>
      %q = arith.mulf %v, %v : f32
      %t = arith.addf %q, %s : f32
      scf.yield %t : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  linalg.generic {indexing_maps = [#arow, #apoint, #arow], iterator_types = ["parallel", "parallel"]}
      ins(%d, %var : memref<4x64xf32>, memref<4xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%a: f32, %v: f32, %o: f32):
    %n = arith.mulf %a, %v : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// One buffer two groups use (bufferization gives equal temporaries one
// allocation), each writing it before reading it: no group reads what the
// other wrote, so each keeps its rows in its own workgroup memory
// ([group, stride] for both).

// CHECK-LABEL: func @reused_by_groups
// CHECK: memref.alloc() {accrue.row_local = array<i64: 0, 64, 1, 64>} : memref<4x64xf32>
#rlane = affine_map<(d0, d1) -> (d1)>
#rpoint = affine_map<(d0, d1) -> (d0)>
#rrow = affine_map<(d0, d1) -> (d0, d1)>
func.func private @opaque_apart()
func.func @reused_by_groups(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %s0: memref<4xf32>, %s1: memref<4xf32>) {
  %t = memref.alloc() : memref<4x64xf32>
  linalg.generic {indexing_maps = [#rrow, #rrow], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x64xf32>) outs(%t : memref<4x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#rlane, #rpoint], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%s0 : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
      %v = memref.load %t[%r, %i] : memref<4x64xf32>
      %u = arith.addf %v, %s : f32
      scf.yield %u : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  func.call @opaque_apart() : () -> ()
  linalg.generic {indexing_maps = [#rrow, #rrow], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x64xf32>) outs(%t : memref<4x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    %f = arith.addf %e, %e : f32
    linalg.yield %f : f32
  }
  linalg.generic {indexing_maps = [#rlane, #rpoint], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%s1 : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
      %v = memref.load %t[%r, %i] : memref<4x64xf32>
      %u = arith.addf %v, %s : f32
      scf.yield %u : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// The group's first writer covers only half of each row (a subview), and
// the reduction reads whole rows: the other half is what the buffer held
// before, which a block's workgroup memory would not hold. Not marked.

// CHECK-LABEL: func @partial_write
// CHECK: memref.alloc() : memref<4x64xf32>
// CHECK: accrue.row_group = 0
#plane = affine_map<(d0, d1) -> (d1)>
#ppoint = affine_map<(d0, d1) -> (d0)>
#prow = affine_map<(d0, d1) -> (d0, d1)>
func.func @partial_write(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %s: memref<4xf32>) {
  %b = memref.alloc() : memref<4x64xf32>
  %half = memref.subview %b[0, 0] [4, 32] [1, 1] : memref<4x64xf32> to memref<4x32xf32, strided<[64, 1]>>
  linalg.generic {indexing_maps = [#prow, #prow], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x32xf32>) outs(%half : memref<4x32xf32, strided<[64, 1]>>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#plane, #ppoint], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%s : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    %id = arith.constant 0.0 : f32
    %share = scf.for %k = %c0 to %c2 step %c1 iter_args(%a = %id) -> (f32) {
      %base = arith.muli %k, %c32 : index
      %i = arith.addi %base, %l : index
      %v = memref.load %b[%r, %i] : memref<4x64xf32>
      %u = arith.addf %v, %a : f32
      scf.yield %u : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// The second reduction reads row 0 of what the row map writes at every
// point: another warp's row. The group ends before it, and it starts the
// next with the row map after it.

// CHECK-LABEL: func @other_row
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 0 : i64, accrue.warp_lanes}
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 0 : i64}
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 1 : i64, accrue.warp_lanes}
// CHECK: linalg.generic {{.+}} attrs = {accrue.row_group = 1 : i64}
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
func.func @other_row(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %y: memref<4x32xf32>) {
  %mean = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%mean : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %x[%r, %l] : memref<4x32xf32>
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %v, %start : f32
    linalg.yield %sum : f32
  }
  %d = memref.alloc() : memref<4x32xf32>
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : memref<4x32xf32>, memref<4xf32>) outs(%d : memref<4x32xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  }
  %var = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%var : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %d[%c0, %l] : memref<4x32xf32>
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %sum = arith.addf %v, %start : f32
    linalg.yield %sum : f32
  }
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%d, %var : memref<4x32xf32>, memref<4xf32>) outs(%y : memref<4x32xf32>) {
  ^bb0(%a: f32, %v: f32, %o: f32):
    %n = arith.mulf %a, %v : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// Views of one buffer 32 elements apart: the row map writes the rows of
// the first, the reduction reads those of the second, whose row p spans
// the second half of the first's row p and the first half of its row
// p + 1. No group.

// CHECK-LABEL: func @shifted_rows
// CHECK-NOT: accrue.row_group
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
func.func @shifted_rows(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %out: memref<4xf32>) {
  %buffer = memref.alloc() : memref<288xf32>
  %first = memref.reinterpret_cast %buffer to offset: [0], sizes: [4, 64], strides: [64, 1]
      : memref<288xf32> to memref<4x64xf32, strided<[64, 1]>>
  %second = memref.reinterpret_cast %buffer to offset: [32], sizes: [4, 64], strides: [64, 1]
      : memref<288xf32> to memref<4x64xf32, strided<[64, 1], offset: 32>>
  linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x64xf32>) outs(%first : memref<4x64xf32, strided<[64, 1]>>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%out : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %second[%r, %l] : memref<4x64xf32, strided<[64, 1], offset: 32>>
    %is0 = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %is0, %id, %acc : f32
    %sum = arith.addf %v, %start : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// A reduction followed by rows longer than a warp takes (4,096 elements),
// by other points, or by something with memory effects; a single point:
// no group.

// CHECK-LABEL: func @apart
// CHECK-NOT: accrue.row_group
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
#lane3 = affine_map<(d0, d1, d2) -> (d2)>
#point3 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func private @opaque()
func.func @apart(%x: memref<4x32xf32>, %long: memref<4x4096xf32>, %wide: memref<8x32xf32>,
                 %one: memref<1x32xf32>, %lanes: memref<32xi8>, %s: memref<4xf32>,
                 %s1: memref<1x1xf32>, %y: memref<4x32xf32>, %ylong: memref<4x4096xf32>,
                 %ywide: memref<8x32xf32>, %y1: memref<1x32xf32>) {
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%s : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %x[%r, %l] : memref<4x32xf32>
    %is0 = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %is0, %id, %acc : f32
    %sum = arith.addf %v, %start : f32
    linalg.yield %sum : f32
  }
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%long, %s : memref<4x4096xf32>, memref<4xf32>) outs(%ylong : memref<4x4096xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%s : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %x[%r, %l] : memref<4x32xf32>
    %is0 = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %is0, %id, %acc : f32
    %sum = arith.addf %v, %start : f32
    linalg.yield %sum : f32
  }
  linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel", "parallel"]}
      ins(%wide : memref<8x32xf32>) outs(%ywide : memref<8x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%s : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %x[%r, %l] : memref<4x32xf32>
    %is0 = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %is0, %id, %acc : f32
    %sum = arith.addf %v, %start : f32
    linalg.yield %sum : f32
  }
  func.call @opaque() : () -> ()
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<4x32xf32>, memref<4xf32>) outs(%y : memref<4x32xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#lane3, #point3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%s1 : memref<1x1xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 2 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %one[%c0, %l] : memref<1x32xf32>
    %is0 = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %is0, %id, %acc : f32
    %sum = arith.addf %v, %start : f32
    linalg.yield %sum : f32
  }
  linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel", "parallel"]}
      ins(%one : memref<1x32xf32>) outs(%y1 : memref<1x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}
