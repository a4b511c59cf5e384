// RUN: accrue-opt %s -cuda-merge-kernel-modules | FileCheck %s

// Outlined kernels move into one module, named by their tag, and share one
// copy of the constant globals they read; launches follow.

// CHECK: gpu.module @kernels {
// CHECK-DAG: memref.global "private" constant @iota : memref<4xi64> = dense<[0, 1, 2, 3]>
// CHECK-DAG: gpu.func @k0_kernel(
// CHECK-DAG: gpu.func @k1_update(
// CHECK: }
// CHECK-NOT: gpu.module
// CHECK: func.func @train_step
// CHECK: gpu.launch_func @kernels::@k0_kernel
// CHECK: gpu.launch_func @kernels::@k1_update
module attributes {gpu.container_module} {
  gpu.module @train_step_kernel {
    memref.global "private" constant @iota : memref<4xi64> = dense<[0, 1, 2, 3]>
    gpu.func @train_step_kernel(%a: memref<4xi64>) kernel {
      %g = memref.get_global @iota : memref<4xi64>
      gpu.return
    } loc(fused<"kernel">["a"])
  }
  gpu.module @train_step_kernel_0 {
    memref.global "private" constant @iota : memref<4xi64> = dense<[0, 1, 2, 3]>
    gpu.func @train_step_kernel(%a: memref<4xi64>) kernel {
      %g = memref.get_global @iota : memref<4xi64>
      gpu.return
    } loc(fused<"update">["b"])
  }
  func.func @train_step(%a: memref<4xi64>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @train_step_kernel::@train_step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xi64>)
    gpu.launch_func @train_step_kernel_0::@train_step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xi64>)
    return
  }
}
