// RUN: accrue-opt %s -split-input-file -cuda-device-scalars | FileCheck %s

// The scalars that change every optimizer step become rank-0 buffers that
// kernels read (a captured CUDA graph replays them); the others stay.

// CHECK-LABEL: func @train_step
// CHECK-SAME: (%[[P:.+]]: memref<16xf32>, %[[LR:.+]]: memref<f32>, %[[STEP:.+]]: memref<i64>, %[[N:.+]]: i64)
// CHECK: %[[LRT:.+]] = bufferization.to_tensor %[[LR]] restrict : memref<f32> to tensor<f32>
// CHECK: %[[LRV:.+]] = tensor.extract %[[LRT]][] : tensor<f32>
// CHECK: %[[STEPT:.+]] = bufferization.to_tensor %[[STEP]] restrict : memref<i64> to tensor<i64>
// CHECK: %[[STEPV:.+]] = tensor.extract %[[STEPT]][] : tensor<i64>
// CHECK: arith.sitofp %[[STEPV]]
// CHECK: arith.mulf %[[LRV]],
// CHECK: arith.index_cast %[[N]]
func.func @train_step(%p: memref<16xf32>, %lr: f32, %step: i64, %n: i64) -> (f32, index)
    attributes {train.abi = [{train.name = "params", train.role = #train.role<params>}, {train.name = "lr", train.role = #train.role<lr>}, {train.name = "step", train.role = #train.role<step>}, {train.name = "n", train.role = #train.role<batch>}]} {
  %s = arith.sitofp %step : i64 to f32
  %x = arith.mulf %lr, %s : f32
  %i = arith.index_cast %n : i64 to index
  return %x, %i : f32, index
}

// -----

// Functions without a contract are not steps.

// CHECK-LABEL: func @helper
// CHECK-SAME: (%{{.+}}: f32)
func.func @helper(%lr: f32) -> f32 {
  return %lr : f32
}
