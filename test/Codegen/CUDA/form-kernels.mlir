// RUN: accrue-opt %s -split-input-file -cuda-form-kernels -canonicalize | FileCheck %s
// RUN: accrue-opt %s -split-input-file -cuda-form-kernels --mlir-print-debuginfo | FileCheck %s --check-prefix=TAG

// An elementwise op: one thread per element, guarded, linearized over a
// 1-D grid of blocks of 256 threads.

// CHECK-LABEL: func @elementwise
// CHECK-SAME: (%[[X:.+]]: memref<4x1000xf32>, %[[Y:.+]]: memref<4x1000xf32>)
// CHECK-DAG: %[[TOTAL:.+]] = arith.constant 4000 : index
// CHECK-DAG: %[[BLOCKS:.+]] = arith.constant 16 : index
// CHECK-DAG: %[[C256:.+]] = arith.constant 256 : index
// CHECK: gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[BLOCKS]], %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%[[BD:.+]] = %[[C256]],
// CHECK:   %[[B:.+]] = arith.muli %[[BX]], %[[BD]]
// CHECK:   %[[T:.+]] = arith.addi %[[B]], %[[TX]]
// CHECK:   %[[IN:.+]] = arith.cmpi ult, %[[T]], %[[TOTAL]]
// CHECK:   scf.if %[[IN]] {
// CHECK:     %[[J:.+]] = arith.remui %[[T]], %c1000
// CHECK:     %[[I0:.+]] = arith.divui %[[T]], %c1000
// CHECK:     %[[I:.+]] = arith.remui %[[I0]], %c4
// CHECK:     %[[V:.+]] = memref.load %[[X]][%[[I]], %[[J]]]
// CHECK:     %[[R:.+]] = math.exp %[[V]]
// CHECK:     memref.store %[[R]], %[[Y]][%[[I]], %[[J]]]
// CHECK:   gpu.terminator
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @elementwise(%x: memref<4x1000xf32>, %y: memref<4x1000xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x1000xf32>) outs(%y : memref<4x1000xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A row reduction: one thread per row, the row's elements in a loop that
// carries the output in a register; one store after it.

// CHECK-LABEL: func @row_sum
// CHECK: gpu.launch
// CHECK:   scf.if
// CHECK:     %[[INIT:.+]] = memref.load %{{.+}}[%[[ROW:.+]]] : memref<8xf32>
// CHECK:     %[[SUM:.+]] = scf.for %[[K:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %[[INIT]]) -> (f32) {
// CHECK:       memref.load %{{.+}}[%[[ROW]], %[[K]]] : memref<8x32xf32>
// CHECK:       arith.addf
// CHECK:     memref.store %[[SUM]], %{{.+}}[%[[ROW]]] : memref<8xf32>
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @row_sum(%x: memref<8x32xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x32xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A contraction (a matmul): one thread per output element, the k loop in
// registers. A copy and a fill become kernels too; rank-0 work runs in one
// thread. The op that writes the parameters is tagged "update".

// CHECK-LABEL: func @train_step
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.+}} = %c16,
// CHECK:   scf.for %{{.+}} = %c0 to %c8 step
// CHECK:     arith.mulf
// CHECK:     arith.addf
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.+}} = %c32,
// CHECK:   memref.load %arg1
// CHECK:   memref.store %{{.+}}, %arg4
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.+}} = %c1,
// CHECK:   memref.store %{{.+}}, %arg3[]
// CHECK-NOT: linalg.
// CHECK-NOT: memref.copy
// Kernels are tagged with what they compute (their names in PTX).
// TAG-DAG: loc(fused<"update">
// TAG-DAG: loc(fused<"kernel">
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @train_step(%x: memref<4x8xf32>, %w: memref<8x4xf32>, %y: memref<4x4xf32>, %s: memref<f32>, %w2: memref<8x4xf32>)
    attributes {train.abi = [{train.name = "x", train.role = "batch"}, {train.name = "params", train.role = "params"}, {train.name = "y", train.role = "output"}, {train.name = "s", train.role = "output"}, {train.name = "w2", train.role = "params"}]} {
  linalg.matmul ins(%x, %w : memref<4x8xf32>, memref<8x4xf32>) outs(%y : memref<4x4xf32>)
  memref.copy %w, %w2 : memref<8x4xf32> to memref<8x4xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<f32>)
  return
} loc("step")
