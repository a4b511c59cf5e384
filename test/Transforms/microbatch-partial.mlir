// RUN: accrue-opt %s -split-input-file -train-microbatch | FileCheck %s

// With a count of valid samples, the split forward takes the count of its
// micro-batch and masks padded samples out of N and D.

func.func private @fwd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// CHECK-LABEL: func.func private @fwd_split_masked
// CHECK-SAME: (%{{.+}}: tensor<3xf32>, %{{.+}}: tensor<2x3xf32>, %[[V:.+]]: tensor<i64>) -> (tensor<f32>, tensor<f32>)
// CHECK: %[[P:.+]] = nn.mul
// Row r belongs to sample r; it counts when r < valid.
// CHECK: %[[ROW:.+]] = nn.constant dense<[0, 1]> : tensor<2xi64>
// CHECK: %[[KEEP:.+]] = nn.less %[[ROW]], %[[V]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK: %[[KEEP2:.+]] = nn.reshape %[[KEEP]] : (tensor<2xi1>) -> tensor<2x1xi1>
// CHECK: %[[F:.+]] = nn.cast %[[KEEP2]] : (tensor<2x1xi1>) -> tensor<2x1xf32>
// CHECK: %[[M:.+]] = nn.mul %[[P]], %[[F]]
// Each valid sample holds 3 elements.
// CHECK: %[[VF:.+]] = nn.cast %[[V]] : (tensor<i64>) -> tensor<f32>
// CHECK: %[[THREE:.+]] = nn.constant dense<3.000000e+00>
// CHECK: %[[D:.+]] = nn.mul %[[VF]], %[[THREE]]
// CHECK: %[[N:.+]] = nn.reduce_sum %[[M]]
// CHECK: return %[[N]], %[[D]]

// CHECK-LABEL: func @step
// CHECK-SAME: attributes {train.micro_batch = 2 : i64, train.partial_windows}
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK: %[[OFF:.+]] = arith.muli %[[I]], %{{.+}} : index
// valid_k = clamp(valid - k * b, 0, b).
// CHECK: %[[START:.+]] = arith.index_cast %[[OFF]] : index to i64
// CHECK: %[[LEFT:.+]] = arith.subi %[[VALID:.+]], %[[START]] : i64
// CHECK: %[[LO:.+]] = arith.maxsi %[[LEFT]], %{{.+}} : i64
// CHECK: %[[VK:.+]] = arith.minsi %[[LO]], %{{.+}} : i64
// CHECK: %[[VT:.+]] = tensor.from_elements %[[VK]] : tensor<i64>
// CHECK: train.value_and_grad @fwd_split_masked(%{{.+}}, %{{.+}}, %[[VT]])
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %valid: i64, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @fwd(%w, %x) valid %valid {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}

// -----

// Token labels flattened from [b, T] to [b*T] keep samples in rows (two
// rows each); without an ignore_index, padded tokens get INT64_MIN.

func.func private @tokens(%w: tensor<4x5xf32>, %x: tensor<2x2x4xf32>, %y: tensor<2x2xi64>) -> tensor<f32> {
  %0 = nn.reshape %x : (tensor<2x2x4xf32>) -> tensor<4x4xf32>
  %1 = nn.matmul %0, %w : (tensor<4x4xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %2 = nn.reshape %y : (tensor<2x2xi64>) -> tensor<4xi64>
  %3 = nn.softmax_cross_entropy_loss %1, %2 {reduction = #nn<reduction mean>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-LABEL: func.func private @tokens_split_masked
// CHECK-SAME: %[[V:[^:]+]]: tensor<i64>)
// CHECK: %[[LABELS:.+]] = nn.reshape %{{.+}} : (tensor<2x2xi64>) -> tensor<4xi64>
// CHECK: %[[ROW:.+]] = nn.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// CHECK: %[[KEEP:.+]] = nn.less %[[ROW]], %[[V]]
// CHECK: %[[PAD:.+]] = nn.constant dense<-9223372036854775808> : tensor<i64>
// CHECK: %[[Y:.+]] = nn.where %[[KEEP]], %[[LABELS]], %[[PAD]]
// CHECK: %[[N:.+]] = nn.softmax_cross_entropy_loss %{{.+}}, %[[Y]] {ignore_index = -9223372036854775808 : i64, reduction = #nn<reduction sum>}
// CHECK: %[[D:.+]] = nn.class_weight_sum %[[Y]] {ignore_index = -9223372036854775808 : i64}
// CHECK: return %[[N]], %[[D]]
func.func @step(%w: tensor<4x5xf32>, %x: tensor<?x2x4xf32>, %y: tensor<?x2xi64>, %valid: i64, %acc: tensor<32xf32>) -> (tensor<f32>, tensor<32xf32>) {
  %l, %g = train.value_and_grad @tokens(%w, %x, %y) valid %valid {wrt = array<i64: 0>, micro_batch = 2} : (tensor<4x5xf32>, tensor<?x2x4xf32>, tensor<?x2xi64>) -> (tensor<f32>, tensor<4x5xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<32xf32>, tensor<4x5xf32>
  return %l, %a : tensor<f32>, tensor<32xf32>
}

// -----

// Statistics over the batch axis mix samples: no masking, and the step
// does not take partial windows.

func.func private @mixed(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  %2 = nn.sub %0, %1 : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %3 = nn.reduce_mean %2 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// CHECK-NOT: func.func private @mixed_split_masked
// CHECK-LABEL: func.func private @mixed_split(
// CHECK-LABEL: func @step
// CHECK-NOT: train.partial_windows
// CHECK: train.value_and_grad @mixed_split(
func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %valid: i64, %acc: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @mixed(%w, %x) valid %valid {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  return %l, %a : tensor<f32>, tensor<16xf32>
}
