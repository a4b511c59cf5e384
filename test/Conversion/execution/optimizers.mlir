// The optimizer update rules, run with the ExecutionEngine (mlir-runner) for
// three steps and compared with numpy transcriptions of PyTorch's
// definitions (check_optimizers.py).
// RUN: accrue-opt %s --accrue-lower-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils,%libomp > %t.out
// RUN: %python %S/check_optimizers.py %t.out

func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %p0 = arith.constant dense<[1.0, -2.0, 0.5, 3.0]> : tensor<4xf32>
  %g = arith.constant dense<[0.1, -0.3, 0.0, 2.0]> : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<4xf32>
  %lr = arith.constant 0.1 : f32
  %t1 = arith.constant 1 : i64
  %t2 = arith.constant 2 : i64
  %t3 = arith.constant 3 : i64
  // AdamW, three steps with the same gradient.
  %a1, %m1, %v1 = train.update %p0, %g states(%z, %z) lr %lr step %t1 {optimizer = #train.adamw<weight_decay = 0.1>} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %a2, %m2, %v2 = train.update %a1, %g states(%m1, %v1) lr %lr step %t2 {optimizer = #train.adamw<weight_decay = 0.1>} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %a3, %m3, %v3 = train.update %a2, %g states(%m2, %v2) lr %lr step %t3 {optimizer = #train.adamw<weight_decay = 0.1>} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %a3_m = bufferization.to_buffer %a3 : tensor<4xf32> to memref<4xf32>
  %a3_u = memref.cast %a3_m : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%a3_u) : (memref<*xf32>) -> ()
  // Adam with L2 weight decay.
  %b1, %bm1, %bv1 = train.update %p0, %g states(%z, %z) lr %lr step %t1 {optimizer = #train.adam<weight_decay = 0.1, beta1 = 0.5>} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %b2, %bm2, %bv2 = train.update %b1, %g states(%bm1, %bv1) lr %lr step %t2 {optimizer = #train.adam<weight_decay = 0.1, beta1 = 0.5>} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  %b2_m = bufferization.to_buffer %b2 : tensor<4xf32> to memref<4xf32>
  %b2_u = memref.cast %b2_m : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%b2_u) : (memref<*xf32>) -> ()
  // SGD with Nesterov momentum and weight decay.
  %s1, %sb1 = train.update %p0, %g states(%z) lr %lr step %t1 {optimizer = #train.sgd<momentum = 0.9, nesterov = true, weight_decay = 0.01>} : tensor<4xf32>, tensor<4xf32>
  %s2, %sb2 = train.update %s1, %g states(%sb1) lr %lr step %t2 {optimizer = #train.sgd<momentum = 0.9, nesterov = true, weight_decay = 0.01>} : tensor<4xf32>, tensor<4xf32>
  %s2_m = bufferization.to_buffer %s2 : tensor<4xf32> to memref<4xf32>
  %s2_u = memref.cast %s2_m : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%s2_u) : (memref<*xf32>) -> ()
  // SGD with dampened momentum.
  %d1, %db1 = train.update %p0, %g states(%z) lr %lr step %t1 {optimizer = #train.sgd<momentum = 0.5, dampening = 0.25>} : tensor<4xf32>, tensor<4xf32>
  %d2, %db2 = train.update %d1, %g states(%db1) lr %lr step %t2 {optimizer = #train.sgd<momentum = 0.5, dampening = 0.25>} : tensor<4xf32>, tensor<4xf32>
  %d2_m = bufferization.to_buffer %d2 : tensor<4xf32> to memref<4xf32>
  %d2_u = memref.cast %d2_m : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%d2_u) : (memref<*xf32>) -> ()
  %db2_m = bufferization.to_buffer %db2 : tensor<4xf32> to memref<4xf32>
  %db2_u = memref.cast %db2_m : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%db2_u) : (memref<*xf32>) -> ()
  return
}
