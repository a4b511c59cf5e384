// RUN: accrue-opt %s -split-input-file -verify-diagnostics
// One test per constraint the nn verifiers and type inference enforce.

func.func @broadcast_incompatible(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast: tensor<2x3xf32>, tensor<4xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @binary_element_types(%a: tensor<3xf32>, %b: tensor<3xf16>) {
  // expected-error @+1 {{operands have different element types}}
  %0 = nn.mul %a, %b : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return
}

// -----

func.func @unary_integer(%a: tensor<3xi64>) {
  // expected-error @+1 {{must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %0 = nn.relu %a : tensor<3xi64>
  return
}

// -----

func.func @gemm_inner_dims(%a: tensor<4x8xf32>, %b: tensor<7x3xf32>) {
  // expected-error @+2 {{Gemm inner dimensions differ: 8 vs 7}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.gemm %a, %b : (tensor<4x8xf32>, tensor<7x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @gemm_bias_shape(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4xf32>) {
  // expected-error @+2 {{Gemm operand C does not broadcast to [4, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.gemm %a, %b, %c : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x3xf32>) {
  // expected-error @+2 {{MatMul operands must have rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<8xf32>, tensor<8x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x5xf32>) {
  // expected-error @+2 {{MatMul batch dimensions do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

func.func @reduce_axis_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.reduce_sum %x {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  return
}

// -----

func.func @reduce_axes_unsorted(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{axes must be sorted and unique}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.reduce_sum %x {axes = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<1x1xf32>
  return
}

// -----

func.func @reduce_no_axes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{needs at least one axis}}
  %0 = nn.reduce_mean %x {axes = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape 'tensor<2x3xf32>' to 'tensor<7xf32>'}}
  %0 = nn.reshape %x : (tensor<2x3xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @expand_incompatible(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast 'tensor<2x3xf32>' to 'tensor<2x4xf32>'}}
  %0 = nn.expand %x : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{Transpose perm is not a permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @flatten_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{Flatten axis 3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.flatten %x {axis = 3} : (tensor<2x3xf32>) -> tensor<6x1xf32>
  return
}

// -----

func.func @sce_labels_shape(%s: tensor<4x3xf32>, %y: tensor<3xi64>) {
  // expected-error @+2 {{labels must have the shape of scores without the class dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.softmax_cross_entropy_loss %s, %y {reduction = #nn<reduction mean>} : (tensor<4x3xf32>, tensor<3xi64>) -> tensor<f32>
  return
}

// -----

func.func @sce_weights_shape(%s: tensor<4x3xf32>, %y: tensor<4xi64>, %w: tensor<4xf32>) {
  // expected-error @+2 {{weights must be a [C] tensor of the scores' element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.softmax_cross_entropy_loss %s, %y, %w {reduction = #nn<reduction sum>} : (tensor<4x3xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @sce_scores_rank(%s: tensor<4xf32>, %y: tensor<4xi64>) {
  // expected-error @+2 {{scores must have shape [N, C, ...]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.softmax_cross_entropy_loss %s, %y {reduction = #nn<reduction sum>} : (tensor<4xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

