// RUN: accrue-opt %s -split-input-file -train-defer-collectives -canonicalize -verify-diagnostics | FileCheck %s

// A data-parallel step graph: each micro-batch's gradients, loss sum and
// count are summed over the ranks, then accumulated. The all-reduce moves
// after the loop, on the accumulator and the two sums, once; the temporary
// arena of each micro-batch goes away and the loop accumulates the local
// gradients in place.

// CHECK-LABEL: func @step
// CHECK-SAME: (%[[ACC:[^:]+]]: tensor<16xf32> {train.role = #train.role<accumulator>}, %[[G:[^:]+]]: tensor<3xf32>, %[[N:[^:]+]]: f32, %[[D:[^:]+]]: f32, %[[K:[^:]+]]: index)
// CHECK-NOT: train.all_reduce
// CHECK: %[[LOOP:.+]]:3 = scf.for %{{.+}} = %{{.+}} to %[[K]] step %{{.+}} iter_args(%[[A:.+]] = %[[ACC]], %[[NS:.+]] = %{{.+}}, %[[DS:.+]] = %{{.+}})
// CHECK-NOT: linalg.fill
// CHECK-NOT: train.all_reduce
// CHECK:   %[[A2:.+]] = train.accumulate %[[A]], %[[G]] {offsets = array<i64: 4>} : tensor<16xf32>, tensor<3xf32>
// CHECK:   %[[NS2:.+]] = arith.addf %[[NS]], %[[N]] : f32
// CHECK:   %[[DS2:.+]] = arith.addf %[[D]], %[[DS]] : f32
// CHECK:   scf.yield %[[A2]], %[[NS2]], %[[DS2]]
// CHECK: %[[R:[^,]+]], %[[RN:[^,]+]], %[[RD:[^ ]+]] = train.all_reduce %[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2 scalars_at 14 : tensor<16xf32>
// CHECK: %[[LOSS:.+]] = arith.divf %[[RN]], %[[RD]]
// CHECK: return %[[R]], %[[LOSS]]
func.func @step(%acc: tensor<16xf32> {train.role = #train.role<accumulator>}, %g: tensor<3xf32>, %n: f32, %d: f32, %k: index) -> (tensor<16xf32>, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r:3 = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc, %ns = %zero, %ds = %zero) -> (tensor<16xf32>, f32, f32) {
    %empty = tensor.empty() : tensor<16xf32>
    %fresh = linalg.fill ins(%zero : f32) outs(%empty : tensor<16xf32>) -> tensor<16xf32>
    %mine = train.accumulate %fresh, %g {offsets = array<i64: 4>} : tensor<16xf32>, tensor<3xf32>
    %sum:3 = train.all_reduce %mine, %n, %d scalars_at 14 : tensor<16xf32>
    %a2 = train.accumulate %a, %sum#0 {offsets = array<i64: 0>} : tensor<16xf32>, tensor<16xf32>
    %ns2 = arith.addf %ns, %sum#1 : f32
    %ds2 = arith.addf %sum#2, %ds : f32
    scf.yield %a2, %ns2, %ds2 : tensor<16xf32>, f32, f32
  }
  %loss = arith.divf %r#1, %r#2 : f32
  return %r#0, %loss : tensor<16xf32>, f32
}

// -----

// Carried values that may not start at zero (an accumulator that is not the
// step's, a loss sum starting at 1) start at zero, and are added once after
// the sum over ranks: otherwise every rank would contribute them. The
// unused count is summed as zero.

// CHECK-LABEL: func @nonzero_start
// CHECK-SAME: (%[[ACC:[^:]+]]: tensor<16xf32>, %[[G:[^:]+]]: tensor<16xf32>, %[[N:[^:]+]]: f32, %[[D:[^:]+]]: f32, %[[K:[^:]+]]: index)
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[EMPTY:.+]] = tensor.empty() : tensor<16xf32>
// CHECK: %[[FILL:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<16xf32>)
// CHECK: %[[LOOP:.+]]:2 = scf.for %{{.+}} iter_args(%[[A:.+]] = %[[FILL]], %[[NS:.+]] = %[[ZERO]])
// CHECK:   train.accumulate %[[A]], %[[G]] {offsets = array<i64: 0>}
// CHECK:   arith.addf %[[NS]], %[[N]]
// CHECK: %[[R:[^,]+]], %[[RN:[^,]+]], %{{.+}} = train.all_reduce %[[LOOP]]#0, %[[LOOP]]#1, %[[ZERO]] scalars_at 14 : tensor<16xf32>
// CHECK: %[[TOTAL:.+]] = train.accumulate %[[ACC]], %[[R]] {offsets = array<i64: 0>}
// CHECK: %[[NTOTAL:.+]] = arith.addf %[[RN]], %[[ONE]]
// CHECK: return %[[TOTAL]], %[[NTOTAL]]
func.func @nonzero_start(%acc: tensor<16xf32>, %g: tensor<16xf32>, %n: f32, %d: f32, %k: index) -> (tensor<16xf32>, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  %r:2 = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc, %ns = %one) -> (tensor<16xf32>, f32) {
    %sum:3 = train.all_reduce %g, %n, %d scalars_at 14 : tensor<16xf32>
    %a2 = train.accumulate %a, %sum#0 {offsets = array<i64: 0>} : tensor<16xf32>, tensor<16xf32>
    %ns2 = arith.addf %ns, %sum#1 : f32
    scf.yield %a2, %ns2 : tensor<16xf32>, f32
  }
  return %r#0, %r#1 : tensor<16xf32>, f32
}

// -----

// The summed loss of each micro-batch is used inside the loop (as a
// per-micro-batch loss print would): moving the all-reduce would change it.

// CHECK-LABEL: func @used_in_loop
// CHECK: scf.for
// CHECK:   train.all_reduce
func.func @used_in_loop(%acc: tensor<16xf32> {train.role = #train.role<accumulator>}, %g: tensor<16xf32>, %n: f32, %d: f32, %k: index) -> (tensor<16xf32>, f32, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r:3 = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc, %ns = %zero, %ds = %zero) -> (tensor<16xf32>, f32, f32) {
    // expected-warning @+1 {{this all-reduce stays inside the loop (once per iteration): result #1 has 2 uses; it must only be summed into a loop-carried value}}
    %sum:3 = train.all_reduce %g, %n, %d scalars_at 14 : tensor<16xf32>
    %a2 = train.accumulate %a, %sum#0 {offsets = array<i64: 0>} : tensor<16xf32>, tensor<16xf32>
    %ns2 = arith.addf %ns, %sum#1 : f32
    %ds2 = arith.maximumf %ds, %sum#1 : f32
    scf.yield %a2, %ns2, %ds2 : tensor<16xf32>, f32, f32
  }
  return %r#0, %r#1, %r#2 : tensor<16xf32>, f32, f32
}

// -----

// A maximum over micro-batches does not commute with a sum over ranks.

func.func @not_a_sum(%acc: tensor<16xf32> {train.role = #train.role<accumulator>}, %g: tensor<16xf32>, %n: f32, %d: f32, %k: index) -> (tensor<16xf32>, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r:2 = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc, %ns = %zero) -> (tensor<16xf32>, f32) {
    // expected-warning @+1 {{result #1 is used by 'arith.maximumf', which is not a sum into a loop-carried value}}
    %sum:3 = train.all_reduce %g, %n, %d scalars_at 14 : tensor<16xf32>
    %a2 = train.accumulate %a, %sum#0 {offsets = array<i64: 0>} : tensor<16xf32>, tensor<16xf32>
    %ns2 = arith.maximumf %ns, %sum#1 : f32
    scf.yield %a2, %ns2 : tensor<16xf32>, f32
  }
  return %r#0, %r#1 : tensor<16xf32>, f32
}

// -----

// The partial sums of the carried accumulator are read inside the loop.

func.func @partial_sums_read(%acc: tensor<16xf32> {train.role = #train.role<accumulator>}, %g: tensor<16xf32>, %n: f32, %d: f32, %k: index) -> (tensor<16xf32>, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r:2 = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc, %norm = %zero) -> (tensor<16xf32>, f32) {
    // expected-warning @+1 {{result #0 is summed into iter_arg #0, whose partial sums are also used inside the loop}}
    %sum:3 = train.all_reduce %g, %n, %d scalars_at 14 : tensor<16xf32>
    %a2 = train.accumulate %a, %sum#0 {offsets = array<i64: 0>} : tensor<16xf32>, tensor<16xf32>
    %norm2 = train.global_norm %a : tensor<16xf32>
    scf.yield %a2, %norm2 : tensor<16xf32>, f32
  }
  return %r#0, %r#1 : tensor<16xf32>, f32
}

// -----

// The reduced arena is added to a slice of a bigger accumulator.

func.func @partial_arena(%acc: tensor<32xf32> {train.role = #train.role<accumulator>}, %g: tensor<16xf32>, %n: f32, %d: f32, %k: index) -> tensor<32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc) -> (tensor<32xf32>) {
    // expected-warning @+1 {{result #0 is accumulated into part of an arena, not added to a whole one}}
    %sum:3 = train.all_reduce %g, %n, %d scalars_at 14 : tensor<16xf32>
    %a2 = train.accumulate %a, %sum#0 {offsets = array<i64: 16>} : tensor<32xf32>, tensor<16xf32>
    scf.yield %a2 : tensor<32xf32>
  }
  return %r : tensor<32xf32>
}

// -----

// Under a condition inside the loop: not every iteration sums.

func.func @conditional(%acc: tensor<16xf32> {train.role = #train.role<accumulator>}, %g: tensor<16xf32>, %n: f32, %d: f32, %k: index, %c: i1) -> tensor<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %k step %c1 iter_args(%a = %acc) -> (tensor<16xf32>) {
    %a2 = scf.if %c -> tensor<16xf32> {
      // expected-warning @+1 {{it is nested in a region inside the loop}}
      %sum:3 = train.all_reduce %g, %n, %d scalars_at 14 : tensor<16xf32>
      %s = train.accumulate %a, %sum#0 {offsets = array<i64: 0>} : tensor<16xf32>, tensor<16xf32>
      scf.yield %s : tensor<16xf32>
    } else {
      scf.yield %a : tensor<16xf32>
    }
    scf.yield %a2 : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}

// -----

// Outside any loop there is nothing to move.

// CHECK-LABEL: func @after_loop
// CHECK: train.all_reduce
func.func @after_loop(%g: tensor<16xf32>, %n: f32, %d: f32) -> tensor<16xf32> {
  %sum:3 = train.all_reduce %g, %n, %d scalars_at 14 : tensor<16xf32>
  return %sum#0 : tensor<16xf32>
}
