// RUN: accrue-opt %s -cuda-emulate-kernels | FileCheck %s

// A kernel runs as loops over its blocks and threads (z outermost), its
// ids replaced by the loops' indices.

// CHECK-LABEL: func @step
// CHECK-SAME: (%[[X:.+]]: memref<512xf32>)
// CHECK: scf.for %{{.+}} = %c0 to %c1
// CHECK:   scf.for %{{.+}} = %c0 to %c1
// CHECK:     scf.for %[[BX:.+]] = %c0 to %c2
// CHECK:       scf.for %{{.+}} = %c0 to %c1
// CHECK:         scf.for %{{.+}} = %c0 to %c1
// CHECK:           scf.for %[[TX:.+]] = %c0 to %c256
// CHECK:             %[[B:.+]] = arith.muli %[[BX]], %c256
// CHECK:             %[[T:.+]] = arith.addi %[[B]], %[[TX]]
// CHECK:             memref.store %{{.+}}, %[[X]][%[[T]]]
// CHECK-NOT: gpu.launch
func.func @step(%x: memref<512xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %t = arith.addi %b, %tx : index
    memref.store %one, %x[%t] : memref<512xf32>
    gpu.terminator
  }
  return
}
