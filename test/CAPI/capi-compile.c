/*===- capi-compile.c - the compiler's C API from a C host ----------------===*
 *
 * For the tests (test/e2e/capi.test):
 *
 *   capi-compile compile MODEL.onnx OUT [NAME=VALUE]...
 *       compiles with accrue-compile's settings through accrueCompile,
 *       printing each diagnostic as "SEVERITY: MESSAGE";
 *   capi-compile bytes MODEL.onnx OUT [NAME=VALUE]...
 *       the same through accrueCompileBytes, from the file's bytes;
 *   capi-compile pipeline FILE.mlir PIPELINE
 *       parses FILE with Accrue's dialects in an MLIR context made through
 *       MLIR's C API, runs PIPELINE (textual, Accrue's passes registered)
 *       and prints the module.
 *
 *===----------------------------------------------------------------------===*/

#include "accrue-c/Compiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void printDiagnostic(const char *severity, const char *message,
                            void *userData) {
  (void)userData;
  printf("%s: %s\n", severity, message);
}

static void printString(MlirStringRef text, void *userData) {
  fwrite(text.data, 1, text.length, (FILE *)userData);
}

static int compile(int fromBytes, const char *model, const char *output,
                   int count, char **settings) {
  AccrueError *error = NULL;
  AccrueCompileOptions *options = accrueCompileOptionsCreate();
  for (int i = 0; i < count; ++i) {
    char *eq = strchr(settings[i], '=');
    if (!eq) {
      fprintf(stderr, "capi-compile: error: bad setting '%s'\n", settings[i]);
      return 1;
    }
    *eq = '\0';
    if (accrueCompileOptionsSet(options, settings[i], eq + 1, &error)) {
      fprintf(stderr, "capi-compile: error: %s\n", accrueErrorMessage(error));
      accrueErrorDestroy(error);
      return 1;
    }
  }
  int status;
  if (fromBytes) {
    FILE *in = fopen(model, "rb");
    if (!in)
      return fprintf(stderr, "capi-compile: error: cannot open %s\n", model), 1;
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *bytes = malloc((size_t)size + 1);
    size_t got = fread(bytes, 1, (size_t)size, in);
    fclose(in);
    status = accrueCompileBytes(bytes, got, output, options, printDiagnostic,
                                NULL, &error);
    free(bytes);
  } else {
    status =
        accrueCompile(model, output, options, printDiagnostic, NULL, &error);
  }
  accrueCompileOptionsDestroy(options);
  if (status) {
    fprintf(stderr, "capi-compile: error: %s\n", accrueErrorMessage(error));
    accrueErrorDestroy(error);
    return 1;
  }
  return 0;
}

static int pipeline(const char *path, const char *text) {
  FILE *in = fopen(path, "rb");
  if (!in)
    return fprintf(stderr, "capi-compile: error: cannot open %s\n", path), 1;
  fseek(in, 0, SEEK_END);
  long size = ftell(in);
  fseek(in, 0, SEEK_SET);
  char *source = calloc((size_t)size + 1, 1);
  size_t got = fread(source, 1, (size_t)size, in);
  fclose(in);

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  accrueRegisterDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  accrueRegisterPasses();
  MlirModule module =
      mlirModuleCreateParse(context, mlirStringRefCreate(source, got));
  free(source);
  if (mlirModuleIsNull(module))
    return fprintf(stderr, "capi-compile: error: cannot parse %s\n", path), 1;
  MlirPassManager pm = mlirPassManagerCreate(context);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  if (mlirLogicalResultIsFailure(mlirParsePassPipeline(
          opm, mlirStringRefCreateFromCString(text), printString, stderr))) {
    fprintf(stderr, "\ncapi-compile: error: bad pipeline\n");
    return 1;
  }
  if (mlirLogicalResultIsFailure(
          mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    fprintf(stderr, "capi-compile: error: the pipeline failed\n");
    return 1;
  }
  mlirOperationPrint(mlirModuleGetOperation(module), printString, stdout);
  printf("\n");
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  mlirContextDestroy(context);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "compile"))
    return compile(0, argv[2], argv[3], argc - 4, argv + 4);
  if (argc >= 4 && !strcmp(argv[1], "bytes"))
    return compile(1, argv[2], argv[3], argc - 4, argv + 4);
  if (argc == 4 && !strcmp(argv[1], "pipeline"))
    return pipeline(argv[2], argv[3]);
  fprintf(stderr,
          "usage: capi-compile compile|bytes MODEL OUT [NAME=VALUE]...\n"
          "       capi-compile pipeline FILE.mlir PIPELINE\n");
  return 2;
}
