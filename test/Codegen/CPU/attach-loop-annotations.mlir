// RUN: accrue-opt %s -attach-loop-annotations | FileCheck %s
// RUN: accrue-opt %s -attach-loop-annotations | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR
// RUN: accrue-opt %s -attach-loop-annotations | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=PARALLEL

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

// A loop whose iterations are independent (schedule-parallel-loops): its
// annotation names an access group, which every load and store in the
// loop's blocks joins, and LLVM IR's metadata says the loop's accesses are
// parallel; the load before the loop stays out of the group.

#group = #llvm.access_group<id = distinct[0]<>>
#parallel = #llvm.loop_annotation<parallelAccesses = #group>

// CHECK-LABEL: llvm.func @parallel
// CHECK: llvm.load %{{.+}} : !llvm.ptr -> f32
// CHECK-NOT: access_groups
// CHECK: llvm.load %{{.+}} {access_groups = [#[[GROUP:.+]]]} : !llvm.ptr -> f32
// CHECK: llvm.store %{{.+}}, %{{.+}} {access_groups = [#[[GROUP]]]} : f32, !llvm.ptr
// CHECK: llvm.br ^bb1(%{{.+}} : i64) {loop_annotation = #{{.+}}}
// PARALLEL-LABEL: define void @parallel
// PARALLEL: load float, ptr %{{.+}}, align 4, !llvm.access.group ![[GROUP:[0-9]+]]
// PARALLEL: store float %{{.+}}, ptr %{{.+}}, align 4, !llvm.access.group ![[GROUP]]
// PARALLEL: br label %{{.+}}, !llvm.loop ![[LOOP:[0-9]+]]
// PARALLEL: ![[LOOP]] = distinct !{![[LOOP]], ![[ACCESSES:[0-9]+]]}
// PARALLEL: ![[ACCESSES]] = !{!"llvm.loop.parallel_accesses", ![[GROUP]]}
llvm.func @parallel(%p: !llvm.ptr, %q: !llvm.ptr, %n: i64) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %first = llvm.load %p : !llvm.ptr -> f32
  llvm.br ^bb1(%c0 : i64)
^bb1(%i: i64):
  %done = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %done, ^bb2, ^bb3
^bb2:
  %a = llvm.getelementptr %p[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %x = llvm.load %a : !llvm.ptr -> f32
  %y = llvm.fadd %x, %first : f32
  %b = llvm.getelementptr %q[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %y, %b : f32, !llvm.ptr
  %next = llvm.add %i, %c1 : i64
  llvm.br ^bb1(%next : i64) {llvm.loop_annotation = #parallel}
^bb3:
  llvm.return
}
