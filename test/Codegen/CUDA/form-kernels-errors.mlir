// RUN: accrue-opt %s -split-input-file -cuda-form-kernels -verify-diagnostics

// A warp reduction's epilogue runs once, in lane 0, after the shuffles: it
// may not read what the body computes per lane (here the lane's index).

#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
func.func @epilogue_reads_lane(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %run: memref<4xf32>, %out: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{malformed warp reduction}}
  linalg.generic {indexing_maps = [#lane, #point, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%run, %out : memref<4xf32>, memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32, %o: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %share = memref.load %x[%r, %l] : memref<4x32xf32>
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %zero, %acc : f32
    %sum = arith.addf %share, %start : f32
    %y = arith.addf %sum, %share : f32
    linalg.yield %sum, %y : f32, f32
  }
  return
}

// -----

// A row group's members become one kernel: what lies between them must
// have no memory effects (cuda-group-rows never puts a call there).

#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
func.func private @opaque()
func.func @call_in_group(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %sum: memref<4xf32>,
                         %y: memref<4x32xf32>) {
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%sum : memref<4xf32>)
      attrs = {accrue.warp_lanes, accrue.row_group = 0 : i64} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %id = arith.constant 0.0 : f32
    %v = memref.load %x[%r, %l] : memref<4x32xf32>
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %total = arith.addf %v, %start : f32
    linalg.yield %total : f32
  }
  // expected-error @+1 {{an op with memory effects inside a row group}}
  func.call @opaque() : () -> ()
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : memref<4x32xf32>, memref<4xf32>) outs(%y : memref<4x32xf32>)
      attrs = {accrue.row_group = 0 : i64} {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  }
  return
}
