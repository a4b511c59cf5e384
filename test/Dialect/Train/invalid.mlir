// RUN: accrue-opt %s -split-input-file -verify-diagnostics

func.func private @loss(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32>

func.func @unknown_callee(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{'nope' does not name a function}}
  %l, %g = train.value_and_grad @nope(%w, %x) {wrt = array<i64: 0>} : (tensor<3x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return
}

// -----

func.func private @loss(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32>

func.func @wrt_out_of_range(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{wrt index 2 is out of range}}
  %l, %g = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 2>} : (tensor<3x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return
}

// -----

func.func private @loss(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32>

func.func @batch_without_micro_batch(%w: tensor<3x4xf32>, %x: tensor<?x4xf32>) {
  // expected-error @+1 {{operand #1 has type 'tensor<?x4xf32>' but 'loss' takes 'tensor<2x4xf32>'}}
  %l, %g = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 0>} : (tensor<3x4xf32>, tensor<?x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return
}

// -----

func.func private @loss(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32>

func.func @batch_not_multiple(%w: tensor<3x4xf32>, %x: tensor<5x4xf32>) {
  // expected-error @+1 {{a batch operand may differ only in a leading dimension that is a multiple of micro_batch}}
  %l, %g = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3x4xf32>, tensor<5x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return
}

// -----

func.func private @vector_loss(%w: tensor<3x4xf32>) -> tensor<3xf32>

func.func @loss_not_scalar(%w: tensor<3x4xf32>) {
  // expected-error @+1 {{which must be tensor<f32>, not 'tensor<3xf32>'}}
  %l, %g = train.value_and_grad @vector_loss(%w) {wrt = array<i64: 0>} : (tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func private @int_arg(%w: tensor<3xi64>) -> tensor<f32>

func.func @wrt_integer(%w: tensor<3xi64>) {
  // expected-error @+1 {{cannot differentiate with respect to operand #0 of non-float type 'tensor<3xi64>'}}
  %l, %g = train.value_and_grad @int_arg(%w) {wrt = array<i64: 0>} : (tensor<3xi64>) -> (tensor<f32>, tensor<3xi64>)
  return
}

// -----

func.func @unpack_overlap(%p: tensor<32xf32>) {
  // expected-error @+1 {{slices overlap at offset 8}}
  %v:2 = train.unpack %p {offsets = array<i64: 0, 8>} : tensor<32xf32> -> tensor<3x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @unpack_outside(%p: tensor<16xf32>) {
  // expected-error @+1 {{slice [12, 24) is outside the arena of 16 elements}}
  %v:2 = train.unpack %p {offsets = array<i64: 0, 12>} : tensor<16xf32> -> tensor<3x4xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @accumulate_offsets(%a: tensor<32xf32>, %g: tensor<3xf32>) {
  // expected-error @+1 {{has 2 offsets for 1 tensors}}
  %r = train.accumulate %a, %g {offsets = array<i64: 0, 16>} : tensor<32xf32>, tensor<3xf32>
  return
}

// -----

func.func @update_state_count(%p: tensor<16xf32>, %g: tensor<16xf32>, %m: tensor<16xf32>, %lr: f32, %t: i64) {
  // expected-error @+1 {{needs 2 state arenas, got 1}}
  %p1, %m1 = train.update %p, %g states(%m) lr %lr step %t {optimizer = #train.adam<>} : tensor<16xf32>, tensor<16xf32>
  return
}

// -----

func.func @fused_max_norm(%p: tensor<16xf32>, %a: tensor<16xf32>, %s: f32, %lr: f32, %t: i64) {
  // expected-error @+1 {{max_norm must be positive}}
  %p1, %a1, %n = train.fused_update %p, %a grad_scale %s lr %lr step %t {optimizer = #train.sgd<>, max_norm = -1.0 : f32} : tensor<16xf32>
  return
}

// -----

func.func @all_reduce_no_room(%acc: tensor<16xf32>, %n: f32, %d: f32) {
  // expected-error @+1 {{scalars_at 15 leaves no room for two scalars in an arena of 16 elements}}
  %r, %rn, %rd = train.all_reduce %acc, %n, %d scalars_at 15 : tensor<16xf32>
  return
}

// -----

func.func private @loss(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32>

func.func @loss_divisor_without_micro_batch(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) {
  // expected-error @+1 {{a loss_divisor needs micro_batch}}
  %l, %g = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 0>, loss_divisor = #train.loss_divisor<per_sample = 1.0>} : (tensor<3x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return
}

// -----

func.func private @loss(%w: tensor<3x4xf32>, %x: tensor<2x4xf32>) -> tensor<f32>

func.func @loss_divisor_not_finite(%w: tensor<3x4xf32>, %x: tensor<?x4xf32>) {
  // expected-error @+1 {{per_sample must be finite}}
  %l, %g = train.value_and_grad @loss(%w, %x) {wrt = array<i64: 0>, micro_batch = 2, loss_divisor = #train.loss_divisor<per_sample = 0x7FF0000000000000>} : (tensor<3x4xf32>, tensor<?x4xf32>) -> (tensor<f32>, tensor<3x4xf32>)
  return
}

// -----

func.func @loss_scale_grows_down(%s: f32, %k: i64, %norm: f32) {
  // expected-error @+1 {{growth must be a finite number >= 1}}
  %next:3 = train.next_loss_scale %s, %k, %norm {growth = 0.5 : f64, backoff = 0.5 : f64, interval = 3 : i64}
  return
}

// -----

func.func @loss_scale_backs_off_up(%s: f32, %k: i64, %norm: f32) {
  // expected-error @+1 {{backoff must be in (0, 1]}}
  %next:3 = train.next_loss_scale %s, %k, %norm {growth = 2.0 : f64, backoff = 2.0 : f64, interval = 3 : i64}
  return
}

// -----

func.func @scatter_past_the_arena(%shard: tensor<?xf32>, %g: tensor<4x8xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{the gradient's 32 elements at offset 40 lie outside an arena of 64}}
  %r = train.reduce_scatter_add %shard, %g offset 40 of 64 : tensor<?xf32>, tensor<4x8xf32>
  return %r : tensor<?xf32>
}
