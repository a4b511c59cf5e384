// RUN: accrue-opt %s -split-input-file -cuda-plan-workspace | FileCheck %s

// Temporaries become views of one workspace argument. %a (1 KiB) and %b
// (256 B) live at the same time; %c is allocated after %a's last use and
// reuses its bytes. The loop's temporary has one offset for every
// iteration. The workspace is recorded in the contract.

// CHECK-LABEL: func @train_step
// CHECK-SAME: %[[WS:[^:]+]]: memref<1280xi8>)
// CHECK-SAME: train.abi = [{train.name = "params", train.role = #train.role<params>}, {train.name = "workspace", train.role = #train.role<workspace>}]
// CHECK: %[[A:.+]] = memref.view %[[WS]][%c0{{.*}}][] : memref<1280xi8> to memref<256xf32>
// CHECK: %[[B:.+]] = memref.view %[[WS]][%c1024{{.*}}][] : memref<1280xi8> to memref<64xf32>
// CHECK: %[[C:.+]] = memref.view %[[WS]][%c0{{.*}}][] : memref<1280xi8> to memref<16xf32>
// CHECK: scf.for
// CHECK:   memref.view %[[WS]][%c0{{.*}}][] : memref<1280xi8> to memref<8xi64>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
func.func @train_step(%p: memref<16xf32>) attributes {train.abi = [{train.name = "params", train.role = #train.role<params>}]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<256xf32>
  %b = memref.alloc() : memref<64xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<256xf32>)
  linalg.fill ins(%zero : f32) outs(%b : memref<64xf32>)
  memref.dealloc %a : memref<256xf32>
  %c = memref.alloc() : memref<16xf32>
  linalg.copy ins(%p : memref<16xf32>) outs(%c : memref<16xf32>)
  linalg.fill ins(%zero : f32) outs(%b : memref<64xf32>)
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.alloc() : memref<8xi64>
    memref.dealloc %t : memref<8xi64>
  }
  return
}

// -----

// The ops of a row group run as one kernel: %a, last used by the group's
// first op, and %b, allocated after it, both live through the whole group
// and may not share bytes (apart, %b would reuse %a's).

// CHECK-LABEL: func @row_group
// CHECK: memref.view %{{.+}}[%c0{{.*}}][] : memref<2048xi8> to memref<256xf32>
// CHECK: memref.view %{{.+}}[%c1024{{.*}}][] : memref<2048xi8> to memref<256xf32>
func.func @row_group(%p: memref<256xf32>) attributes {train.abi = [{train.name = "params", train.role = #train.role<params>}]} {
  %a = memref.alloc() : memref<256xf32>
  linalg.copy {accrue.row_group = 0 : i64} ins(%p : memref<256xf32>) outs(%a : memref<256xf32>)
  %b = memref.alloc() : memref<256xf32>
  linalg.copy {accrue.row_group = 0 : i64} ins(%p : memref<256xf32>) outs(%b : memref<256xf32>)
  linalg.copy ins(%b : memref<256xf32>) outs(%p : memref<256xf32>)
  return
}
