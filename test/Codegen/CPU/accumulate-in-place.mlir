// RUN: accrue-opt %s -split-input-file -accumulate-in-place | FileCheck %s

// A weight gradient contracted into a zero-filled temporary, then added to
// its slice of the accumulator: the contraction accumulates into the slice
// (viewed with the temporary's shape) and the temporary, its fill and the
// add are gone.

#mapA = affine_map<(m, n, k) -> (k, m)>
#mapB = affine_map<(m, n, k) -> (k, n)>
#mapC = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i) -> (i)>
// CHECK-LABEL: func @contraction
// CHECK-SAME: %[[X:[^:]+]]: memref<16x4xf32>, %[[DY:[^:]+]]: memref<16x8xf32>, %[[ACC:[^:]+]]: memref<40xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK: %[[SLICE:.+]] = memref.subview %[[ACC]][8] [32] [1]
// CHECK: %[[VIEW:.+]] = memref.expand_shape %[[SLICE]] {{\[\[}}0, 1]] output_shape [4, 8]
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[DY]] : {{.*}}) outs(%[[VIEW]] : memref<4x8xf32, strided<[8, 1], offset: 8>>)
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @contraction(%x: memref<16x4xf32>, %dy: memref<16x8xf32>, %acc: memref<40xf32>) {
  %zero = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%g : memref<4x8xf32>)
  linalg.generic {indexing_maps = [#mapA, #mapB, #mapC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<16x4xf32>, memref<16x8xf32>) outs(%g : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  %flat = memref.collapse_shape %g [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %slice = memref.subview %acc[8] [32] [1] : memref<40xf32> to memref<32xf32, strided<[1], offset: 8>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%flat : memref<32xf32>) outs(%slice : memref<32xf32, strided<[1], offset: 8>>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  memref.dealloc %g : memref<4x8xf32>
  return
}

// -----

// A weight gradient rounded to bf16 (bf16 autocast) by an elementwise op
// that writes all of the temporary: the op adds its value into the slice
// itself (out + f(in)), and the temporary and the add are gone.

#id2 = affine_map<(i, j) -> (i, j)>
#id = affine_map<(i) -> (i)>
// CHECK-LABEL: func @rounded
// CHECK-SAME: %[[G:[^:]+]]: memref<4x8xf32>, %[[ACC:[^:]+]]: memref<40xf32>
// CHECK-NOT: memref.alloc
// CHECK: %[[SLICE:.+]] = memref.subview %[[ACC]][8] [32] [1]
// CHECK: %[[VIEW:.+]] = memref.expand_shape %[[SLICE]] {{\[\[}}0, 1]] output_shape [4, 8]
// CHECK: linalg.generic {{.*}} ins(%[[G]] : memref<4x8xf32>) outs(%[[VIEW]] : memref<4x8xf32, strided<[8, 1], offset: 8>>)
// CHECK-NEXT: ^bb0(%[[IN:.+]]: f32, %[[OUT:.+]]: f32):
// CHECK: %[[N:.+]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK: %[[W:.+]] = arith.extf %[[N]] : bf16 to f32
// CHECK: %[[SUM:.+]] = arith.addf %[[OUT]], %[[W]] : f32
// CHECK: linalg.yield %[[SUM]]
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @rounded(%grad: memref<4x8xf32>, %acc: memref<40xf32>) {
  %g = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%grad : memref<4x8xf32>) outs(%g : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.truncf %in : f32 to bf16
    %w = arith.extf %n : bf16 to f32
    linalg.yield %w : f32
  }
  %flat = memref.collapse_shape %g [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %slice = memref.subview %acc[8] [32] [1] : memref<40xf32> to memref<32xf32, strided<[1], offset: 8>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%flat : memref<32xf32>) outs(%slice : memref<32xf32, strided<[1], offset: 8>>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  memref.dealloc %g : memref<4x8xf32>
  return
}

// -----

// An elementwise op that reads the temporary it writes (its values are
// not all its own) stays, and so does the add.
#id2 = affine_map<(i, j) -> (i, j)>
#id = affine_map<(i) -> (i)>
// CHECK-LABEL: func @reads_its_init
// CHECK: memref.alloc
// CHECK: linalg.generic
// CHECK: linalg.generic
func.func @reads_its_init(%grad: memref<4x8xf32>, %acc: memref<40xf32>) {
  %g = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%grad : memref<4x8xf32>) outs(%g : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  %flat = memref.collapse_shape %g [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  %slice = memref.subview %acc[8] [32] [1] : memref<40xf32> to memref<32xf32, strided<[1], offset: 8>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%flat : memref<32xf32>) outs(%slice : memref<32xf32, strided<[1], offset: 8>>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  memref.dealloc %g : memref<4x8xf32>
  return
}

// -----

// A bias gradient (a sum over rows) likewise.

#in = affine_map<(r, c) -> (r, c)>
#out = affine_map<(r, c) -> (c)>
#id = affine_map<(i) -> (i)>
// CHECK-LABEL: func @sum
// CHECK-NOT: memref.alloc
// CHECK: %[[SLICE:.+]] = memref.subview %{{.+}}[0] [8] [1]
// CHECK: linalg.generic {{.*}} outs(%[[SLICE]] :
// CHECK-NOT: linalg.generic
func.func @sum(%dy: memref<16x8xf32>, %acc: memref<40xf32>) {
  %zero = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%g : memref<8xf32>)
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<16x8xf32>) outs(%g : memref<8xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %c, %a : f32
    linalg.yield %s : f32
  }
  %slice = memref.subview %acc[0] [8] [1] : memref<40xf32> to memref<8xf32, strided<[1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : memref<8xf32>) outs(%slice : memref<8xf32, strided<[1]>>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Something between the sum and the add reads the accumulator's slice:
// moving the write up would change what it reads, so nothing changes. A
// fill of another value, or a reduction that does not add into its init,
// neither.

#in = affine_map<(r, c) -> (r, c)>
#out = affine_map<(r, c) -> (c)>
#id = affine_map<(i) -> (i)>
// CHECK-LABEL: func @read_between
// CHECK: memref.alloc
// CHECK: linalg.fill
// CHECK-LABEL: func @nonzero_fill
// CHECK: memref.alloc
// CHECK: linalg.fill
// CHECK-LABEL: func @maximum
// CHECK: memref.alloc
// CHECK: linalg.fill
func.func @read_between(%dy: memref<16x8xf32>, %acc: memref<40xf32>, %out: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%g : memref<8xf32>)
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<16x8xf32>) outs(%g : memref<8xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %c, %a : f32
    linalg.yield %s : f32
  }
  %slice = memref.subview %acc[0] [8] [1] : memref<40xf32> to memref<8xf32, strided<[1]>>
  memref.copy %slice, %out : memref<8xf32, strided<[1]>> to memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : memref<8xf32>) outs(%slice : memref<8xf32, strided<[1]>>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %o, %in : f32
    linalg.yield %s : f32
  }
  return
}
func.func @nonzero_fill(%dy: memref<16x8xf32>, %acc: memref<40xf32>) {
  %one = arith.constant 1.0 : f32
  %g = memref.alloc() : memref<8xf32>
  linalg.fill ins(%one : f32) outs(%g : memref<8xf32>)
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<16x8xf32>) outs(%g : memref<8xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %c, %a : f32
    linalg.yield %s : f32
  }
  %slice = memref.subview %acc[0] [8] [1] : memref<40xf32> to memref<8xf32, strided<[1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : memref<8xf32>) outs(%slice : memref<8xf32, strided<[1]>>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %o, %in : f32
    linalg.yield %s : f32
  }
  return
}
func.func @maximum(%dy: memref<16x8xf32>, %acc: memref<40xf32>) {
  %zero = arith.constant 0.0 : f32
  %g = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%g : memref<8xf32>)
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<16x8xf32>) outs(%g : memref<8xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.maximumf %c, %a : f32
    linalg.yield %s : f32
  }
  %slice = memref.subview %acc[0] [8] [1] : memref<40xf32> to memref<8xf32, strided<[1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : memref<8xf32>) outs(%slice : memref<8xf32, strided<[1]>>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %o, %in : f32
    linalg.yield %s : f32
  }
  return
}
