// The counting emulator: cuda-emulate-kernels{count-accesses} reports
// every global access of a kernel to the runtime, and the runtime's
// counter catches races and out-of-bounds accesses, naming the kernel's
// ONNX node. Each scenario is run through mlir-runner with the runtime's
// library, whose counter (outside an Artifact) stops the process at the
// end of the first launch that breaks a rule.
// RUN: split-file %s %t
// RUN: accrue-opt %t/kernels.mlir -cuda-emulate-kernels=count-accesses | FileCheck %s --check-prefix=IR
// RUN: accrue-opt %t/copy.mlir -cuda-emulate-kernels=count-accesses -verify-diagnostics
// Executions (the sanitizer build's library cannot be loaded by mlir-runner):
// RUN: %if !sanitizer %{ accrue-opt %t/kernels.mlir -cuda-emulate-kernels=count-accesses --accrue-lower-cpu > %t/lowered.mlir %}
// RUN: %if !sanitizer %{ mlir-runner %t/lowered.mlir -e clean -entry-point-result=void -shared-libs=%accrue_capi_lib %}
// RUN: %if !sanitizer %{ not mlir-runner %t/lowered.mlir -e write_write -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=WW %}
// RUN: %if !sanitizer %{ not mlir-runner %t/lowered.mlir -e read_write -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=RW %}
// RUN: %if !sanitizer %{ mlir-runner %t/lowered.mlir -e exchange -entry-point-result=void -shared-libs=%accrue_capi_lib %}
// RUN: %if !sanitizer %{ not mlir-runner %t/lowered.mlir -e missing_barrier -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=NOBAR %}
// RUN: %if !sanitizer %{ not mlir-runner %t/lowered.mlir -e across_blocks -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=BLOCKS %}
// RUN: %if !sanitizer %{ not mlir-runner %t/lowered.mlir -e out_of_bounds -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=OOB %}
// RUN: %if !sanitizer %{ mlir-runner %t/lowered.mlir -e shared_exchange -entry-point-result=void -shared-libs=%accrue_capi_lib %}
// RUN: %if !sanitizer %{ not mlir-runner %t/lowered.mlir -e shared_unsynced -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=SHARED %}
// A row group's kernel (cuda-form-kernels), with its barrier and, seeded,
// without it:
// RUN: %if !sanitizer %{ accrue-opt %t/group.mlir -cuda-form-kernels -cuda-emulate-kernels=count-accesses --accrue-lower-cpu > %t/group-lowered.mlir %}
// RUN: %if !sanitizer %{ mlir-runner %t/group-lowered.mlir -e main -entry-point-result=void -shared-libs=%accrue_capi_lib %}
// RUN: %if !sanitizer %{ accrue-opt %t/group.mlir -cuda-form-kernels=row-barriers=false -cuda-emulate-kernels=count-accesses --accrue-lower-cpu > %t/seeded-lowered.mlir %}
// RUN: %if !sanitizer %{ not mlir-runner %t/seeded-lowered.mlir -e main -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=SEEDED %}
// RUN: %if !sanitizer %{ accrue-opt %t/group.mlir -cuda-form-kernels=reduction-barriers=false -cuda-emulate-kernels=count-accesses --accrue-lower-cpu > %t/seeded-reduction-lowered.mlir %}
// RUN: %if !sanitizer %{ not mlir-runner %t/seeded-reduction-lowered.mlir -e main -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=SEEDED-REDUCTION %}
// A group whose mean is its own (cuda-group-rows: workgroup memory): clean
// with its barriers; without the one between the members, the row map's
// threads read the mean thread 0 leaves there unordered.
// RUN: %if !sanitizer %{ accrue-opt %t/local.mlir -cuda-group-rows -cuda-form-kernels -cuda-emulate-kernels=count-accesses --accrue-lower-cpu > %t/local-lowered.mlir %}
// RUN: %if !sanitizer %{ mlir-runner %t/local-lowered.mlir -e main -entry-point-result=void -shared-libs=%accrue_capi_lib %}
// RUN: %if !sanitizer %{ accrue-opt %t/local.mlir -cuda-group-rows -cuda-form-kernels=row-barriers=false -cuda-emulate-kernels=count-accesses --accrue-lower-cpu > %t/local-seeded.mlir %}
// RUN: %if !sanitizer %{ not mlir-runner %t/local-seeded.mlir -e main -entry-point-result=void -shared-libs=%accrue_capi_lib 2>&1 | FileCheck %s --check-prefix=LOCAL %}

// The launch names its kernel and node, each thread its ids, and each
// access its site, buffer, offset, address, size and flags (element bytes
// << 8 | in bounds << 1 | store); indices outside the view are replaced
// by 0 through selects, and a store there writes back what it holds.
// IR-LABEL: func.func @clean_kernel
// IR: %[[NAME:.+]] = memref.get_global @__accrue_kernel_name_0 : memref<15xi8>
// IR: call @accrue_emu_launch(%c0_i64, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}})
// IR: scf.for
// IR: func.call @accrue_emu_thread
// IR: %[[IN0:.+]] = arith.andi %true, %{{.+}} : i1
// IR: %[[C1024:.+]] = arith.constant 1024 : i64
// IR: func.call @accrue_emu_access(%c0_i64{{.*}}, %c0_i64{{.*}}, %{{.+}}, %{{.+}}, %c4_i64{{.*}}, %{{.+}})
// IR: %[[SAFE0:.+]] = arith.select %[[IN0]], %{{.+}}, %c0{{.*}} : index
// IR: memref.load %arg0[%[[SAFE0]]]
// IR: %[[C1025:.+]] = arith.constant 1025 : i64
// IR: func.call @accrue_emu_access(%c1_i64
// IR: %[[HELD:.+]] = memref.load %arg0
// IR: %[[VALUE:.+]] = arith.select %{{.+}}, %{{.+}}, %[[HELD]] : f32
// IR: memref.store %[[VALUE]], %arg0
// IR: call @accrue_emu_launch_end()
// IR-DAG: func.func private @accrue_emu_access(i64, i64, i64, i64, i64, i64)
// IR-DAG: memref.global "private" constant @__accrue_kernel_name_0 : memref<15xi8>

// WW: accrue: a data race in kernel k0_seeded (ONNX node 'seeded'), access 0 to 'step argument 0' at byte 0: thread 1 of block 0 writes the element that thread 0 of block 0 writes, in one launch (its threads run in no order)
// RW: accrue: a data race in kernel k0_shifted (ONNX node 'shifted'), access 1 to 'step argument 0' at byte 4: thread 1 of block 0 writes the element that thread 0 of block 0 reads, in one launch
// A barrier orders the accesses of one block's threads: what one thread
// writes, another reads after the barrier, and writes again after the
// next. Without the barrier, or across blocks (which no barrier orders),
// that is a race.
// NOBAR: accrue: a data race in kernel k0_unsynced (ONNX node 'unsynced'), access 1 to 'step argument 1' at byte 4: thread 1 of block 0 writes the element that thread 0 of block 0 reads, in one launch (its threads run in no order)
// BLOCKS: accrue: a data race in kernel k0_neighbour_block (ONNX node 'neighbour_block'), access 1 to 'step argument 1' at byte 128: thread 0 of block 1 reads the element that thread 31 of block 0 writes, in one launch (its threads run in no order between barriers)
// A row group's members share a kernel: the row map's threads read the
// sum thread 0 of their block stored, which only the barrier between the
// members orders (the reduction's own barrier, between its warps' values
// and thread 0's fold of them, comes before that store).
// SEEDED: accrue: a data race in kernel k0__ln_LayerNormalization (ONNX node '/ln/LayerNormalization'), access {{[0-9]+}} to 'step argument 2' at byte 0: thread 1 of block 0 reads the element that thread 0 of block 0 writes, in one launch (its threads run in no order between barriers)
// Inside the reduction, thread 0 folds the values its block's warps left
// in workgroup memory, which only the reduction's own barrier orders
// (seeded: left out).
// SEEDED-REDUCTION: accrue: a data race in kernel k0__ln_LayerNormalization (ONNX node '/ln/LayerNormalization'), an access to 'shared memory 0' at byte 4: thread 32 of block 0 writes the element that thread 0 of block 0 reads, in one launch (its threads run in no order)
// LOCAL: accrue: a data race in kernel k0__ln_LayerNormalization (ONNX node '/ln/LayerNormalization'), an access to 'shared memory 1' at byte 0: thread 1 of block 0 reads the element that thread 0 of block 0 writes, in one launch (its threads run in no order between barriers)
// Workgroup (shared) memory is each block's own: the emulator reuses one
// buffer for the blocks it runs in turn, and what one block did there is
// no race with the next; within a block, only a barrier orders its
// threads' accesses.
// SHARED: accrue: a data race in kernel k0_mirror (ONNX node 'mirror'), an access to 'shared memory 0' at byte 64: thread 16 of block 0 writes the element that thread 15 of block 0 reads, in one launch (its threads run in no order)
// OOB: accrue: an out-of-bounds load in kernel k0_past_the_end (ONNX node 'past_the_end'), access 0 to 'step argument 0' at byte 256: thread 63 of block 0 reads outside the view it indexes (the access is skipped)

//--- kernels.mlir
// Each thread adds one to its own element: no race, nothing out of bounds.
func.func @clean_kernel(%x: memref<128xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %t = arith.addi %b, %tx : index
    %v = memref.load %x[%t] : memref<128xf32>
    %w = arith.addf %v, %one : f32
    memref.store %w, %x[%t] : memref<128xf32>
    gpu.terminator
  } loc(fused<"clean">["clean"])
  return
}

func.func @clean() {
  %x = memref.alloc() : memref<128xf32>
  call @clean_kernel(%x) : (memref<128xf32>) -> ()
  return
}

// Every thread stores to element 0: the seeded race.
func.func @seeded_kernel(%x: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%c0] : memref<128xf32>
    gpu.terminator
  } loc(fused<"seeded">["seeded"])
  return
}

func.func @write_write() {
  %x = memref.alloc() : memref<128xf32>
  call @seeded_kernel(%x) : (memref<128xf32>) -> ()
  return
}

// Thread t reads element t + 1 and writes element t: thread t + 1 writes
// what thread t read.
func.func @shifted_kernel(%x: memref<128xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %next = arith.addi %tx, %c1 : index
    %v = memref.load %x[%next] : memref<128xf32>
    memref.store %v, %x[%tx] : memref<128xf32>
    gpu.terminator
  } loc(fused<"shifted">["shifted"])
  return
}

func.func @read_write() {
  %x = memref.alloc() : memref<128xf32>
  call @shifted_kernel(%x) : (memref<128xf32>) -> ()
  return
}

// 64 threads read element t + 1 of a 64-element buffer: the last reads
// past its end.
func.func @past_the_end_kernel(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %next = arith.addi %tx, %c1 : index
    %v = memref.load %x[%next] : memref<64xf32>
    memref.store %v, %y[%tx] : memref<64xf32>
    gpu.terminator
  } loc(fused<"past_the_end">["past_the_end"])
  return
}

func.func @out_of_bounds() {
  %x = memref.alloc() : memref<64xf32>
  %y = memref.alloc() : memref<64xf32>
  call @past_the_end_kernel(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
  return
}

// Two blocks of 32 threads: thread t of block b writes y[32b + t], then
// (after a barrier) reads y[32b + (t + 1) % 32] into x, then (after
// another) reads and writes y[32b + t] again, which its neighbour read.
func.func @exchange_kernel(%x: memref<64xf32>, %y: memref<64xf32>) {
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
    gpu.barrier
    %own = memref.load %y[%i] : memref<64xf32>
    %sum = arith.addf %v, %own : f32
    memref.store %sum, %y[%i] : memref<64xf32>
    gpu.terminator
  } loc(fused<"exchange">["exchange"])
  return
}

func.func @exchange() {
  %x = memref.alloc() : memref<64xf32>
  %y = memref.alloc() : memref<64xf32>
  call @exchange_kernel(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
  return
}

// The same exchange without its first barrier.
func.func @unsynced_kernel(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    %next = arith.addi %tx, %c1 : index
    %wrapped = arith.remui %next, %sx : index
    %j = arith.addi %base, %wrapped : index
    %v = memref.load %y[%j] : memref<64xf32>
    memref.store %one, %y[%i] : memref<64xf32>
    memref.store %v, %x[%i] : memref<64xf32>
    gpu.terminator
  } loc(fused<"unsynced">["unsynced"])
  return
}

func.func @missing_barrier() {
  %x = memref.alloc() : memref<64xf32>
  %y = memref.alloc() : memref<64xf32>
  call @unsynced_kernel(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
  return
}

// The exchange with the next thread of the launch: thread i writes
// y[i + 1] and, after a barrier, reads y[i], so thread 0 of block 1 reads
// what thread 31 of block 0 wrote, which no barrier orders.
func.func @neighbour_block_kernel(%x: memref<64xf32>, %y: memref<65xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    %next = arith.addi %i, %c1 : index
    memref.store %one, %y[%next] : memref<65xf32>
    gpu.barrier
    %v = memref.load %y[%i] : memref<65xf32>
    memref.store %v, %x[%i] : memref<64xf32>
    gpu.terminator
  } loc(fused<"neighbour_block">["neighbour_block"])
  return
}

func.func @across_blocks() {
  %x = memref.alloc() : memref<64xf32>
  %y = memref.alloc() : memref<65xf32>
  call @neighbour_block_kernel(%x, %y) : (memref<64xf32>, memref<65xf32>) -> ()
  return
}

// Thread t of each of two blocks stores x[32b + t] at t of the block's
// shared memory and, after the barrier (or, unsynced, without it), reads
// the element thread 31 - t stored (unsynced, thread 15 reads element 16
// before thread 16 writes it).
func.func @mirror_kernel(%x: memref<64xf32>, %y: memref<64xf32>) {
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
    memref.store %w, %y[%i] : memref<64xf32>
    gpu.terminator
  } loc(fused<"mirror">["mirror"])
  return
}

func.func @unsynced_mirror_kernel(%x: memref<64xf32>, %y: memref<64xf32>) {
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
    %mirror = arith.subi %c31, %tx : index
    %w = memref.load %smem[%mirror] : memref<32xf32, #gpu.address_space<workgroup>>
    memref.store %w, %y[%i] : memref<64xf32>
    gpu.terminator
  } loc(fused<"mirror">["mirror"])
  return
}

func.func @shared_exchange() {
  %x = memref.alloc() : memref<64xf32>
  %y = memref.alloc() : memref<64xf32>
  call @mirror_kernel(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
  return
}

func.func @shared_unsynced() {
  %x = memref.alloc() : memref<64xf32>
  %y = memref.alloc() : memref<64xf32>
  call @unsynced_mirror_kernel(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
  return
}

//--- copy.mlir
// A copy inside a kernel would go uncounted: refused.
func.func @step(%x: memref<4xf32>, %y: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{cannot count the accesses of this operation: the counting emulator knows memref and vector loads and stores}}
    memref.copy %x, %y : memref<4xf32> to memref<4xf32>
    gpu.terminator
  }
  return
}

//--- group.mlir
// LayerNorm's mean and x - mean over 4 rows of 64 as one row group.
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
func.func @group(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %sum: memref<4xf32>,
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
  } loc(callsite("/ln/LayerNormalization"("m.onnx":0:0) at "m.onnx":0:0))
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : memref<4x64xf32>, memref<4xf32>) outs(%y : memref<4x64xf32>)
      attrs = {accrue.row_group = 0 : i64} {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  } loc(callsite("/ln/LayerNormalization"("m.onnx":0:0) at "m.onnx":0:0))
  return
}

func.func @main() {
  %x = memref.alloc() : memref<4x64xf32>
  %lanes = memref.alloc() : memref<32xi8>
  %sum = memref.alloc() : memref<4xf32>
  %y = memref.alloc() : memref<4x64xf32>
  call @group(%x, %lanes, %sum, %y) : (memref<4x64xf32>, memref<32xi8>, memref<4xf32>, memref<4x64xf32>) -> ()
  return
}

//--- local.mlir
// LayerNorm's mean over 4 rows of 64 (an allocation only the group uses)
// and x - mean.
#lane = affine_map<(d0, d1) -> (d1)>
#point = affine_map<(d0, d1) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, d1)>
func.func @group(%x: memref<4x64xf32>, %lanes: memref<32xi8>, %y: memref<4x64xf32>) {
  %mean = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#lane, #point], iterator_types = ["parallel", "reduction"]}
      ins(%lanes : memref<32xi8>) outs(%mean : memref<4xf32>) attrs = {accrue.warp_lanes} {
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
  } loc(callsite("/ln/LayerNormalization"("m.onnx":0:0) at "m.onnx":0:0))
  linalg.generic {indexing_maps = [#row, #point, #row], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : memref<4x64xf32>, memref<4xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  } loc(callsite("/ln/LayerNormalization"("m.onnx":0:0) at "m.onnx":0:0))
  return
}

func.func @main() {
  %x = memref.alloc() : memref<4x64xf32>
  %lanes = memref.alloc() : memref<32xi8>
  %y = memref.alloc() : memref<4x64xf32>
  call @group(%x, %lanes, %y) : (memref<4x64xf32>, memref<32xi8>, memref<4x64xf32>) -> ()
  return
}
