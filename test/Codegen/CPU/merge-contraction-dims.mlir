// RUN: accrue-opt %s -split-input-file -merge-contraction-dims | FileCheck %s

// An LSTM's input projection, [16, 64, 256] x [256, 1024]: the samples and
// the steps are both m dimensions, consecutive in A and C: one m of 1024.
// CHECK-DAG: #[[$A:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$B:.+]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[$C:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func @rows
// CHECK: %[[A:.+]] = tensor.collapse_shape %{{.+}} {{\[}}[0, 1], [2]] : tensor<16x64x256xf32> into tensor<1024x256xf32>
// CHECK: %[[P:.+]] = linalg.generic {indexing_maps = [#[[$A]], #[[$B]], #[[$C]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[A]], %{{.+}} : tensor<1024x256xf32>, tensor<256x1024xf32>)
// CHECK: tensor.expand_shape %[[P]] {{\[}}[0, 1], [2]] output_shape [16, 64, 1024] : tensor<1024x1024xf32> into tensor<16x64x1024xf32>
func.func @rows(%x: tensor<16x64x256xf32>, %w: tensor<256x1024xf32>, %c: tensor<16x64x1024xf32>) -> tensor<16x64x1024xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %w : tensor<16x64x256xf32>, tensor<256x1024xf32>) outs(%c : tensor<16x64x1024xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %1 = arith.mulf %a, %b : f32
    %2 = arith.addf %o, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<16x64x1024xf32>
  return %0 : tensor<16x64x1024xf32>
}

// -----

// A weight gradient X^T dY over [16, 64] samples and steps, both k
// dimensions, consecutive in both inputs: one k of 1024, summed in the
// same order (the steps inside the samples).
// CHECK-LABEL: func @reduction
// CHECK: tensor.collapse_shape %{{.+}} {{\[}}[0, 1], [2]] : tensor<16x64x256xf32> into tensor<1024x256xf32>
// CHECK: tensor.collapse_shape %{{.+}} {{\[}}[0, 1], [2]] : tensor<16x64x512xf32> into tensor<1024x512xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins({{.*}} : tensor<1024x256xf32>, tensor<1024x512xf32>) outs({{.*}} : tensor<256x512xf32>)
func.func @reduction(%x: tensor<16x64x256xf32>, %dy: tensor<16x64x512xf32>, %c: tensor<256x512xf32>) -> tensor<256x512xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d2, d3, d0)>, affine_map<(d0, d1, d2, d3) -> (d2, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %dy : tensor<16x64x256xf32>, tensor<16x64x512xf32>) outs(%c : tensor<256x512xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %1 = arith.mulf %a, %b : f32
    %2 = arith.addf %o, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<256x512xf32>
  return %0 : tensor<256x512xf32>
}

// -----

// Left alone: a convolution's weight gradient, whose k dimensions (samples,
// pixels) are apart in both inputs (the channels between them); a product
// whose m dimensions A reads in the other order; an op that is not a
// contraction.
// CHECK-LABEL: func @left_alone
// CHECK-NOT: tensor.collapse_shape
// CHECK-NOT: tensor.expand_shape
func.func @left_alone(%dy: tensor<16x64x256xf32>, %col: tensor<16x288x256xf32>, %c: tensor<64x288xf32>,
                      %xt: tensor<64x16x256xf32>, %w: tensor<256x128xf32>, %d: tensor<16x64x128xf32>,
                      %u: tensor<16x64xf32>) -> (tensor<64x288xf32>, tensor<16x64x128xf32>, tensor<16x64xf32>) {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%dy, %col : tensor<16x64x256xf32>, tensor<16x288x256xf32>) outs(%c : tensor<64x288xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %1 = arith.mulf %a, %b : f32
    %2 = arith.addf %o, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<64x288xf32>
  %3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%xt, %w : tensor<64x16x256xf32>, tensor<256x128xf32>) outs(%d : tensor<16x64x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %4 = arith.mulf %a, %b : f32
    %5 = arith.addf %o, %4 : f32
    linalg.yield %5 : f32
  } -> tensor<16x64x128xf32>
  %6 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%u : tensor<16x64xf32>) outs(%u : tensor<16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %7 = arith.addf %a, %a : f32
    linalg.yield %7 : f32
  } -> tensor<16x64xf32>
  return %0, %3, %6 : tensor<64x288xf32>, tensor<16x64x128xf32>, tensor<16x64xf32>
}
