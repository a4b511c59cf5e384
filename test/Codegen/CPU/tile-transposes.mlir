// RUN: accrue-opt %s -tile-transposes | FileCheck %s
// RUN: accrue-opt %s -tile-transposes="parallel=true min-parallel-elements=512" | FileCheck %s --check-prefix=PAR

// A transpose that moves the innermost dimension is copied in blocks of
// 16 x 16 (the output's innermost dimension by the one the input's
// innermost becomes), smaller at the edges; with `parallel`, large ones
// are marked for schedule-parallel-loops. One that keeps the innermost
// dimension copies whole rows already and is left alone.

// CHECK-LABEL: func @blocks
// CHECK: scf.parallel (%[[I:.+]], %[[J:.+]]) = ({{.*}}) to (%c40, %c24) step (%c16, %c16{{.*}})
// CHECK: %[[LEFT:.+]] = arith.subi %c40, %[[I]]
// CHECK: %[[ROWS:.+]] = arith.minsi %[[LEFT]], %c16
// CHECK: memref.subview %arg0[%[[J]], %[[I]]] [%{{.+}}, %[[ROWS]]] [1, 1]
// CHECK: memref.subview %arg1[%[[I]], %[[J]]] [%[[ROWS]], %{{.+}}] [1, 1]
// CHECK: linalg.transpose {{.*}} permutation = [1, 0]
// CHECK-NOT: accrue.parallel_kernel
// PAR-LABEL: func @blocks
// PAR: scf.parallel
// PAR: accrue.parallel_kernel
func.func @blocks(%in: memref<24x40xf32>, %out: memref<40x24xf32>) {
  linalg.transpose ins(%in : memref<24x40xf32>) outs(%out : memref<40x24xf32>) permutation = [1, 0]
  return
}

// Below min-parallel-elements: blocks, not marked.
// PAR-LABEL: func @small
// PAR: scf.parallel
// PAR-NOT: accrue.parallel_kernel
// PAR: return
func.func @small(%in: memref<20x18xf32>, %out: memref<18x20xf32>) {
  linalg.transpose ins(%in : memref<20x18xf32>) outs(%out : memref<18x20xf32>) permutation = [1, 0]
  return
}

// CHECK-LABEL: func @rows
// CHECK-NOT: scf.parallel
// CHECK: linalg.transpose ins(%arg0 : memref<8x4x64xf32>)
func.func @rows(%in: memref<8x4x64xf32>, %out: memref<4x8x64xf32>) {
  linalg.transpose ins(%in : memref<8x4x64xf32>) outs(%out : memref<4x8x64xf32>) permutation = [1, 0, 2]
  return
}
