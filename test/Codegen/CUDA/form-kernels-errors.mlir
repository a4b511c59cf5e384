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
