// RUN: accrue-opt %s -split-input-file -unroll-short-loops | FileCheck %s
// RUN: accrue-opt %s -split-input-file -unroll-short-loops="max-ops=8" | FileCheck %s --check-prefix=SMALL

// A max pooling's adjoint as linalg's loops leave it: the window's column
// (2 long) innermost. It is unrolled into the loop over the windows (16),
// which becomes innermost; the window's row (2), outside that loop, stays.
// CHECK-LABEL: func @window_columns
// CHECK: scf.for %[[ROW:.*]] = %c0 to %c2 step %c1
// CHECK-NEXT: scf.for %[[X:.*]] = %c0 to %c16 step %c1
// CHECK-NOT: scf.for
// CHECK: arith.muli %[[X]], %c2
// CHECK-NEXT: %[[I0:.*]] = arith.addi
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[I0]]]
// CHECK: arith.muli %[[X]], %c2
// CHECK-NEXT: %[[I1:.*]] = arith.addi
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[I1]]]
// CHECK-NOT: memref.store
// With at most 8 ops to an unrolled body (9, twice): unchanged.
// SMALL-LABEL: func @window_columns
// SMALL-COUNT-3: scf.for
func.func @window_columns(%dy: memref<16xf32>, %arg: memref<16xi32>, %dx: memref<2x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %x = %c0 to %c16 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        %g = memref.load %dy[%x] : memref<16xf32>
        %w = memref.load %arg[%x] : memref<16xi32>
        %jw = arith.index_cast %j : index to i32
        %hit = arith.cmpi eq, %w, %jw : i32
        %v = arith.select %hit, %g, %zero : f32
        %x2 = arith.muli %x, %c2 : index
        %col = arith.addi %x2, %j : index
        memref.store %v, %dx[%i, %col] : memref<2x32xf32>
      }
    }
  }
  return
}

// -----

// Two short loops (2 x 3) innermost: both are unrolled, six stores in the
// loop around them.
// CHECK-LABEL: func @nested_short
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK-COUNT-6: memref.store
// CHECK-NOT: memref.store
func.func @nested_short(%out: memref<64x2x3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  scf.for %x = %c0 to %c64 step %c1 {
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c3 step %c1 {
        memref.store %one, %out[%x, %i, %j] : memref<64x2x3xf32>
      }
    }
  }
  return
}

// -----

// Left alone: a loop of 8 (LLVM vectorizes it), a short loop that is not
// nested in another (nothing to vectorize around it), and a short loop of
// vector code (a contraction kernel's).
// CHECK-LABEL: func @left_alone
// CHECK-COUNT-5: scf.for
// CHECK-NOT: scf.for
func.func @left_alone(%a: memref<64x8xf32>, %b: memref<4xf32>, %v: memref<64x4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %ones = arith.constant dense<1.0> : vector<8xf32>
  scf.for %x = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      memref.store %one, %a[%x, %j] : memref<64x8xf32>
    }
  }
  scf.for %j = %c0 to %c4 step %c1 {
    memref.store %one, %b[%j] : memref<4xf32>
  }
  scf.for %x = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      vector.store %ones, %v[%x, %j, %c0] : memref<64x4x8xf32>, vector<8xf32>
    }
  }
  return
}

// -----

// A convolution input gradient's col2im as linalg's loops leave it: 8 x 8
// image rows added into a padded 10 x 10 one. The innermost loop (8 long)
// fills a 256-bit vector, but LLVM takes it for tiny and keeps it scalar
// unless asked: it is marked for vectorization. The loop around it (also
// 8) is not innermost; a loop of 16 is LLVM's to judge, and one that rounds
// to bf16 is left as it was (LLVM would take 4 lanes for it).
// CHECK: #[[$VECTORIZE:.+]] = #llvm.loop_vectorize<disable = false>
// CHECK: #[[$MARK:.+]] = #llvm.loop_annotation<vectorize = #[[$VECTORIZE]]>
// CHECK-LABEL: func @image_rows
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.addf
// CHECK: } {llvm.loop_annotation = #[[$MARK]]}
// CHECK-NEXT: }
// CHECK-NOT: llvm.loop_annotation
// CHECK: return
func.func @image_rows(%cols: memref<8x8xf32>, %dx: memref<10x10xf32>, %wide: memref<16xf32>, %narrow: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %h = %c0 to %c8 step %c1 {
    scf.for %w = %c0 to %c8 step %c1 {
      %a = memref.load %cols[%h, %w] : memref<8x8xf32>
      %h1 = arith.addi %h, %c1 : index
      %w1 = arith.addi %w, %c1 : index
      %b = memref.load %dx[%h1, %w1] : memref<10x10xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %dx[%h1, %w1] : memref<10x10xf32>
    }
  }
  scf.for %i = %c0 to %c16 step %c1 {
    %a = memref.load %wide[%i] : memref<16xf32>
    %s = arith.addf %a, %a : f32
    memref.store %s, %wide[%i] : memref<16xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %a = memref.load %wide[%i] : memref<16xf32>
    %r = arith.truncf %a : f32 to bf16
    memref.store %r, %narrow[%i] : memref<8xbf16>
  }
  return
}
