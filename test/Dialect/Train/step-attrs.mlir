// RUN: accrue-opt %s -split-input-file -verify-diagnostics
// RUN: accrue-opt %s -split-input-file -verify-diagnostics 2>&1 | FileCheck %s --check-prefix=ROUNDTRIP
// The train dialect checks its discardable attributes (argument roles and
// names, tied results, metrics, the finalized ABI, the step markers) where
// they are attached.

// A well-formed step's attributes round-trip; roles print as #train.role.
// ROUNDTRIP: func.func @train_step(%{{.+}}: tensor<16xf32> {train.name = "params", train.role = #train.role<params>}, %{{.+}}: i64 {train.name = "valid_samples", train.role = #train.role<valid_samples>}, %{{.+}}: tensor<4xi64> {train.index_checks = [{high = 100 : i64, low = 0 : i64, what = "token"}], train.name = "ids", train.role = #train.role<batch>})
// ROUNDTRIP-SAME: -> (tensor<16xf32> {train.tied = 0 : i64}, f32 {train.metric = "loss"})
// ROUNDTRIP-SAME: attributes {train.micro_batch = 2 : i64, train.partial_windows, train.step}
func.func @train_step(%p: tensor<16xf32> {train.role = #train.role<params>, train.name = "params"},
                      %v: i64 {train.role = #train.role<valid_samples>, train.name = "valid_samples"},
                      %ids: tensor<4xi64> {train.role = #train.role<batch>, train.name = "ids", train.index_checks = [{low = 0 : i64, high = 100 : i64, what = "token"}]})
    -> (tensor<16xf32> {train.tied = 0 : i64}, f32 {train.metric = "loss"})
    attributes {train.step, train.partial_windows, train.micro_batch = 2 : i64} {
  %l = arith.constant 0.0 : f32
  return %p, %l : tensor<16xf32>, f32
}

// -----

// expected-error @+1 {{unknown step argument role 'weights'}}
func.func @f(%p: tensor<16xf32> {train.role = #train.role<weights>})

// -----

// expected-error @+1 {{'train.role' must be a #train.role, not "params"}}
func.func private @f(%p: tensor<16xf32> {train.role = "params"})

// -----

// expected-error @+1 {{'train.name' must be a string, not 3 : i64}}
func.func private @f(%p: tensor<16xf32> {train.name = 3 : i64})

// -----

// expected-error @+1 {{'train.index_checks' entries must be {low, high, what} dictionaries}}
func.func private @f(%p: tensor<4xi64> {train.index_checks = [{low = 0 : i64}]})

// -----

// expected-error @+1 {{argument #0: unknown train attribute 'train.nmae'}}
func.func private @f(%p: tensor<16xf32> {train.nmae = "p"})

// -----

// expected-error @+1 {{result #0: 'train.tied' must be the index of an argument, not 1 : i64}}
func.func private @f(%p: tensor<16xf32>) -> (tensor<16xf32> {train.tied = 1 : i64})

// -----

// expected-error @+1 {{result #0: 'train.metric' must name a metric of the step contract, not "accuracy"}}
func.func private @f() -> (f32 {train.metric = "accuracy"})

// -----

// expected-error @+1 {{'train.micro_batch' must be a positive i64, not 0 : i64}}
func.func private @f() attributes {train.micro_batch = 0 : i64}

// -----

// expected-error @+1 {{'train.abi' entry #1 must be a dictionary with a #train.role 'train.role' and a string 'train.name'}}
func.func private @f(%a: memref<4xf32>, %b: memref<4xf32>) attributes {train.abi = [{train.role = #train.role<params>, train.name = "params"}, {train.role = #train.role<accumulator>}]}

// -----

// expected-error @+1 {{'train.abi' entry #0: 'train.fields' must be an array of strings}}
func.func private @f(%m: memref<1xf32>) attributes {train.abi = [{train.role = #train.role<metrics>, train.name = "metrics", train.fields = [1 : i64]}]}

// -----

// expected-error @+1 {{unknown train attribute 'train.stpe'}}
func.func private @f() attributes {train.stpe}

// -----

func.func @g() {
  // expected-error @+1 {{'train.step' belongs on a function}}
  %c = arith.constant {train.step} 0 : i32
  return
}

// -----

// Integers of another type would not read back (getInt asserts on them).
// expected-error @+1 {{'train.micro_batch' must be a positive i64, not 2 : ui64}}
func.func private @f() attributes {train.micro_batch = 2 : ui64}

// -----

// expected-error @+1 {{result #0: 'train.tied' must be the index of an argument, not 0 : i128}}
func.func private @f(%p: tensor<16xf32>) -> (tensor<16xf32> {train.tied = 0 : i128})

// -----

// expected-error @+1 {{'train.index_checks' entries must be {low, high, what} dictionaries (i64 bounds, a string)}}
func.func private @f(%p: tensor<4xi64> {train.index_checks = [{low = 0 : i32, high = 9 : i64, what = "id"}]})
