// RUN: accrue-opt %s -split-input-file -schedule-parallel-loops | FileCheck %s
// RUN: accrue-opt %s -split-input-file -schedule-parallel-loops=transcendental-work=0 | FileCheck %s --check-prefix=UNWEIGHTED

// An outermost parallel loop with enough work stays parallel over its
// leading dimensions (at least 16 iterations); the rest become scf.for
// loops inside it. A parallel loop nested in another, or in a sequential
// loop, or with little work, becomes sequential.

// CHECK-LABEL: func @large
// CHECK: scf.parallel (%[[I:.+]]) = (%c0) to (%c64) step (%c1)
// CHECK-NEXT: scf.for %[[J:.+]] = %c0 to %c1024 step %c1
// CHECK-NEXT: memref.load %{{.+}}[%[[I]], %[[J]]]
func.func @large(%a: memref<64x1024xf32>, %b: memref<64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c1024) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<64x1024xf32>
    memref.store %x, %b[%i, %j] : memref<64x1024xf32>
  }
  return
}

// -----

// CHECK-LABEL: func @small
// CHECK-NOT: scf.parallel
// CHECK: scf.for
// CHECK: scf.for
func.func @small(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<4x8xf32>
    memref.store %x, %b[%i, %j] : memref<4x8xf32>
  }
  return
}

// -----

// A sum over rows: the reduction loop is outermost, so the parallel loop
// inside it would fork once per row; it stays sequential.
// CHECK-LABEL: func @inside_reduction
// CHECK-NOT: scf.parallel
func.func @inside_reduction(%a: memref<1024x256xf32>, %b: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  scf.for %r = %c0 to %c1024 step %c1 {
    scf.parallel (%j) = (%c0) to (%c256) step (%c1) {
      %x = memref.load %a[%r, %j] : memref<1024x256xf32>
      %y = memref.load %b[%j] : memref<256xf32>
      %s = arith.addf %x, %y : f32
      memref.store %s, %b[%j] : memref<256xf32>
    }
  }
  return
}

// -----

// A contraction kernel's loop (marked by vectorize-contractions) stays
// parallel inside its k-block loop; a parallel loop nested in a parallel
// loop does not.
// CHECK-LABEL: func @kernel
// CHECK: scf.for
// CHECK-NEXT: scf.parallel
// CHECK-NOT: scf.parallel
// CHECK: accrue.parallel_kernel
func.func @kernel(%a: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  scf.for %k = %c0 to %c64 step %c8 {
    scf.parallel (%i) = (%c0) to (%c64) step (%c8) {
      scf.parallel (%j) = (%c0) to (%c64) step (%c1) {
        memref.store %zero, %a[%i, %j] : memref<64x64xf32>
      }
    } {accrue.parallel_kernel}
  }
  return
}

// -----

// 16 x 256 points (an LSTM cell's gates at one step) are too few to fork
// for a copy, but with a transcendental function each (16 more
// iterations' work: 4096 x 17 >= 32768) they are worth two threads.
// Unweighted, the loop with exp is serialized too.
// CHECK-LABEL: func @transcendental
// CHECK: scf.parallel (%{{.+}}) = (%c0) to (%c16) step (%c1)
// CHECK: math.exp
// UNWEIGHTED-LABEL: func @transcendental
// UNWEIGHTED-NOT: scf.parallel
// UNWEIGHTED: math.exp
func.func @transcendental(%a: memref<16x256xf32>, %b: memref<16x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c256) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<16x256xf32>
    %e = math.exp %x : f32
    memref.store %e, %b[%i, %j] : memref<16x256xf32>
  }
  return
}

// -----

// CHECK-LABEL: func @cheap
// CHECK-NOT: scf.parallel
// CHECK: arith.addf
func.func @cheap(%a: memref<16x256xf32>, %b: memref<16x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c256) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<16x256xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %b[%i, %j] : memref<16x256xf32>
  }
  return
}

// -----

// The innermost loop made from a parallel loop, which reads and writes
// consecutive elements along it (and a bias it does not move), says that
// its iterations are independent: an access group in the parallelAccesses
// of its llvm.loop_annotation (LLVM vectorizes it without checking at run
// time that %a, %bias and %b are apart). Strided reads along it (a
// pooling window's), or a loop shorter than a vector, keep their checks.

// CHECK: #[[$GROUP:.+]] = #llvm.access_group<id = distinct[{{[0-9]+}}]<>>
// CHECK: #[[$PARALLEL:.+]] = #llvm.loop_annotation<parallelAccesses = #[[$GROUP]]>
// CHECK-LABEL: func @rows
// CHECK: scf.parallel
// CHECK: scf.for
// CHECK: } {llvm.loop_annotation = #[[$PARALLEL]]}
// CHECK-LABEL: func @strided
// CHECK-NOT: llvm.loop_annotation
// CHECK-LABEL: func @short
// CHECK-NOT: llvm.loop_annotation
func.func @rows(%a: memref<64x1024xf32>, %bias: memref<64xf32>, %b: memref<64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c1024) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<64x1024xf32>
    %y = memref.load %bias[%i] : memref<64xf32>
    %s = arith.addf %x, %y : f32
    memref.store %s, %b[%i, %j] : memref<64x1024xf32>
  }
  return
}
func.func @strided(%a: memref<64x2048xf32>, %b: memref<64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c1024) step (%c1, %c1) {
    %k = arith.muli %j, %c2 : index
    %x = memref.load %a[%i, %k] : memref<64x2048xf32>
    memref.store %x, %b[%i, %j] : memref<64x1024xf32>
  }
  return
}
func.func @short(%a: memref<4096x8xf32>, %b: memref<4096x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c4096 = arith.constant 4096 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4096, %c8) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<4096x8xf32>
    memref.store %x, %b[%i, %j] : memref<4096x8xf32>
  }
  return
}
