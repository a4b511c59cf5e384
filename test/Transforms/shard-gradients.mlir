// RUN: accrue-opt %s -train-shard-optimizer=gradients=true -verify-diagnostics | FileCheck %s
// RUN: accrue-opt %s -train-shard-optimizer=gradients=true -convert-train-to-linalg --one-shot-bufferize="bufferize-function-boundaries" 2>/dev/null | FileCheck %s --check-prefix=BUFFERS

// ZeRO stage 2: the accumulator argument and the loop carry the rank's
// shard; the micro-batch's train.accumulate becomes one reduce-scatter per
// gradient, in the order the gradients are computed (%gb before %ga), each
// right after its gradient; after the loop only the two scalars are
// all-reduced; the sharded update takes the shard.

// CHECK-LABEL: func @train_step
// CHECK-SAME: %[[PARAMS:[^:]+]]: tensor<64xf32> {train.role = #train.role<params>}, %[[ACC:[^:]+]]: tensor<?xf32> {train.role = #train.role<accumulator>}, %{{.+}}: tensor<?xf32> {train.role = #train.role<state>}, %{{.+}}: tensor<?xf32> {train.role = #train.role<state>}
// CHECK-SAME: -> (tensor<64xf32> {train.tied = 0 : i64}, tensor<?xf32> {train.tied = 1 : i64}, tensor<?xf32> {train.tied = 2 : i64}, tensor<?xf32> {train.tied = 3 : i64}, f32)
// CHECK: %[[LOOP:.+]]:3 = scf.for {{.+}} iter_args(%[[A:.+]] = %[[ACC]], %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (tensor<?xf32>, f32, f32)
// CHECK: %[[GB:.+]] = linalg.fill {{.+}} -> tensor<4x6xf32>
// CHECK-NEXT: %[[A1:.+]] = train.reduce_scatter_add %[[A]], %[[GB]] offset 32 of 64 : tensor<?xf32>, tensor<4x6xf32>
// CHECK: %[[GA:.+]] = linalg.fill {{.+}} -> tensor<32xf32>
// CHECK-NEXT: %[[A2:.+]] = train.reduce_scatter_add %[[A1]], %[[GA]] offset 0 of 64 : tensor<?xf32>, tensor<32xf32>
// CHECK-NOT: train.accumulate
// CHECK: scf.yield %[[A2]]
// CHECK: %[[PAIR:.+]] = tensor.from_elements %[[LOOP]]#1, %[[LOOP]]#2 : tensor<2xf32>
// CHECK: %[[SUMS:.+]] = train.all_reduce_arena %[[PAIR]] : tensor<2xf32>
// CHECK-NOT: train.all_reduce
// CHECK: train.fused_update %[[PARAMS]], %[[LOOP]]#0 states({{.+}}) {{.+}}sharded} : tensor<64xf32> accumulator tensor<?xf32>, tensor<?xf32>, tensor<?xf32>

// Bufferized: each gradient's buffer goes to the hook flat, with its offset
// and the arena's size, beside the shard; the update reads the shard and
// zeroes it, without a slice of a whole accumulator.
// BUFFERS: func.func private @accrue_reduce_scatter_add(memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, i64, i64) attributes {llvm.emit_c_interface}
// BUFFERS-LABEL: func @train_step
// BUFFERS-SAME: %[[ACC:[^:]+]]: memref<?xf32
// BUFFERS: %[[GB:.+]] = memref.alloc() {{.+}} : memref<4x6xf32>
// BUFFERS: %[[FLAT:.+]] = memref.collapse_shape %[[GB]] {{\[\[}}0, 1]] : memref<4x6xf32> into memref<24xf32>
// BUFFERS: %[[G:.+]] = memref.cast %[[FLAT]]
// BUFFERS: %[[S:.+]] = memref.cast %{{.+}} : memref<?xf32{{.*}}> to memref<?xf32, strided<[?], offset: ?>>
// BUFFERS: %[[AT:.+]] = arith.constant 32 : i64
// BUFFERS: %[[N:.+]] = arith.constant 64 : i64
// BUFFERS: call @accrue_reduce_scatter_add(%[[G]], %[[S]], %[[AT]], %[[N]])
// BUFFERS: %[[AT0:.+]] = arith.constant 0 : i64
// BUFFERS: call @accrue_reduce_scatter_add(%{{.+}}, %{{.+}}, %[[AT0]], %{{.+}})
// BUFFERS: call @accrue_all_reduce
// BUFFERS: call @accrue_shard_begin
// BUFFERS-NOT: memref.subview %[[ACC]]
// BUFFERS: call @accrue_all_gather
func.func @train_step(%params: tensor<64xf32> {train.role = #train.role<params>},
                      %acc: tensor<64xf32> {train.role = #train.role<accumulator>},
                      %m: tensor<64xf32> {train.role = #train.role<state>},
                      %v: tensor<64xf32> {train.role = #train.role<state>},
                      %lr: f32, %step: i64, %k: index)
    -> (tensor<64xf32> {train.tied = 0 : i64}, tensor<64xf32> {train.tied = 1 : i64},
        tensor<64xf32> {train.tied = 2 : i64}, tensor<64xf32> {train.tied = 3 : i64}, f32)
    attributes {train.step} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %r:3 = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc, %ls = %zero, %n = %zero)
      -> (tensor<64xf32>, f32, f32) {
    %eb = tensor.empty() : tensor<4x6xf32>
    %gb = linalg.fill ins(%one : f32) outs(%eb : tensor<4x6xf32>) -> tensor<4x6xf32>
    %ea = tensor.empty() : tensor<32xf32>
    %ga = linalg.fill ins(%lr : f32) outs(%ea : tensor<32xf32>) -> tensor<32xf32>
    %a2 = train.accumulate %a, %ga, %gb {offsets = array<i64: 0, 32>} : tensor<64xf32>, tensor<32xf32>, tensor<4x6xf32>
    %ls2 = arith.addf %ls, %one : f32
    %n2 = arith.addf %n, %one : f32
    scf.yield %a2, %ls2, %n2 : tensor<64xf32>, f32, f32
  }
  %s, %sl, %sn = train.all_reduce %r#0, %r#1, %r#2 scalars_at 60 : tensor<64xf32>
  %scale = arith.divf %sl, %sn : f32
  %p, %na, %st:2, %norm = train.fused_update %params, %s states(%m, %v) grad_scale %scale lr %lr step %step {max_norm = 1.0 : f32, optimizer = #train.adamw<>} : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
  return %p, %na, %st#0, %st#1, %norm : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, f32
}
