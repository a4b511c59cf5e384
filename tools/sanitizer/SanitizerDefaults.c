/*===- SanitizerDefaults.c - Sanitizer settings of Accrue's programs ------===*
 *
 * Linked into every executable of an ACCRUE_SANITIZE build (see
 * accrue_sanitizer_defaults in CMakeLists.txt). The environment's
 * ASAN_OPTIONS and LSAN_OPTIONS still override these, flag by flag.
 *
 * - allow_user_poisoning=0: LLVM's headers poison the slabs of the bump
 *   allocators they inline into Accrue's (instrumented) code, and Debian's
 *   uninstrumented libMLIR.so allocates from the same slabs without
 *   unpoisoning them: every such access would be a false use-after-poison.
 *   Accrue's own code never poisons memory by hand.
 * - Leak checking runs on the runtime (ACCRUE_DETECT_LEAKS=1: accrue-train),
 *   not on the compiler, whose MLIR and protobuf singletons live until exit
 *   on purpose. CUDA's libraries and the dynamic loader keep allocations
 *   for the life of the process; those are suppressed. A process that loads
 *Open MPI is not checked: Open MPI unloads its plugins at MPI_Finalize, and
 *   their allocations can then be neither attributed nor suppressed.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ACCRUE_DETECT_LEAKS
#define ACCRUE_DETECT_LEAKS 0
#endif

const char *__asan_default_options(void) {
  return ACCRUE_DETECT_LEAKS ? "allow_user_poisoning=0:detect_leaks=1"
                             : "allow_user_poisoning=0:detect_leaks=0";
}

/* Set by the runtime when it loads Open MPI (lib/Runtime/Collectives.cpp),
 * read by LeakSanitizer when the process exits. */
int accrue_sanitizer_no_leak_check = 0;

int __lsan_is_turned_off(void) { return accrue_sanitizer_no_leak_check; }

const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }

const char *__lsan_default_suppressions(void) {
  return "leak:libcuda\n"
         "leak:libcublas\n"
         "leak:libnccl\n"
         "leak:_dl_open\n"
         "leak:_dl_init\n";
}
