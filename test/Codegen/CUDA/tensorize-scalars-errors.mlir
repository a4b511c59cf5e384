// RUN: accrue-opt %s -split-input-file -cuda-tensorize-scalars -verify-diagnostics

// Host code that needs a value computed on the device would synchronize the
// device: a loop bound, a branch, an offset.

func.func @loop_bound(%t: tensor<i64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = tensor.extract %t[] : tensor<i64>
  %n = arith.index_cast %v : i64 to index
  // expected-error @+1 {{host code needs 'scf.for' of a value computed on the device (from tensor data) as a bound}}
  scf.for %i = %c0 to %n step %c1 {
  }
  return
}

// -----

func.func @branch(%t: tensor<f32>) {
  %zero = arith.constant 0.0 : f32
  %v = tensor.extract %t[] : tensor<f32>
  %c = arith.cmpf olt, %v, %zero : f32
  // expected-error @+1 {{host code needs 'scf.if' of a value computed on the device}}
  scf.if %c {
  }
  return
}

// -----

func.func @offset(%t: tensor<i64>, %x: tensor<8xf32>) -> f32 {
  %i = tensor.extract %t[] : tensor<i64>
  %j = arith.index_cast %i : i64 to index
  // expected-error @+1 {{an index computed on the device would be read by host code}}
  %v = tensor.extract %x[%j] : tensor<8xf32>
  return %v : f32
}
