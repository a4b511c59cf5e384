// RUN: accrue-opt %s -cuda-kernel-report="accumulation-steps=3 json=true" -o /dev/null | FileCheck %s
// RUN: accrue-opt %s -cuda-kernel-report="accumulation-steps=3" -o /dev/null | FileCheck %s --check-prefix=TEXT

// The kernel report reads each kernel's index arithmetic for the first warp
// of block 0. Expected values are worked out by hand from the addresses:
// 32 lanes x 4 bytes = 128 contiguous bytes = 4 sectors of 32 bytes.

// k0: one f32 per thread, neighbours adjacent: coalesced, 4 sectors per
// warp request; outside the micro-batch loop, once per step.
// CHECK-LABEL: "gemms": [
// CHECK:      "epilogue": "none",
// CHECK:      "k": 64,
// CHECK-NEXT: "launches_per_micro_batch": 1,
// CHECK-NEXT: "launches_per_step": 3,
// CHECK-NEXT: "m": 1,
// CHECK-NEXT: "multiply_type": "f32",
// CHECK-NEXT: "n": 1,
// CHECK-NEXT: "node": "/ln/LayerNormalization"
// CHECK:      "epilogue": "bias_gradient_b",
// CHECK-NEXT: "input_type": "f32",
// CHECK:      "multiply_type": "bf16",
// CHECK-NEXT: "n": 64,
// CHECK-NEXT: "node": "/head/MatMul"
// CHECK-LABEL: "kernels": [
// CHECK:      "buffer": "a",
// CHECK-NEXT: "element_bytes": 4,
// CHECK-NEXT: "executions_per_thread": 1,
// CHECK-NEXT: "footprint_bytes": 4000,
// CHECK-NEXT: "op": "load",
// CHECK-NEXT: "pattern": "coalesced",
// CHECK-NEXT: "sector_efficiency": 1,
// CHECK-NEXT: "sectors_per_request": 4,
// CHECK-NEXT: "thread_stride_bytes": 4
// CHECK:      "block": [
// CHECK-NEXT:   256,
// CHECK:      "footprint_bytes": 8000,
// CHECK-NEXT: "grid": [
// CHECK-NEXT:   4,
// CHECK:      "launches_per_micro_batch": 0,
// CHECK-NEXT: "launches_per_step": 1,
// CHECK-NEXT: "loop_invariant": false,
// CHECK-NEXT: "memory_ops_per_thread": 2,
// CHECK-NEXT: "name": "k0_kernel",
// CHECK-NEXT: "node": "step",
// CHECK-NEXT: "parameter_divisions": 0,

// k1: a thread per row of a 64x64 f32 matrix, walking the row: lanes are
// 256 bytes apart, 32 sectors per request for 128 used bytes (12.5%); 64
// loads and one store per thread; 3 launches per step (K = 3).
// CHECK:      "buffer": "m",
// CHECK-NEXT: "element_bytes": 4,
// CHECK-NEXT: "executions_per_thread": 64,
// CHECK-NEXT: "footprint_bytes": 16384,
// CHECK-NEXT: "op": "load",
// CHECK-NEXT: "pattern": "strided",
// CHECK-NEXT: "sector_efficiency": 0.125,
// CHECK-NEXT: "sectors_per_request": 32,
// CHECK-NEXT: "thread_stride_bytes": 256
// CHECK:      "launches_per_micro_batch": 1,
// CHECK-NEXT: "launches_per_step": 3,
// CHECK-NEXT: "loop_invariant": false,
// CHECK-NEXT: "memory_ops_per_thread": 65,
// CHECK-NEXT: "name": "k1_kernel",
// CHECK:      "trip_count": 64,

// k2: rows chosen by loaded ids: indirect; named after its ONNX node.
// CHECK:      "buffer": "table",
// CHECK:      "pattern": "indirect",
// CHECK:      "name": "k2__emb_Gather",
// CHECK-NEXT: "node": "/emb/Gather",

// k3: one thread copying 100 elements in a loop.
// CHECK:      "pattern": "single-thread",
// CHECK:      "memory_ops_per_thread": 200,
// CHECK-NEXT: "name": "k3_kernel",
// CHECK:      "threads": 1,
// CHECK-NEXT: "trip_count": 100,

// k4: a view 100 bytes into the workspace: lanes cover bytes [100, 228),
// 5 sectors for 128 bytes (80%); a rank-0 load is a broadcast of one
// sector; of its two remainders, the one by a value from outside the
// kernel is a run-time division once it is outlined, the one by a constant
// is not (constants are sunk into kernels before outlining).
// CHECK:      "buffer": "s",
// CHECK:      "pattern": "broadcast",
// CHECK-NEXT: "sector_efficiency": null,
// CHECK-NEXT: "sectors_per_request": 1,
// CHECK-NEXT: "thread_stride_bytes": 0
// CHECK:      "buffer": "workspace",
// CHECK:      "pattern": "coalesced",
// CHECK-NEXT: "sector_efficiency": 0.8{{0*[0-9]?}},
// CHECK-NEXT: "sectors_per_request": 5,
// CHECK:      "name": "k4_kernel",
// CHECK-NEXT: "node": "step",
// CHECK-NEXT: "parameter_divisions": 1,

// CHECK-LABEL: "totals": {
// CHECK-NEXT: "bias_gradient_epilogues_per_micro_batch": 1,
// CHECK-NEXT: "footprint_bytes_per_micro_batch":
// CHECK-NEXT: "footprint_bytes_per_step":
// CHECK-NEXT: "gemm_calls_per_micro_batch": 2,
// CHECK-NEXT: "gemm_calls_per_step": 6,
// CHECK-NEXT: "gemms_with_m_or_n_1": 1,
// CHECK-NEXT: "kernels": 5,
// CHECK-NEXT: "kernels_dividing_by_parameters": 1,
// CHECK-NEXT: "kernels_per_micro_batch": 2,
// CHECK-NEXT: "kernels_per_step": 9,
// CHECK-NEXT: "loop_invariant_kernels_per_micro_batch": 0,
// CHECK-NEXT: "max_memory_ops_per_thread": 200,
// CHECK-NEXT: "single_thread_kernels": 1,
// CHECK-NEXT: "single_thread_kernels_with_loops": 1,

// TEXT: kernel report (3 micro-batches per step): 5 kernels; per micro-batch 2 launches and 2 GEMM calls, per step 9 and 6
// TEXT: warning: k3_kernel runs a loop of 200 memory operations in one thread
// TEXT: warning: GEMM of /ln/LayerNormalization is 1x1x64 (batch 1): a reduction, not a matrix product

func.func private @accrue_gemm(index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, f32, index)

func.func @step(%a: memref<1000xf32>, %b: memref<1000xf32>, %m: memref<64x64xf32>, %r: memref<64xf32>, %table: memref<100x32xf32>, %ids: memref<32xi64>, %s: memref<f32>, %workspace: memref<4096xi8>, %k: index) attributes {train.abi = [{train.name = "a", train.role = #train.role<batch>}, {train.name = "b", train.role = #train.role<batch>}, {train.name = "m", train.role = #train.role<batch>}, {train.name = "r", train.role = #train.role<batch>}, {train.name = "table", train.role = #train.role<batch>}, {train.name = "ids", train.role = #train.role<batch>}, {train.name = "s", train.role = #train.role<batch>}, {train.name = "workspace", train.role = #train.role<workspace>}, {train.name = "k", train.role = #train.role<step>}]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  %c256 = arith.constant 256 : index
  %c1000 = arith.constant 1000 : index
  %zero = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %t = arith.addi %base, %tx : index
    %in = arith.cmpi ult, %t, %c1000 : index
    scf.if %in {
      %v = memref.load %a[%t] : memref<1000xf32>
      memref.store %v, %b[%t] : memref<1000xf32>
    }
    gpu.terminator
  }
  scf.for %i = %c0 to %k step %c1 {
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
      %sum = scf.for %j = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (f32) {
        %v = memref.load %m[%tx, %j] : memref<64x64xf32>
        %n = arith.addf %acc, %v : f32
        scf.yield %n : f32
      }
      memref.store %sum, %r[%tx] : memref<64xf32>
      gpu.terminator
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
      %id = memref.load %ids[%tx] : memref<32xi64>
      %row = arith.index_cast %id : i64 to index
      %v = memref.load %table[%row, %tx] : memref<100x32xf32>
      memref.store %v, %r[%tx] : memref<64xf32>
      gpu.terminator
    } loc(fused<"/emb/Gather">["model.onnx":1:1])
    func.call @accrue_gemm(%c1, %c1, %c1, %c64, %c0, %c64, %c1, %c0, %c0, %c1, %c64, %c0, %c0, %c1, %c1, %c0, %c0, %zero, %c0) : (index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, f32, index) -> () loc("/ln/LayerNormalization")
    // f32 operands that hold bf16 values (types bits 16-23 = 7), and B's
    // bias gradient (bits 24-31 = 2).
    %exact = arith.constant 34013184 : index
    func.call @accrue_gemm(%c1, %c64, %c64, %c64, %c0, %c64, %c1, %c0, %c0, %c1, %c64, %c0, %c0, %c1, %c64, %c0, %exact, %zero, %c100) : (index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, f32, index) -> () loc("/head/MatMul")
  } {train.microbatch_loop}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %j = %c0 to %c100 step %c1 {
      %v = memref.load %a[%j] : memref<1000xf32>
      memref.store %v, %b[%j] : memref<1000xf32>
    }
    gpu.terminator
  }
  %view = memref.view %workspace[%c100][] : memref<4096xi8> to memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %scale = memref.load %s[] : memref<f32>
    %j = arith.remui %tx, %c64 : index
    %runtime = arith.remui %tx, %k : index
    %v = memref.load %view[%j] : memref<64xf32>
    %w = arith.mulf %v, %scale : f32
    memref.store %w, %r[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}
