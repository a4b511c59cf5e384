// RUN: accrue-opt %s -split-input-file -verify-diagnostics -cuda-emulate-kernels -canonicalize | FileCheck %s

// A kernel with shuffles runs in phases, each a shuffle's: every thread of
// the block runs the ops before the shuffle, keeping the value it
// exchanges in a stack buffer of one element per thread of the block
// (freed with the launch's alloca scope, which the canonicalizer folds
// into the function here); then every
// thread runs the shuffle and what follows, reading its partner lane's
// value (xor 1: lanes 2k and 2k + 1 of the same warp, the warp's first
// thread being tid - tid % 32).

// CHECK-LABEL: func @shuffle
// CHECK-SAME: (%[[X:.+]]: memref<64xf32>, %[[Y:.+]]: memref<64xf32>)
// CHECK: %[[KEPT:.+]] = memref.alloca() : memref<64xf32>
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
// phases: an error naming it; the same for a barrier.

func.func @divergent(%x: memref<64xf32>, %c: i1) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1_i32 = arith.constant 1 : i32
  %c32_i32 = arith.constant 32 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    scf.if %c {
      %v = memref.load %x[%tx] : memref<64xf32>
      // expected-error @+1 {{cannot emulate a shuffle or a barrier inside a branch or a loop}}
      %s, %ok = gpu.shuffle xor %v, %c1_i32, %c32_i32 : f32
      memref.store %s, %x[%tx] : memref<64xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// A barrier starts a phase too: every thread of the block stores its
// element before any thread reads its neighbour's (thread t + 1's, the
// block's last one wrapping to 0). What crosses the barrier (the thread's
// element index) is kept per thread; the barrier itself is gone.

// CHECK-LABEL: func @barrier
// CHECK-SAME: (%[[X:.+]]: memref<64xf32>, %[[Y:.+]]: memref<64xf32>)
// CHECK: scf.for %[[B:.+]] = %c0 to %c2
// CHECK:   scf.for %[[T1:.+]] = %c0 to %c32
// CHECK:     %[[I:.+]] = arith.addi
// CHECK:     memref.store %{{.+}}, %[[Y]][%[[I]]]
// CHECK:     memref.store %[[I]], %[[KEPT:.+]][%[[T1]]]
// CHECK:   }
// CHECK:   scf.for %[[T2:.+]] = %c0 to %c32
// CHECK:     memref.load %[[KEPT]][%[[T2]]]
// CHECK:     memref.load %[[Y]]
// CHECK:     memref.store %{{.+}}, %[[X]]
// CHECK:   }
// CHECK: }
// CHECK-NOT: gpu.barrier
func.func @barrier(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    memref.store %one, %y[%i] : memref<64xf32>
    gpu.barrier
    %next = arith.addi %tx, %c1 : index
    %wrapped = arith.remui %next, %sx : index
    %j = arith.addi %base, %wrapped : index
    %v = memref.load %y[%j] : memref<64xf32>
    memref.store %v, %x[%i] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

func.func @divergent_barrier(%x: memref<64xf32>, %c: i1) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    scf.if %c {
      // expected-error @+1 {{cannot emulate a shuffle or a barrier inside a branch or a loop}}
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// A shuffle down reads lane + offset, inside the width.

// CHECK-LABEL: func @shuffle_down
// CHECK: %[[LANE:.+]] = arith.remui %{{.+}}, %c32
// CHECK: %[[PARTNER:.+]] = arith.addi %[[LANE]], %c1
// CHECK: arith.cmpi ult, %[[PARTNER]], %c32
func.func @shuffle_down(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1_i32 = arith.constant 1 : i32
  %c32_i32 = arith.constant 32 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<64xf32>
    %s, %ok = gpu.shuffle down %v, %c1_i32, %c32_i32 : f32
    memref.store %s, %y[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// Workgroup (shared) memory is a stack buffer of the launch, which each
// block in turn uses: thread t stores its value at t, and after the
// barrier reads thread 31 - t's.

// CHECK-LABEL: func @shared
// CHECK-SAME: (%[[X:.+]]: memref<64xf32>, %[[Y:.+]]: memref<64xf32>)
// CHECK: %[[SMEM:.+]] = memref.alloca() : memref<32xf32>
// CHECK: scf.for %{{.+}} = %c0 to %c2
// CHECK:   scf.for %[[T1:.+]] = %c0 to %c32
// CHECK:     %[[V:.+]] = memref.load %[[X]]
// CHECK:     memref.store %[[V]], %[[SMEM]][%[[T1]]]
// CHECK:   }
// CHECK:   scf.for %[[T2:.+]] = %c0 to %c32
// CHECK:     %[[MIRROR:.+]] = arith.subi %c31, %[[T2]]
// CHECK:     %[[W:.+]] = memref.load %[[SMEM]][%[[MIRROR]]]
// CHECK:     memref.store %[[W]], %[[Y]]
// CHECK:   }
// CHECK: }
// CHECK-NOT: gpu.barrier
func.func @shared(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c31 = arith.constant 31 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%smem : memref<32xf32, #gpu.address_space<workgroup>>) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    %v = memref.load %x[%i] : memref<64xf32>
    memref.store %v, %smem[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %mirror = arith.subi %c31, %tx : index
    %w = memref.load %smem[%mirror] : memref<32xf32, #gpu.address_space<workgroup>>
    %base2 = arith.muli %bx, %sx : index
    %j = arith.addi %base2, %tx : index
    memref.store %w, %y[%j] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// Shared memory of a dynamic shape (a launch's dynamic shared memory)
// cannot be placed on the stack.

func.func @dynamic_shared(%n: index) {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{cannot emulate shared memory of a dynamic shape}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%smem : memref<?xf32, #gpu.address_space<workgroup>>) {
    gpu.terminator
  }
  return
}
