// RUN: accrue-opt %s -split-input-file --convert-nn-to-linalg | FileCheck %s
// Shape ops as views.
// (The execution tests in ../execution run the lowered ops against
// numpy.)

// Reshapes and flattens are views: collapse to 1-D, expand to the target.
// CHECK-LABEL: func @views
// CHECK: %[[F:.+]] = tensor.collapse_shape %{{.+}} {{\[}}[0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK: tensor.expand_shape %[[F]] {{\[}}[0, 1]] output_shape [6, 4] : tensor<24xf32> into tensor<6x4xf32>
// CHECK: linalg.transpose ins(%{{.+}} : tensor<2x3x4xf32>) outs(%{{.+}} : tensor<4x2x3xf32>) permutation = [2, 0, 1]
func.func @views(%x: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<4x2x3xf32>) {
  %0 = nn.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = nn.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0, %1 : tensor<6x4xf32>, tensor<4x2x3xf32>
}

// -----

// A gather's gradient (an embedding's): the tokens in order (outer), and
// inside, the features as a loop of independent iterations (each writes
// its own column of the table), which CUDA runs one thread each.
// CHECK-LABEL: func @gather_grad
// CHECK: %[[ZEROS:.+]] = linalg.fill
// CHECK: scf.for %[[TOKEN:.+]] = %c0 to %c16 step %c1 iter_args(%[[T:.+]] = %[[ZEROS]])
// CHECK:   scf.for %[[FEATURE:.+]] = %c0 to %c4 step %c1 iter_args(%[[U:.+]] = %[[T]])
// CHECK:     %[[ID:.+]] = tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<2x8xi64>
// CHECK:     tensor.insert %{{.+}} into %[[U]]
// CHECK:   } {nn.independent_iterations}
func.func @gather_grad(%dy: tensor<2x8x4xf32>, %idx: tensor<2x8xi64>) -> tensor<17x4xf32> {
  %0 = nn.gather_grad %dy, %idx {axis = 0 : i64} : (tensor<2x8x4xf32>, tensor<2x8xi64>) -> tensor<17x4xf32>
  return %0 : tensor<17x4xf32>
}

// -----

// At a constant arange (a position embedding), nothing repeats: the first
// rows are 0 + dy, the rest zero; no loop.
// CHECK-LABEL: func @gather_grad_arange
// CHECK-NOT: scf.for
// CHECK: %[[SUM:.+]] = linalg.generic
// CHECK:   arith.addf %cst{{.*}}, %{{.+}} : f32
// CHECK: %[[ZEROS:.+]] = linalg.fill
// CHECK: tensor.insert_slice %[[SUM]] into %[[ZEROS]][0, 0] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<5x4xf32>
func.func @gather_grad_arange(%dy: tensor<3x4xf32>) -> tensor<5x4xf32> {
  %idx = arith.constant dense<[0, 1, 2]> : tensor<3xi64>
  %0 = nn.gather_grad %dy, %idx {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

// -----

// Any other constant index is scattered.
// CHECK-LABEL: func @gather_grad_repeated
// CHECK: scf.for
// CHECK: } {nn.independent_iterations}
func.func @gather_grad_repeated(%dy: tensor<3x4xf32>) -> tensor<5x4xf32> {
  %idx = arith.constant dense<[0, 2, 2]> : tensor<3xi64>
  %0 = nn.gather_grad %dy, %idx {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}
