// Runs lowered nn ops with the ExecutionEngine (mlir-runner) and compares
// the printed values with numpy (check_losses.py).
// RUN: accrue-opt %s --accrue-lower-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils,%libomp > %t.out
// RUN: %python %S/check_losses.py %t.out

func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %s = arith.constant dense<[[1.0, 2.0, 0.5], [-1.0, 0.0, 3.0], [0.25, 0.25, 0.25], [4.0, -2.0, 1.0]]> : tensor<4x3xf32>
  %y = arith.constant dense<[2, 0, -1, 1]> : tensor<4xi64>
  %w = arith.constant dense<[1.0, 2.0, 0.5]> : tensor<3xf32>
  // Weighted mean with an ignored label (-1), its gradient, the weight sum.
  %mean = nn.softmax_cross_entropy_loss %s, %y, %w {reduction = #nn<reduction mean>, ignore_index = -1} : (tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>) -> tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %grad = nn.softmax_cross_entropy_grad %one, %s, %y, %w {reduction = #nn<reduction mean>, ignore_index = -1} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>) -> tensor<4x3xf32>
  %count = nn.class_weight_sum %y, %w {ignore_index = -1} : (tensor<4xi64>, tensor<3xf32>) -> tensor<f32>
  // Unweighted per-item losses, no ignore_index: -1 is out of range, NaN.
  %none = nn.softmax_cross_entropy_loss %s, %y {reduction = #nn<reduction none>} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<4xf32>
  %a = bufferization.to_buffer %mean : tensor<f32> to memref<f32>
  %au = memref.cast %a : memref<f32> to memref<*xf32>
  func.call @printMemrefF32(%au) : (memref<*xf32>) -> ()
  %b = bufferization.to_buffer %grad : tensor<4x3xf32> to memref<4x3xf32>
  %bu = memref.cast %b : memref<4x3xf32> to memref<*xf32>
  func.call @printMemrefF32(%bu) : (memref<*xf32>) -> ()
  %c = bufferization.to_buffer %count : tensor<f32> to memref<f32>
  %cu = memref.cast %c : memref<f32> to memref<*xf32>
  func.call @printMemrefF32(%cu) : (memref<*xf32>) -> ()
  %d = bufferization.to_buffer %none : tensor<4xf32> to memref<4xf32>
  %du = memref.cast %d : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%du) : (memref<*xf32>) -> ()
  return
}
