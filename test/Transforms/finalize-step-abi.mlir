// RUN: accrue-opt %s -split-input-file -train-finalize-step-abi | FileCheck %s

// Tensors in, tensors out becomes buffers updated in place: tied results are
// materialized into their argument, scalar results stored into a trailing
// metrics buffer. The roles of the final arguments, the metrics buffer's
// included, are recorded in order as train.abi (the artifact's manifest).

// CHECK-LABEL: func @train_step
// CHECK-SAME: (%[[P:.+]]: memref<16xf32>, %[[X:.+]]: memref<?x4xf32>, %[[LR:.+]]: f32, %[[METRICS:.+]]: memref<2xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface, train.abi = [{train.name = "params", train.role = #train.role<params>}, {train.name = "x", train.role = #train.role<batch>}, {train.name = "lr", train.role = #train.role<lr>}, {train.fields = ["loss", "grad_norm"], train.name = "metrics", train.role = #train.role<metrics>}], train.step}
// CHECK: %[[PT:.+]] = bufferization.to_tensor %[[P]] restrict writable : memref<16xf32> to tensor<16xf32>
// CHECK: %[[XT:.+]] = bufferization.to_tensor %[[X]] restrict writable : memref<?x4xf32> to tensor<?x4xf32>
// CHECK: %[[NEW:.+]] = train.scale %[[PT]], %[[LR]]
// CHECK: tensor.dim %[[XT]]
// CHECK: bufferization.materialize_in_destination %[[NEW]] in restrict writable %[[P]] : (tensor<16xf32>, memref<16xf32>) -> ()
// CHECK: memref.store %[[LR]], %[[METRICS]][%{{.+}}] : memref<2xf32>
// CHECK: memref.store %{{.+}}, %[[METRICS]][%{{.+}}] : memref<2xf32>
// CHECK: return
// CHECK-NOT: tensor<16xf32> {train.tied
func.func @train_step(%p: tensor<16xf32> {train.role = #train.role<params>, train.name = "params"}, %x: tensor<?x4xf32> {train.role = #train.role<batch>, train.name = "x"}, %lr: f32 {train.role = #train.role<lr>, train.name = "lr"})
    -> (tensor<16xf32> {train.tied = 0 : i64}, f32 {train.metric = "loss"}, f32 {train.metric = "grad_norm"}) attributes {train.step} {
  %new = train.scale %p, %lr : tensor<16xf32>
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x4xf32>
  %n = arith.index_cast %d : index to i32
  %f = arith.sitofp %n : i32 to f32
  return %new, %lr, %f : tensor<16xf32>, f32, f32
}

// -----

// An untied tensor result (an inference forward's output) is written into an
// output buffer the caller passes, after the arguments.

// CHECK-LABEL: func @forward
// CHECK-SAME: (%[[X:.+]]: memref<4xf32>, %[[OUT:.+]]: memref<4xf32>)
// CHECK-SAME: train.abi = [{train.name = "x", train.role = #train.role<batch>}, {train.name = "result0", train.role = #train.role<output>}]
// CHECK: bufferization.materialize_in_destination %{{.+}} in restrict writable %[[OUT]]
func.func @forward(%x: tensor<4xf32> {train.role = #train.role<batch>, train.name = "x"}) -> tensor<4xf32> attributes {train.step} {
  return %x : tensor<4xf32>
}

// -----

// The ranges an integer batch input's values must lie in stay with its
// entry in train.abi (the manifest's index_checks).

// CHECK-LABEL: func @labels
// CHECK-SAME: train.abi = [{train.index_checks = [{high = 3 : i64, ignore = -100 : i64, low = 0 : i64, what = "the 3 classes"}], train.name = "y", train.role = #train.role<batch>}, {train.name = "x", train.role = #train.role<batch>}]
func.func @labels(%y: tensor<4xi64> {train.role = #train.role<batch>, train.name = "y", train.index_checks = [{low = 0 : i64, high = 3 : i64, ignore = -100 : i64, what = "the 3 classes"}]}, %x: tensor<4xf32> {train.role = #train.role<batch>, train.name = "x"}) attributes {train.step} {
  return
}

// -----

// Functions that are not steps are left alone.

// CHECK-LABEL: func @helper
// CHECK-SAME: (%{{.+}}: tensor<4xf32>) -> tensor<4xf32>
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
