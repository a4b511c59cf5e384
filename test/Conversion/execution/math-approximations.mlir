// The polynomial approximations approximate-math puts in place of libm
// (exp, log, tanh, erf in f32), measured against libm in f64 over 200001
// points each: the largest relative error, in parts per million, must stay
// under 0.5 (libm's own f32 functions measure 0.06-0.15 ppm here; the
// approximations 0.06-0.27). Special values keep IEEE semantics: masked
// attention scores are exp(-inf).
// RUN: accrue-opt %s --accrue-lower-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils,%libomp > %t.out
// RUN: %python %S/check_math_approximations.py %t.out

func.func private @printMemrefF32(memref<*xf32>)

// Largest relative error of f(x) in f32 against f(x) in f64 (libm) over n
// points of [lo, hi].
func.func @max_error(%lo: f32, %hi: f32, %which: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 200001 : index
  %nf = arith.constant 200000.0 : f32
  %zero = arith.constant 0.0 : f32
  %tiny = arith.constant 1.0e-30 : f64
  %span = arith.subf %hi, %lo : f32
  %step = arith.divf %span, %nf : f32
  %worst = scf.for %i = %c0 to %n step %c1 iter_args(%w = %zero) -> f32 {
    %ii = arith.index_cast %i : index to i64
    %fi = arith.sitofp %ii : i64 to f32
    %off = arith.mulf %fi, %step : f32
    %x = arith.addf %lo, %off : f32
    %x64 = arith.extf %x : f32 to f64
    %r:2 = scf.index_switch %which -> f32, f64
    case 0 {
      %a = math.exp %x : f32
      %b = math.exp %x64 : f64
      scf.yield %a, %b : f32, f64
    }
    case 1 {
      %a = math.log %x : f32
      %b = math.log %x64 : f64
      scf.yield %a, %b : f32, f64
    }
    case 2 {
      %a = math.tanh %x : f32
      %b = math.tanh %x64 : f64
      scf.yield %a, %b : f32, f64
    }
    default {
      %a = math.erf %x : f32
      %b = math.erf %x64 : f64
      scf.yield %a, %b : f32, f64
    }
    %a64 = arith.extf %r#0 : f32 to f64
    %d = arith.subf %a64, %r#1 : f64
    %ad = math.absf %d : f64
    %ab = math.absf %r#1 : f64
    %den = arith.maximumf %ab, %tiny : f64
    %rel = arith.divf %ad, %den : f64
    %rel32 = arith.truncf %rel : f64 to f32
    %m = arith.maximumf %w, %rel32 : f32
    scf.yield %m : f32
  }
  return %worst : f32
}

func.func @main() {
  %out = memref.alloc() : memref<4xf32>
  %ppm = arith.constant 1.0e6 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %m87 = arith.constant -87.0 : f32
  %p88 = arith.constant 88.0 : f32
  %lo_log = arith.constant 1.0e-6 : f32
  %hi_log = arith.constant 1.0e6 : f32
  %m9 = arith.constant -9.0 : f32
  %p9 = arith.constant 9.0 : f32
  %m4 = arith.constant -4.0 : f32
  %p4 = arith.constant 4.0 : f32
  %e0 = func.call @max_error(%m87, %p88, %c0) : (f32, f32, index) -> f32
  %e1 = func.call @max_error(%lo_log, %hi_log, %c1) : (f32, f32, index) -> f32
  %e2 = func.call @max_error(%m9, %p9, %c2) : (f32, f32, index) -> f32
  %e3 = func.call @max_error(%m4, %p4, %c3) : (f32, f32, index) -> f32
  %s0 = arith.mulf %e0, %ppm : f32
  %s1 = arith.mulf %e1, %ppm : f32
  %s2 = arith.mulf %e2, %ppm : f32
  %s3 = arith.mulf %e3, %ppm : f32
  memref.store %s0, %out[%c0] : memref<4xf32>
  memref.store %s1, %out[%c1] : memref<4xf32>
  memref.store %s2, %out[%c2] : memref<4xf32>
  memref.store %s3, %out[%c3] : memref<4xf32>
  %u = memref.cast %out : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  // exp(-inf, inf, nan), log(0, -1, inf), tanh(-inf, inf), erf(-inf, inf).
  %ninf = arith.constant 0xFF800000 : f32
  %pinf = arith.constant 0x7F800000 : f32
  %nan = arith.constant 0x7FC00000 : f32
  %zero = arith.constant 0.0 : f32
  %mone = arith.constant -1.0 : f32
  %v0 = math.exp %ninf : f32
  %v1 = math.exp %pinf : f32
  %v2 = math.exp %nan : f32
  %v3 = math.log %zero : f32
  %v4 = math.log %mone : f32
  %v5 = math.log %pinf : f32
  %v6 = math.tanh %ninf : f32
  %v7 = math.tanh %pinf : f32
  %v8 = math.erf %ninf : f32
  %v9 = math.erf %pinf : f32
  %sp = memref.alloc() : memref<10xf32>
  %values = vector.from_elements %v0, %v1, %v2, %v3, %v4, %v5, %v6, %v7, %v8, %v9 : vector<10xf32>
  vector.store %values, %sp[%c0] : memref<10xf32>, vector<10xf32>
  %su = memref.cast %sp : memref<10xf32> to memref<*xf32>
  func.call @printMemrefF32(%su) : (memref<*xf32>) -> ()
  return
}
