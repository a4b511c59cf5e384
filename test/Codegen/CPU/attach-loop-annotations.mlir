// RUN: accrue-opt %s -attach-loop-annotations | FileCheck %s
// RUN: accrue-opt %s -attach-loop-annotations | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR

// An scf.for marked by unroll-short-loops, after convert-scf-to-cf and
// convert-cf-to-llvm: the mark is a discardable attribute of the latch
// branch, which the translation would ignore. It becomes the branch's
// loop_annotation, and LLVM IR's loop metadata.

#vectorize = #llvm.loop_vectorize<disable = false>
#mark = #llvm.loop_annotation<vectorize = #vectorize>

// CHECK-LABEL: llvm.func @latch
// CHECK: llvm.br ^bb1(%{{.+}} : i64) {loop_annotation = #{{.+}}}
// CHECK-NOT: llvm.loop_annotation
// IR-LABEL: define void @latch
// IR: br label %{{.+}}, !llvm.loop ![[LOOP:[0-9]+]]
// IR: ![[LOOP]] = distinct !{![[LOOP]], ![[ENABLE:[0-9]+]]}
// IR: ![[ENABLE]] = !{!"llvm.loop.vectorize.enable", i1 true}
llvm.func @latch(%p: !llvm.ptr, %n: i64) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  llvm.br ^bb1(%c0 : i64)
^bb1(%i: i64):
  %done = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %done, ^bb2, ^bb3
^bb2:
  %next = llvm.add %i, %c1 : i64
  llvm.br ^bb1(%next : i64) {llvm.loop_annotation = #mark}
^bb3:
  llvm.return
}
