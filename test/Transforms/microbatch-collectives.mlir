// RUN: accrue-opt %s -train-microbatch=collectives=per-micro-batch | FileCheck %s --check-prefix=NAIVE
// RUN: accrue-opt %s -train-microbatch=collectives=per-micro-batch -train-defer-collectives -canonicalize | FileCheck %s --check-prefix=DEFER
// RUN: accrue-opt %s -train-microbatch -canonicalize | FileCheck %s --check-prefix=LOCAL

// A data-parallel step as train-microbatch writes it: every micro-batch's
// gradient sum N, count D and gradients are summed over the ranks inside
// the loop (from a zeroed arena), then accumulated.

// NAIVE-LABEL: func @step
// NAIVE: scf.for
// NAIVE:   %[[VG:.+]]:3 = train.value_and_grad @fwd_split
// NAIVE:   %[[N:.+]] = tensor.extract %[[VG]]#0[]
// NAIVE:   %[[D:.+]] = tensor.extract %[[VG]]#1[]
// NAIVE:   %[[FRESH:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<16xf32>)
// NAIVE:   %[[MINE:.+]] = train.accumulate %[[FRESH]], %[[VG]]#2 {offsets = array<i64: 0>}
// NAIVE:   %[[R:[^,]+]], %[[RN:[^,]+]], %[[RD:[^ ]+]] = train.all_reduce %[[MINE]], %[[N]], %[[D]] scalars_at 3 :
// NAIVE:   train.accumulate %{{.+}}, %[[R]] {offsets = array<i64: 0>}
// NAIVE:   arith.addf %{{.+}}, %[[RN]]
// NAIVE:   arith.addf %{{.+}}, %[[RD]]
// NAIVE: } {train.microbatch_loop}
// NAIVE-NOT: train.all_reduce

// train-defer-collectives turns it into the one-process loop followed by one
// all-reduce of the accumulator, N and D, which the normalization then uses.

// DEFER-LABEL: func @step
// DEFER-SAME: (%[[W:.+]]: tensor<3xf32>, %[[X:.+]]: tensor<?x3xf32>, %[[ACC:.+]]: tensor<16xf32> {train.role = #train.role<accumulator>})
// DEFER: %[[LOOP:.+]]:3 = scf.for {{.+}} iter_args(%[[A:.+]] = %[[ACC]], %[[NS:.+]] = %{{.+}}, %[[DS:.+]] = %{{.+}})
// DEFER-NOT: train.all_reduce
// DEFER-NOT: linalg.fill
// DEFER:   %[[VG:.+]]:3 = train.value_and_grad @fwd_split
// DEFER:   %[[N:.+]] = tensor.extract %[[VG]]#0[]
// DEFER:   %[[D:.+]] = tensor.extract %[[VG]]#1[]
// DEFER:   %[[A2:.+]] = train.accumulate %[[A]], %[[VG]]#2 {offsets = array<i64: 0>}
// DEFER:   arith.addf %[[NS]], %[[N]]
// DEFER:   arith.addf %[[DS]], %[[D]]
// DEFER: } {train.microbatch_loop}
// DEFER: %[[R:[^,]+]], %[[RN:[^,]+]], %[[RD:[^ ]+]] = train.all_reduce %[[LOOP]]#0, %[[LOOP]]#1, %[[LOOP]]#2 scalars_at 3 : tensor<16xf32>
// DEFER-NOT: train.all_reduce
// DEFER-DAG: %[[LOSS:.+]] = arith.divf %[[RN]], %[[RD]] : f32
// DEFER-DAG: %[[INV:.+]] = arith.divf %{{.+}}, %[[RD]] : f32
// DEFER-DAG: %[[G:.+]] = train.scale %[[R]], %[[INV]]
// DEFER-DAG: %[[RESET:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[R]] : tensor<16xf32>)
// DEFER: return %{{.+}}, %[[G]], %[[RESET]]

// Without collectives, the same loop and no all-reduce.
// LOCAL-LABEL: func @step
// LOCAL-NOT: train.all_reduce

func.func private @fwd(%w: tensor<3xf32>, %x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = nn.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

func.func @step(%w: tensor<3xf32>, %x: tensor<?x3xf32>, %acc: tensor<16xf32> {train.role = #train.role<accumulator>}) -> (tensor<f32>, tensor<16xf32>, tensor<16xf32>) {
  %l, %g = train.value_and_grad @fwd(%w, %x) {wrt = array<i64: 0>, micro_batch = 2} : (tensor<3xf32>, tensor<?x3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %a = train.accumulate %acc, %g {offsets = array<i64: 0>} : tensor<16xf32>, tensor<3xf32>
  %zero = arith.constant 0.0 : f32
  %reset = linalg.fill ins(%zero : f32) outs(%a : tensor<16xf32>) -> tensor<16xf32>
  return %l, %a, %reset : tensor<f32>, tensor<16xf32>, tensor<16xf32>
}
