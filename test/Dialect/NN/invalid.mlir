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


// -----

func.func @cast_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{changes the shape from 'tensor<2x3xf32>' to 'tensor<6xf16>'}}
  %0 = nn.cast %x : (tensor<2x3xf32>) -> tensor<6xf16>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<8xf32>) {
  // expected-error @+1 {{step 0 is zero}}
  %0 = nn.slice %x {starts = array<i64: 0>, steps = array<i64: 0>} : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @slice_out_of_bounds(%x: tensor<8xf32>) {
  // expected-error @+1 {{dimension 0 reads outside the input (start 1, step 2, size 5)}}
  %0 = nn.slice %x {starts = array<i64: 1>, steps = array<i64: 2>} : (tensor<8xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @slice_starts(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{needs one start and one step per dimension}}
  %0 = nn.slice %x {starts = array<i64: 1>, steps = array<i64: 2>} : (tensor<8x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = nn.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+2 {{Concat inputs differ in dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @gather_axis(%t: tensor<17x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{Gather axis 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.gather %t, %i {axis = 2 : i64} : (tensor<17x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @conv_weight(%x: tensor<2x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+2 {{Conv weight 'tensor<6x3x3x3xf32>' does not match}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<2x6x6x6xf32>
  return
}

// -----

func.func @conv_3d(%x: tensor<2x4x8x8x8xf32>, %w: tensor<6x4x3x3x3xf32>) {
  // expected-error @+2 {{supports 2-D inputs [N, C, H, W], not}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {dilations = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x8x8x8xf32>, tensor<6x4x3x3x3xf32>) -> tensor<2x6x6x6x6xf32>
  return
}

// -----

func.func @pool_window(%x: tensor<1x1x2x2xf32>) {
  // expected-error @+2 {{window does not fit the input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.max_pool %x {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @pool_negative_pads(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{pads must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.average_pool %x {kernel = array<i64: 2, 2>, pads = array<i64: -1, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x3xf32>
  return
}

// -----

func.func @scan_no_scanned(%h0: tensor<3x2xf32>) {
  // expected-error @+1 {{needs at least one scanned input}}
  %0 = nn.scan(%h0) {num_carries = 1 : i64, num_scanned = 0 : i64} : (tensor<3x2xf32>) -> (tensor<3x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>):
    nn.yield %h : tensor<3x2xf32>
  }
  return
}

// -----

func.func @scan_step_argument(%h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) {
  // expected-error @+1 {{body argument 1 must be 'tensor<3x2xf32>', not 'tensor<3x4x2xf32>'}}
  %0:2 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x4x2xf32>):
    nn.yield %h, %h : tensor<3x2xf32>, tensor<3x2xf32>
  }
  return
}

// -----

func.func @scan_carry_type(%h0: tensor<3x2xf32>, %x: tensor<3x4x1xf32>) {
  // expected-error @+1 {{carry 0 must keep its type 'tensor<3x2xf32>'}}
  %0:2 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x1xf32>) -> (tensor<3x2xf32>, tensor<3x4x1xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x1xf32>):
    nn.yield %xt, %xt : tensor<3x1xf32>, tensor<3x1xf32>
  }
  return
}

// -----

func.func @scan_stacked_output(%h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>) {
  // expected-error @+1 {{output 0 must be the step output 'tensor<3x2xf32>' stacked along axis 1}}
  %0:2 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>) -> (tensor<3x2xf32>, tensor<4x3x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>):
    nn.yield %h, %xt : tensor<3x2xf32>, tensor<3x2xf32>
  }
  return
}

// -----

func.func @scan_lengths(%h0: tensor<3x2xf32>, %x: tensor<3x4x2xf32>, %m: tensor<3x5x1xi1>) {
  // expected-error @+1 {{scanned input 2 must be [3, 4, ...], not 'tensor<3x5x1xi1>'}}
  %0:2 = nn.scan(%h0, %x, %m) {num_carries = 1 : i64, num_scanned = 2 : i64} : (tensor<3x2xf32>, tensor<3x4x2xf32>, tensor<3x5x1xi1>) -> (tensor<3x2xf32>, tensor<3x4x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>, %mt: tensor<3x1xi1>):
    nn.yield %h, %xt : tensor<3x2xf32>, tensor<3x2xf32>
  }
  return
}

// -----

func.func @scan_no_results(%x: tensor<3x4x2xf32>) {
  // expected-error @+1 {{has no results}}
  nn.scan(%x) {num_carries = 0 : i64, num_scanned = 1 : i64} : (tensor<3x4x2xf32>) -> () {
  ^bb0(%xt: tensor<3x2xf32>):
    nn.yield
  }
  return
}

// -----

func.func @scan_dynamic(%h0: tensor<3x2xf32>, %x: tensor<3x?x2xf32>) {
  // expected-error @+1 {{needs static shapes, not 'tensor<3x?x2xf32>'}}
  %0:2 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x?x2xf32>) -> (tensor<3x2xf32>, tensor<3x?x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>):
    nn.yield %h, %xt : tensor<3x2xf32>, tensor<3x2xf32>
  }
  return
}

// -----

func.func @scan_no_steps(%h0: tensor<3x2xf32>, %x: tensor<3x0x2xf32>) {
  // expected-error @+1 {{scanned inputs must be [N, T, ...] with T >= 1}}
  %0:2 = nn.scan(%h0, %x) {num_carries = 1 : i64, num_scanned = 1 : i64} : (tensor<3x2xf32>, tensor<3x0x2xf32>) -> (tensor<3x2xf32>, tensor<3x0x2xf32>) {
  ^bb0(%h: tensor<3x2xf32>, %xt: tensor<3x2xf32>):
    nn.yield %h, %xt : tensor<3x2xf32>, tensor<3x2xf32>
  }
  return
}
