// RUN: accrue-opt %s -split-input-file -cuda-verify-device-access -verify-diagnostics

// Host code of a step may launch kernels, index into buffers and call the
// runtime's entries; nothing else that touches buffer contents.

func.func private @accrue_all_reduce(memref<?xf32, strided<[?], offset: ?>>)
func.func @train_step(%p: memref<4xf32>, %ws: memref<64xi8>) attributes {train.abi = []} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = memref.view %ws[%c0][] : memref<64xi8> to memref<4xf32>
  %s = memref.subview %v[1] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1], offset: 1>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %p[%c0] : memref<4xf32>
    memref.store %x, %v[%c0] : memref<4xf32>
    gpu.terminator
  }
  %cast = memref.cast %p : memref<4xf32> to memref<?xf32, strided<[?], offset: ?>>
  func.call @accrue_all_reduce(%cast) : (memref<?xf32, strided<[?], offset: ?>>) -> ()
  return
}

// -----

func.func @train_step(%p: memref<4xf32>) -> f32 attributes {train.abi = []} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{host code reads or writes an element of a device buffer ('memref.load'): on the GPU this would read device memory from the host or synchronize; it must run in a kernel}}
  %x = memref.load %p[%c0] : memref<4xf32>
  return %x : f32
}

// -----

func.func @train_step(%p: memref<4xf32>, %q: memref<4xf32>) attributes {train.abi = []} {
  // expected-error @+1 {{host code computes on device buffers ('memref.copy')}}
  memref.copy %p, %q : memref<4xf32> to memref<4xf32>
  return
}

// -----

func.func @train_step(%p: memref<4xf32>) attributes {train.abi = []} {
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{host code computes on device buffers ('linalg.fill')}}
  linalg.fill ins(%zero : f32) outs(%p : memref<4xf32>)
  return
}

// -----

func.func @train_step() attributes {train.abi = []} {
  // expected-error @+1 {{host code allocates memory while the step runs ('memref.alloc')}}
  %a = memref.alloc() : memref<4xf32>
  return
}

// -----

func.func private @helper(memref<4xf32>)
func.func @train_step(%p: memref<4xf32>) attributes {train.abi = []} {
  // expected-error @+1 {{host code passes device buffers to a function that is not a kernel or a runtime entry ('func.call')}}
  func.call @helper(%p) : (memref<4xf32>) -> ()
  return
}
