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
    attributes {train.abi = [{train.name = "x", train.role = #train.role<batch>}, {train.name = "params", train.role = #train.role<params>}, {train.name = "y", train.role = #train.role<output>}, {train.name = "s", train.role = #train.role<output>}, {train.name = "w2", train.role = #train.role<params>}]} {
  linalg.matmul ins(%x, %w : memref<4x8xf32>, memref<8x4xf32>) outs(%y : memref<4x4xf32>)
  memref.copy %w, %w2 : memref<8x4xf32> to memref<8x4xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<f32>)
  return
} loc("step")

// -----

// An update over rank-1 arenas streams: a grid-stride loop (4096 chunks of
// 4 elements, 16 blocks of 256 threads: a stride of 4096 chunks) moving 4
// elements of each operand
// with one 16-byte vector access; the rank-0 scalar is loaded once per
// chunk.

// CHECK-LABEL: func @streaming
// CHECK-SAME: (%[[P:.+]]: memref<16384xf32>, %[[G:.+]]: memref<16384xf32>, %[[LR:.+]]: memref<f32>)
// CHECK-DAG: %[[CHUNKS:.+]] = arith.constant 4096 : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c16{{.*}}, {{.*}}) threads({{.*}}) in (%{{.+}} = %c256
// CHECK:   scf.for %[[C:.+]] = %{{.+}} to %[[CHUNKS]] step %[[CHUNKS]] {
// CHECK:     %[[BASE:.+]] = arith.muli %[[C]], %c4
// CHECK-DAG: %[[VP:.+]] = vector.load %[[P]][%[[BASE]]] {alignment = 16 : i64} : memref<16384xf32>, vector<4xf32>
// CHECK-DAG: %[[VG:.+]] = vector.load %[[G]][%[[BASE]]] {alignment = 16 : i64} : memref<16384xf32>, vector<4xf32>
// CHECK-DAG: memref.load %[[LR]][] : memref<f32>
// CHECK-COUNT-4: arith.mulf
// CHECK: %[[NEW:.+]] = vector.from_elements
// CHECK: vector.store %[[NEW]], %[[P]][%[[BASE]]] {alignment = 16 : i64} : memref<16384xf32>, vector<4xf32>
// CHECK-NOT: memref.store
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @streaming(%p: memref<16384xf32>, %g: memref<16384xf32>, %lr: memref<f32>) attributes {train.abi = [{train.name = "params", train.role = #train.role<params>}, {train.name = "grads", train.role = #train.role<accumulator>}, {train.name = "lr", train.role = #train.role<lr>}]} {
  linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]}
      ins(%g, %lr : memref<16384xf32>, memref<f32>) outs(%p : memref<16384xf32>) {
  ^bb0(%grad: f32, %rate: f32, %param: f32):
    %step = arith.mulf %grad, %rate : f32
    %new = arith.subf %param, %step : f32
    linalg.yield %new : f32
  }
  return
}

// -----

// Not streamed: an offset that is not a multiple of 4 elements, and i1
// elements (a byte each in memory, a bit each in a vector).

// CHECK-LABEL: func @not_streaming
// CHECK-NOT: vector.load
// CHECK: memref.load
#id = affine_map<(d0) -> (d0)>
func.func @not_streaming(%x: memref<64xf32, strided<[1], offset: 2>>, %y: memref<64xf32>, %m: memref<64xi1>, %z: memref<64xi1>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<64xf32, strided<[1], offset: 2>>) outs(%y : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%m : memref<64xi1>) outs(%z : memref<64xi1>) {
  ^bb0(%in: i1, %out: i1):
    linalg.yield %in : i1
  }
  return
}

// -----

// A host loop over buffer elements (a scatter-add) runs in one thread; one
// whose body is a loop of independent iterations (an embedding gradient:
// tokens outside, features inside) runs one thread per inner iteration,
// each walking the outer loop in order. Where each iteration only adds into
// the element it reads, the table's 130 rows are split into 44 ranges of 3
// rows (at most 64 ranges), one per grid row: every thread reads every
// index but updates only the rows of its range.

// CHECK-LABEL: func @scatter
// CHECK: gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c1, %{{.+}} = %c1, %{{.+}} = %c1) threads(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c1, %{{.+}} = %c1, %{{.+}} = %c1)
// CHECK:   scf.for %{{.+}} = %c0 to %c6
// CHECK: gpu.launch blocks(%[[BX:.+]], %[[BY:.+]], %{{.+}}) in (%{{.+}} = %c2, %{{.+}} = %c44, %{{.+}} = %c1) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%[[DX:.+]] = %c256, %{{.+}} = %c1, %{{.+}} = %c1)
// CHECK:   %[[B:.+]] = arith.muli %[[BX]], %[[DX]] : index
// CHECK:   %[[T:.+]] = arith.addi %[[B]], %[[TX]] : index
// CHECK:   %[[FIRST:.+]] = arith.muli %[[BY]], %c3 : index
// CHECK:   %[[IN:.+]] = arith.cmpi ult, %[[T]], %c300 : index
// CHECK:   scf.if %[[IN]] {
// CHECK:     scf.for %[[TOKEN:.+]] = %c0 to %c6
// CHECK:       %[[ID:.+]] = memref.load %{{.+}}[%[[TOKEN]]] : memref<6xindex>
// CHECK:       %[[OFF:.+]] = arith.subi %[[ID]], %[[FIRST]] : index
// CHECK:       %[[MINE:.+]] = arith.cmpi ult, %[[OFF]], %c3 : index
// CHECK:       scf.if %[[MINE]] {
// CHECK:         memref.load %{{.+}}[%[[ID]], %[[T]]] : memref<130x300xf32>
// CHECK:         memref.load %{{.+}}[%[[TOKEN]], %[[T]]] : memref<6x300xf32>
// CHECK:         memref.store %{{.+}}, %{{.+}}[%[[ID]], %[[T]]] : memref<130x300xf32>
// CHECK-NOT: nn.independent_iterations
func.func @scatter(%ids: memref<6xindex>, %dy: memref<6x300xf32>, %table: memref<130x300xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c300 = arith.constant 300 : index
  scf.for %n = %c0 to %c6 step %c1 {
    %id = memref.load %ids[%n] : memref<6xindex>
    %v = memref.load %dy[%n, %c0] : memref<6x300xf32>
    memref.store %v, %table[%id, %c0] : memref<130x300xf32>
  }
  scf.for %n = %c0 to %c6 step %c1 {
    scf.for %d = %c0 to %c300 step %c1 {
      %id = memref.load %ids[%n] : memref<6xindex>
      %t = memref.load %table[%id, %d] : memref<130x300xf32>
      %v = memref.load %dy[%n, %d] : memref<6x300xf32>
      %s = arith.addf %t, %v : f32
      memref.store %s, %table[%id, %d] : memref<130x300xf32>
    } {nn.independent_iterations}
  }
  return
}

// -----

// An iteration that reads another element of the buffer it stores to is
// not split by rows (a thread of another range may write what it reads).

// CHECK-LABEL: func @reads_another_row
// CHECK: gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c2, %{{.+}} = %c1, %{{.+}} = %c1) threads(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c256, %{{.+}} = %c1, %{{.+}} = %c1)
// CHECK-NOT: arith.subi
// CHECK: memref.store
func.func @reads_another_row(%ids: memref<6xindex>, %table: memref<130x300xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c300 = arith.constant 300 : index
  scf.for %n = %c0 to %c6 step %c1 {
    scf.for %d = %c0 to %c300 step %c1 {
      %id = memref.load %ids[%n] : memref<6xindex>
      %t = memref.load %table[%id, %d] : memref<130x300xf32>
      %u = memref.load %table[%c0, %d] : memref<130x300xf32>
      %s = arith.addf %t, %u : f32
      memref.store %s, %table[%id, %d] : memref<130x300xf32>
    } {nn.independent_iterations}
  }
  return
}

// -----

// A loop whose own iterations are independent (writes of distinct
// elements: cuda-sort-gather-grads' keys at their ranks): one thread per
// iteration, the body run for the thread's index, no row ranges.

// CHECK-LABEL: func @independent
// CHECK: gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c3, %{{.+}} = %c1, %{{.+}} = %c1) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%[[DX:.+]] = %c256, %{{.+}} = %c1, %{{.+}} = %c1)
// CHECK:   %[[B:.+]] = arith.muli %[[BX]], %[[DX]] : index
// CHECK:   %[[T:.+]] = arith.addi %[[B]], %[[TX]] : index
// CHECK:   %[[IN:.+]] = arith.cmpi ult, %[[T]], %c600 : index
// CHECK:   scf.if %[[IN]] {
// CHECK-NOT: scf.for
// CHECK:     %[[AT:.+]] = memref.load %{{.+}}[%[[T]]] : memref<600xindex>
// CHECK:     %[[V:.+]] = memref.load %{{.+}}[%[[T]]] : memref<600xf32>
// CHECK:     memref.store %[[V]], %{{.+}}[%[[AT]]] : memref<600xf32>
// CHECK-NOT: nn.independent_iterations
func.func @independent(%ranks: memref<600xindex>, %x: memref<600xf32>, %y: memref<600xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c600 = arith.constant 600 : index
  scf.for %t = %c0 to %c600 step %c1 {
    %at = memref.load %ranks[%t] : memref<600xindex>
    %v = memref.load %x[%t] : memref<600xf32>
    memref.store %v, %y[%at] : memref<600xf32>
  } {nn.independent_iterations}
  return
}

// -----

// A full reduction's first stage (rank 1, a loop in its body) is not
// streamed: one thread per partial, each running its own loop (streamed,
// a thread would run 4 partials' loops and neighbours read 4 apart).

// CHECK-LABEL: func @first_stage
// CHECK: gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c4{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c256{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}})
// CHECK-NOT: vector.load
// CHECK: scf.for %{{.+}} = %c0{{.*}} to %c64
#stage = affine_map<(d0) -> (d0)>
func.func @first_stage(%x: memref<65536xf32>, %partials: memref<1024xf32>) {
  linalg.generic {indexing_maps = [#stage], iterator_types = ["parallel"]}
      outs(%partials : memref<1024xf32>) {
  ^bb0(%out: f32):
    %p = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c1024 = arith.constant 1024 : index
    %sum = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc = %out) -> (f32) {
      %base = arith.muli %k, %c1024 : index
      %i = arith.addi %base, %p : index
      %v = memref.load %x[%i] : memref<65536xf32>
      %s = arith.addf %acc, %v : f32
      scf.yield %s : f32
    }
    linalg.yield %sum : f32
  }
  return
}

// -----

// A transpose (here with a bf16 cast): one thread per 4 x 4 tile, reading
// 4 runs of 4 elements along the input's rows and writing 4 along the
// output's, each one aligned vector access. The output's 4 bf16 are 8
// bytes, so 4 neighbouring lanes take neighbouring tiles along the
// output's rows (32 bytes, a sector): thread t is tile
// (a = (t / 4) % 4, b = (t / 16) * 4 + t % 4) of the 16 x 32 output.

// CHECK-LABEL: func @transpose
// CHECK: gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c1, %{{.+}} = %c1, %{{.+}} = %c1) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c32, %{{.+}} = %c1, %{{.+}} = %c1)
// CHECK: %[[Q:.+]] = arith.remui %[[TX]], %c4
// CHECK: %[[R:.+]] = arith.divui %[[TX]], %c4
// CHECK: %[[P:.+]] = arith.remui %[[R]], %c4
// CHECK: %[[R2:.+]] = arith.divui %[[R]], %c4
// CHECK: %[[G:.+]] = arith.remui %[[R2]], %c2
// CHECK: %[[A:.+]] = arith.muli %[[P]], %c4
// CHECK: %[[GQ:.+]] = arith.muli %[[G]], %c4
// CHECK: %[[TB:.+]] = arith.addi %[[GQ]], %[[Q]]
// CHECK: %[[B:.+]] = arith.muli %[[TB]], %c4
// CHECK: vector.load %{{.+}}[%[[B]], %[[A]]] {alignment = 16 : i64} : memref<32x16xf32>, vector<4xf32>
// CHECK-COUNT-3: vector.load %{{.+}} {alignment = 16 : i64} : memref<32x16xf32>, vector<4xf32>
// CHECK-COUNT-4: arith.truncf
// CHECK: vector.store %{{.+}}, %{{.+}}[%[[A]], %[[B]]] {alignment = 8 : i64} : memref<16x32xbf16>, vector<4xbf16>
// CHECK-COUNT-3: vector.store %{{.+}} {alignment = 8 : i64} : memref<16x32xbf16>, vector<4xbf16>
// CHECK-NOT: memref.load
#tin = affine_map<(d0, d1) -> (d1, d0)>
#tid = affine_map<(d0, d1) -> (d0, d1)>
func.func @transpose(%x: memref<32x16xf32>, %y: memref<16x32xbf16>) {
  linalg.generic {indexing_maps = [#tin, #tid], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<32x16xf32>) outs(%y : memref<16x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  }
  return
}

// -----

// Not tiled: a side not a multiple of 4, an input offset that is not
// 4-aligned, and a second input read point by point.

// CHECK-LABEL: func @transpose_left_alone
// CHECK-NOT: vector.load
// CHECK-NOT: vector.store
#lin = affine_map<(d0, d1) -> (d1, d0)>
#lid = affine_map<(d0, d1) -> (d0, d1)>
func.func @transpose_left_alone(%x: memref<17x16xf32>, %y: memref<16x17xf32>,
                                %v: memref<16x8xf32, strided<[8, 1], offset: 2>>,
                                %w: memref<8x16xf32>,
                                %u: memref<16x8xf32>, %z: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#lin, #lid], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<17x16xf32>) outs(%y : memref<16x17xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#lin, #lid], iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<16x8xf32, strided<[8, 1], offset: 2>>) outs(%w : memref<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#lin, #lid, #lid], iterator_types = ["parallel", "parallel"]}
      ins(%u, %w : memref<16x8xf32>, memref<8x16xf32>) outs(%z : memref<8x16xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %s = arith.addf %in, %in2 : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A warp reduction (cuda-split-reductions' accrue.warp_lanes): a warp per
// output point, here 4 rows of 32 as 128 threads. Lane l folds its share
// (the body up to its last combine: its element) where the warp has a
// point, from the identity where it has none; five xor shuffles, outside
// any branch so that every lane reaches them, combine the lanes; lane 0
// of a warp with a point combines the result with the constant lane 0
// starts from and stores it. The placeholder input is not read.

// CHECK-LABEL: func @warp
// CHECK-SAME: (%[[X:.+]]: memref<4x32xf32>, %[[LANES:.+]]: memref<32xi8>, %[[OUT:.+]]: memref<4xf32>)
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c128{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}})
// CHECK-NOT: %[[LANES]]
// CHECK:   %[[ROW:.+]] = arith.divui %[[TX]], %c32
// CHECK:   %[[LANE:.+]] = arith.remui %[[TX]], %c32
// CHECK:   %[[VALID:.+]] = arith.cmpi ult, %[[ROW]], %c4
// CHECK:   %[[SHARE:.+]] = scf.if %[[VALID]] -> (f32) {
// CHECK:       memref.load %[[X]]
// CHECK:   } else {
// CHECK:     scf.yield %[[ZERO]] : f32
// CHECK:   }
// CHECK:   %[[S16:.+]], %{{.+}} = gpu.shuffle xor %[[SHARE]], %c16{{.*}}, %c32{{.*}} : f32
// CHECK:   %[[V16:.+]] = arith.addf %[[SHARE]], %[[S16]] : f32
// CHECK:   %[[S8:.+]], %{{.+}} = gpu.shuffle xor %[[V16]], %c8{{.*}}, %c32{{.*}} : f32
// CHECK:   %[[V8:.+]] = arith.addf %[[V16]], %[[S8]] : f32
// CHECK:   gpu.shuffle xor %{{.+}}, %c4{{.*}}, %c32
// CHECK:   gpu.shuffle xor %{{.+}}, %c2{{.*}}, %c32
// CHECK:   %[[S1:.+]], %{{.+}} = gpu.shuffle xor %[[V2:.+]], %c1{{.*}}, %c32{{.*}} : f32
// CHECK:   %[[V1:.+]] = arith.addf %[[V2]], %[[S1]] : f32
// CHECK:   %[[FIRST:.+]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK:   %[[WRITES:.+]] = arith.andi %[[FIRST]], %[[VALID]]
// CHECK:   scf.if %[[WRITES]] {
// CHECK:     %[[R:.+]] = arith.addf %[[V1]], %[[ZERO]] : f32
// CHECK:     memref.store %[[R]], %[[OUT]][%{{.+}}]
// CHECK:   }
// CHECK: gpu.terminator
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
func.func @warp(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %out: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%out : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %share = memref.load %x[%r, %l] : memref<4x32xf32>
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %zero, %acc : f32
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// A warp reduction whose lanes would each fold several elements (rows of
// 64: 2 a lane) takes a block of as many warps per point instead (a row
// group of one member): 4 blocks of 64 threads, warp w folding the lane
// loop's iterations w, w + 2, ...; each warp's lanes combine by shuffles
// and leave the warp's value in workgroup memory, and after a barrier
// thread 0 folds them in order and stores the point.

// CHECK-LABEL: func @warp_block
// CHECK-SAME: (%[[X:.+]]: memref<4x64xf32>, %[[LANES:.+]]: memref<32xi8>, %[[OUT:.+]]: memref<4xf32>)
// CHECK: gpu.launch blocks({{.+}}) in (%{{.+}} = %c4{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c64{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) workgroup(%[[WARPS:.+]] : memref<2xf32, #gpu.address_space<workgroup>>)
// CHECK:   %[[WARP:.+]] = arith.divui %[[TX]], %c32
// CHECK:   scf.for %{{.+}} = %[[WARP]] to %c2{{.*}} step %c2
// CHECK:     memref.load %[[X]]
// CHECK:   gpu.shuffle xor
// CHECK:   memref.store %{{.+}}, %[[WARPS]][%[[WARP]]]
// CHECK:   gpu.barrier
// CHECK:   memref.load %[[WARPS]][%c0
// CHECK:   memref.load %[[WARPS]][%c1
// CHECK:   memref.store %{{.+}}, %[[OUT]]
// CHECK: gpu.terminator
#lanew = affine_map<(d0, d1) -> (d1)>
#pointw = affine_map<(d0, d1) -> (d0)>
func.func @warp_block(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %out: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#lanew, #pointw], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%out : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
    %sum = arith.addf %share, %start : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// The constant lane 0 starts from may be defined in the body: it is cloned
// where lane 0 combines.

// CHECK-LABEL: func @warp_body_constant
// CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK: gpu.shuffle xor
// CHECK: scf.if
// CHECK:   %[[R:.+]] = arith.addf %{{.+}}, %[[ONE]] : f32
// CHECK:   memref.store %[[R]]
#lane2 = affine_map<(d0, d1) -> (d1)>
#point2 = affine_map<(d0, d1) -> (d0)>
func.func @warp_body_constant(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [#lane2, #point2], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%out : memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %one = arith.constant 1.0 : f32
    %share = memref.load %x[%r, %l] : memref<4x32xf32>
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %one, %acc : f32
    %m = arith.addf %share, %start : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// A warp reduction's epilogue (cuda-fuse-kernels: the ops after the
// combine, with further inputs and outputs, taking their results at the
// last lane) runs in lane 0 after the shuffles, on the point's value, as
// the last lane computes it: its inputs and its outputs' old values
// loaded at the point once, its results stored there.

// CHECK-LABEL: func @warp_epilogue
// CHECK-SAME: (%[[X:.+]]: memref<4x32xf32>, %[[LANES:.+]]: memref<32xi8>, %[[G:.+]]: memref<4xf32>, %[[RUNNING:.+]]: memref<4xf32>, %[[OUT:.+]]: memref<4xf32>)
// CHECK-DAG: %[[N:.+]] = arith.constant 3.200000e+01 : f32
// CHECK: gpu.launch
// CHECK:   scf.if %{{.+}} -> (f32) {
// CHECK-NOT: %[[G]]
// CHECK:   } else {
// CHECK:   gpu.shuffle xor
// CHECK:   %[[S1:.+]], %{{.+}} = gpu.shuffle xor %[[V2:.+]], %c1{{.*}}, %c32{{.*}} : f32
// CHECK:   %[[V1:.+]] = arith.addf %[[V2]], %[[S1]] : f32
// CHECK:   scf.if %{{.+}} {
// CHECK:     %[[R:.+]] = arith.addf %[[V1]], %{{.+}} : f32
// CHECK:     memref.store %[[R]], %[[RUNNING]][%[[P:.+]]]
// CHECK:     %[[GV:.+]] = memref.load %[[G]][%[[P]]]
// CHECK:     %[[OLD:.+]] = memref.load %[[OUT]][%[[P]]]
// CHECK:     %[[M:.+]] = arith.divf %[[R]], %[[N]] : f32
// CHECK:     %[[Y:.+]] = arith.mulf %[[M]], %[[GV]] : f32
// CHECK:     %[[NEW:.+]] = arith.addf %[[OLD]], %[[Y]] : f32
// CHECK:     memref.store %[[NEW]], %[[OUT]][%[[P]]]
// CHECK:   }
// CHECK: gpu.terminator
#lane3 = affine_map<(d0, d1) -> (d1)>
#point3 = affine_map<(d0, d1) -> (d0)>
func.func @warp_epilogue(%x: memref<4x32xf32>, %lanes: memref<32xi8>, %g: memref<4xf32>, %run: memref<4xf32>, %out: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 32.0 : f32
  linalg.generic {indexing_maps = [#lane3, #point3, #point3, #point3], iterator_types = ["parallel", "reduction"]}
      ins(%lanes, %g : memref<32xi8>, memref<4xf32>) outs(%run, %out : memref<4xf32>, memref<4xf32>) attrs = {accrue.warp_lanes} {
  ^bb0(%in: i8, %gv: f32, %acc: f32, %o: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %share = memref.load %x[%r, %l] : memref<4x32xf32>
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %zero, %acc : f32
    %sum = arith.addf %share, %start : f32
    %m = arith.divf %sum, %n : f32
    %y = arith.mulf %m, %gv : f32
    %new = arith.addf %o, %y : f32
    %lane = linalg.index 1 : index
    %c31 = arith.constant 31 : index
    %last = arith.cmpi eq, %lane, %c31 : index
    %kept = arith.select %last, %new, %o : f32
    linalg.yield %sum, %kept : f32, f32
  }
  return
}

// -----

// A row group (cuda-group-rows): one kernel of a block per point, here 4
// rows of 64, 2 elements a lane: 2 warps a block. Each warp folds its
// share of the row (warp w the lane loop's iterations w, w + 2, ...),
// combines its lanes with shuffles and leaves its value in workgroup
// memory; after a barrier thread 0 folds the warps' values in order and
// stores the sum. After a block barrier, the row map's threads take the
// row's elements t and t + 64 (here t only), reading the sum once.

// CHECK-LABEL: func @row_group
// CHECK-SAME: (%[[X:.+]]: memref<4x64xf32>, %[[LANES:.+]]: memref<32xi8>, %[[SUM:.+]]: memref<4xf32>, %[[Y:.+]]: memref<4x64xf32>)
// CHECK: gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c4{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c64{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) workgroup(%[[WARPS:.+]] : memref<2xf32, #gpu.address_space<workgroup>>)
// CHECK:   %[[WARP:.+]] = arith.divui %[[TX]], %c32
// CHECK:   %[[LANE:.+]] = arith.remui %[[TX]], %c32
// CHECK:   %[[SHARE:.+]] = scf.for %{{.+}} = %[[WARP]] to %c2{{.*}} step %c2
// CHECK:     memref.load %[[X]]
// CHECK:   gpu.shuffle xor %[[SHARE]], %c16
// CHECK:   %[[S1:.+]], %{{.+}} = gpu.shuffle xor %[[V2:.+]], %c1{{.*}}, %c32{{.*}} : f32
// CHECK:   %[[V1:.+]] = arith.addf %[[V2]], %[[S1]] : f32
// CHECK:   %[[FIRST:.+]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK:   scf.if %[[FIRST]] {
// CHECK:     memref.store %[[V1]], %[[WARPS]][%[[WARP]]]
// CHECK:   }
// CHECK-NEXT: gpu.barrier
// CHECK:   %[[WARP0:.+]] = arith.cmpi eq, %[[WARP]], %c0
// CHECK:   %[[THREAD0:.+]] = arith.andi %[[FIRST]], %[[WARP0]]
// CHECK:   scf.if %[[THREAD0]] {
// CHECK:     %[[W0:.+]] = memref.load %[[WARPS]][%c0]
// CHECK:     %[[W1:.+]] = memref.load %[[WARPS]][%c1]
// CHECK:     %[[BOTH:.+]] = arith.addf %[[W0]], %[[W1]]
// CHECK:     %[[TOTAL:.+]] = arith.addf %[[BOTH]], %cst
// CHECK:     memref.store %[[TOTAL]], %[[SUM]]
// CHECK:   }
// CHECK-NEXT: gpu.barrier
// CHECK:   %[[SV:.+]] = memref.load %[[SUM]][%[[R:.+]]]
// CHECK:   scf.for %[[J:.+]] = %[[TX]] to %c64{{.*}} step %c64
// CHECK:     %[[XV:.+]] = memref.load %[[X]][%[[R]], %[[J]]]
// CHECK:     %[[D:.+]] = arith.subf %[[XV]], %[[SV]]
// CHECK:     memref.store %[[D]], %[[Y]][%[[R]], %[[J]]]
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
func.func @row_group(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %sum: memref<4xf32>,
                     %y: memref<4x64xf32>) {
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%sum : memref<4xf32>)
      attrs = {accrue.warp_lanes, accrue.row_group = 0 : i64} {
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
    %total = arith.addf %share, %start : f32
    linalg.yield %total : f32
  }
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : memref<4x64xf32>, memref<4xf32>) outs(%y : memref<4x64xf32>)
      attrs = {accrue.row_group = 0 : i64} {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  }
  return
}

// -----

// A reduction whose lane loop does more than fold each element into the
// running value (here it halves it first) cannot split its iterations
// over warps: the group takes a block of one warp per point, without
// workgroup memory.

// CHECK-LABEL: func @row_group_unsplit
// CHECK: gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c4{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c32{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) {
// CHECK:   scf.for %{{.+}} = %c0{{.*}} to %c2{{.*}} step %c1
// CHECK-NOT: workgroup
// CHECK: gpu.terminator
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
func.func @row_group_unsplit(%x: memref<4x64xf32>, %lanes: memref<32xi8>,
                             %sum: memref<4xf32>, %y: memref<4x64xf32>) {
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%sum : memref<4xf32>)
      attrs = {accrue.warp_lanes, accrue.row_group = 0 : i64} {
  ^bb0(%in: i8, %acc: f32):
    %l = linalg.index 1 : index
    %r = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c32 = arith.constant 32 : index
    %id = arith.constant 0.0 : f32
    %half = arith.constant 0.5 : f32
    %share = scf.for %k = %c0 to %c2 step %c1 iter_args(%s = %id) -> (f32) {
      %base = arith.muli %k, %c32 : index
      %i = arith.addi %base, %l : index
      %v = memref.load %x[%r, %i] : memref<4x64xf32>
      %h = arith.mulf %s, %half : f32
      %t = arith.addf %v, %h : f32
      scf.yield %t : f32
    }
    %first = arith.cmpi eq, %l, %c0 : index
    %start = arith.select %first, %id, %acc : f32
    %total = arith.addf %share, %start : f32
    linalg.yield %total : f32
  }
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : memref<4x64xf32>, memref<4xf32>) outs(%y : memref<4x64xf32>)
      attrs = {accrue.row_group = 0 : i64} {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  }
  return
}
