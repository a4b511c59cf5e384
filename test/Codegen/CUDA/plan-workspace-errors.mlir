// RUN: accrue-opt %s -split-input-file -cuda-plan-workspace -verify-diagnostics

func.func @train_step(%n: index) attributes {train.abi = [{train.name = "n", train.role = #train.role<batch>}]} {
  // expected-error @+1 {{a temporary of type 'memref<?xf32>' cannot be placed in the device workspace (it needs a static shape)}}
  %a = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

func.func @train_step(%p: memref<4xf32>) attributes {train.abi = [{train.name = "p", train.role = #train.role<params>}]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %p) -> (memref<4xf32>) {
    // expected-error @+1 {{a temporary outlives its loop iteration; it cannot be placed in the device workspace}}
    %t = memref.alloc() : memref<4xf32>
    scf.yield %t : memref<4xf32>
  }
  return
}
