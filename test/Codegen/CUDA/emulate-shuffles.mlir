// RUN: accrue-opt %s -split-input-file -verify-diagnostics -cuda-emulate-kernels -canonicalize | FileCheck %s

// A kernel with shuffles runs in phases, each a shuffle's: every thread of
// the block runs the ops before the shuffle, keeping the value it
// exchanges in a buffer of one element per thread of the block; then every
// thread runs the shuffle and what follows, reading its partner lane's
// value (xor 1: lanes 2k and 2k + 1 of the same warp, the warp's first
// thread being tid - tid % 32).

// CHECK-LABEL: func @shuffle
// CHECK-SAME: (%[[X:.+]]: memref<64xf32>, %[[Y:.+]]: memref<64xf32>)
// CHECK: %[[KEPT:.+]] = memref.alloc() : memref<64xf32>
// CHECK: scf.for %[[T1:.+]] = %c0 to %c64
// CHECK:   %[[V:.+]] = memref.load %[[X]][%[[T1]]]
// CHECK:   memref.store %[[V]], %[[KEPT]][%[[T1]]]
// CHECK: }
// CHECK: scf.for %[[T2:.+]] = %c0 to %c64
// CHECK:   %[[OWN:.+]] = memref.load %[[KEPT]][%[[T2]]]
// CHECK:   %[[LANE:.+]] = arith.remui %[[T2]], %c32
// CHECK:   %[[BASE:.+]] = arith.subi %[[T2]], %[[LANE]]
// CHECK:   %[[PARTNER:.+]] = arith.xori %[[LANE]], %c1
// CHECK:   %[[INSIDE:.+]] = arith.cmpi ult, %[[PARTNER]], %c32
// CHECK:   %[[SOURCE:.+]] = arith.addi %[[BASE]], %[[PARTNER]]
// CHECK:   %[[FROM:.+]] = arith.select %{{.+}}, %[[SOURCE]], %[[T2]]
// CHECK:   %[[OTHER:.+]] = memref.load %[[KEPT]][%[[FROM]]]
// CHECK:   %[[W:.+]] = arith.addf %[[OWN]], %[[OTHER]]
// CHECK:   memref.store %[[W]], %[[Y]][%[[T2]]]
// CHECK: }
// CHECK: memref.dealloc %[[KEPT]]
// CHECK-NOT: gpu.shuffle
func.func @shuffle(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1_i32 = arith.constant 1 : i32
  %c32_i32 = arith.constant 32 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<64xf32>
    %s, %ok = gpu.shuffle xor %v, %c1_i32, %c32_i32 : f32
    %w = arith.addf %v, %s : f32
    memref.store %w, %y[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// A shuffle every lane does not reach (in a branch) cannot be run in
// phases: an error naming it.

func.func @divergent(%x: memref<64xf32>, %c: i1) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1_i32 = arith.constant 1 : i32
  %c32_i32 = arith.constant 32 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    scf.if %c {
      %v = memref.load %x[%tx] : memref<64xf32>
      // expected-error @+1 {{cannot emulate a shuffle inside a branch or a loop}}
      %s, %ok = gpu.shuffle xor %v, %c1_i32, %c32_i32 : f32
      memref.store %s, %x[%tx] : memref<64xf32>
    }
    gpu.terminator
  }
  return
}
