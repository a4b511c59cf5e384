// Contractions, broadcasting and reductions, run with the ExecutionEngine
// (mlir-runner) and compared with numpy (check_contractions.py).
// RUN: accrue-opt %s --accrue-lower-cpu | env OMP_NUM_THREADS=1 mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils,%libomp > %t.out
// RUN: %python %S/check_contractions.py %t.out
// Two threads: the parallel loops' blocks (whatever the machine's cores).
// RUN: accrue-opt %s --accrue-lower-cpu | env OMP_NUM_THREADS=2 mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils,%libomp > %t.2.out
// RUN: %python %S/check_contractions.py %t.2.out

func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %a = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = arith.constant dense<[[1.0, -1.0, 0.5], [2.0, 0.0, -0.5]]> : tensor<2x3xf32>
  %c = arith.constant dense<[0.5, -0.5]> : tensor<2xf32>
  // A^T (2x3) B^T (3x2) * 0.5 + 2 * c.
  %g = nn.gemm %a, %b, %c {transA = true, transB = true, alpha = 0.5 : f32, beta = 2.0 : f32} : (tensor<3x2xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  // Batched matmul, rhs broadcast over the batch: [2,3,2] x [2,3].
  %x = arith.constant dense<[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[2.0, 1.0], [1.0, 2.0], [0.5, -1.0]]]> : tensor<2x3x2xf32>
  %m = nn.matmul %x, %b : (tensor<2x3x2xf32>, tensor<2x3xf32>) -> tensor<2x3x3xf32>
  // Mean over the middle axis, kept; then broadcast-subtract it.
  %mean = nn.reduce_mean %m {axes = array<i64: 1>} : (tensor<2x3x3xf32>) -> tensor<2x1x3xf32>
  %centered = nn.sub %m, %mean : (tensor<2x3x3xf32>, tensor<2x1x3xf32>) -> tensor<2x3x3xf32>
  %sq = nn.mul %centered, %centered : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %var = nn.reduce_sum %sq {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x3xf32>) -> tensor<3xf32>
  %p = arith.constant dense<3.0> : tensor<f32>
  %cube = nn.pow %var, %p : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %act = nn.sigmoid %cube : tensor<3xf32>
  %t = nn.transpose %m {perm = array<i64: 2, 0, 1>} : (tensor<2x3x3xf32>) -> tensor<3x2x3xf32>
  %f = nn.flatten %t {axis = 2} : (tensor<3x2x3xf32>) -> tensor<6x3xf32>

  %g_m = bufferization.to_buffer %g : tensor<2x2xf32> to memref<2x2xf32>
  %g_u = memref.cast %g_m : memref<2x2xf32> to memref<*xf32>
  func.call @printMemrefF32(%g_u) : (memref<*xf32>) -> ()
  %var_m = bufferization.to_buffer %var : tensor<3xf32> to memref<3xf32>
  %var_u = memref.cast %var_m : memref<3xf32> to memref<*xf32>
  func.call @printMemrefF32(%var_u) : (memref<*xf32>) -> ()
  %act_m = bufferization.to_buffer %act : tensor<3xf32> to memref<3xf32>
  %act_u = memref.cast %act_m : memref<3xf32> to memref<*xf32>
  func.call @printMemrefF32(%act_u) : (memref<*xf32>) -> ()
  %f_m = bufferization.to_buffer %f : tensor<6x3xf32> to memref<6x3xf32>
  %f_u = memref.cast %f_m : memref<6x3xf32> to memref<*xf32>
  func.call @printMemrefF32(%f_u) : (memref<*xf32>) -> ()
  return
}
